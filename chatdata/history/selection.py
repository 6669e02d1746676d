"""Dropping fields of a History: ``h.exclude(...)``, ``h.select(...)``, ``del h.<field>`` and
``h.pop(field)``. A mixin of :class:`~chatdata.history.History`.

Every message has a ``role`` and a ``content``: a History without one of those columns renders
no messages, saves a folder that does not load and turns each message into ``{"role": None}``.
So these refuse to drop ``role`` or ``content`` (``ValueError``, saying what to do instead), and
dropping an optional field (``is_complete``, ``tool_calls``, ``tool_responses``, ``extra``) gives
every message that field's default, as if no message had had the key: ``to_chats`` leaves it
out. torchrl's History keeps the field as ``None`` and fails later, where it is used.
``as_tensordict=True`` gives the raw columns, any of them (a RaggedTensorDict for a batch of
conversations of different lengths).

Example:
    >>> from chatdata import History
    >>> h = History.from_chats([{"role": "user", "content": "hi"},
    ...                         {"role": "assistant", "content": "yo", "is_complete": False}])
    >>> h.exclude("is_complete").to_chats()[1]
    {'role': 'assistant', 'content': 'yo'}
    >>> try:
    ...     h.exclude("role")
    ... except ValueError as err:
    ...     print(str(err)[:60])
    History.exclude: every message needs 'role' and 'content'; d
"""
from __future__ import annotations

import torch

from ..td import NonTensorData, RaggedTensorDict
from .columns import DEFAULTS, FLAGS_KEY, IS_COMPLETE, TOOL_CALLS, TOOL_RESPONSES
from .field_checks import check_content_rule

__all__ = ["SelectMethods"]

_REQUIRED = ("role", "content")
_FLAG_OF = {"is_complete": IS_COMPLETE, "tool_calls": TOOL_CALLS, "tool_responses": TOOL_RESPONSES}
_HINT = ("; to read the other columns without them, use as_tensordict=True (raw columns) or "
         "h.message_column(name), or build the messages you want with from_chats")


def _name(key):
    return key[0] if type(key) is tuple and len(key) == 1 else key


def _refuse_required(what: str, dropped) -> None:
    dropped = [k for k in _REQUIRED if k in dropped]
    if dropped:
        raise ValueError(f"{what}: every message needs 'role' and 'content'; dropping {dropped} would leave "
                         f"a History whose messages have no {' and no '.join(dropped)}{_HINT}")


def _raw(storage, fn):
    """``fn`` (a TensorDict's select / exclude) over the message columns of ``storage``."""
    if isinstance(storage, RaggedTensorDict):
        return RaggedTensorDict(fn(storage.values), storage.offsets)
    return fn(storage)


class SelectMethods:
    """``exclude``, ``select``, ``pop`` and ``del h.<field>`` of History."""

    def exclude(self, *keys, inplace: bool = False, as_tensordict: bool = False):
        """This History with the optional fields ``keys`` reset to their defaults (a key that is no
        field is ignored, as tensordict does). ``role`` and ``content`` cannot be dropped
        (``ValueError``); ``as_tensordict=True`` gives the other raw columns instead.

        Example:
            >>> from chatdata import History
            >>> h = History.from_chats([{"role": "user", "content": "hi", "name": "bob"}])
            >>> h.exclude("extra").to_chats()
            [{'role': 'user', 'content': 'hi'}]
        """
        names = [_name(k) for k in (keys[0] if len(keys) == 1 and isinstance(keys[0], list) else keys)]
        if as_tensordict:
            return _raw(self._storage, lambda td: td.exclude(*names))
        _refuse_required("History.exclude", names)
        if FLAGS_KEY in names:
            raise ValueError(f"History.exclude: {FLAGS_KEY!r} records which keys each message was given and cannot be "
                             "dropped from a History; use as_tensordict=True for the raw columns")
        return self._dropped([n for n in DEFAULTS if n in names], inplace, "exclude")

    def select(self, *keys, inplace: bool = False, strict: bool = True, as_tensordict: bool = False):
        """This History with only the fields ``keys``: the optional fields not named are reset to
        their defaults. ``role`` and ``content`` must be among ``keys`` (``ValueError``);
        ``as_tensordict=True`` gives the raw columns named. With ``strict``, a key that is no
        field is a ``KeyError``.

        Example:
            >>> from chatdata import History
            >>> h = History.from_chats([{"role": "assistant", "content": "hi", "is_complete": False}])
            >>> h.select("role", "content").to_chats()
            [{'role': 'assistant', 'content': 'hi'}]
        """
        names = [_name(k) for k in (keys[0] if len(keys) == 1 and isinstance(keys[0], list) else keys)]
        if as_tensordict:
            return _raw(self._storage, lambda td: td.select(*names, strict=strict))
        unknown = [n for n in names if n not in self._field_names and n != FLAGS_KEY]
        if unknown and strict:
            raise KeyError(f"History.select: {unknown} are not History fields; the fields are {list(self._field_names)}")
        _refuse_required("History.select", [k for k in _REQUIRED if k not in names])
        return self._dropped([n for n in DEFAULTS if n not in names], inplace, "select")

    def pop(self, key, default=...):
        """Remove the optional field ``key`` and return its column (the field is reset to its
        default, as :meth:`exclude` does); ``role`` and ``content`` cannot be removed."""
        name = _name(key)
        if name not in DEFAULTS:
            if name in self._field_names or name == FLAGS_KEY:
                _refuse_required("History.pop", [name])
                raise ValueError(f"History.pop: {FLAGS_KEY!r} cannot be removed from a History")
            if default is ...:
                raise KeyError(f"History has no field {name!r}; its fields are {list(self._field_names)}")
            return default
        storage = self._storage
        td = storage.values if isinstance(storage, RaggedTensorDict) else storage
        column = td._tensordict[name]
        self._dropped([name], True, "pop")
        return column

    def __delattr__(self, name):
        if name in _REQUIRED:
            _refuse_required(f"del h.{name}", [name])
        if name in DEFAULTS:  # an optional field goes back to its default
            self._dropped([name], True, "del")
            return
        super().__delattr__(name)

    def _dropped(self, names: list, inplace: bool, what: str):
        """Self (``inplace``) or a copy with the optional fields ``names`` back at their defaults
        and their key-presence bits cleared; the content rule is checked first (an assistant
        message holding only tool calls cannot lose them), so a refusal changes nothing."""
        target = self.copy()
        storage = target._storage
        td = storage.values if isinstance(storage, RaggedTensorDict) else storage
        entries = td._tensordict
        for name in names:
            entries[name] = NonTensorData(DEFAULTS[name], batch_size=td.batch_size)
        bits = sum(_FLAG_OF.get(n, 0) for n in names)
        flags = entries.get(FLAGS_KEY)
        if bits and isinstance(flags, torch.Tensor):
            entries[FLAGS_KEY] = flags & ~bits  # a new tensor: the original's flags stay as they were
        try:
            check_content_rule(td)
        except ValueError as err:
            raise ValueError(f"History.{what}({', '.join(map(repr, names))}): {err}") from None
        if not inplace:
            return target
        object.__setattr__(self, "_storage", storage)
        return self

