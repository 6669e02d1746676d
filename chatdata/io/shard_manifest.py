"""The layout of a sharded dataset on disk and its manifest: reading and checking
``manifest.json``, replacing it atomically under the writers' lock, naming new shard folders,
and removing the folders a failed or replaced write leaves (see :mod:`chatdata.io.sharded` for
the layout and the guarantees).

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> m = commit_shards(folder, [], "History")
    >>> is_sharded(folder), m["items"], m["kind"]
    (True, 0, 'History')
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path

__all__ = ["MANIFEST", "LOCK", "SHARDS", "is_sharded", "uncommitted_shards", "shard_outside", "commit_shards", "new_shard_name",
           "remove_job_shards", "remove_replaced", "missing_folders", "remove_empty"]

MANIFEST = "manifest.json"
LOCK = ".manifest.lock"
SHARDS = "shards"
FORMAT = "chatdata-sharded"
VERSION = 1


def _format_error(msg: str):
    from ..td import FormatError

    return FormatError(msg)


def is_sharded(path) -> bool:
    """True if ``path`` is a folder holding a ``manifest.json``."""
    return (Path(path) / MANIFEST).is_file()


def uncommitted_shards(path) -> list | None:
    """The shard folders in ``path`` if it holds nothing but what a sharded write leaves before its
    first commit (``shards/`` of shard folders and temporary ones, the lock, a manifest being
    written), and no ``manifest.json``: a write killed (or still running) before it committed
    (``[]`` for an empty folder). ``None`` for any other folder, so that a writer may continue in
    such a folder and nowhere else.

    Example:
        >>> import tempfile, pathlib
        >>> p = pathlib.Path(tempfile.mkdtemp())
        >>> (p / "shards" / "shard-0-ab").mkdir(parents=True)
        >>> [s.name for s in uncommitted_shards(p)], uncommitted_shards(p / "shards")
        (['shard-0-ab'], None)
    """
    p = Path(path)
    shards = p / SHARDS
    try:
        if not p.is_dir() or (p / MANIFEST).exists() or shards.is_symlink() or (shards.exists() and not shards.is_dir()):
            return None
        if any(x.name not in (LOCK, SHARDS) and not x.name.startswith(f".{MANIFEST}.tmp-") for x in p.iterdir()):
            return None
        kids = sorted(shards.iterdir()) if shards.is_dir() else []
    except OSError:
        return None
    if all(k.name.startswith(("shard-", ".shard-")) and k.is_dir() and not k.is_symlink() for k in kids):
        return kids
    return None


def shard_outside(folder, entry_path: str):
    """Where the shard ``entry_path`` of the dataset ``folder`` really is, if a symbolic link on
    the way leads it out of the folder (the manifest's paths are checked to stay inside only as
    text); ``None`` when it is inside.

    Example:
        >>> import tempfile, pathlib
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> (root / "shards").mkdir(); (root / "shards" / "up").symlink_to(root.parent)
        >>> shard_outside(root, "shards/a") is None, shard_outside(root, "shards/up/x") == root.parent.resolve() / "x"
        (True, True)
    """
    root = Path(folder).resolve()
    real = (root / entry_path).resolve()
    return None if real == root or root in real.parents else real


def _kind_of(obj) -> str:
    from ..history import History
    from ..td import RaggedTensorDict

    if isinstance(obj, History):
        return "History"
    if isinstance(obj, RaggedTensorDict):
        keys = set(obj.keys())
        return "tokens" if "input_ids" in keys else "ragged"
    return type(obj).__name__


def _is_history(obj) -> bool:
    return _kind_of(obj) == "History"


def _items(obj) -> int:
    return int(obj.batch_size[0]) if obj.batch_size else 1


@contextlib.contextmanager
def _locked(folder: Path):
    """An exclusive lock on ``folder/.manifest.lock`` (advisory ``fcntl.flock``; released when the
    process dies, so a killed writer never leaves the folder locked)."""
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            import fcntl
        except ImportError:  # not POSIX: no cross-process lock available
            fcntl = None
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


_MAX_ITEMS = 2**62  # past 2**63 Python cannot even index them


def _read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
    except FileNotFoundError:
        raise _format_error(f"{path}: no such manifest") from None
    except ValueError as err:
        raise _format_error(f"{path}: not valid JSON ({err})") from None
    except RecursionError:
        raise _format_error(f"{path}: not valid JSON (nested too deeply)") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise _format_error(f"{path}: not a chatdata sharded-dataset manifest (no \"format\": \"{FORMAT}\")")
    if not isinstance(m.get("version"), int) or m["version"] > VERSION:
        raise _format_error(f"{path}: manifest version {m.get('version')!r} is newer than this chatdata ({VERSION})")
    shards = m.get("shards")
    if not isinstance(shards, list):
        raise _format_error(f"{path}: 'shards' must be a list")
    if m.get("kind") is not None and not isinstance(m["kind"], str):
        raise _format_error(f"{path}: 'kind' must be a string (the shards' class, e.g. \"History\"), got {m['kind']!r}")
    total, seen = 0, {}
    for i, s in enumerate(shards):
        p = s.get("path") if isinstance(s, dict) else None
        items = s.get("items") if isinstance(s, dict) else None
        if not isinstance(p, str) or type(items) is not int or not 0 <= items <= _MAX_ITEMS:
            raise _format_error(f"{path}: shard {i} must be {{\"path\": str, \"items\": int >= 0}}, got {s!r}")
        total += items
        if total > _MAX_ITEMS:
            raise _format_error(f"{path}: the shards hold {total} items in all, more than a dataset can")
        parts = Path(p).parts
        if Path(p).is_absolute() or ".." in parts or not parts:
            raise _format_error(f"{path}: shard {i} path {p!r} is not a relative path inside the folder")
        if seen.setdefault(parts, i) != i:  # "shards/a" and "shards/./a/" are one folder
            raise _format_error(f"{path}: shards {seen[parts]} and {i} are both {p!r}: readers would return its "
                                "items twice; remove one of the entries")
    return m


def _write_manifest(folder: Path, manifest: dict) -> None:
    """Replace the manifest atomically: write a temporary file, fsync it, rename it over."""
    tmp = folder / f".{MANIFEST}.tmp-{uuid.uuid4().hex[:12]}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(manifest, f, ensure_ascii=False, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, folder / MANIFEST)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # make the rename durable
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _empty_manifest(kind: str | None) -> dict:
    return {"format": FORMAT, "version": VERSION, "kind": kind, "items": 0, "shards": []}


def new_shard_name(job: str | None = None) -> str:
    """A shard folder name no other writer (process, thread or machine) picks: time + random.
    ``job`` (hex, no ``-``) goes into the name, so that a job whose workers write shards in
    parallel can find and remove them all if it fails (:func:`remove_job_shards`)."""
    return f"shard-{time.time_ns():020d}-{job + '-' if job else ''}{uuid.uuid4().hex}"


def remove_job_shards(folder, job: str) -> None:
    """Remove the shard folders of ``folder/shards/`` that :func:`new_shard_name` named for ``job``
    (a failed job's shards, which no manifest names)."""
    shards = Path(folder) / SHARDS
    if shards.is_dir():
        for child in shards.glob(f"shard-*-{job}-*"):
            shutil.rmtree(child, ignore_errors=True)


def remove_replaced(folder, old: list[dict], new: list[dict]) -> None:
    """Remove the shard folders of the ``old`` manifest entries that an overwrite replaced by
    ``new``. Only what a writer makes is removed: a folder ``shards/<name>`` (not a symlink) that
    ``new`` does not name; an entry of a tampered manifest (``shards`` itself, a path through a
    symlink out of the dataset) names nothing this deletes, and stays for ``verify`` to list."""
    root = Path(folder)
    shards = (root / SHARDS).resolve()
    keep = {Path(e["path"]).parts for e in new}
    for s in old:
        parts = Path(s["path"]).parts
        p = root.joinpath(*parts)
        if len(parts) == 2 and parts[0] == SHARDS and parts not in keep and not p.is_symlink() \
                and p.resolve().parent == shards:
            shutil.rmtree(p, ignore_errors=True)


def missing_folders(path) -> list:
    """``path/shards`` and those of its parents that do not exist yet, innermost first: what a
    writer about to create ``path/shards`` makes, for :func:`remove_empty` to undo."""
    return [p for p in (Path(path) / SHARDS, *(Path(path) / SHARDS).parents) if not p.exists()]


def remove_empty(folders: list) -> None:
    """Remove ``folders`` (innermost first) that are empty; a folder something else wrote into stays.
    A failed first write leaves no ``OUT/shards/`` that the retry would refuse as a foreign folder."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def commit_shards(folder, entries: list[dict], kind: str | None, *, replace: bool = False) -> dict:
    """Add shard ``entries`` (``{"path", "items"}``) to the manifest of ``folder`` under the lock
    (``replace=True``: they become the only shards); returns the new manifest."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder):
        m = _read_manifest(folder) if (folder / MANIFEST).is_file() else _empty_manifest(kind)
        if replace:
            m = _empty_manifest(kind)
        if kind is not None and m.get("kind") not in (None, kind):
            raise ValueError(f"{folder}: cannot add {kind} shards to a dataset of {m['kind']} shards")
        if m.get("kind") is None:
            m["kind"] = kind
        m["shards"] = [*m["shards"], *entries]
        m["items"] = sum(s["items"] for s in m["shards"])
        _write_manifest(folder, m)
    return m
