"""Changing a History: set a field (``h.set``, ``h.role = ...``, ``h["role"] = ...``), write
messages by index (``h[i] = message``), ``append`` and ``extend``. Each checks the new values as
:meth:`History.from_chats <chatdata.history.History.from_chats>` does, and a refused change leaves
the History as it was. A mixin of :class:`~chatdata.history.History`, in its own module to keep
the class's file walkable.

Example:
    >>> from chatdata import History
    >>> h = History.from_chats([{"role": "user", "content": "a"}])
    >>> try:
    ...     h.role = [3]
    ... except ValueError as err:
    ...     print(err)
    History: message 0: 'role' must be a str, got int
    >>> _ = h.append({"role": "assistant", "content": "b"})
    >>> h.to_chats()
    [{'role': 'user', 'content': 'a'}, {'role': 'assistant', 'content': 'b'}]
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch

from ..td import NonTensorData, NonTensorStack, RaggedTensorDict, TensorDict
from ..td import cat
from .columns import CONTENT_ABSENT, DEFAULTS, FLAGS_KEY, IS_COMPLETE, TOOL_CALLS, TOOL_RESPONSES, _stack, normalize_storage
from .content import ContentBase
from .copy_on_write import prepare_write
from .field_checks import FIELD_RULES, check_content_rule, check_field, field_error
from .ragged_ops import as_ragged, concat_rows, single_row

__all__ = ["ChangeMethods", "int_index", "one_key", "own_columns", "storage_of"]

_CONTENT_RULE_FIELDS = ("content", "role", "tool_calls", "extra")
_FLAG_OF = {"content": CONTENT_ABSENT, "is_complete": IS_COMPLETE, "tool_calls": TOOL_CALLS, "tool_responses": TOOL_RESPONSES}


def _as_int(i):
    if isinstance(i, torch.Tensor) and i.ndim == 0 and not i.is_floating_point() and i.dtype is not torch.bool:
        return int(i)
    if isinstance(i, np.integer):
        return int(i)
    if isinstance(i, np.bool_):  # a bool, not an int: adds a dim as True / False do
        return bool(i)
    return i


def int_index(index):
    """``index`` with 0-d integer tensors (and numpy ints) replaced by Python ints."""
    if isinstance(index, tuple):
        return tuple(map(_as_int, index))
    return _as_int(index)


def storage_of(h):
    """The storage of the History ``h``, with every History column (:func:`normalize_storage`)."""
    s = h._storage
    if isinstance(s, TensorDict):
        normalize_storage(s)
    return s


class ChangeMethods:
    """``set`` (and the field setters), ``h[i] = message``, ``append``, ``extend``."""

    def set(self, key, value, inplace: bool = False, non_blocking: bool = False):
        """Set a field; ``None`` resets it to its default, nested lists set a ragged batch.

        The value must be one a History can hold (``ValueError`` otherwise, the History unchanged):
        see :mod:`chatdata.history.field_checks`.
        """
        key = one_key(key)
        name = key[0] if isinstance(key, tuple) else key
        if name not in FIELD_RULES or isinstance(key, tuple):
            return self._set(key, name, value, inplace)
        storage = self._storage
        td = storage.values if isinstance(storage, RaggedTensorDict) else storage
        old = td._tensordict.get(name)
        self._set(key, name, value, inplace)
        try:
            check_field(td, name)
            # the content rule reads these four (the constructor checks it once, at the end)
            if name in _CONTENT_RULE_FIELDS and not self.__dict__.get("_building"):
                check_content_rule(td)
        except ValueError:
            if old is None:
                td._tensordict.pop(name, None)
            else:
                td._tensordict[name] = old
            raise
        flags = td._tensordict.get(FLAGS_KEY)
        if name == "content" and value is not None and isinstance(flags, torch.Tensor):
            # every message now has a content key: a "no content key" mark left on one would make
            # to_chats refuse the History as corrupt (a new tensor: copies share the old one)
            td._tensordict[FLAGS_KEY] = flags & ~CONTENT_ABSENT
        return self

    def _set(self, key, name, value, inplace: bool):
        storage = self._storage
        if name in self._field_names and isinstance(storage, RaggedTensorDict) and not isinstance(key, tuple):
            n = storage.numel()
            if isinstance(value, list):
                # one list per conversation: a str's len() matching a conversation's would set its characters
                if not all(type(v) is list for v in value):
                    bad = next(v for v in value if type(v) is not list)
                    raise ValueError(f"cannot set {name!r} on a batch of conversations: give one list of values per "
                                     f"conversation (nested lists), or one value for every message; got a list "
                                     f"holding {type(bad).__name__} {bad!r:.40}")
                if len(value) != len(storage) or [len(v) for v in value] != storage.lengths.tolist():
                    raise ValueError(f"cannot set {name!r}: nested list lengths do not match the conversation lengths")
                storage.values._tensordict[name] = _stack([x for v in value for x in v])
            elif isinstance(value, (tuple, torch.Tensor, np.ndarray)):
                raise ValueError(f"cannot set {name!r} on a batch of conversations from a {type(value).__name__}: give "
                                 "one list of values per conversation (nested lists), or one value for every message")
            else:
                storage.values._tensordict[name] = NonTensorData(DEFAULTS.get(name) if value is None else value, batch_size=(n,))
            return self
        if value is None and name in self._field_names and isinstance(storage, TensorDict):
            storage._tensordict[name] = NonTensorData(DEFAULTS.get(name), batch_size=storage.batch_size)
            return self
        current = storage._tensordict.get(name) if isinstance(storage, TensorDict) else None
        if inplace and isinstance(current, NonTensorData) and not (
                current._is_memmap and current._disk is not None
                and field_error(name, [value], storage.batch_size, constant=True) is None):
            # a constant column is replaced, never changed in place: another History may hold the same
            # object (a copy), and a refused value would be left in it. Only a loaded folder's constant
            # takes one valid value in place (written through to the folder)
            inplace = False
        if not inplace and isinstance(storage, TensorDict) and storage.is_locked and name in self._field_names:
            # a loaded History's storage is locked, and a locked TensorDict writes into its entries: a new
            # column (one value per message into a constant) would be written into the folder's constant.
            # Replaced instead, the lock (and the memmap marks unlock_ would drop) kept
            storage._is_locked = False
            try:
                super().set(key, value, inplace=False)
            finally:
                storage._is_locked = True
        else:
            super().set(key, value, inplace=inplace)
        if name == "content" and isinstance(storage, TensorDict) and isinstance(value, ContentBase):
            normalize_storage(storage)
        return self

    def __setitem__(self, index, value) -> None:
        """``h["role"] = ...`` sets a field (:meth:`set`); ``h[i] = message`` writes messages (a
        History, or message dicts, checked as :meth:`from_chats` checks them) into a conversation
        or a batch of equal-length conversations."""
        if isinstance(one_key(index), str):
            self.set(index, value)
            return
        value = _as_history(type(self), value, "item assignment")
        if isinstance(self._storage, RaggedTensorDict):
            raise TypeError("cannot assign messages by index into a batch of conversations of different lengths; "
                            "build a new History (from_chats, append, extend) or set a whole field (h.role = [[...], ...])")
        if isinstance(value._storage, RaggedTensorDict):
            raise TypeError(f"cannot write a batch of conversations of different lengths (batch size "
                            f"{tuple(value.batch_size)}) into messages by index; write messages: a History "
                            "of one conversation or of one message, or message dicts")
        src = storage_of(value)
        # copy-on-write where the columns are held (the root of the views self was taken from), every
        # view on the way re-taken: the write reaches the root whole, never a folder on disk
        prepare_write(self, src)
        self._storage[int_index(index)] = src

    # -- growing -------------------------------------------------------------------------
    def _result(self, storage, inplace: bool) -> "ChangeMethods":
        if inplace:
            object.__setattr__(self, "_storage", storage)
            return self
        return type(self)._from_storage(storage)

    def _dim(self, dim: int) -> int:
        nd = self.ndim
        if isinstance(dim, bool) or not hasattr(dim, "__index__"):  # 1.0 read as "out of range", "0" as a bare TypeError
            raise TypeError(f"dim must be an int, got {dim!r:.40} ({type(dim).__name__})")
        dim = dim.__index__()
        if not -nd <= dim < nd:
            raise IndexError(f"dim {dim} is out of range for a History with {nd} batch dims")
        return dim % nd

    def append(self, history: "ChangeMethods", *, inplace: bool = True, dim: int = -1) -> "ChangeMethods":
        """Add one element along ``dim``: ``history`` has one batch dim less than self.

        On a conversation (1-D) it adds a message. On a batch ``(B, -1)``: with ``dim=-1`` it
        adds one message to every conversation (``history`` has batch ``(B,)``); with ``dim=0``
        it adds a conversation. Positions are computed with offset arithmetic, no per-
        conversation loop. ``inplace=True`` (default) replaces self's storage and returns self.

        Example:
            >>> h = History.from_chats([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]])
            >>> _ = h.append(History(role=["assistant"] * 2, content=["A", "B"], batch_size=(2,)))
            >>> h.content
            [['a', 'A'], ['b', 'B']]
        """
        _check_inplace(inplace, "append")
        history = _as_history(type(self), history, "append")
        if not self.batch_dims:
            raise RuntimeError("Cannot append an element to a batchless History (one message). Call unsqueeze(0) first on self.")
        if self.batch_dims != history.batch_dims + 1:
            raise RuntimeError(
                "The new history to append must have one less dimension than self. Got "
                f"self.ndim={self.ndim} and history.ndim={history.ndim}."
            )
        d = self._dim(dim)
        s, o = storage_of(self), storage_of(history)
        if isinstance(s, TensorDict) and isinstance(o, TensorDict) and (
            d == self.ndim - 1 or s.batch_size[d + 1:] == o.batch_size[d:]
        ):
            try:
                return self._result(cat([s, o.unsqueeze(d)], d), inplace)
            except ValueError:
                if self.ndim != 2:
                    raise
        if self.ndim != 2:
            raise RuntimeError(f"cannot append to a History of batch size {tuple(self.batch_size)} along dim {dim}")
        if d == 1:
            if not isinstance(o, TensorDict):
                raise RuntimeError("append along the message dim takes one message per conversation (a 1-D History)")
            n = o.batch_size[0]
            if n != self.batch_size[0]:
                raise ValueError(f"append along the message dim adds one message to each conversation: {self.batch_size[0]} "
                                 f"conversations, got {n} messages (use dim=0 to add a conversation)")
            new = concat_rows(as_ragged(s), RaggedTensorDict(o, torch.arange(n + 1, dtype=torch.int64)))
        else:
            new = RaggedTensorDict.cat([as_ragged(s), single_row(o)])
        return self._result(new, inplace)

    def extend(self, history: "ChangeMethods", *, inplace: bool = True, dim: int = 0) -> "ChangeMethods":
        """Add several elements along ``dim``: ``history`` has as many batch dims as self.

        On a conversation it adds messages. On a batch: ``dim=0`` adds conversations,
        ``dim=-1`` adds messages to every conversation (``history`` is a batch with as many
        conversations, of any lengths). ``inplace=True`` (default) replaces self's storage.

        Example:
            >>> h = History.from_chats([{"role": "user", "content": "a"}])
            >>> _ = h.extend(History.from_chats([{"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]))
            >>> h.role
            ['user', 'assistant', 'user']
        """
        _check_inplace(inplace, "extend")
        history = _as_history(type(self), history, "extend")
        if not self.batch_dims:
            raise RuntimeError("Cannot add an element to a batchless History (one message). Call unsqueeze(0) first on self.")
        if self.batch_dims != history.batch_dims:
            raise RuntimeError(
                "The new history to extend must have as many dimensions as self. Got "
                f"self.ndim={self.ndim} and history.ndim={history.ndim}."
            )
        d = self._dim(dim)
        s, o = storage_of(self), storage_of(history)
        if isinstance(s, TensorDict) and isinstance(o, TensorDict):
            same = all(a == b for i, (a, b) in enumerate(zip(s.batch_size, o.batch_size)) if i != d)
            if same or self.ndim != 2:
                return self._result(cat([s, o], d), inplace)
        if self.ndim != 2:
            raise RuntimeError(f"cannot extend a History of batch size {tuple(self.batch_size)} along dim {dim}")
        if d == 0:
            new = RaggedTensorDict.cat([as_ragged(s), as_ragged(o)])
        else:
            new = concat_rows(as_ragged(s), as_ragged(o))
        return self._result(new, inplace)

    # -- updating ------------------------------------------------------------------------
    def update(self, other=None, **kwargs):
        """Set the fields of ``other`` (a History, or a dict / TensorDict of field values), then
        the fields given as keywords, each as :meth:`set` checks it; ``keys_to_update`` picks
        fields. A key that is no field (``KeyError``), a value the History cannot hold or a History
        of other conversation lengths (``ValueError``) leave the History unchanged.

        Example:
            >>> from chatdata import History
            >>> h = History.from_chats([[{"role": "user", "content": "a"}],
            ...                         [{"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]])
            >>> h.update({"content": [["A"], ["B", "C"]]}).content
            [['A'], ['B', 'C']]
        """
        return self._update(other, kwargs, inplace=bool(kwargs.pop("inplace", False)))

    def update_(self, other=None, **kwargs):
        """:meth:`update`, writing into the existing entries."""
        kwargs.pop("inplace", None)
        return self._update(other, kwargs, inplace=True)

    def _update(self, other, kwargs, inplace: bool):
        keys = kwargs.pop("keys_to_update", None)
        for opt in ("clone", "non_blocking", "is_leaf", "update_batch_size"):
            kwargs.pop(opt, None)
        columns, values = {}, {}
        if isinstance(other, ChangeMethods):
            columns = _same_shape_columns(self, other)
        elif isinstance(other, (Mapping, TensorDict)):
            values = {one_key(k): v for k, v in other.items()}
        elif other is not None:
            raise TypeError(f"update takes a History or a dict of fields, got {type(other).__name__}")
        values.update(kwargs)
        if keys is not None:
            keys = {one_key(k) for k in keys}
            columns = _pick_columns(self, columns, keys)
            values = {k: v for k, v in values.items() if k in keys}
        unknown = sorted(map(str, set(values) - set(self._field_names)))
        if unknown:
            raise KeyError(f"History.update: {unknown} are not History fields; the fields are {list(self._field_names)}")
        if not columns and not values:
            return self
        # set and checked on a shallow copy first: a refused update leaves self as it was
        trial = self.copy()
        trial_td = _message_td(trial)
        trial_td._tensordict.update(columns)
        trial.__dict__["_building"] = True  # the content rule is checked once, on the result
        try:
            for name, value in values.items():
                trial.set(name, value)
        finally:
            trial.__dict__.pop("_building", None)
        check_content_rule(trial_td)
        if not (inplace and not columns and isinstance(self._storage, TensorDict)):
            _message_td(self)._tensordict.update(trial_td._tensordict)
            return self
        self.__dict__["_building"] = True  # checked above: now written into the existing entries
        try:
            for name, value in values.items():
                self.set(name, value, inplace=True)
        finally:
            self.__dict__.pop("_building", None)
        return self


def one_key(key):
    """``("role",)`` is the key ``"role"`` (as in tensordict): checked as the field it names."""
    return key[0] if type(key) is tuple and len(key) == 1 else key


def _message_td(h):
    """The TensorDict of ``h``'s messages (the flat values of a batch of conversations)."""
    s = h._storage
    return s.values if isinstance(s, RaggedTensorDict) else s


def _same_shape_columns(h, other) -> dict:
    """``other``'s message columns (flags included), to be set into ``h``, whose messages they
    must match one for one: the same batch size, and the same conversation lengths for a batch."""
    s, o = storage_of(h), storage_of(other)
    ragged_s, ragged_o = isinstance(s, RaggedTensorDict), isinstance(o, RaggedTensorDict)
    same = tuple(h.batch_size) == tuple(other.batch_size) and ragged_s == ragged_o
    if same and ragged_s:
        same = torch.equal(s.offsets, o.offsets)
    if not same:
        def shape(x):
            st = x._storage
            if isinstance(st, RaggedTensorDict):
                return f"conversations of lengths {st.lengths.tolist()}"
            return f"batch size {tuple(x.batch_size)}"
        raise ValueError(f"History.update: the History given has {shape(other)}, this one {shape(h)}; "
                         "update takes one with the same messages (or a dict of fields)")
    return own_columns(_message_td(other)._tensordict)


def own_columns(entries: dict) -> dict:
    """``entries`` with each string column given its own index (the strings stay shared), each
    tensor column copied and each constant a new object: ``h[i] = message`` and in-place sets
    write into those, and must never write into another History's."""
    return {name: _own_tensor(e) if isinstance(e, torch.Tensor) else e.clone() if isinstance(e, NonTensorStack) else
            e.clone(recurse=False) if isinstance(e, NonTensorData) else e  # a constant: a new object, same value
            for name, e in entries.items()}


def _own_tensor(t: torch.Tensor) -> torch.Tensor:
    """A copy of the flag / bool column ``t`` as a plain tensor, in one single-threaded numpy copy
    (torch's parallel copy of a few hundred KB took 20 ms when the other cores were busy)."""
    if t.device.type == "cpu" and not t.requires_grad:
        try:
            return torch.from_numpy(t.as_subclass(torch.Tensor).numpy().copy())
        except TypeError:  # a dtype numpy has not
            pass
    return t.clone()


def _pick_columns(h, columns: dict, keys: set) -> dict:
    """The ``keys`` of ``columns`` (another History's), with the flags: ``h``'s own, except the
    bits of the picked fields (a message without a content key, ...), which come with them."""
    picked = {k: v for k, v in columns.items() if k in keys and k != FLAGS_KEY}
    bits = sum(_FLAG_OF.get(k, 0) for k in picked)
    if bits:
        mine = _message_td(h)._tensordict[FLAGS_KEY]
        picked[FLAGS_KEY] = (mine & ~bits) | (columns[FLAGS_KEY] & bits)
    return picked


def _check_inplace(inplace, what: str) -> None:
    """``inplace="no"`` (or 0/1, None) is no bool: it would grow self or not by its truthiness."""
    if type(inplace) is not bool:
        raise TypeError(f"{what}: inplace must be True or False, got {inplace!r:.40}")


def _as_history(cls, value, what: str):
    """``value`` (a History, a message dict, a list of them or of chats) as a History of ``cls``."""
    if isinstance(value, ChangeMethods):
        return value
    if isinstance(value, Mapping):
        return cls.from_chats([dict(value)])[0]
    if isinstance(value, (list, tuple)):
        return cls.from_chats(list(value))
    raise TypeError(f"{what} takes a History (or message dicts), got {type(value).__name__}")
