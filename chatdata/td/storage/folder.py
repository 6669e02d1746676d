"""An opened dataset folder: every file is resolved relative to the folder's descriptor.

Loading opens the dataset's folder once (``os.open``) and reaches every ``meta.json``, data file
and sub-folder through that descriptor (``dir_fd=``), never by path again. A save that swaps a
new folder into place while a load runs therefore cannot mix files of two saves into one
object: the load keeps reading the folder it opened. Links are refused anywhere below the
dataset's own folder (the folder itself may be reached through a link).

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "meta.json").write_text("{}")
    >>> with Folder.open(d) as f:
    ...     f.read_bytes("meta.json")
    b'{}'
"""
from __future__ import annotations

import errno
import mmap
import os
import stat
import warnings
from pathlib import Path

import torch

from .fsops import FormatError

__all__ = ["Folder"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


class Folder:
    """An open directory descriptor plus the path it is shown as (see the module docstring)."""

    __slots__ = ("fd", "path", "_children", "stat_opened")

    def __init__(self, fd: int, path: Path):
        self.fd = fd
        self.path = Path(path)
        self._children: list[Folder] = []
        self.stat_opened = os.fstat(fd)  # identifies the folder opened (st_dev, st_ino)

    @classmethod
    def open(cls, path) -> "Folder":
        """Open the dataset folder ``path`` (a link to a folder is followed here only)."""
        path = Path(path)
        try:
            fd = os.open(path, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        except FileNotFoundError:
            raise FileNotFoundError(f"no saved collection at {path}: the folder does not exist") from None
        except NotADirectoryError:
            raise FormatError(
                f"{path} is a file, not a saved folder (single-file archives such as tensordict's "
                ".tdz are not read; unzip it and load the folder)"
            ) from None
        return cls(fd, path)

    def __enter__(self) -> "Folder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close this folder's descriptor and those of the sub-folders opened through it."""
        for child in self._children:
            child.close()
        self._children = []
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def replaced(self) -> bool:
        """True when the path now names another folder than the one opened (a save swapped it),
        or the opened folder was deleted (its inode number may then be reused: checked first)."""
        try:
            if self.fd >= 0 and os.fstat(self.fd).st_nlink == 0:
                return True
            a, b = os.stat(self.path), self.stat_opened
        except OSError:
            return True
        return (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino)

    # -- entries ---------------------------------------------------------------------------
    def lstat(self, name: str):
        """``os.stat`` of ``name`` without following a link; None when it does not exist;
        a link raises :class:`FormatError` naming its path."""
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except NotADirectoryError:
            return None
        if stat.S_ISLNK(st.st_mode):
            raise FormatError(
                f"{self.path / name} is a symbolic link; chatdata refuses links inside a dataset "
                "(they could point anywhere): replace it with the file itself"
            )
        return st

    def is_file(self, name: str) -> bool:
        st = self.lstat(name)
        return st is not None and stat.S_ISREG(st.st_mode)

    def is_dir(self, name: str) -> bool:
        st = self.lstat(name)
        return st is not None and stat.S_ISDIR(st.st_mode)

    def exists(self, name: str) -> bool:
        return self.lstat(name) is not None

    def size(self, name: str) -> int:
        st = self.lstat(name)
        if st is None:
            raise FormatError(f"data file {self.path / name} is missing")
        return st.st_size

    def sub(self, name: str) -> "Folder":
        """The sub-folder ``name`` (opened through this folder; closed with it)."""
        self.lstat(name)  # refuses a link with a clear message
        try:
            fd = os.open(name, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC, dir_fd=self.fd)
        except (FileNotFoundError, NotADirectoryError):
            raise FormatError(f"sub-folder {self.path / name} is missing") from None
        except OSError as err:
            if err.errno == errno.ELOOP:
                self.lstat(name)
            raise FormatError(f"cannot open {self.path / name} ({err.strerror})") from None
        child = Folder(fd, self.path / name)
        self._children.append(child)
        return child

    def _open(self, name: str, flags: int) -> int:
        try:
            return os.open(name, flags | _NOFOLLOW | _CLOEXEC, dir_fd=self.fd)
        except FileNotFoundError:
            raise FormatError(f"data file {self.path / name} is missing") from None
        except OSError as err:
            if err.errno == errno.ELOOP:
                self.lstat(name)  # raises the link message
            raise

    def read_bytes(self, name: str) -> bytes:
        fd = self._open(name, os.O_RDONLY)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FormatError(f"{self.path / name} is not a file")
            chunks = []
            while True:
                b = os.read(fd, 1 << 20)
                if not b:
                    return b"".join(chunks)
                chunks.append(b)
        finally:
            os.close(fd)

    def map(self, name: str, dtype: torch.dtype, numel: int, *, shared: bool = True, random: bool = False):
        """Map the file ``name`` as a 1-D tensor of ``numel`` items; returns ``(tensor, file size)``.

        ``shared=True`` maps it writable and shared (writes reach the file), falling back to a
        private copy-on-write map when the file cannot be opened for writing. ``random=True``
        turns off the kernel's read-ahead (one string of a cold 10 GB column reads a page).
        """
        fd = None
        if shared:
            try:
                fd = self._open(name, os.O_RDWR)
            except PermissionError:
                fd = None
            except OSError as err:
                if err.errno not in (errno.EROFS, errno.EACCES, errno.ETXTBSY):
                    raise
        access = mmap.ACCESS_WRITE if fd is not None else mmap.ACCESS_COPY
        if fd is None:
            fd = self._open(name, os.O_RDONLY)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise FormatError(f"{self.path / name} is not a file")
            itemsize = torch.empty((), dtype=dtype).element_size()
            if numel == 0 or st.st_size < numel * itemsize:
                return torch.empty(0, dtype=dtype), st.st_size
            mm = mmap.mmap(fd, numel * itemsize, access=access)
        finally:
            os.close(fd)
        if random and hasattr(mm, "madvise") and hasattr(mmap, "MADV_RANDOM"):
            mm.madvise(mmap.MADV_RANDOM)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return torch.frombuffer(mm, dtype=dtype, count=numel), st.st_size  # keeps ``mm`` alive
