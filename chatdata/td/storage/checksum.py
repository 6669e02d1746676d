"""Checksums of data files: computed while a file is written, recorded in its ``meta.json``.

Every data file a writer produces gets an XXH3-64 checksum (``xxhash``), recorded in the
``checksums`` field of the folder's ``meta.json`` as ``"xxh3_64:<16 hex digits>"``. Writers hash
the bytes they hand to ``write`` (no second read of the file); ``chatdata verify`` and
``load_memmap(path, verify=True)`` hash the files again and compare.

XXH3-64 is the fastest of the candidates measured on this machine (``benchmarks/bench_checksum.py``,
1 GiB in memory, best of 3: xxh3_64 7.4-7.8 GiB/s, crc32c 6.0-7.1 GiB/s, google-crc32c 3.3 GiB/s
with the copy it needs, xxh64 2.6-3.2 GiB/s, zlib.crc32 0.9-1.1 GiB/s), has a BSD licence (the
``crc32c`` package is LGPL) and 64 bits (a random change goes unnoticed with probability 2**-64).

Example:
    >>> import io
    >>> f = HashingFile(io.BytesIO())
    >>> f.write(b"hello"); f.checksum() == checksum_bytes(b"hello")
    5
    True
    >>> checksum_bytes(b"")
    'xxh3_64:2d06800538d394c2'
"""
from __future__ import annotations

import mmap
import os

import xxhash

__all__ = ["ALGORITHM", "HashingFile", "new_hasher", "record", "sorted_checksums", "checksum_bytes", "checksum_file", "iter_file_chunks",
           "format_checksum", "parse_checksum"]

ALGORITHM = "xxh3_64"
CHUNK = 1 << 22  # 4 MiB: large enough to amortise the call, small enough to stay in cache


ENABLED = True  # benchmarks set it to False to measure a save without checksums


class _NoHasher:
    """Stands in for a hasher when checksums are switched off (benchmarks only)."""

    def update(self, buf) -> None:
        pass

    def hexdigest(self):
        return None


def new_hasher():
    """A fresh incremental hasher (``update(buffer)``, ``hexdigest()``).

    Example:
        >>> h = new_hasher(); h.update(b"ab"); h.update(b"c")
        >>> format_checksum(h) == checksum_bytes(b"abc")
        True
    """
    return xxhash.xxh3_64() if ENABLED else _NoHasher()


def format_checksum(hasher) -> str | None:
    """``"xxh3_64:<hex>"`` of a hasher, as written to ``meta.json`` (None when switched off).

    Example:
        >>> format_checksum(new_hasher())
        'xxh3_64:2d06800538d394c2'
    """
    digest = hasher.hexdigest()
    return None if digest is None else f"{ALGORITHM}:{digest}"


def parse_checksum(value) -> tuple[str, str] | None:
    """``(algorithm, hex)`` of a recorded checksum, or None when it is not a ``"name:hex"`` string.

    Example:
        >>> parse_checksum("xxh3_64:00ff")
        ('xxh3_64', '00ff')
    """
    if not isinstance(value, str) or ":" not in value:
        return None
    algo, _, digest = value.partition(":")
    return algo, digest


def record(sums: dict, name: str, checksum) -> None:
    """Put ``checksum`` of file ``name`` into a folder's ``checksums`` map (unless switched off).

    Example:
        >>> sums = {}; record(sums, "a.memmap", checksum_bytes(b"")); sorted(sums)
        ['a.memmap']
    """
    if checksum is not None:
        sums[name] = checksum


def sorted_checksums(sums: dict) -> dict:
    """The ``checksums`` map as written: file names in sorted order, so that every writer (in
    any thread order) writes the same ``meta.json``.

    Example:
        >>> list(sorted_checksums({"b": "x", "a": "y"}))
        ['a', 'b']
    """
    return {k: sums[k] for k in sorted(sums)}


def checksum_bytes(buf) -> str:
    """The recorded form of the checksum of a bytes-like object.

    Example:
        >>> checksum_bytes(b"abc") == checksum_bytes(memoryview(b"abc"))
        True
    """
    h = new_hasher()
    h.update(buf)
    return format_checksum(h)


def iter_file_chunks(path, chunk: int = CHUNK):
    """Memoryviews over consecutive pieces of a file's bytes (read-only mapping, no copy).

    Example:
        >>> import tempfile
        >>> p = tempfile.mktemp(); open(p, "wb").write(b"xyz")
        3
        >>> [bytes(c) for c in iter_file_chunks(p, chunk=2)]
        [b'xy', b'z']
    """
    size = os.path.getsize(path)
    if size == 0:
        return
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mm, "madvise") and hasattr(mmap, "MADV_SEQUENTIAL"):
        mm.madvise(mmap.MADV_SEQUENTIAL)
    view = memoryview(mm)
    try:
        for a in range(0, len(view), chunk):
            piece = view[a:a + chunk]
            try:
                yield piece
            finally:
                piece.release()
    finally:
        view.release()
        mm.close()


def checksum_file(path) -> str:
    """The recorded form of the checksum of a file's content.

    Example:
        >>> import tempfile
        >>> p = tempfile.mktemp(); open(p, "wb").write(b"abc")
        3
        >>> checksum_file(p) == checksum_bytes(b"abc")
        True
    """
    h = new_hasher()
    for piece in iter_file_chunks(path):
        h.update(piece)
    return format_checksum(h)


class HashingFile:
    """A binary file opened for writing that hashes what is written to it.

    ``write`` hashes the same buffer it writes, so the checksum costs no second read.
    """

    __slots__ = ("file", "hasher")

    def __init__(self, file):
        self.file = file
        self.hasher = new_hasher()

    @classmethod
    def open(cls, path, mode: str = "wb") -> "HashingFile":
        return cls(open(path, mode))

    def write(self, buf) -> int:
        self.hasher.update(buf)
        return self.file.write(buf)

    def writelines(self, bufs) -> None:
        update, write = self.hasher.update, self.file.write
        for b in bufs:
            update(b)
            write(b)

    def checksum(self) -> str:
        return format_checksum(self.hasher)

    @property
    def closed(self) -> bool:
        return self.file.closed

    def fileno(self) -> int:
        return self.file.fileno()

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
