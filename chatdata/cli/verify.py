"""``chatdata verify PATH``: read every file of a saved dataset and check it.

Checks sizes, offsets, UTF-8 and the checksums recorded at save (see
:mod:`chatdata.td.storage.verify`), prints one line per bad file and exits 1 when there is one (0 when
the data is whole). Temporary folders that interrupted saves left beside the dataset are listed
(they do not change the exit status).

Example:
    >>> _ = History.from_chats([[{"role": "user", "content": "hi"}]]).memmap("ds/")
    >>> from chatdata.cli import main
    >>> main(["verify", "ds/"])
    ok: ds/: ... files, ... checksums match (...)
    0
"""
from __future__ import annotations

import json

from .common import plural, say
from .progress import human_bytes

HELP = "check a dataset's files: sizes, offsets, UTF-8 and checksums"
EXAMPLE = """examples:
  chatdata verify ds/                  # exit status 0: whole; 1: a bad file (named)
  chatdata verify ds/ --no-checksums   # sizes, offsets and UTF-8 only
  chatdata verify ds/ --json"""


def add_parser(sub):
    import argparse

    p = sub.add_parser("verify", help=HELP, description=HELP + " (exit status 1 names every bad file).",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", help="a saved folder (chatdata import, History.memmap, TensorDict.memmap, ...) or a "
                   "sharded one (import --shard-size: every shard and the manifest)")
    p.add_argument("--no-checksums", action="store_true", help="skip hashing the files")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="print only problems")
    p.set_defaults(func=run)
    return p


def _as_dict(report) -> dict:
    return {
        "path": str(report.path), "ok": report.ok,
        "problems": [{"path": p.path, "message": p.message} for p in report.problems],
        "files": report.files, "bytes": report.bytes, "checksummed": report.checksummed,
        "unchecked": report.unchecked, "leftovers": report.leftovers, "seconds": round(report.seconds, 4),
    }


def run(args) -> int:
    import os

    from ..io.sharded_verify import verify_dataset
    from .errors import CLIError

    from .common import check_not_inside_dataset

    check_not_inside_dataset(args.path)  # a part alone would say "ok" while the rest goes unchecked
    if not os.path.exists(args.path):  # nothing to check: a mistyped path, not a bad dataset
        raise CLIError(f"{args.path}: no such folder (give the folder a dataset was saved to)")
    if not os.path.isdir(args.path):
        raise CLIError(f"{args.path}: is a file, not a folder (give the folder a dataset was saved to)")
    report = verify_dataset(args.path, checksums=not args.no_checksums)
    if args.json:
        say(json.dumps(_as_dict(report), indent=2))
        return 0 if report.ok else 1
    for p in report.problems:
        say(f"bad: {p}")
    rate = report.bytes / max(report.seconds, 1e-9)
    if report.ok:
        if not args.quiet:
            sums = (f"{plural(report.checksummed, 'checksum')} match" if not args.no_checksums
                    else "checksums skipped")
            say(f"ok: {args.path}: {plural(report.files, 'data file')}, {human_bytes(report.bytes)}, {sums} "
                f"({report.seconds:.2f} s, {human_bytes(rate)}/s)")
    else:
        files = report.bad_files()
        say(f"FAILED: {args.path}: {plural(len(report.problems), 'problem')} in {plural(len(files), 'file')}")
    if report.unchecked and not args.quiet:
        unchecked = plural(len(report.unchecked), "file or folder", "files or folders")
        say(f"note: {unchecked} without checksums (saved before chatdata recorded checksums, written by "
            "tensordict, or preallocated by memmap_like): everything else was checked; save with chatdata to "
            "add checksums")
    for folder in report.leftovers:
        what = "" if folder.endswith(")") else " (temporary folder of an interrupted save; safe to delete)"
        say(f"leftover: {folder}{what}")
    return 0 if report.ok else 1
