"""``ShardedDataset``: a sharded dataset opened for reading (one lazy History or token set over
its shards, each shard checked against the manifest when it is first loaded) or for appending
whole shards (see :mod:`chatdata.io.sharded` for the layout).

Example:
    >>> import tempfile, chatdata
    >>> ds = chatdata.open_dataset(tempfile.mkdtemp() + "/c", mode="a")
    >>> ds.append(chatdata.History.from_chats([[{"role": "user", "content": "hi"}]]))
    >>> ShardedDataset(ds.path)[0].content
    ['hi']
"""
from __future__ import annotations

import bisect
import operator
import shutil
from pathlib import Path

from .lazy_history import LazyShards
from .shard_manifest import (MANIFEST, SHARDS, _format_error, _is_history, _items, _kind_of, _read_manifest,
                             commit_shards, new_shard_name, shard_outside)

__all__ = ["ShardedDataset"]

_OUTSIDE = ("shard {i} ({path}) leads out of the dataset folder, to {real}, through a symbolic link; "
            "a shard is a folder inside its dataset: copy it in (or open that dataset itself), or remove the entry")


class ShardedDataset(LazyShards):
    """A sharded dataset opened by :func:`open_dataset`: one lazy History (or token set) over its
    shards, read as :class:`~chatdata.io.lazy_history.LazyShards` says (``batch_size``, ``ds[i]``,
    ``ds[a:b]``, ``ds[i, j]``, ``to_chats``, ``apply_chat_template``, ``memmap``, ...).
    ``ds.shard(k)`` is the k-th shard as loaded by ``load_memmap``. In mode ``"a"``,
    :meth:`append` adds a shard.
    """

    def __init__(self, path, mode: str = "r"):
        self.path = Path(path)
        self.mode = mode
        self._loaded: dict[int, object] = {}
        self.refresh()

    def refresh(self) -> None:
        """Re-read the manifest (a reader sees the shards committed when it (re)opened)."""
        m = _read_manifest(self.path)
        for i, s in enumerate(m["shards"]):
            outside = shard_outside(self.path, s["path"])
            if outside is not None:
                raise _format_error(f"{self.path / MANIFEST}: " + _OUTSIDE.format(i=i, path=s["path"], real=outside))
            if not (self.path / s["path"] / "meta.json").is_file():
                raise _format_error(f"{self.path / MANIFEST}: shard {i} ({s['path']}) is missing "
                                    f"(no {self.path / s['path'] / 'meta.json'})")
        self.manifest = m
        self.kind = m.get("kind")
        self._starts = [0]
        for s in m["shards"]:
            self._starts.append(self._starts[-1] + s["items"])
        self._loaded = {}

    # -- reading ----------------------------------------------------------------------------
    @property
    def num_shards(self) -> int:
        return len(self.manifest["shards"])

    def shard_paths(self) -> list[Path]:
        """The folders of the shards, in manifest order."""
        return [self.path / s["path"] for s in self.manifest["shards"]]

    def shard(self, k: int):
        """Shard ``k`` (negative counts from the end), loaded lazily (memory-mapped) and checked
        against the manifest."""
        n = self.num_shards
        try:
            if isinstance(k, bool):
                raise TypeError
            k = operator.index(k)
        except TypeError:
            raise TypeError(f"a shard is named by its int position, got {type(k).__name__} {k!r}") from None
        if not -n <= k < n:
            raise IndexError(f"shard {k} is out of range for a dataset of {n} shards")
        k %= n
        obj = self._loaded.get(k)
        if obj is None:
            from ..history import History  # noqa: F401 - registers the class for load_memmap
            from ..td import load_memmap

            entry = self.manifest["shards"][k]
            path = self.path / entry["path"]
            obj = load_memmap(path)
            if self.kind is not None and _kind_of(obj) != self.kind:
                raise _format_error(f"{self.path / MANIFEST}: shard {k} ({entry['path']}) holds a {_kind_of(obj)}, "
                                    f"the manifest says its shards hold {self.kind}")
            if _is_history(obj) and obj.ndim != 2:  # a single message or a 3-D batch is not a set of conversations
                raise _format_error(f"{self.path / MANIFEST}: shard {k} ({entry['path']}) holds a History of batch "
                                    f"{tuple(obj.batch_size)}, not a batch of conversations")
            if _items(obj) != entry["items"]:
                raise _format_error(f"{self.path / MANIFEST}: shard {k} ({entry['path']}) holds {_items(obj)} "
                                    f"items, the manifest says {entry['items']}")
            self._loaded[k] = obj
        return obj

    def __len__(self) -> int:
        return self._starts[-1]

    def _locate(self, i: int) -> tuple[int, int]:
        k = bisect.bisect_right(self._starts, i) - 1
        return k, i - self._starts[k]

    def iter_chunks(self, size: int):
        """Consecutive pieces of at most ``size`` items, never crossing a shard (no copies)."""
        from .counts import check_count

        size = check_count("size", size)
        for k in range(self.num_shards):
            s = self.shard(k)
            n = _items(s)
            for a in range(0, n, size):
                yield s[a:a + size]

    def to_arrow(self, column: str = "messages"):
        """One ``pyarrow.Table`` over all shards (one chunk per shard, zero-copy per shard). Shards
        whose message fields have types one schema cannot hold (str content in one shard, content
        parts in another) are joined first and written as ``History.to_arrow`` writes them."""
        from .deps import require_pyarrow

        pa = require_pyarrow()
        from .shard_tables import ragged_to_arrow

        tables = [self.shard(k).to_arrow(column) if self.kind == "History" else ragged_to_arrow(self.shard(k))
                  for k in range(self.num_shards)]
        if not tables:
            from .stitch import empty_history

            return empty_history().to_arrow(column)
        if self.kind not in ("History", None):
            return pa.concat_tables(tables, promote_options="permissive")
        from .arrow_check import encoding_clash, key_orders, order_clash

        schemas = [t.schema for t in tables]
        if encoding_clash(schemas, column) is None and not order_clash([key_orders(t, column) for t in tables],
                                                                       schemas, column):
            try:
                return pa.concat_tables(tables, promote_options="permissive")
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                pass
        # shards whose message fields have types no one schema holds (str content in one, content
        # parts in another; an extra field of other types; keys one struct would reorder: tool
        # arguments {"unit", "city"} in one shard, {"city", ...} first in another), or text that is JSON in one shard and
        # plain in another (concat would keep one tag for all): the History of them all writes
        # such fields one way (as JSON text), at the price of reading the values
        return self[:].to_arrow(column)

    def __repr__(self) -> str:
        return f"ShardedDataset({str(self.path)!r}, kind={self.kind!r}, items={len(self)}, shards={self.num_shards})"

    # -- writing ----------------------------------------------------------------------------
    def append(self, obj) -> None:
        """Write ``obj`` (a batch of conversations, one conversation, or a ragged token set) as a new shard and
        add it to the manifest atomically; safe with other writers appending at the same time.
        ``obj`` may be a sharded dataset (another one, or this one): its shards are copied in as
        new shards, all added in one update of the manifest."""
        if self.mode != "a":
            raise PermissionError(f"{self.path} was opened with mode={self.mode!r}; open it with mode=\"a\" to append")
        from ..history import History

        if isinstance(obj, LazyShards):  # its shards, as they are (each one checked against its manifest)
            pieces, kind = [obj.shard(k) for k in range(obj.num_shards)], obj.kind
        else:
            if isinstance(obj, History):  # one conversation (also one without messages) is one item
                from .stitch import as_conversations

                obj = as_conversations(obj, "append")
            if not callable(getattr(obj, "memmap", None)):
                raise TypeError(f"append takes a History or a ragged token set, got {type(obj).__name__}"
                                + (" (History.from_chats(chats) makes one from message dicts)"
                                   if isinstance(obj, (list, tuple, dict)) else ""))
            pieces, kind = [obj], _kind_of(obj)
        (self.path / SHARDS).mkdir(parents=True, exist_ok=True)
        names: list[str] = []
        try:
            for piece in pieces:
                names.append(f"{SHARDS}/{new_shard_name()}")
                piece.memmap(str(self.path / names[-1]), copy_existing=True)  # also a loaded dataset
            commit_shards(self.path, [{"path": n, "items": _items(p)} for n, p in zip(names, pieces)], kind)
        except BaseException:
            for name in names:
                shutil.rmtree(self.path / name, ignore_errors=True)
            raise
        self.refresh()
