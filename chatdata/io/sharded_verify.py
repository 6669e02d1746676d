"""Verify a dataset folder, plain or sharded: every file of every shard, and the manifest.

A plain folder is checked by :func:`chatdata.td.storage.verify.verify`. A sharded folder (see
:mod:`chatdata.io.sharded`) is checked shard by shard with it, and on top of that:

* ``manifest.json`` reads as a sharded manifest, and every shard it names exists inside the
  folder (not through a symbolic link leading out of it);
* every shard holds as many items as the manifest says, and the manifest's total adds up;
* shard folders that the manifest does not name are listed as leftovers (a writer killed
  before its commit leaves one; a writer running right now may be about to add it), and so are
  the temporary folders of shards whose writer was killed while writing them. Like the
  temporary folders of interrupted saves, they do not make the report bad;
* a folder holding only the shards of a write that never committed (no manifest yet) is
  reported as that: no dataset yet, its shard folders listed as leftovers;
* sub-folders that are sharded datasets themselves (the token set and branch table that
  ``chatdata serve`` keeps beside its conversations) are checked the same way.

Example:
    >>> import tempfile, chatdata
    >>> path = tempfile.mkdtemp() + "/corpus"
    >>> chatdata.open_dataset(path, mode="a").append(chatdata.History.from_chats([[{"role": "user", "content": "hi"}]]))
    >>> report = verify_dataset(path)
    >>> report.ok, report.files > 0
    (True, True)
"""
from __future__ import annotations

import time
from pathlib import Path

from ..td import FormatError
from ..td.storage import Problem, VerifyReport, find_dead_temps, verify
from .shard_manifest import MANIFEST, SHARDS, _read_manifest, is_sharded, shard_outside, uncommitted_shards
from .sharded_dataset import _OUTSIDE

__all__ = ["verify_dataset"]


def verify_dataset(path, *, checksums: bool = True) -> VerifyReport:
    """Check the dataset at ``path`` (plain or sharded); returns one :class:`VerifyReport` whose
    problems name the bad files of every shard and any disagreement with the manifest.

    Example:
        >>> import tempfile, torch
        >>> from chatdata.td import TensorDict
        >>> path = tempfile.mkdtemp() + "/ds"
        >>> _ = TensorDict({"x": torch.arange(3)}, [3]).memmap(path)
        >>> verify_dataset(path).ok
        True
    """
    t0 = time.perf_counter()
    root = Path(path)
    if not is_sharded(path):
        kids = uncommitted_shards(root)
        if kids is None or not (kids or (root / SHARDS).is_dir()):  # an empty folder is not a killed write's
            return verify(path, checksums=checksums)
        report = VerifyReport(root)  # the shards of a sharded write that never committed: no dataset yet
        report.problems.append(Problem(str(root / MANIFEST), f"is missing: a sharded write into {root} has not "
                                       f"committed (it was stopped, or is still running), so it holds no dataset "
                                       f"yet; its {len(kids)} shard folders are leftovers. Run the write again "
                                       "(it starts over beside them), or delete the folder"))
        report.leftovers += [f"{k} (an unfinished shard)" if k.name.startswith(".") else
                             f"{k} (a shard folder the manifest does not name)" for k in kids]
        report.seconds = time.perf_counter() - t0
        return report
    report = VerifyReport(root)
    try:
        manifest = _read_manifest(root)
    except (FormatError, ValueError, OSError) as err:
        report.problems.append(Problem(str(root / MANIFEST), str(err)))
        report.seconds = time.perf_counter() - t0
        return report
    named = set()
    total = 0
    for k, entry in enumerate(manifest["shards"]):
        shard = root / entry["path"]
        total += entry["items"]
        if shard.resolve() in named:
            report.problems.append(Problem(str(root / MANIFEST), f"names shard {entry['path']!r} twice (shard {k}): "
                                                                 "readers would return its items twice"))
            continue
        named.add(shard.resolve())
        outside = shard_outside(root, entry["path"])
        if outside is not None:
            report.problems.append(Problem(str(root / MANIFEST), _OUTSIDE.format(i=k, path=entry["path"],
                                                                                  real=outside)))
            continue
        part = verify(shard, checksums=checksums)
        _merge(report, part)
        if part.ok:
            _check_items(report, shard, k, entry["items"])
    if manifest.get("items") is not None and manifest["items"] != total:
        report.problems.append(Problem(str(root / MANIFEST), f"says {manifest['items']} items in all, but its "
                                                             f"shards add up to {total}"))
    shards_dir = root / SHARDS
    if shards_dir.is_dir():
        for child in sorted(shards_dir.iterdir()):
            if child.is_dir() and not child.name.startswith(".") and child.resolve() not in named:
                report.leftovers.append(f"{child} (a shard folder the manifest does not name)")
        # a shard whose writer was killed while writing it: its temporary folder (a live writer's is not listed)
        report.leftovers += [f"{t} (an unfinished shard of a writer that is gone)" for t in find_dead_temps(shards_dir)]
    for child in sorted(root.iterdir()):
        if child.name != SHARDS and child.is_dir() and is_sharded(child):  # a companion sharded dataset
            _merge(report, verify_dataset(child, checksums=checksums))
    report.seconds = time.perf_counter() - t0
    return report


def _merge(report: VerifyReport, part: VerifyReport) -> None:
    report.problems += part.problems
    report.files += part.files
    report.bytes += part.bytes
    report.checksummed += part.checksummed
    report.unchecked += part.unchecked
    report.leftovers += part.leftovers


def _check_items(report: VerifyReport, shard: Path, k: int, expected: int) -> None:
    from ..history import History  # noqa: F401 - registers the class for load_memmap
    from ..td import load_memmap
    from .shard_manifest import _items

    n = _items(load_memmap(shard))
    if n != expected:
        report.problems.append(Problem(str(shard), f"holds {n} items, but the manifest (shard {k}) says {expected}"))
