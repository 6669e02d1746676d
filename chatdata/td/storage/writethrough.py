"""Write-through of in-place updates of memory-mapped ``NonTensorData`` values.

In a memory-mapped TensorDict, an in-place write into a tensor reaches its file. A
``NonTensorData`` entry lives in its folder's ``meta.json`` (a ``value`` entry, see
``docs/format.md``), so an in-place update of it (``update_``, ``update(..., inplace=True)``,
``td.set_``, ``td.update_``, assigning ``.data``) rewrites that ``meta.json``:

1. the new value is checked first (JSON only, no lone surrogates; never pickled): a refused
   value changes nothing, neither on disk nor in memory;
2. the folder is opened and ``flock``-ed (writers of one folder take turns, so two updates of
   two entries never lose one another); if the path now names another folder than the one
   loaded (a later save replaced it) or none, nothing is written: the object is detached from
   the folder, as its memory-mapped tensors are, and a :class:`DetachedWriteWarning` says so;
3. ``meta.json`` is read again under the lock, only the entry's ``value`` changes (the
   ``checksums`` of the data files and every other field stay as they are), the result is
   written to ``.meta.json.tmp-<12 hex>`` in the same folder, fsynced when the collection was
   saved with ``durable=True``, and renamed over ``meta.json`` (then the folder is fsynced).

A reader therefore sees the whole old ``meta.json`` or the whole new one, never a torn file;
``chatdata verify`` passes before and after. A writer killed between steps leaves at most a
``.meta.json.tmp-*`` file, which loading ignores, a save over the folder accepts, and the next
update of that folder removes.

Example:
    >>> import tempfile, torch
    >>> from chatdata.td import TensorDict, NonTensorData, load_memmap
    >>> path = tempfile.mkdtemp() + "/ds"
    >>> td = TensorDict({"tag": NonTensorData("v1")}, []).memmap(path)
    >>> _ = td.get("tag").update_(NonTensorData("v2"))
    >>> load_memmap(path)["tag"]
    'v2'
"""
from __future__ import annotations

import errno
import json
import os
import stat
import uuid
from pathlib import Path

from .fsops import UPDATE_TEMP_PREFIX as TEMP_PREFIX, FormatError, write_all
from .integrity import parse_meta
from .json_values import _entry_value
from .writer import _save

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: updates of one folder are not serialised
    fcntl = None

__all__ = ["ValueLink", "link_value", "write_value", "write_stack", "TEMP_PREFIX", "is_update_leftover",
           "DetachedWriteWarning"]

_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO named meta.json must not block the update


class ValueLink:
    """Where a loaded ``NonTensorData`` lives: the folder (its path and the identity of the
    folder that was loaded, ``(st_dev, st_ino)``), the entry's key, and whether updates are
    fsynced."""

    __slots__ = ("folder", "key", "ident", "durable")

    def __init__(self, folder: Path, key: str, ident: tuple, durable: bool = False):
        # absolute: a later os.chdir must not point the link at another folder
        self.folder, self.key, self.ident, self.durable = Path(folder).absolute(), key, ident, durable

    def __repr__(self) -> str:
        return f"ValueLink({str(self.folder)!r}, {self.key!r})"

    # what the leaves call (the non-tensor room sits below this one and cannot import it)
    def write_value(self, value) -> bool:
        """:func:`write_value` of this link (a ``NonTensorData`` entry)."""
        return write_value(self, value)

    def write_stack(self, stack) -> bool:
        """:func:`write_stack` of ``stack``, the ``NonTensorStack`` this link belongs to."""
        return write_stack(stack)


def link_value(obj, folder, key) -> None:
    """Record on the ``NonTensorData`` ``obj`` that it is entry ``key`` of the opened
    :class:`~chatdata.td.storage.folder.Folder` ``folder`` (called by the reader); ``key=None`` for a
    ``NonTensorStack`` saved as a folder of its own.

    Example:
        >>> import tempfile
        >>> from chatdata.td import TensorDict, NonTensorData, load_memmap
        >>> path = tempfile.mkdtemp() + "/ds"
        >>> _ = TensorDict({"tag": NonTensorData("v1")}, []).memmap(path)
        >>> load_memmap(path).get("tag")._disk.key
        'tag'
    """
    st = folder.stat_opened
    obj._disk = ValueLink(folder.path, key, (st.st_dev, st.st_ino))


def is_update_leftover(name: str) -> bool:
    """True for the temporary file an update killed mid-way may leave in a folder.

    Example:
        >>> is_update_leftover(".meta.json.tmp-0123456789ab"), is_update_leftover("meta.json")
        (True, False)
    """
    return name.startswith(TEMP_PREFIX)


def _dumps(meta: dict) -> bytes:
    # the writers' own serialisation (persist._write_meta), so the file reads the same way
    return json.dumps(meta, ensure_ascii=False, allow_nan=True).encode("utf-8")


def write_value(link: ValueLink, value) -> bool:
    """Replace the value of ``link``'s entry in its folder's ``meta.json`` atomically.

    Returns True when written, False when the folder is gone or was replaced by another save
    (nothing written). Raises ``TypeError`` / ``ValueError`` naming the entry for a value the
    format cannot hold, and :class:`FormatError` when the entry is no longer a ``value``
    entry of a chatdata folder (nothing written in either case).

    Example:
        >>> import tempfile
        >>> from chatdata.td import TensorDict, NonTensorData, load_memmap
        >>> path = tempfile.mkdtemp() + "/ds"
        >>> td = TensorDict({"tag": NonTensorData("v1")}, []).memmap(path)
        >>> write_value(td.get("tag")._disk, {"v": 2}), load_memmap(path)["tag"]
        (True, {'v': 2})
    """
    where = f"entry {link.key!r} of {link.folder}"
    _entry_value(value, where)  # the writer's checks and messages
    try:
        fd = os.open(link.folder, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return _detached(link)  # the folder was deleted: the object is detached from it
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by close (or by the kernel if we die)
        if _taken_over(fd, link):
            return _detached(link)  # another save took the path: its folder is not ours to edit
        try:
            return _replace_value(fd, link, value, where)
        except OSError as err:
            if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):  # read-only: memory only, as its tensors
                return _read_only(link, err)
            if isinstance(err, FileNotFoundError) and _taken_over(fd, link):
                return _detached(link)  # swapped out and being deleted while we wrote
            raise
        except FormatError:
            if _taken_over(fd, link):  # a concurrent save swapped the folder out and deleted its meta.json
                return _detached(link)
            raise
    finally:
        os.close(fd)


def _replace_value(fd: int, link: ValueLink, value, where: str) -> bool:
    """Under the folder lock: ``meta.json`` with the entry's new value, via a temporary file."""
    meta_path = link.folder / "meta.json"
    meta, mode = _read_meta(fd, meta_path)
    entries = meta.get("entries") if meta.get("format") == "chatdata" else None
    entry = entries.get(link.key) if isinstance(entries, dict) else None
    if not isinstance(entry, dict) or entry.get("kind") != "value":
        raise FormatError(f"{meta_path}: {where} is no longer a 'value' entry; cannot write the update through")
    entry["value"] = value
    raw = _dumps(meta)
    _remove_leftovers(fd)  # files of killed updates (we hold the lock: no live writer has one)
    tmp = f"{TEMP_PREFIX}{uuid.uuid4().hex[:12]}"
    tfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600, dir_fd=fd)
    try:
        try:
            os.fchmod(tfd, mode)  # the new meta.json keeps the old one's permissions
            write_all(tfd, raw, link.durable)
        finally:
            os.close(tfd)
        os.replace(tmp, "meta.json", src_dir_fd=fd, dst_dir_fd=fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=fd)
        except OSError:
            pass
        raise
    if link.durable:
        os.fsync(fd)  # the rename itself
    return True


class DetachedWriteWarning(UserWarning):
    """An in-place update stayed in memory: the folder it was loaded from is gone or was
    replaced by another save."""


def _detached(link: ValueLink) -> bool:
    return _in_memory_only(link, "no longer holds the save {what} was loaded from (another save replaced the "
                                 "folder, or it was deleted): the update stays in memory only. Reload with "
                                 "load_memmap() or memmap_refresh_() and update again, or save it with memmap(path)")


def _read_only(link: ValueLink, err: OSError) -> bool:
    return _in_memory_only(link, f"cannot be written ({err.strerror or err}): the update of {{what}} stays in memory "
                                 "only, as writes into its memory-mapped tensors do (a read-only folder maps them "
                                 "copy-on-write). Save it elsewhere with memmap(path) to keep it")


def _in_memory_only(link: ValueLink, why: str) -> bool:
    """Warn that an update was not written (``why`` follows the folder; ``{what}`` names the
    entry) and return False."""
    import warnings

    what = "the stack" if link.key is None else f"entry {link.key!r}"
    warnings.warn(f"{link.folder} {why.format(what=what)}", DetachedWriteWarning, stacklevel=5)
    return False


def _read_meta(fd: int, where: Path) -> dict:
    try:
        mfd = os.open("meta.json", os.O_RDONLY | _NOFOLLOW | _CLOEXEC | _NONBLOCK, dir_fd=fd)
    except FileNotFoundError:
        raise FormatError(f"{where} is missing; cannot write the update through") from None
    except OSError as err:
        raise FormatError(f"{where} cannot be opened ({err}); links are refused inside a dataset") from None
    try:
        st = os.fstat(mfd)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(f"{where} is not a regular file; cannot write the update through")
        chunks = []
        while True:
            b = os.read(mfd, 1 << 20)
            if not b:
                break
            chunks.append(b)
    finally:
        os.close(mfd)
    return parse_meta(b"".join(chunks), where), stat.S_IMODE(st.st_mode)


def _taken_over(fd: int, link: ValueLink) -> bool:
    """True when the folder open as ``fd`` is no longer the one at ``link.folder``: deleted, or
    moved aside by another save (which deletes it next, files first, so a write into it may find
    its own temporary file gone before the folder itself is)."""
    st = os.fstat(fd)
    if st.st_nlink == 0 or (st.st_dev, st.st_ino) != link.ident:
        return True
    try:
        now = os.stat(link.folder)
    except OSError:
        return True
    return (now.st_dev, now.st_ino) != link.ident


def _remove_leftovers(fd: int) -> None:
    for name in os.listdir(fd):
        if is_update_leftover(name):
            try:
                os.unlink(name, dir_fd=fd)
            except OSError:
                pass


def _folder_ident(path, _prefix) -> tuple:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def write_stack(stack) -> bool:
    """Save a ``NonTensorStack`` memory-mapped on its own (``stack.memmap_(path)``) again to its
    folder, after an in-place change: the whole column is rewritten and swapped in with the
    atomic save protocol (``docs/format.md``, section 8), so readers see the old column or the
    new one. Returns False, writing nothing, when the folder is gone or another save replaced
    it. A value the format refuses raises before anything is swapped in.

    Example:
        >>> import tempfile
        >>> from chatdata.td import NonTensorStack, load_memmap
        >>> path = tempfile.mkdtemp() + "/s"
        >>> s = NonTensorStack("a", "b").memmap_(path)
        >>> s[1] = "z"
        >>> load_memmap(path).tolist()
        ['a', 'z']
    """
    link = stack._disk
    try:
        fd = os.open(link.folder, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return _detached(link)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # rewrites of one folder take turns
        st = os.fstat(fd)
        try:
            now = os.stat(link.folder)
        except OSError:
            return _detached(link)
        if st.st_nlink == 0 or (st.st_dev, st.st_ino) != link.ident or (now.st_dev, now.st_ino) != link.ident:
            return _detached(link)  # another save took the path: its folder is not ours to rewrite
        # the identity of the folder this save puts in place (taken before the swap)
        _, link.ident = _save(stack, link.folder, num_threads=0, like=False, existsok=True,
                              after_write=_folder_ident, durable=link.durable)
        return True
    finally:
        os.close(fd)
