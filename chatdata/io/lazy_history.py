"""A sharded dataset read as one lazy History (or one token set): the read side of
:class:`~chatdata.io.sharded.ShardedDataset`.

``chatdata.open_dataset("corpus/")`` answers as the History of all its conversations would, while
holding none of them: ``batch_size`` ``(n, -1)``, ``len``, indexing (``ds[i]`` a conversation,
``ds[i, j]`` a message, ``ds[a:b]`` / ``ds[::k]`` / ``ds[[i, j]]`` / ``ds[tensor]`` / a bool mask
a History of those conversations, ``ds[a:b, j]`` as History allows), iteration, ``to_chats``, ``ds["role"]``,
``apply_chat_template``, ``conversation_offsets``, ``to_arrow`` and ``memmap`` (one plain dataset). It is
read-only (writes raise ``TypeError`` saying what to do), and what it gives is a History of its own:
a write into ``ds[i]`` never changes ``ds`` nor a shard's folder. A sharded token set
(``kind == "tokens"``) indexes and slices the same way into ragged token stacks.

Opening maps nothing; an item maps only the shard it lives in (found by a bisect over the shards'
first items), and a selection across shards is stitched column by column
(:mod:`chatdata.io.stitch`), never message by message.

Example:
    >>> import tempfile, chatdata
    >>> path = tempfile.mkdtemp() + "/corpus"
    >>> w = chatdata.open_dataset(path, mode="a")
    >>> w.append(chatdata.History.from_chats([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]))
    >>> w.append(chatdata.History.from_chats([[{"role": "user", "content": "c"}]]))
    >>> ds = chatdata.open_dataset(path)
    >>> ds.batch_size, ds[-1, 0].content, ds[1:].content
    (torch.Size([3, -1]), 'c', [['b'], ['c']])
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..history import History
from ..td import RaggedTensorDict, load_memmap
from .stitch import COLUMNS, empty_history, stitch_histories

__all__ = ["LazyShards"]

_HISTORY_KINDS = ("History", None)
# a shard's asked items are read as the range covering them when it is at most this many times
# their number (one memcpy of the range's bytes), else gathered (their bytes only, but the byte
# gather costs ~30x a memcpy per byte: bench_sharded.py)
DENSE_RUN = 32


def _as_ids(index, n: int) -> torch.Tensor:
    """A list / array / tensor of ints or bools as int64 positions in ``range(n)``."""
    try:
        ids = torch.as_tensor(np.asarray(index) if not isinstance(index, torch.Tensor) else index)
    except (TypeError, ValueError, OverflowError):  # str, None, sets, ragged lists, ints past int64
        raise IndexError(f"items are selected by ints, slices, or a 1-D list/tensor of ints or bools; got {index!r:.80}") from None
    if ids.dtype == torch.bool:
        if ids.shape != (n,):
            raise IndexError(f"a bool index must have one value per item ({n}), got shape {tuple(ids.shape)}")
        return ids.nonzero().reshape(-1)
    if ids.numel() == 0:
        return torch.zeros(0, dtype=torch.int64)
    if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.ndim != 1:
        raise IndexError(f"items are selected by ints, slices, or a 1-D list/tensor of ints or bools; got {index!r:.80}")
    ids = ids.to(torch.int64)
    bad = (ids < -n) | (ids >= n)
    if bool(bad.any()):
        raise IndexError(f"index {int(ids[bad][0])} is out of range for a dataset of {n} items")
    return torch.where(ids < 0, ids + n, ids)


def _own(x):
    """A History read from a cached shard as a History of its own (a shallow copy: new column
    indexes, shared strings): a write into it must not change the dataset's other reads."""
    return x.copy() if isinstance(x, History) else x


def _scalar(index):
    if isinstance(index, torch.Tensor) and index.ndim == 0 and not index.is_floating_point() \
            and index.dtype is not torch.bool:
        return int(index)
    if isinstance(index, np.integer):
        return int(index)
    return index


class LazyShards:
    """The read side of a sharded dataset (see the module docstring). The shard engine provides
    ``shard(k)``, ``num_shards``, ``kind``, ``manifest``, ``path`` and ``len``."""

    # -- shape ----------------------------------------------------------------------------
    @property
    def batch_size(self) -> torch.Size:
        """``(n, -1)``: n conversations (or token rows) of any length, as a History batch."""
        if self.kind in (*_HISTORY_KINDS, "tokens", "ragged") or not self.num_shards:
            return torch.Size([len(self), -1])
        return torch.Size([len(self), *self.shard(0).batch_size[1:]])

    @property
    def shape(self) -> torch.Size:
        return self.batch_size

    @property
    def batch_dims(self) -> int:
        return len(self.batch_size)

    ndim = batch_dims

    @property
    def device(self):
        return None

    # -- reading ----------------------------------------------------------------------------
    def _starts_tensor(self) -> torch.Tensor:
        return torch.tensor(self._starts, dtype=torch.int64)

    def _empty(self):
        if self.kind in _HISTORY_KINDS:
            return empty_history()
        for k in range(self.num_shards):
            return self.shard(k)[0:0]
        raise IndexError("an empty sharded dataset of unknown kind has no items to select")

    def _join(self, pieces: list):
        if not pieces:
            return self._empty()
        if self.kind in _HISTORY_KINDS:
            out = stitch_histories(pieces)
            return _own(out) if any(out is p for p in pieces) else out  # one shard's piece: a view of the shard
        if len(pieces) == 1:
            return pieces[0]
        if isinstance(pieces[0], RaggedTensorDict):
            return RaggedTensorDict.cat(pieces)
        from ..td import cat

        return cat(pieces, 0)

    def _select_range(self, start: int, stop: int):
        pieces, i = [], start
        while i < stop:
            k, j = self._locate(i)
            take = min(stop - i, self._starts[k + 1] - i)
            pieces.append(self.shard(k)[j:j + take])
            i += take
        return self._join(pieces)

    def _select_ids(self, ids: torch.Tensor):
        """Items ``ids`` (any order, repeats allowed): per shard, a dense run of them is taken as
        the range that covers it (column views, copied once by the stitch) and a sparse one is
        gathered; one index then puts the items in the order asked (no copy)."""
        if ids.numel() == 0:
            return self._empty()
        shard_of = torch.searchsorted(self._starts_tensor(), ids, right=True) - 1
        order = torch.argsort(shard_of, stable=True)
        grouped = ids[order]
        ks, counts = torch.unique_consecutive(shard_of[order], return_counts=True)
        pieces, where, base, a = [], torch.empty_like(ids), 0, 0
        for k, c in zip(ks.tolist(), counts.tolist()):
            local = grouped[a:a + c] - self._starts[k]
            lo, hi = int(local.min()), int(local.max()) + 1
            # [lo:hi] and [:] are views: indexing the cached shard itself with a tensor would turn
            # its columns' ranges into index tensors for good, and later slices would gather
            if hi - lo <= DENSE_RUN * c:
                pieces.append(self.shard(k)[lo:hi])
                where[order[a:a + c]] = local - lo + base
                base += hi - lo
            else:
                pieces.append(self.shard(k)[:][local])
                where[order[a:a + c]] = torch.arange(base, base + c)
                base += c
            a += c
        out = self._join(pieces)
        if base != ids.numel() or not torch.equal(where, torch.arange(base)):
            out = out[where]
        return out

    def __getitem__(self, index):
        n = len(self)
        index = _scalar(index)
        if isinstance(index, tuple):
            if index and index[0] is Ellipsis and len(index) == 2:
                index = (slice(None), index[1])
            if not index:
                return self[:]
            first, rest = _scalar(index[0]), index[1:]
            if isinstance(first, int) and not isinstance(first, bool):
                if not -n <= first < n:
                    raise IndexError(f"index {first} is out of range for a dataset of {n} items")
                k, j = self._locate(first % n)
                return _own(self.shard(k)[(j, *rest)])
            selected = self[first]
            return selected[(slice(None), *rest)] if rest else selected
        if index is Ellipsis:
            return self[:]
        if isinstance(index, int) and not isinstance(index, bool):
            if not -n <= index < n:
                raise IndexError(f"index {index} is out of range for a dataset of {n} items")
            k, j = self._locate(index % n)
            return _own(self.shard(k)[j])
        if isinstance(index, slice):
            start, stop, step = index.indices(n)
            if step <= 0:
                raise ValueError("step must be greater than zero")
            if step == 1:
                return self._select_range(start, max(start, stop))
            return self._select_ids(torch.arange(start, max(start, stop), step, dtype=torch.int64))
        if isinstance(index, str) and self.kind in _HISTORY_KINDS:  # ds["role"]: the field, as History reads it
            if index not in History._field_names:
                raise KeyError(f"History has no field {index!r}; its fields are {list(History._field_names)}")
            return self._field(index)
        if index is None or isinstance(index, (bool, str, float)):
            raise IndexError(f"a sharded dataset is indexed by ints, slices, lists or tensors; got {index!r}")
        return self._select_ids(_as_ids(index, n))

    def __iter__(self):
        for k in range(self.num_shards):
            s = self.shard(k)
            for j in range(int(s.batch_size[0]) if s.batch_size else 1):
                yield _own(s[j])

    # -- History methods ------------------------------------------------------------------
    def _require_history(self, what: str) -> None:
        if self.kind not in _HISTORY_KINDS:
            raise TypeError(f"{what} reads conversations; {self.path} is a sharded set of {self.kind}")

    def to_chats(self) -> list:
        """Every conversation as a list of message dicts (``History.to_chats`` of each shard)."""
        self._require_history("to_chats")
        return [c for k in range(self.num_shards) for c in self.shard(k).to_chats()]

    tolist = to_chats

    def _field(self, name: str) -> list:
        self._require_history(name)
        return [v for k in range(self.num_shards) for v in getattr(self.shard(k), name)]

    def _read_only(self, *args, **kwargs):
        raise TypeError(f"{self.path} is a sharded dataset read lazily from its saved shards: it cannot be changed in "
                        "place. Take the conversations to change as a History (ds[:] or ds[a:b], in memory), change "
                        "that, and save it (memmap) or add it to a dataset opened with mode=\"a\" (append)")

    __setitem__ = __delitem__ = set = update = update_ = extend = _read_only

    role = property(lambda self: self._field("role"), _read_only, doc="Every message's role, a list per conversation.")
    content = property(lambda self: self._field("content"), _read_only,
                       doc="Every message's content, a list per conversation.")
    is_complete = property(lambda self: self._field("is_complete"), _read_only)
    tool_calls = property(lambda self: self._field("tool_calls"), _read_only)
    tool_responses = property(lambda self: self._field("tool_responses"), _read_only)
    extra = property(lambda self: self._field("extra"), _read_only)

    def conversation_offsets(self) -> torch.Tensor:
        """int64 offsets of the conversations in the messages of all shards (``History``'s):
        conversation ``i`` is messages ``offsets[i]:offsets[i+1]``. Reads each shard's offsets only.

        Example:
            >>> import chatdata
            >>> w = chatdata.open_dataset("offs", mode="a")
            >>> w.append(chatdata.History.from_chats([[{"role": "user", "content": "a"}]]))
            >>> w.append(chatdata.History.from_chats([[{"role": "user", "content": "b"}, {"role": "user", "content": "c"}]]))
            >>> chatdata.open_dataset("offs").conversation_offsets().tolist()
            [0, 1, 3]
        """
        self._require_history("conversation_offsets")
        parts, base = [torch.zeros(1, dtype=torch.int64)], 0
        for k in range(self.num_shards):
            if self.manifest["shards"][k]["items"]:
                off = self.shard(k).conversation_offsets()
                parts.append(off[1:] + base)
                base += int(off[-1])
        return torch.cat(parts)

    def message_column(self, name: str):
        """``History.message_column`` over every message: the shards' columns stitched into one
        (this reads every shard; per shard, ``ds.shard(k).message_column(name)`` reads one)."""
        self._require_history("message_column")
        return self[:].message_column(name)

    def apply_chat_template(self, **kwargs):
        """``History.apply_chat_template`` over every conversation: shard by shard, the results
        joined (texts in one list, token rows in one ragged stack); with ``padding`` or
        ``return_tensors``, once over all conversations.

        Example:
            >>> import chatdata
            >>> w = chatdata.open_dataset("corpus", mode="a")
            >>> w.append(chatdata.History.from_chats([[{"role": "user", "content": "a"}]]))
            >>> w.append(chatdata.History.from_chats([[{"role": "user", "content": "b"}]]))
            >>> ds = chatdata.open_dataset("corpus")
            >>> ds.apply_chat_template(chat_template_name="chatml_format")
            ['<|im_start|>user\\na<|im_end|>\\n<|im_start|>assistant\\n', ...]
        """
        self._require_history("apply_chat_template")
        if kwargs.get("padding") or kwargs.get("return_tensors") or self.num_shards < 2:
            return self[:].apply_chat_template(**kwargs)
        outs = [self.shard(k).apply_chat_template(**kwargs) for k in range(self.num_shards)
                if self.manifest["shards"][k]["items"]]
        if not outs:  # every shard empty: the empty History's answer (and its checks of the options)
            return self[:].apply_chat_template(**kwargs)
        if all(isinstance(o, list) for o in outs):
            return [x for o in outs for x in o]
        if all(isinstance(o, RaggedTensorDict) for o in outs):
            return RaggedTensorDict.cat(outs)
        return self[:].apply_chat_template(**kwargs)

    # -- saving ---------------------------------------------------------------------------
    def memmap(self, prefix, *, durable: bool = False):
        """Write every item into ONE plain dataset folder ``prefix`` (what ``History.memmap``
        writes), streaming shard by shard; returns it loaded (``load_memmap(prefix)``). The folder
        must be new, empty, or a dataset to replace (as for any save).

        Example:
            >>> import chatdata
            >>> w = chatdata.open_dataset("chats", mode="a")
            >>> w.append(chatdata.History.from_chats([[{"role": "user", "content": "a"}]] * 2))
            >>> w.append(chatdata.History.from_chats([[{"role": "user", "content": "b"}]]))
            >>> chatdata.open_dataset("chats").memmap("all/").batch_size
            torch.Size([3, -1])
        """
        from ..td.storage import StreamWriter, check_overwritable

        out = Path(prefix)
        if out.resolve() == self.path.resolve() or self.path.resolve() in out.resolve().parents:
            raise ValueError(f"{out} is inside the sharded dataset {self.path}; write the copy elsewhere")
        check_overwritable(out)
        history = self.kind in _HISTORY_KINDS
        columns = COLUMNS if history else tuple(self.shard(0).values.keys()) if self.num_shards else ()
        with StreamWriter(out, tensorclass=History if history else None, columns=columns, durable=durable) as w:
            wrote = False
            for k in range(self.num_shards):
                s = self.shard(k)
                if self.manifest["shards"][k]["items"]:
                    w.append(stitch_histories([s]) if history else s)
                    wrote = True
            if not wrote:
                w.append(empty_history() if history else self._empty())
        return load_memmap(out)
