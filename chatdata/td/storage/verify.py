"""Verify a saved folder: sizes, offsets, UTF-8 and checksums of every data file.

Loading checks only what it can check without reading the data (``meta.json``, file sizes,
the first and last offsets). :func:`verify` reads every file once and checks, per folder:

* every file that ``meta.json`` names exists, is a regular file (not a symlink) and has the
  size its dtype and shape (or ``nbytes``, or the number of values) give;
* string columns: offsets start at 0, never decrease, end at the data size, and every value
  starts on a character boundary; the data is valid UTF-8 (lone surrogates allowed, as the
  writer stores them);
* ragged stacks: offsets start at 0, never decrease and end at the number of value rows;
* every file whose checksum ``meta.json`` records hashes to it (XXH3-64, see
  :mod:`chatdata.td.storage.checksum`): this catches a same-size change that keeps the data valid;
* finally the folder loads (every check loading makes).

Folders written before checksums existed verify everything but the checksums (their files are
listed as ``unchecked``). It also lists temporary folders that interrupted saves left beside the
target. ``load_memmap(path, verify=True)`` and ``chatdata verify PATH`` call it.

The walk over the folders is :mod:`.verify_walk`, the UTF-8 check :mod:`.utf8_check` and the
report (:class:`VerifyReport`, :class:`Problem`) :mod:`.verify_report`.

Example:
    >>> import tempfile, torch
    >>> from chatdata.td import TensorDict
    >>> path = tempfile.mkdtemp() + "/ds"
    >>> _ = TensorDict({"x": torch.arange(3), "s": ["a", "b", "c"]}, [3]).memmap(path)
    >>> report = verify(path)
    >>> report.ok, report.files, report.checksummed
    (True, 3, 3)
"""
from __future__ import annotations

import time
from pathlib import Path

from .fsops import FormatError
from .reader import load
from .tempdirs import find_orphans
from .verify_report import Problem, VerifyReport
from .verify_walk import _Verifier

__all__ = ["verify", "VerifyReport", "Problem", "find_leftovers"]


def find_leftovers(path) -> list:
    """Temporary folders of saves to ``path`` whose writer is gone (orphans), beside ``path``.

    Example:
        >>> import tempfile, pathlib
        >>> find_leftovers(pathlib.Path(tempfile.mkdtemp()) / "ds")
        []
    """
    path = Path(path).absolute()
    return [str(p) for p in find_orphans(path)]  # the save's own orphan detection (writer locks)


def verify(path, *, checksums: bool = True) -> VerifyReport:
    """Check every file of the saved folder ``path``; returns a :class:`VerifyReport` naming
    each bad file (``report.ok``, ``report.problems``; ``report.raise_if_bad()`` raises
    :class:`FormatError`). ``checksums=False`` skips hashing (sizes, offsets, UTF-8 only).

    Example:
        >>> import tempfile, torch
        >>> from chatdata.td import TensorDict
        >>> path = tempfile.mkdtemp() + "/ds"
        >>> _ = TensorDict({"x": torch.arange(3)}, [3]).memmap(path)
        >>> with open(path + "/x.memmap", "r+b") as f: _ = f.write(b"\\x07")
        >>> [p.path.endswith("x.memmap") for p in verify(path).problems]
        [True]
    """
    t0 = time.perf_counter()
    path = Path(path)
    report = VerifyReport(path)
    if not path.exists() and not path.is_symlink():
        report.problems.append(Problem(str(path), "does not exist"))
    elif not path.is_dir():
        report.problems.append(Problem(str(path), "is not a folder"))
    else:
        _Verifier(report, checksums).collection(path)
        if report.ok:
            try:  # every check loading makes (batch sizes, ...), on top of the above
                load(path)
            except (FormatError, ValueError, OSError, RuntimeError, OverflowError) as err:  # torch's too
                report.problems.append(Problem(str(path), f"does not load: {err}"))
    report.leftovers[:0] = find_leftovers(path)
    report.seconds = time.perf_counter() - t0
    return report
