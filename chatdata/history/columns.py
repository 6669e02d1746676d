"""Column-wise conversion between OpenAI-style message dicts and History storage.

Storage of a History (a TensorDict whose last batch dim is the message index, or a
:class:`~chatdata.td.RaggedTensorDict` over such a TensorDict for conversations of different
lengths) always holds these entries, one value per message:

============== ===================================================================
``role``       str column
``content``    str column; ``None`` or a list of part dicts where the input had them
``is_complete`` bool column (a constant ``True`` when no message says otherwise)
``tool_calls`` list-of-dicts column, ``None`` where absent
``tool_responses`` list column, ``None`` where absent
``extra``      dict of the message's other keys (``name``, ``tool_call_id``,
               ``reasoning_content``, ...) in their input order, ``None`` if none
``_flags``     int8 tensor: which optional keys the input message had (see below)
============== ===================================================================

Columns that hold one value for every message are a ``NonTensorData`` constant (no per-message
cost). ``_flags`` makes ``to_chats`` exact: bit ``CONTENT_ABSENT`` marks a message without a
``content`` key; ``IS_COMPLETE``, ``TOOL_CALLS``, ``TOOL_RESPONSES`` mark keys given explicitly
(even with their default value). A message dict is rebuilt as ``role``, ``content`` (unless
absent), then ``is_complete`` (if given or False), ``tool_calls`` / ``tool_responses`` (if given
or not None), then the extra keys.
"""
from __future__ import annotations

from collections.abc import Mapping
from itertools import repeat
from operator import is_not
from operator import itemgetter
from typing import Any

import numpy as np
import torch

from ..td import NonTensorData, NonTensorStack, RaggedTensorDict, TensorDict
from ..td.nontensor import Pool
from .content import check_parts
from .message_checks import content_rule_error, json_value_error, json_values_ok, text_error, texts_ok, type_name

__all__ = ["FIELDS", "build_storage", "storage_to_chats", "column", "normalize_storage", "FLAGS_KEY", "packed_strings"]

FIELDS = ("role", "content", "is_complete", "tool_calls", "tool_responses", "extra")
DEFAULTS = {"is_complete": True, "tool_calls": None, "tool_responses": None, "extra": None}
FLAGS_KEY = "_flags"
CONTENT_ABSENT, IS_COMPLETE, TOOL_CALLS, TOOL_RESPONSES = 1, 2, 4, 8
_KNOWN = {"role", "content", "is_complete", "tool_calls", "tool_responses"}
_MISSING = object()


def _stack(values: list) -> NonTensorStack:
    # a range index: O(1) to build, and items/slices of it stay ranges (no tensor per read)
    return NonTensorStack._from_parts(range(len(values)), Pool.from_values(values))


def _const(value, n: int) -> NonTensorData:
    return NonTensorData(value, batch_size=(n,))


def _where(chat_index, msg_index) -> str:
    if chat_index is None:
        return f"message {msg_index}"
    return f"chat {chat_index}, message {msg_index}"


def _locate(flat_index: int, offsets: list[int] | None) -> tuple[int | None, int]:
    if offsets is None:
        return None, flat_index
    import bisect

    c = bisect.bisect_right(offsets, flat_index) - 1
    while offsets[c + 1] == offsets[c]:  # skip empty chats
        c += 1
    return c, flat_index - offsets[c]


def _message_error(msg, where: str) -> str | None:
    if not isinstance(msg, Mapping):
        return f"{where}: a message must be a dict, got {type_name(msg)}"
    if "role" not in msg:
        rows = next((k for k in ("messages", "conversations", "conversation") if isinstance(msg.get(k), list)), None)
        hint = (f"; it looks like a dataset row holding a chat under {rows!r}: pass [row[{rows!r}] for row in rows]"
                if rows else "")
        return f"{where}: message has no 'role' (keys: {sorted(map(str, msg))}){hint}"
    if type(msg["role"]) is not str:
        return f"{where}: 'role' must be a str, got {type_name(msg['role'])}"
    content = msg.get("content")
    if content is not None and type(content) is not str:
        err = check_parts(content)
        if err is not None:
            return f"{where}: {err}"
    if "is_complete" in msg and type(msg["is_complete"]) is not bool:
        return f"{where}: 'is_complete' must be a bool, got {type_name(msg['is_complete'])}"
    for key in ("tool_calls", "tool_responses"):
        val = msg.get(key)
        if val is not None and not isinstance(val, list):
            return f"{where}: {key!r} must be a list or None, got {type_name(val)}"
    return None


def _first_error(flat: list, offsets: list[int] | None) -> str:
    for i, msg in enumerate(flat):
        err = _message_error(msg, _where(*_locate(i, offsets)))
        if err is not None:
            return err
    return "invalid chats"  # pragma: no cover - callers only get here after a failed check


def _check_texts(texts: list, field: str, offsets, full: list | None = None) -> None:
    """Refuse lone surrogates in str values (one strict encode of them all joined; each value is
    looked at only when that fails, to name it); ``full`` holds the values when ``texts`` stands
    for them with '' in place of the ones that are not str."""
    if texts_ok(texts):
        return
    items = enumerate(full) if full is not None else enumerate(texts)
    for i, t in items:
        if type(t) is str:
            err = text_error(t, field)
            if err is not None:
                raise ValueError(f"{_where(*_locate(i, offsets))}: {err}")


def _check_json(key, value, i: int, offsets) -> None:
    """A message key and its value must round-trip through a save exactly."""
    if type(key) is not str:
        err = f"the message key {key!r} ({type_name(key)}) is not a str; a save would turn it into one"
    else:
        err = text_error(key, f"the message key {key!r}") or json_value_error(value, repr(key))
    if err is not None:
        raise ValueError(f"{_where(*_locate(i, offsets))}: {err}")


def _refuse_json(flat: list, long_msgs: list[int], offsets, upto: int, last_key) -> None:
    """Walk the keys of the messages ``long_msgs`` before ``upto`` (and of message ``upto`` up to
    and including ``last_key``) in order; raise for the first value a save would change."""
    for i in long_msgs:
        if i > upto:
            return
        for k, v in flat[i].items():
            if k not in ("role", "content"):
                _check_json(k, v, i, offsets)
            if i == upto and k == last_key:
                return


def _refuse_field(flat: list, long_msgs: list[int], i: int, key, offsets) -> None:
    """Raise for message ``i`` whose ``key`` has the wrong type -- unless a value before it (in
    message order, then key order) is one a save would change: that is named first, as a check
    per value in that order would have done."""
    _refuse_json(flat, long_msgs, offsets, i, key)
    raise ValueError(_message_error(flat[i], _where(*_locate(i, offsets))))


def build_storage(flat: list, offsets: list[int] | None) -> TensorDict:
    """The History columns (a TensorDict of batch ``(len(flat),)``) for the messages ``flat``,
    in one pass per column. ``offsets`` (chat boundaries) only serve error messages.

    Raises ``ValueError`` naming the chat and message index for a bad message.
    """
    n = len(flat)
    try:
        roles = [m["role"] for m in flat]
    except Exception:  # KeyError, TypeError, or whatever a non-dict's [] raises (a numpy scalar: IndexError)
        raise ValueError(_first_error(flat, offsets)) from None
    if n and set(map(type, roles)) != {str}:
        raise ValueError(_first_error(flat, offsets))
    _check_texts(roles, "'role'", offsets)
    try:
        contents = [m["content"] for m in flat]
    except KeyError:
        contents = [m.get("content", _MISSING) for m in flat]
    flags = None
    if n and set(map(type, contents)) != {str}:
        absent = []
        odd = np.flatnonzero(np.fromiter(map(is_not, map(type, contents), repeat(str)), dtype=bool, count=n)).tolist()
        strings = contents.copy()
        for i in odd:
            c = contents[i]
            strings[i] = ""
            if c is _MISSING:
                contents[i] = None
                absent.append(i)
            if c is None or c is _MISSING:
                err = content_rule_error(flat[i], None) if isinstance(flat[i], Mapping) else None
            else:
                err = check_parts(c) or json_value_error(c, "'content'")
            if err is not None:
                raise ValueError(f"{_where(*_locate(i, offsets))}: {err}")
        _check_texts(strings, "'content'", offsets, contents)
        flags = torch.from_numpy(np.zeros(n, dtype=np.int8))
        flags[absent] = CONTENT_ABSENT
    if flags is None:
        _check_texts(contents, "'content'", offsets)
        flags = torch.from_numpy(np.zeros(n, dtype=np.int8))
        try:
            lengths = np.fromiter(map(len, flat), dtype=np.int64, count=n)
        except TypeError:  # not a mapping
            raise ValueError(_first_error(flat, offsets)) from None
        long_msgs = np.flatnonzero(lengths > 2).tolist()
    else:  # a message without a content key holds one key less
        lengths = np.fromiter(map(len, flat), dtype=np.int64, count=n)
        long_msgs = np.flatnonzero(lengths > 2 - (flags.numpy() == CONTENT_ABSENT)).tolist()
    cols: dict[str, Any] = {}
    if long_msgs:
        is_complete: dict[int, Any] = {}
        tool_calls: dict[int, Any] = {}
        tool_responses: dict[int, Any] = {}
        extras: dict[int, Any] = {}
        fl = flags.numpy()
        keys: list = []  # every key and value beyond role/content, checked in bulk after the loop
        values: list = []
        for i in long_msgs:
            m = flat[i]
            bits = int(fl[i])
            extra = None
            for k, v in m.items():
                if k in ("role", "content"):
                    continue
                keys.append(k)
                values.append(v)
                if k in _KNOWN:
                    if k == "is_complete":
                        if type(v) is not bool:
                            _refuse_field(flat, long_msgs, i, k, offsets)
                        is_complete[i] = v
                        bits |= IS_COMPLETE
                    elif k == "tool_calls":
                        if v is not None and type(v) is not list:
                            _refuse_field(flat, long_msgs, i, k, offsets)
                        tool_calls[i] = v
                        bits |= TOOL_CALLS
                    elif k == "tool_responses":
                        if v is not None and type(v) is not list:
                            _refuse_field(flat, long_msgs, i, k, offsets)
                        tool_responses[i] = v
                        bits |= TOOL_RESPONSES
                else:
                    if extra is None:
                        extra = {}
                    extra[k] = v
            fl[i] = bits
            if extra is not None:
                extras[i] = extra
        if not (set(map(type, keys)) <= {str} and texts_ok(keys) and json_values_ok(values)):
            _refuse_json(flat, long_msgs, offsets, len(flat), None)  # names the first culprit
        for name, found in (("is_complete", is_complete), ("tool_calls", tool_calls),
                            ("tool_responses", tool_responses), ("extra", extras)):
            default = DEFAULTS[name]
            if any(v is not default for v in found.values()):
                col = [default] * n
                for i, v in found.items():
                    col[i] = v
                cols[name] = _stack(col)
    entries = {"role": _stack(roles), "content": _stack(contents)}
    for name in ("is_complete", "tool_calls", "tool_responses", "extra"):
        entries[name] = cols[name] if name in cols else _const(DEFAULTS[name], n)
    entries[FLAGS_KEY] = flags
    return TensorDict._new_unsafe(entries, torch.Size([n]), None)


def packed_strings(entry) -> bool:
    """Whether ``entry`` is a packed str column (a loaded one, say): every value is then a str,
    known without decoding one (a pool packs as str only when all its values are)."""
    if not isinstance(entry, NonTensorStack):
        return False
    pool = entry._pool
    return pool.kind == "str" and pool.is_packed and not pool._extras


def column(td: TensorDict, name: str) -> list:
    """All values of column ``name`` of a storage TensorDict, flattened to a list."""
    n = td.numel()
    entry = td._tensordict.get(name)
    if entry is None:
        if name == FLAGS_KEY:
            return [0] * n
        return [DEFAULTS.get(name)] * n
    if isinstance(entry, torch.Tensor):
        return entry.reshape(-1).tolist()
    if isinstance(entry, NonTensorData):
        return [entry.data] * n
    if isinstance(entry, NonTensorStack):
        ids = entry._ids()  # a range stays a range: the column keeps its zero-copy paths
        pool = entry._pool
        if pool._list is not None and len(ids) > 1:  # one C-level gather
            return list(itemgetter(*ids)(pool._list))
        return pool.take(ids)
    from ..td.tensorclass import TensorClass

    if isinstance(entry, TensorClass):  # ContentBase content
        return [entry.to_parts()] if not entry.batch_size[:td.ndim] else _content_parts(entry, td.batch_size)
    raise TypeError(f"unsupported History column {name!r} of type {type(entry).__name__}")


def _content_parts(content, batch_size) -> list:
    flat = content.reshape(-1, *content.batch_size[len(batch_size):]) if len(batch_size) != 1 else content
    return [flat[i].to_parts() for i in range(flat.batch_size[0])]


def rows_to_messages(td: TensorDict) -> list[dict]:
    """Message dicts of every element of the storage TensorDict ``td`` (flattened)."""
    if "role" not in td._tensordict:  # e.g. left by empty(): every message would read {"role": None, ...}
        raise ValueError("this History has no 'role' column; every message needs a role "
                         "(build it with from_chats, or set the column: h.role = [...])")
    roles = column(td, "role")
    contents = column(td, "content")
    flags_entry = td._tensordict.get(FLAGS_KEY)
    simple = (flags_entry is None or not bool(flags_entry.any())) and all(
        isinstance(td._tensordict.get(k), (NonTensorData, type(None))) and
        (td._tensordict.get(k) is None or td._tensordict[k].data is DEFAULTS[k])
        for k in ("is_complete", "tool_calls", "tool_responses", "extra")
    )
    content_col = td._tensordict.get("content")
    if isinstance(content_col, NonTensorStack) and content_col._pool.kind == "json":
        for c in contents:  # a JSON column may hold any JSON value: only str, None, parts are content
            if type(c) not in (str, list, type(None)):
                _corrupt(td, "content", f"a content value is a {type(c).__name__}")
    if simple:
        return [{"role": r, "content": c} for r, c in zip(roles, contents)]
    flags = column(td, FLAGS_KEY)
    done = column(td, "is_complete")
    calls = column(td, "tool_calls")
    resps = column(td, "tool_responses")
    extras = column(td, "extra")
    out = []
    for r, c, f, d, tc, tr, ex in zip(roles, contents, flags, done, calls, resps, extras):
        if (type(d) is not bool or (tc is not None and type(tc) is not list) or (tr is not None and type(tr) is not list)
                or (ex is not None and type(ex) is not dict) or (f & CONTENT_ABSENT and c is not None)):
            _check_row(td, c, f, d, tc, tr, ex)
        m = {"role": r}
        if not f & CONTENT_ABSENT:
            m["content"] = c
        if f & IS_COMPLETE or d is False:
            m["is_complete"] = d
        if f & TOOL_CALLS or tc is not None:
            m["tool_calls"] = tc
        if f & TOOL_RESPONSES or tr is not None:
            m["tool_responses"] = tr
        if ex:
            m.update(ex)
        out.append(m)
    return out


def _corrupt(td: TensorDict, name: str, what: str):
    from ..td import FormatError

    entry = td._tensordict.get(name)
    source = getattr(getattr(entry, "_pool", None), "_source", None) or getattr(entry, "filename", None)
    raise FormatError(f"{source or f'History column {name!r}'}: corrupt History column {name!r}: {what}")


def _check_row(td, c, f, d, tc, tr, ex) -> None:
    """Name the column of a loaded message whose value no History can hold."""
    if type(d) is not bool:
        _corrupt(td, "is_complete", f"a value is a {type(d).__name__}, not a bool")
    for name, v in (("tool_calls", tc), ("tool_responses", tr)):
        if v is not None and type(v) is not list:
            _corrupt(td, name, f"a value is a {type(v).__name__}, not a list or null")
    if ex is not None and type(ex) is not dict:
        _corrupt(td, "extra", f"a value is a {type(ex).__name__}, not an object or null")
    if f & CONTENT_ABSENT and c is not None:
        _corrupt(td, FLAGS_KEY, f"flags {f} mark a message without content, but its content is {c!r:.40}")


def _nest(flat: list, shape) -> list:
    if len(shape) <= 1:
        return flat
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def storage_to_chats(storage):
    """Message dicts with the storage's batch shape: a dict (one message), a list of dicts (a
    conversation), lists of lists (a batch; ragged or dense)."""
    if isinstance(storage, RaggedTensorDict):
        msgs = rows_to_messages(storage.values)
        off = storage.offsets.tolist()
        return [msgs[a:b] for a, b in zip(off[:-1], off[1:])]
    msgs = rows_to_messages(storage)
    bs = storage.batch_size
    if not bs:
        return msgs[0]
    return _nest(msgs, bs)


def normalize_storage(td: TensorDict) -> TensorDict:
    """Add the History columns ``td`` lacks (as constants) so that every History storage has the
    same keys (needed to stack / concatenate them); converts ContentBase content to parts."""
    entries = td._tensordict
    bs = td.batch_size
    for name in ("is_complete", "tool_calls", "tool_responses", "extra"):
        if name not in entries:
            entries[name] = NonTensorData(DEFAULTS[name], batch_size=bs)
    if "content" not in entries and "role" in entries:  # History(..., content=None): None for every message
        entries["content"] = NonTensorData(None, batch_size=bs)  # (a saved History needs the column to load)
    if FLAGS_KEY not in entries:
        entries[FLAGS_KEY] = torch.zeros(bs, dtype=torch.int8)
    from ..td.tensorclass import TensorClass

    content = entries.get("content")
    if isinstance(content, TensorClass):
        parts = _content_parts(content, bs) if bs else [content.to_parts()]
        parts = [p if isinstance(p, list) else [p] for p in parts]
        entries["content"] = NonTensorData(parts[0], batch_size=bs) if not bs else _stack(parts).reshape(bs)
    return td
