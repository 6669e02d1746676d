"""Checks for values set on a History directly: ``History(role=..., content=...)``, ``h.role = ...``,
``h.set("content", ...)``, the columns given to ``History.from_message_columns``. They apply the type rules ``from_chats`` applies at the door, so that a
History built either way holds only what it can render, save and load back:

=================== =====================================================
``role``            a str
``content``         a str, None, or a list of content parts (dicts)
``is_complete``     a bool (or a bool tensor)
``tool_calls``      a list or None
``tool_responses``  a list or None
``extra``           a dict (str keys) or None
=================== =====================================================

``extra`` may not hold the keys of the other fields (``extra={"role": "system"}`` would override the
role in ``to_chats`` and rendering). Every value must also survive a save exactly (no lone surrogates, tuples, sets or non-str keys:
:mod:`chatdata.history.message_checks`). A History of batch ``()`` may hold lists of roles and contents
(``History(role=["user", "assistant"], content=["a", "b"])``: torchrl's unbatched conversation).
A message whose content is None follows the content rule of ``from_chats``
(:func:`~chatdata.history.message_checks.content_rule_error`).

The check of a column is a few passes over its values (a set of their types, one strict encode
of its strings); only when it fails is each value looked at, to name the first culprit.

Example:
    >>> field_error("role", [3], (), constant=True)
    "'role' must be a str, got int"
    >>> field_error("content", ["hi", None, [{"type": "text", "text": "x"}]], (3,)) is None
    True
"""
from __future__ import annotations

from itertools import chain

import numpy as np
import torch

from ..td import NonTensorData, NonTensorStack
from .columns import CONTENT_ABSENT, FLAGS_KEY, _stack, column, packed_strings
from .content import check_parts
from .message_checks import content_rule_error, json_value_error, json_values_ok, text_error, texts_ok, type_name

__all__ = ["field_error", "check_field", "check_content_rule", "FIELD_RULES", "message_column", "check_message_columns"]

_NONE = type(None)
# the types each field's values may have, and how to say it
FIELD_RULES = {
    "role": ({str}, "a str"),
    "content": ({str, _NONE, list}, "a str, None or a list of content parts"),
    "is_complete": ({bool}, "a bool"),
    "tool_calls": ({list, _NONE}, "a list or None"),
    "tool_responses": ({list, _NONE}, "a list or None"),
    "extra": ({dict, _NONE}, "a dict or None"),
}
_FIELDS = frozenset(FIELD_RULES) - {"extra"}  # keys extra may not hold: to_chats would mix them up
_MAX_LIST_DEPTH = 8
# torchrl's unbatched conversation: a History of batch () holding a list of roles and of contents
_UNBATCHED_LISTS = ("role", "content")  # lists of values in an unbatched History: deeper than any batch


def _value_error(name: str, v) -> str | None:
    types, what = FIELD_RULES[name]
    if type(v) not in types:
        return f"{name!r} must be {what}, got {type_name(v)}"
    if name == "extra" and v and not _FIELDS.isdisjoint(v):
        key = next(k for k in v if k in _FIELDS)
        return (f"'extra' holds the key {key!r}, a History field of its own (to_chats would let it override the "
                f"field); set {key}= instead")
    if type(v) is str:
        return text_error(v, repr(name))
    if name == "content" and type(v) is list:
        return check_parts(v) or json_value_error(v, repr(name))
    if name in ("tool_calls", "tool_responses", "extra"):
        return json_value_error(v, repr(name))
    return None


def _values_ok(name: str, values: list) -> bool:
    types = set(map(type, values))
    if not types <= FIELD_RULES[name][0]:
        return False
    if name == "role":
        return texts_ok(values)
    if name == "content":
        if types != {str} and any(check_parts(v) for v in values if type(v) is list):
            return False
        return texts_ok([v for v in values if type(v) is str]) if list not in types else json_values_ok(values)
    if name == "extra" and not _FIELDS.isdisjoint(chain.from_iterable(v for v in values if type(v) is dict)):
        return False
    return name == "is_complete" or json_values_ok(values)


def _where(i: int, batch_size) -> str:
    if len(batch_size) <= 1:
        return f"message {i}: "
    return f"message {tuple(int(k) for k in np.unravel_index(i, tuple(batch_size)))}: "


def field_error(name: str, values: list, batch_size, constant: bool = False) -> str | None:
    """What is wrong with the values of field ``name`` (one per message, flat, of a History of
    ``batch_size``), or None. ``constant``: ``values`` is one value shared by every message; in
    an unbatched History it may be a list of values (one per message of torchrl's unbatched
    conversation)."""
    if name not in FIELD_RULES or _values_ok(name, values):
        return None
    if constant:
        err = _value_error(name, values[0])
        v = values[0]
        parts = name == "content" and type(v) is list and v and all(type(p) is dict for p in v)  # parts, not values
        if err is not None and not batch_size and type(v) is list and not parts and name in _UNBATCHED_LISTS:
            return _list_error(name, v, err)
        return err
    for i, v in enumerate(values):
        err = _value_error(name, v)
        if err is not None:
            return _where(i, batch_size) + err
    return None  # pragma: no cover - a failed bulk check always has a culprit


def _list_error(name: str, value: list, err: str) -> str | None:
    """None if ``value`` holds valid values (lists of them too, as many levels as batch dims), else
    ``err`` (what is wrong with ``value`` as one value) and what is wrong with its first bad item."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        item_err = _value_error(name, v)
        if item_err is None:
            continue
        if type(v) is list and depth < _MAX_LIST_DEPTH:
            stack.extend((x, depth + 1) for x in reversed(v))
            continue
        return f"{err} (nor is it a list of values, one per message: {item_err})"
    return None


def check_field(td, name: str) -> None:
    """Raise ``ValueError`` (naming the field, and the message for a column) if the entry ``name``
    of the History storage ``td`` (a TensorDict whose batch dims are the messages') holds a value
    a History cannot.

    Example:
        >>> from chatdata.td import TensorDict
        >>> check_field(TensorDict({"role": ["user", "assistant"]}, batch_size=[2]), "role")
    """
    if name not in FIELD_RULES:
        return
    entry = td._tensordict.get(name)
    if entry is None:
        return
    bs = td.batch_size
    if isinstance(entry, NonTensorData):
        err = field_error(name, [entry.data], bs, constant=True)
    elif isinstance(entry, NonTensorStack):
        err = field_error(name, column(td, name), bs)
    elif isinstance(entry, torch.Tensor) and name == "is_complete" and entry.dtype is torch.bool:
        err = None
    else:
        what = f"a {entry.dtype} tensor" if isinstance(entry, torch.Tensor) else f"a {type_name(entry)}"
        err = f"{name!r} must be {FIELD_RULES[name][1]}, got {what}"
    if err is not None:
        raise ValueError(f"History: {err}")


def check_content_rule(td) -> None:
    """Raise ``ValueError`` for a message of the storage ``td`` whose content is None (or unset)
    where the content rule wants some: a user, system or tool message; an assistant message
    without tool calls or reasoning. Only messages without content are looked at.

    Example:
        >>> from chatdata.td import TensorDict
        >>> check_content_rule(TensorDict({"role": ["user", "assistant"], "content": ["a", None],
        ...                                "tool_calls": [None, [{"id": "1"}]]}, batch_size=[2]))
    """
    entries = td._tensordict
    content = entries.get("content")
    if isinstance(content, NonTensorData) and content.data is not None:
        if not td.batch_size:
            _check_unbatched_lengths(entries.get("role"), content.data)
        return  # one content for all messages (a list at batch (): torchrl's unbatched lists)
    if packed_strings(content):
        return  # a loaded str column: no None, and no decoding to find that out
    contents = column(td, "content") if content is not None else [None] * td.numel()
    if None not in contents:
        return
    idx = [i for i, c in enumerate(contents) if c is None]
    # the other columns only at those messages: a loaded column decodes only what is read
    sub = td if not td.batch_size or len(idx) == len(contents) else td.reshape(-1)._index(torch.tensor(idx))
    roles, calls, extras = column(sub, "role"), column(sub, "tool_calls"), column(sub, "extra")
    for k, i in enumerate(idx):
        if type(roles[k]) is not str:  # torchrl's unbatched lists: no one message to check
            continue
        msg = {"role": roles[k], "content": None, "tool_calls": calls[k], **(extras[k] or {})}
        err = content_rule_error(msg, None)
        if err is not None:
            where = _where(i, td.batch_size) if td.batch_size else ""
            raise ValueError(f"History: {where}{err}")


def _check_unbatched_lengths(role, content) -> None:
    """torchrl's unbatched conversation (lists of roles and contents at batch ``()``) holds one
    content per role: other lengths (or a list on one side only) would pair them up wrongly."""
    roles = role.data if isinstance(role, NonTensorData) else None
    parts = type(content) is list and all(type(p) is dict for p in content)  # one message's parts
    n_roles = len(roles) if type(roles) is list else None
    n_contents = len(content) if type(content) is list and not parts else None
    if n_roles is None and n_contents is None or n_roles == n_contents or n_roles is not None and parts:
        return
    def count(n, what):
        return f"{n} {what}s" if n is not None else f"one {what}"
    raise ValueError(f"History: {count(n_roles, 'role')} but {count(n_contents, 'content')}; an unbatched "
                     "History (lists of roles and contents) needs one content per role")


def message_column(name: str, value, n: int):
    """The column ``name`` of ``History.from_message_columns``, given as ``value`` for ``n``
    messages: a list (or tuple) of values, a NonTensorStack or NonTensorData of batch ``(n,)``,
    a bool tensor (``is_complete``) or an int tensor / list of flags (``_flags``, see
    :mod:`chatdata.history.columns`). ``TypeError`` / ``ValueError`` naming the column otherwise;
    the values themselves are checked by :func:`check_message_columns`.

    Example:
        >>> message_column("_flags", [0, 2], 2)
        tensor([0, 2], dtype=torch.int8)
        >>> message_column("role", ["user"], 2)
        Traceback (most recent call last):
        ...
        ValueError: column 'role' holds 1 values; the offsets say 2 messages (one value per message)
    """
    if name == FLAGS_KEY:
        return _flags_column(value, n)
    if isinstance(value, (list, tuple)):
        value = _stack(list(value))
    elif isinstance(value, torch.Tensor):
        if name != "is_complete" or value.dtype is not torch.bool:
            raise TypeError(f"column {name!r} is a {value.dtype} tensor; it takes a list of values, one per message"
                            + (" (or a bool tensor)" if name == "is_complete" else ""))
        if value.ndim != 1:
            raise ValueError(f"column {name!r} has shape {tuple(value.shape)}, expected ({n},)")
    elif not isinstance(value, (NonTensorStack, NonTensorData)):
        raise TypeError(f"column {name!r} must be a list of values (one per message), a NonTensorStack or a "
                        f"NonTensorData, got {type_name(value)}")
    size = tuple(value.shape if isinstance(value, torch.Tensor) else value.batch_size)
    if size != (n,):
        what = f"holds {size[0]} values" if len(size) == 1 else f"has batch size {size}"
        raise ValueError(f"column {name!r} {what}; the offsets say {n} messages (one value per message)")
    return value


def _flags_column(value, n: int) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        if not isinstance(value, (list, tuple, np.ndarray)):
            raise TypeError(f"column {FLAGS_KEY!r} must be an int8 tensor or a list of ints, got {type_name(value)}")
        value = torch.as_tensor(np.asarray(value) if len(value) else np.zeros(0, np.int8))
    if value.dtype is torch.bool or value.is_floating_point() or value.is_complex():
        raise TypeError(f"column {FLAGS_KEY!r} must hold ints, got {value.dtype}")
    if tuple(value.shape) != (n,):
        raise ValueError(f"column {FLAGS_KEY!r} has shape {tuple(value.shape)}, expected ({n},) (one per message)")
    from .schema import FLAG_MAX

    flat = value.numpy() if value.device.type == "cpu" else value.cpu().numpy()  # numpy: one single-threaded pass
    bad = np.flatnonzero((flat < 0) | (flat > FLAG_MAX))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"column {FLAGS_KEY!r}: message {i} has flags {int(flat[i])}; flags are 0..{FLAG_MAX}")
    return value.to(torch.int8)


def check_message_columns(td, given) -> None:
    """Raise ``ValueError`` naming the column and message for a value of the columns ``given``
    (their names; columns of a History or a load, passed on as NonTensorStacks, are taken as
    they are) that no History can hold, as the setters check them; then the content rule when
    ``role`` or ``content`` is given (with both passed on, it would decode the whole content
    column for tool calls that hygiene's ``decode_arguments`` only reshapes), and the ``_flags``
    that mark a message without content, which must have none."""
    for name in given:
        check_field(td, name)
    if "role" in given or "content" in given:
        check_content_rule(td)
    absent = np.flatnonzero(td._tensordict[FLAGS_KEY].numpy() & CONTENT_ABSENT) if FLAGS_KEY in given else ()
    if len(absent):
        contents = column(td, "content")
        for i in absent.tolist():
            if contents[i] is not None:
                raise ValueError(f"History: message {i}: its {FLAGS_KEY!r} mark it without content (bit "
                                 f"{CONTENT_ABSENT}), but its content is {contents[i]!r:.40}")
