"""Sharded datasets: a folder of ordinary chatdata datasets plus a ``manifest.json``.

::

    corpus/
    ├── manifest.json        {"format": "chatdata-sharded", "version": 1, "kind": "History",
    │                         "items": 30, "shards": [{"path": "shards/shard-...", "items": 10}, ...]}
    ├── .manifest.lock       (empty; writers take an fcntl lock on it)
    └── shards/
        ├── shard-00001732540000000000000-1f3a.../   a dataset as `chatdata import` writes it
        └── ...

A writer writes its shard folder (atomically, under a name no other writer can pick), then,
holding an exclusive ``fcntl`` lock on ``.manifest.lock``, re-reads the manifest, adds its
shards and replaces the manifest with ``os.replace`` of a fully written, fsynced temporary file.
So concurrent writers lose no shard, and a reader (which takes no lock) always sees a whole
manifest: the old one or the new one. A writer killed at any point leaves at worst an orphan
shard folder that no manifest names.

Example:
    >>> import tempfile, chatdata
    >>> path = tempfile.mkdtemp() + "/corpus"
    >>> ds = chatdata.open_dataset(path, mode="a")
    >>> ds.append(chatdata.History.from_chats([[{"role": "user", "content": "hi"}]]))
    >>> ds.append(chatdata.History.from_chats([[{"role": "user", "content": "yo"}]]))
    >>> r = chatdata.open_dataset(path)
    >>> len(r), r[1].content
    (2, ['yo'])

This module is the face of sharded datasets: :func:`open_dataset` and :class:`ShardedWriter`;
the manifest and the folder layout live in :mod:`chatdata.io.shard_manifest`, the reader in
:mod:`chatdata.io.sharded_dataset` (both re-exported here).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from .shard_manifest import (LOCK, MANIFEST, SHARDS, _empty_manifest, _format_error, _items, _locked,
                             _read_manifest, _write_manifest, commit_shards, is_sharded, missing_folders,
                             new_shard_name, remove_empty, remove_replaced, uncommitted_shards)
from .shard_manifest import remove_job_shards  # noqa: F401 - re-exported for chatdata.ray
from .sharded_dataset import ShardedDataset

__all__ = ["open_dataset", "ShardedDataset", "ShardedWriter", "MANIFEST", "is_sharded"]


_UNCOMMITTED = ("{p} holds the shards of a sharded write that has not committed (no {manifest}: the write was "
                "stopped, or is still running), so no dataset yet; run the write again, or delete the folder")


def _tables_hint(p: Path) -> str:
    """How to read ``p`` when it is a table file or a folder of them (Parquet, Arrow, HF datasets)."""
    suffixes = (".parquet", ".arrow", ".feather", ".ipc")
    tables = p.suffix.lower() in suffixes if p.is_file() else \
        (p / "state.json").is_file() or (p / "dataset_dict.json").is_file() or \
        any(f.suffix.lower() in suffixes for f in p.iterdir())
    return (f"; it holds Parquet / Arrow tables: `chatdata import {p} OUT` makes a dataset of them "
            "(History.from_arrow reads one table)") if tables else ""


def _refuse_foreign(p: Path) -> None:
    """Refuse a folder holding anything but a sharded dataset's own files (the lock, the shards,
    a manifest being written by another writer, the shards of a write killed before its commit)."""
    if p.is_dir() and uncommitted_shards(p) is None:
        raise ValueError(f"{p} is a non-empty folder that is not a chatdata dataset")


def open_dataset(path, mode: str = "r"):
    """Open a dataset folder: a plain chatdata dataset (returned as ``load_memmap`` gives it, a
    lazy History or token set), or a sharded folder with a ``manifest.json`` (a
    :class:`ShardedDataset`, indexable across shards). ``mode="a"`` opens (creating it if needed)
    a sharded dataset for :meth:`ShardedDataset.append`.

    Example:
        >>> import tempfile, chatdata
        >>> ds = chatdata.open_dataset(tempfile.mkdtemp() + "/new", mode="a")
        >>> len(ds), ds.num_shards
        (0, 0)
    """
    if mode not in ("r", "a"):
        raise ValueError(f"mode must be 'r' or 'a', got {mode!r}")
    p = Path(path)
    if mode == "a":
        if (p / "meta.json").is_file() and not (p / MANIFEST).is_file():
            raise ValueError(f"{p} holds a meta.json: a plain (unsharded) dataset, or another program's folder; "
                             "append shards to a sharded folder instead")
        if p.exists() and not p.is_dir():
            raise ValueError(f"{p} is a file, not a dataset folder")
        if not (p / MANIFEST).is_file():
            _refuse_foreign(p)  # before creating anything in someone else's folder
            from .saved import saved_ancestor

            inside = saved_ancestor(p)
            if inside is not None:  # its save would then refuse to replace it (files not its own)
                raise ValueError(f"{p} is inside the saved dataset {inside}; create the sharded dataset elsewhere")
            p.mkdir(parents=True, exist_ok=True)
            with _locked(p):  # writers creating the dataset at once: one writes the manifest
                if not (p / MANIFEST).is_file():
                    _refuse_foreign(p)
                    _write_manifest(p, _empty_manifest(None))
        return ShardedDataset(p, "a")
    if (p / MANIFEST).is_file():
        return ShardedDataset(p, "r")
    if (p / "meta.json").is_file():
        from ..history import History  # noqa: F401 - registers the class for load_memmap
        from ..td import load_memmap

        return load_memmap(p)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such dataset")
    if uncommitted_shards(p):
        raise _format_error(_UNCOMMITTED.format(p=p, manifest=MANIFEST))
    if p.is_file():
        raise _format_error(f"{p} is a file, not a dataset folder{_tables_hint(p)}")
    raise _format_error(f"{p} is neither a chatdata dataset (no meta.json) nor a sharded one (no {MANIFEST})"
                        f"{_tables_hint(p)}")


class ShardedWriter:
    """Streams items into new shards of at most ``shard_size`` items; :meth:`close` adds them all
    to the manifest in one atomic update (so an import either lands whole or not at all), and
    :meth:`abort` removes them. Same ``append``/``close``/``abort`` as ``StreamWriter``.

    Example:
        >>> import tempfile, chatdata
        >>> w = ShardedWriter(tempfile.mkdtemp() + "/c", shard_size=1)
        >>> w.append(chatdata.History.from_chats([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]))
        >>> w.close().num_shards
        2
    """

    def __init__(self, path, shard_size: int, *, kind: str = "History", overwrite: bool = False, columns=None,
                 durable: bool = False):
        from .counts import check_count

        self.path = Path(path)
        self.shard_size = check_count("shard_size", shard_size)
        self.kind = kind
        self.overwrite = overwrite
        self.columns = columns
        self.durable = durable  # fsync each shard before and after its rename (the manifest always is)
        self.entries: list[dict] = []
        self._current = None
        self._current_name = None
        self._current_items = 0
        # the folders this writer makes, removed again by abort() when it leaves them empty: a failed
        # import leaves no `OUT/shards/` that the next import would refuse as someone else's folder
        self._made = missing_folders(self.path)
        (self.path / SHARDS).mkdir(parents=True, exist_ok=True)

    def _open(self):
        from ..td.storage import StreamWriter

        self._current_name = f"{SHARDS}/{new_shard_name()}"
        if self.kind == "History":
            from ..history import History
            from ..history.columns import FIELDS, FLAGS_KEY

            self._current = StreamWriter(self.path / self._current_name, tensorclass=History,
                                         columns=(*FIELDS, FLAGS_KEY), durable=self.durable)
        else:
            self._current = StreamWriter(self.path / self._current_name, columns=self.columns or (),
                                         durable=self.durable)
        self._current_items = 0

    def _finish(self):
        if self._current is not None:
            self._current.close()
            self.entries.append({"path": self._current_name, "items": self._current_items})
            self._current = None

    def append(self, chunk) -> None:
        """Append a ragged chunk (a History batch or a ragged stack), split across shards."""
        n = _items(chunk)
        a = 0
        while a < n:
            if self._current is None:
                self._open()
            take = min(n - a, self.shard_size - self._current_items)
            piece = chunk[a:a + take] if (a, take) != (0, n) else chunk
            self._current.append(piece)
            self._current_items += take
            a += take
            if self._current_items >= self.shard_size:
                self._finish()

    def close(self) -> ShardedDataset:
        """Finish the last shard and commit every shard written to the manifest."""
        try:
            self._finish()
        except BaseException:
            self.abort()
            raise
        old = _read_manifest(self.path)["shards"] if (self.overwrite and is_sharded(self.path)) else []
        commit_shards(self.path, self.entries, self.kind, replace=self.overwrite)
        remove_replaced(self.path, old, self.entries)  # replaced by --overwrite: no manifest names them any more
        return ShardedDataset(self.path)

    def abort(self) -> None:
        """Remove every shard this writer wrote; the manifest is untouched."""
        if self._current is not None:
            self._current.abort()
            self._current = None
        for e in self.entries:
            shutil.rmtree(self.path / e["path"], ignore_errors=True)
        self.entries = []
        remove_empty(self._made)
        self._made = []
