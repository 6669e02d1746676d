"""``chatdata export DS OUT.jsonl``: a History dataset back to JSON Lines ``{"messages": [...]}``.

Conversations are read in chunks from the memory-mapped dataset, so memory stays flat. For
OpenAI input, ``import`` then ``export`` gives the same messages back (same keys, same order).
"""
from __future__ import annotations

import gzip
import json
import os
import time
import uuid
from pathlib import Path

from .common import CLIError, check_output, dataset_chunks, load_history, plural, positive_int, say
from .progress import Progress

HELP = "export a History dataset to JSON Lines ({\"messages\": [...]} per line) or Parquet"
EXAMPLE = """examples:
  chatdata export ds/ chats.jsonl
  chatdata export ds/ chats.jsonl.gz --chunk-size 4096
  chatdata export ds/ chats.jsonl --overwrite        # replace an existing file
  chatdata export ds/ chats.parquet"""


def add_parser(sub):
    import argparse

    p = sub.add_parser("export", help=HELP, description=HELP + ".", epilog=EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ds", help="a dataset folder (made by chatdata import)")
    p.add_argument("out", help="the .jsonl file to write (.jsonl.gz compresses), or a .parquet file; '-' for stdout")
    p.add_argument("--chunk-size", type=positive_int, default=8192, metavar="N", help="conversations per chunk (default 8192)")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it already exists")
    p.add_argument("--allow-empty", action="store_true", help="write an empty file for an empty dataset "
                   "(default: an error)")
    p.add_argument("--format", choices=("jsonl", "parquet"), help="output format (default: by OUT's extension)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary")
    p.set_defaults(func=run)
    return p


def export_dataset(ds, out, chunk_size: int = 8192, progress=None, *, overwrite: bool = True,
                   allow_empty: bool = True) -> int:
    """Write the dataset ``ds`` to ``out`` as JSON Lines; returns the number of conversations."""
    h = ds if not isinstance(ds, (str, os.PathLike)) else load_history(ds)
    n = len(h)
    if n == 0 and not allow_empty:
        raise CLIError(f"{ds if isinstance(ds, (str, os.PathLike)) else 'the dataset'} holds no conversation; "
                       "pass --allow-empty to write an empty file")
    if str(out) != "-":
        check_output(out, overwrite, kind="file", inputs=[ds] if isinstance(ds, (str, os.PathLike)) else ())
    bar = Progress("exporting", total=n, unit="conversations", enabled=progress)
    dumps = json.JSONEncoder(ensure_ascii=False).encode
    if str(out) == "-":
        import sys

        f, tmp = sys.stdout, None
    else:
        out = Path(out)
        if out.is_dir():
            raise CLIError(f"{out} is a folder; give a .jsonl file name")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp-{uuid.uuid4().hex[:12]}")
        f = gzip.open(tmp, "wt", encoding="utf-8") if out.suffix == ".gz" else open(tmp, "w", encoding="utf-8")
    try:
        for _, chunk in dataset_chunks(h, chunk_size):
            chats = chunk.to_chats()
            f.write("".join([dumps({"messages": c}) + "\n" for c in chats]))
            bar.update(len(chats))
        if tmp is not None:
            f.close()
            os.replace(tmp, out)
    except BaseException:
        if tmp is not None:
            f.close()
            tmp.unlink(missing_ok=True)
        raise
    finally:
        bar.close()
    return n


def _export_parquet(ds, out, chunk_size: int, *, overwrite: bool = True, allow_empty: bool = True) -> int:
    """Parquet output: chatdata.io writes it (one row group per chunk)."""
    from ..io.tables import export_parquet
    from ..td import FormatError

    if str(out) == "-":
        raise CLIError("Parquet cannot be written to stdout; give a .parquet file name")
    n = len(load_history(ds))  # what it holds: a History dataset (plain or sharded), else one line saying so
    check_output(out, overwrite, kind="file", inputs=[ds])
    try:
        if not allow_empty and n == 0:
            raise CLIError(f"{ds} holds no conversation; pass --allow-empty to write an empty file")
        return export_parquet(ds, out, chunk_size=chunk_size)
    except (ValueError, FormatError) as err:
        raise CLIError(str(err)) from None


JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")


def output_format(out, ds=None) -> str:
    """``"jsonl"`` or ``"parquet"`` by the name ``out`` ends with (``-``: JSON Lines to stdout).
    Any other name is refused rather than given JSON Lines it does not announce (``chats.csv``,
    or ``chats.json``, which tools read as one JSON document); ``--format`` keeps such a name.

    Example:
        >>> output_format("chats.jsonl.gz"), output_format("chats.parquet")
        ('jsonl', 'parquet')
    """
    name = str(out).lower()
    if name == "-" or name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    if ds is not None:  # an output inside the input is the worse mistake: say that one first
        from .paths import check_apart

        check_apart(out, [ds])
    what = "one JSON document" if name.endswith((".json", ".json.gz")) else "this kind of file"
    raise CLIError(f"{out}: export writes JSON Lines (.jsonl, .jsonl.gz) or Parquet (.parquet), not {what}; "
                   "name the file so, or pass --format jsonl|parquet to write that format under this name")


def run(args) -> int:
    if args.chunk_size <= 0:
        raise CLIError("--chunk-size must be > 0")
    t = time.perf_counter()
    if (args.format or output_format(args.out, args.ds)) == "parquet":
        n = _export_parquet(args.ds, args.out, args.chunk_size, overwrite=args.overwrite, allow_empty=args.allow_empty)
    else:
        n = export_dataset(args.ds, args.out, args.chunk_size, overwrite=args.overwrite, allow_empty=args.allow_empty)
    if not args.quiet and args.out != "-":
        say(f"exported {plural(n, 'conversation')} from {args.ds} to {args.out} in {time.perf_counter() - t:.2f} s")
    return 0
