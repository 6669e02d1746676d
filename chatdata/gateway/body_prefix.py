"""Parse a chat request body that repeats the previous one: compare its bytes, parse only the rest.

An agent harness resends the whole chat on every request. Parsing that JSON costs O(the chat),
which at 100 turns is most of the gateway's time per request. But a harness serializes the same
messages the same way, so the new body starts with the previous body's bytes up to the end of
its last message. :func:`parse_body` keeps a :class:`BodyMemo` of that prefix (its bytes, the
messages it parsed to, and the top-level members before ``"messages"``). When the next body
starts with exactly those bytes (one ``memcmp``), the prefix parses to exactly those values
(JSON is read left to right, and the prefix ends at the ``}`` of a whole message), so only the
rest is parsed. Any other body, or anything unusual (another encoding, a byte-order mark, a
second ``"messages"`` member), is parsed whole with :func:`json.loads`, which also writes its
error messages. The result is always what ``json.loads(raw)`` returns, except that ``NaN``,
``Infinity`` and ``-Infinity`` (which Python's ``json`` reads and writes, but which are not JSON)
and numbers too large for a float (``1e999``, read as ``inf``) are refused like malformed JSON: a session holding one could be answered but never stored.

The messages taken from the memo are the previous request's dict objects, shared: nothing in
the gateway changes a parsed message (normalising builds new dicts).

Example:
    >>> first = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}'
    >>> body, known, memo = parse_body(first, None)
    >>> known, body["max_tokens"], memo.prefix[-16:]
    (0, 5, b'"content": "hi"}')
    >>> second = first[:-19] + b', {"role": "assistant", "content": "yo"}], "max_tokens": 7}'
    >>> body, known, memo = parse_body(second, memo)
    >>> known, [m["content"] for m in body["messages"]], body["max_tokens"], body == json.loads(second)
    (1, ['hi', 'yo'], 7, True)
"""
from __future__ import annotations

import json
import math
import re

__all__ = ["BodyMemo", "parse_body", "not_json_constant", "finite_float"]


def not_json_constant(name: str):
    """``parse_constant`` of the gateway's JSON readers: ``NaN`` / ``Infinity`` are refused.

    Example:
        >>> json.loads('{"x": NaN}', parse_constant=not_json_constant)
        Traceback (most recent call last):
        ...
        ValueError: NaN is not JSON (send a finite number, a string or null)
    """
    raise ValueError(f"{name} is not JSON (send a finite number, a string or null)")


def finite_float(text: str) -> float:
    """``parse_float`` of the gateway's JSON readers: a number too large for a float (``1e999``,
    valid JSON, read as ``inf``) is refused like ``Infinity``.

    Example:
        >>> json.loads("[2.5, 1e999]", parse_float=finite_float)
        Traceback (most recent call last):
        ...
        ValueError: 1e999 is too large for a float (send a finite number, a string or null)
    """
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large for a float (send a finite number, a string or null)")
    return value


_STRICT = {"parse_constant": not_json_constant, "parse_float": finite_float}
_SCAN = json.JSONDecoder(**_STRICT).scan_once  # the C scanner json.loads uses
_SCANSTRING = json.decoder.scanstring
_WS = re.compile(r"[ \t\n\r]*")
_WS_CHARS = " \t\n\r"


class BodyMemo:
    """The part of a parsed body that the next body of the same chat repeats."""

    __slots__ = ("prefix", "head", "messages")

    def __init__(self, prefix: bytes, head: dict, messages: list) -> None:
        self.prefix = prefix  # the body's bytes up to the end of its last message
        self.head = head  # the top-level members before "messages"
        self.messages = messages  # what the prefix's messages parse to


class _Irregular(Exception):
    """The body is not in the shape the fast reader follows: parse it whole."""


def _ws(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()


def _value(text: str, pos: int):
    try:
        return _SCAN(text, pos)
    except (StopIteration, ValueError):
        raise _Irregular from None


def _members(text: str, pos: int, body: dict, allow_messages: bool) -> tuple[int, int | None, dict | None]:
    """Read object members from ``pos`` (just after ``{`` or after a value, at ``,`` or ``}``) up to
    and past the closing ``}``. Returns (position, end of the last message, members before
    "messages"); the last two are None when there is no memo to keep."""
    cut, head, seen_messages = None, None, False
    first = text[pos - 1:pos] == "{"
    while True:
        pos = _ws(text, pos)
        ch = text[pos:pos + 1]
        if ch == "}":
            if first:
                return pos + 1, None, None
            break
        if not first:
            if ch != ",":
                raise _Irregular
            pos = _ws(text, pos + 1)
        first = False
        if text[pos:pos + 1] != '"':
            raise _Irregular
        try:
            key, pos = _SCANSTRING(text, pos + 1, True)
        except ValueError:
            raise _Irregular from None
        pos = _ws(text, pos)
        if text[pos:pos + 1] != ":":
            raise _Irregular
        value, end = _value(text, _ws(text, pos + 1))
        if key == "messages":
            if not allow_messages or seen_messages:
                raise _Irregular  # "messages" twice: leave it to json.loads
            seen_messages, head = True, dict(body)
            if isinstance(value, list) and value and isinstance(value[-1], dict):
                cut = end - 1  # at "]": back over the whitespace to the last message's "}"
                while text[cut - 1] in _WS_CHARS:
                    cut -= 1
        body[key] = value
        pos = end
    return pos + 1, cut, head


def _byte_len(text: str, end: int, ascii_only: bool) -> int:
    return end if ascii_only else len(text[:end].encode("utf-8"))


def _parse_whole(raw: bytes) -> tuple[dict, BodyMemo | None]:
    if not isinstance(raw, bytes):
        return json.loads(raw, **_STRICT), None
    try:
        text = raw.decode("utf-8")
        pos = _ws(text, 0)
        if text[pos:pos + 1] != "{":
            raise _Irregular
        body: dict = {}
        pos, cut, head = _members(text, pos + 1, body, True)
        if _ws(text, pos) != len(text):
            raise _Irregular
    except (_Irregular, UnicodeDecodeError):
        return json.loads(raw, **_STRICT), None  # the reference (and its error message)
    if cut is None:
        return body, None
    return body, BodyMemo(raw[:_byte_len(text, cut, len(text) == len(raw))], head, body["messages"])


def _parse_after(raw: bytes, memo: BodyMemo) -> tuple[dict, BodyMemo]:
    """The body when it starts with ``memo.prefix``; raises _Irregular to parse it whole."""
    n = len(memo.prefix)
    try:
        tail = raw[n:].decode("utf-8")
    except UnicodeDecodeError:
        raise _Irregular from None
    msgs = list(memo.messages)
    pos, cut = 0, 0
    while True:  # the rest of the messages array
        pos = _ws(tail, pos)
        ch = tail[pos:pos + 1]
        if ch == "]":
            break
        if ch != ",":
            raise _Irregular
        value, pos = _value(tail, _ws(tail, pos + 1))
        msgs.append(value)
        cut = pos
    if not isinstance(msgs[-1], dict):
        raise _Irregular  # a malformed last message: json.loads and the checks report it
    body = dict(memo.head)
    body["messages"] = msgs
    pos, _, _ = _members(tail, pos + 1, body, False)
    if _ws(tail, pos) != len(tail):
        raise _Irregular
    prefix = memo.prefix if cut == 0 else raw[:n + _byte_len(tail, cut, len(tail) == len(raw) - n)]
    return body, BodyMemo(prefix, memo.head, msgs)


def parse_body(raw: bytes, memo: BodyMemo | None) -> tuple[object, int, BodyMemo | None]:
    """``(json.loads(raw), messages taken from memo, memo for the next body)``; the parsed
    value is anything JSON (the caller checks it is an object). Raises what ``json.loads``
    raises for a body that is not JSON."""
    if memo is not None and isinstance(raw, bytes) and raw.startswith(memo.prefix):
        try:
            body, new = _parse_after(raw, memo)
            return body, len(memo.messages), new
        except _Irregular:
            pass
    body, new = _parse_whole(raw)
    return body, 0, new
