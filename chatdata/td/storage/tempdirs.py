"""Temporary folders of saves: short names, a writer lock, and finding the orphans of dead writers.

A save writes into ``.<name[:24]>.tmp-<12 hex>/data/`` beside its target and swaps that folder
into place. The temporary folder also holds ``writer.lock``: the writer creates it, takes an
exclusive ``flock`` on it for as long as it works, and records its target's name, its pid and
its host. The kernel drops the lock when the writer dies (even by SIGKILL), so a temporary
folder whose lock can be taken belongs to a writer that is gone: an *orphan*. A live writer's
folder is never an orphan: its lock is held.

The name stays short whatever the target's length (a 250-character target still fits in 255
bytes); the full target name is in the lock file, so orphans are matched to their target
exactly.

Example:
    >>> import tempfile, pathlib
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> with WriterTemp(root / "ds") as tmp:
    ...     _ = (tmp.data / "meta.json").write_text("{}")
    ...     find_orphans(root / "ds")   # our own folder is live: not an orphan
    []
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import time
import uuid
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no orphan detection
    fcntl = None

__all__ = ["WriterTemp", "find_orphans", "find_dead_temps", "remove_orphans", "temp_name"]

LOCK_NAME = "writer.lock"
_TEMP_RE = re.compile(r"^\.(?P<stem>.*)\.tmp-[0-9a-f]{12}$")
_STEM_CHARS = 24
# a temporary folder without a readable lock is the rest of a writer killed in the few
# microseconds between creating the folder and locking it; it is an orphan once this old
_UNLOCKED_GRACE_S = 60.0
# folders left by chatdata versions that had no lock file: orphans once untouched this long
_LEGACY_GRACE_S = 600.0


def temp_name(target_name: str) -> str:
    """The short, hidden name of a temporary folder for ``target_name``.

    Example:
        >>> len(temp_name("x" * 250)) <= 42
        True
    """
    return f".{target_name[:_STEM_CHARS]}.tmp-{uuid.uuid4().hex[:12]}"


class WriterTemp:
    """A locked temporary folder beside ``target``; ``.data`` is where the save is written.

    Use as a context manager: on exit the folder is removed (whatever it then holds: nothing
    after a successful swap, the old data after an exchange, or a failed save's files).
    """

    def __init__(self, target):
        self.target = Path(target)
        self.path = self.target.parent / temp_name(self.target.name)
        self.data = self.path / "data"
        self._fd = None

    def __enter__(self) -> "WriterTemp":
        try:  # the mkdir too: a Ctrl-C right after it (when the folder first shows) must remove it
            os.mkdir(self.path)
            self._fd = os.open(self.path / LOCK_NAME, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o644)
            if fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_EX)
            info = {"target": self.target.name, "pid": os.getpid(), "host": socket.gethostname()}
            os.write(self._fd, json.dumps(info).encode("utf-8", "surrogatepass"))
            os.mkdir(self.data)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        if self._fd is not None:
            os.close(self._fd)  # releases the lock (last: the folder is gone by now)
            self._fd = None


def _lock_owner(folder: Path):
    """``(state, info)``: state is "live" (lock held), "dead" (lock free, info read), or
    "unknown" (no lock file or no info in it yet)."""
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return "unknown", None
    try:
        if fcntl is None:
            return "live", None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return "live", None
        raw = os.read(fd, 1 << 16)
        try:
            info = json.loads(raw.decode("utf-8", "surrogatepass"))
        except ValueError:
            return "unknown", None
        return ("dead", info) if isinstance(info, dict) else ("unknown", None)
    finally:
        os.close(fd)


def _age(folder: Path) -> float:
    """Seconds since anything in ``folder`` (itself included) was last modified."""
    try:
        newest = folder.lstat().st_mtime
        for root, dirs, files in os.walk(folder):
            for name in dirs + files:
                newest = max(newest, os.lstat(os.path.join(root, name)).st_mtime)
    except OSError:
        return 0.0
    return time.time() - newest


def _gone_writers(parent: Path):
    """``(folder, owner)`` for each temporary folder in ``parent`` whose writer is gone:
    ``owner(name)`` tells whether it was a save to ``name`` (by the name its lock records, else by
    its folder name: the first 24 characters, or the whole name in a legacy folder). A lock that
    can be taken means gone; a folder without a readable lock counts once nothing in it was
    touched for the grace period (a minute for one killed before it locked, ten for a legacy
    folder holding ``meta.json``): a writer without a lock shows it is alive only by writing."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        m = _TEMP_RE.match(entry.name)
        if m is None or not entry.is_dir(follow_symlinks=False):
            continue
        folder = Path(entry.path)
        state, info = _lock_owner(folder)
        if state == "dead":
            yield folder, lambda name, target=info.get("target"): target == name
        elif state == "unknown":
            stem, legacy = m["stem"], (folder / "meta.json").exists()
            if _age(folder) > (_LEGACY_GRACE_S if legacy else _UNLOCKED_GRACE_S):
                yield folder, lambda name, stem=stem, n=None if legacy else _STEM_CHARS: stem == name[:n]


def find_orphans(path) -> list[Path]:
    """The temporary folders left beside dataset ``path`` by saves whose writer is gone.

    A folder is an orphan when its writer lock can be taken (the writer died) and it names
    ``path`` as its target; a folder of a live writer (this or another process) never is.
    Folders that old chatdata versions left (``.<name>.tmp-*`` without a lock) count when
    untouched for 10 minutes.

    Example:
        >>> import tempfile, pathlib
        >>> find_orphans(pathlib.Path(tempfile.mkdtemp()) / "ds")
        []
    """
    path = Path(path).absolute()
    name = path.name
    return sorted(folder for folder, owner in _gone_writers(path.parent) if owner(name))


def find_dead_temps(parent) -> list[Path]:
    """The temporary folders in ``parent`` whose writer is gone, whatever they were to become:
    the rest of saves killed before their final rename (a shard a killed writer never finished,
    for example, whose target no one knows of). A folder of a live writer never is one; the
    rules are :func:`find_orphans`' without its match on the target.

    Example:
        >>> import tempfile, pathlib
        >>> find_dead_temps(pathlib.Path(tempfile.mkdtemp()))
        []
    """
    return sorted(folder for folder, _ in _gone_writers(parent))


def remove_orphans(path) -> list[Path]:
    """Delete :func:`find_orphans` ``(path)``; returns what was removed.

    Each folder's lock is taken (exclusively, without waiting) while it is deleted, so a
    writer that is alive after all keeps its folder.
    """
    removed = []
    for folder in find_orphans(path):
        fd = None
        try:
            fd = os.open(folder / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except FileNotFoundError:
            pass  # legacy folder, or one whose writer was killed before it made the lock
        except OSError:
            if fd is not None:
                os.close(fd)
            continue  # someone holds it now
        try:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        finally:
            if fd is not None:
                os.close(fd)
    return removed
