"""Checks of an output path made before a command does any work: that it is apart from the
command's inputs (replacing or writing into an input would destroy it) and that its folder can be
written (so that a long run does not fail at its end on a temporary file's name).
Not a subcommand; :func:`chatdata.cli.common.check_output` calls these.

Example:
    >>> import tempfile; from pathlib import Path
    >>> ds = Path(tempfile.mkdtemp()) / "ds"; ds.mkdir()
    >>> check_apart(ds.parent / "tokens", [ds])           # fine
    >>> check_apart(ds / "tokens", [ds])
    Traceback (most recent call last):
    ...
    chatdata.cli.errors.CLIError: .../ds/tokens is inside the input .../ds; write the output elsewhere
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from .errors import CLIError

__all__ = ["check_apart", "check_writable", "inside_dataset", "datasets_in"]


def _real(path) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def check_apart(out, inputs) -> None:
    """Refuse an output that is one of ``inputs`` (also through a symbolic link), lies inside one,
    or holds one (replacing it would delete the input while it is read)."""
    target = _real(out)
    for src in inputs:
        if src is None or not Path(src).exists():
            continue
        real = _real(src)
        if target == real:
            raise CLIError(f"{out} is the input {src} itself; write the output elsewhere (the input would be "
                           "destroyed)")
        if real in target.parents:
            raise CLIError(f"{out} is inside the input {src}; write the output elsewhere")
        if target in real.parents:
            raise CLIError(f"{out} holds the input {src}; write the output elsewhere (replacing it would delete "
                           "the input)")


def check_writable(out, *, make_parents: bool = True) -> None:
    """Refuse an output whose folder is a file, is missing (unless ``make_parents``: the command
    creates it) or cannot be written; tries a temporary file there (removed at once)."""
    out = Path(out)
    parent = Path(os.path.abspath(out)).parent
    if not make_parents and not parent.exists():
        raise CLIError(f"{out}: folder {parent} does not exist; create it first or choose another path")
    folder = parent
    while not folder.exists() and folder != folder.parent:  # the nearest folder that exists
        folder = folder.parent
    if not folder.is_dir():
        raise CLIError(f"{out}: {folder} is a file, not a folder; choose another path")
    try:
        fd, probe = tempfile.mkstemp(prefix=".chatdata-write-test-", dir=folder)
    except OSError as err:
        raise CLIError(f"{out}: cannot write in {folder} ({err.strerror or err}); choose another path") from None
    os.close(fd)
    os.unlink(probe)


def _chatdata_meta(folder: Path):
    """The parsed ``meta.json`` of ``folder`` when it is a chatdata one (small, as they are), else None."""
    meta = folder / "meta.json"
    try:
        if not meta.is_file() or meta.stat().st_size > (1 << 22):
            return None
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == "chatdata" else None


def _names(value) -> set:
    """Every string in a parsed meta.json (the file and folder names it refers to among them)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set(value).union(*(_names(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_names(v) for v in value))
    return set()


def inside_dataset(path) -> Path | None:
    """The outermost chatdata folder ``path`` is part of (its ``meta.json``, or a file or folder
    that folder's meta.json names, such as a History dataset's ``_storage``), else None. A dataset
    that merely sits in another's folder, or a shard of a sharded dataset, is its own. A path that
    does not exist yet is part of the dataset its nearest existing folder is (or is part of).

    Example:
        >>> from chatdata import History
        >>> _ = History.from_chats([[{"role": "user", "content": "hi"}]]).memmap("ds/")
        >>> inside_dataset("ds/_storage"), inside_dataset("ds/meta.json"), inside_dataset("ds")
        (PosixPath('ds'), PosixPath('ds'), None)
    """
    child, top = Path(path), None
    if not child.exists():  # a path still to be made: part of the dataset its nearest folder belongs to
        folder = next((f for f in child.parents if f.exists()), None)
        if folder is None:
            return None
        return inside_dataset(folder) or (folder if _chatdata_meta(folder) is not None else None)
    for folder in child.parents:
        meta = _chatdata_meta(folder)
        if meta is None or (child.name != "meta.json" and child.name not in _names(meta)):
            break
        child = top = folder
    return top


def datasets_in(folder, limit: int = 5) -> list[Path]:
    """Up to ``limit`` chatdata datasets directly in ``folder`` (sub-folders holding a meta.json or a
    manifest.json), sorted by name: what a folder of outputs (``chatdata demo --out``) holds."""
    try:
        subs = sorted(p for p in Path(folder).iterdir() if p.is_dir())
    except OSError:
        return []
    return [p for p in subs if (p / "meta.json").is_file() or (p / "manifest.json").is_file()][:limit]
