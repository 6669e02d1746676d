"""The record shapes ``chatdata import`` reads, and how it tells JSON Lines from one JSON document.

Shapes, per line (or per item of a JSON list):

* OpenAI: ``{"messages": [{"role": ..., "content": ..., "tool_calls": [...]}, ...]}``
  (every message key is kept, ``"weight"`` too: export gives the same messages back);
* ShareGPT: ``{"conversations": [{"from": "human", "value": ...}, ...]}`` (optional top-level
  ``"system"``); ``from`` maps to roles: human/user -> user, gpt/assistant/model -> assistant,
  system -> system, tool/observation/function_response -> tool; ``function_call`` becomes an
  assistant message with ``tool_calls`` (its value parsed as JSON ``{"name", "arguments"}``); a
  turn's ``"weight"`` (axolotl: a number >= 0, 0 = not trained) is kept on its message;
* bare: a list of message dicts, or of ShareGPT turns (``{"from": ..., "value": ...}``, read
  as the ShareGPT shape reads them).

Example:
    >>> to_messages({"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a", "weight": 0}]})
    [{'role': 'user', 'content': 'q'}, {'role': 'assistant', 'content': 'a', 'weight': 0}]
    >>> to_messages([{"from": "human", "value": "q"}])
    [{'role': 'user', 'content': 'q'}]
    >>> is_document([b'[\\n', b'  {"messages": []}\\n', b']\\n']), is_document([b'{oops\\n', b'[]\\n', b'[]\\n'])
    (True, False)
"""
from __future__ import annotations

import codecs
import json

from ..templates.selection import loss_weight

FORMATS = ("auto", "openai", "sharegpt", "bare")
SHAREGPT_ROLES = {
    "human": "user", "user": "user",
    "gpt": "assistant", "assistant": "assistant", "model": "assistant", "chatgpt": "assistant", "bard": "assistant",
    "system": "system",
    "tool": "tool", "observation": "tool", "function_response": "tool", "ipython": "tool",
}
SNIFF_LINES = 64  # non-empty lines read to tell JSON Lines from a document


def is_message(x) -> bool:
    return isinstance(x, dict) and ("role" in x or "from" in x)


def _weight(value, j: int, what: str = "turn"):
    """A turn's ``"weight"`` as training reads it (:func:`~chatdata.templates.selection.loss_weight`);
    ValueError naming the turn otherwise. The value is kept as it is."""
    try:
        loss_weight(value, f"{what} {j}: 'weight'")
    except TypeError as err:
        raise ValueError(str(err)) from None
    return value


def _is_sharegpt_turns(rec: list) -> bool:
    """A list whose first item is a ShareGPT turn (``from`` and no ``role``)."""
    return bool(rec) and type(rec[0]) is dict and "from" in rec[0] and "role" not in rec[0]


def _sharegpt(rec: dict) -> list:
    turns = rec["conversations"]
    if not isinstance(turns, list):
        raise ValueError(f"'conversations' must be a list, got {type(turns).__name__}")
    out = []
    system = rec.get("system")
    if isinstance(system, str) and system:
        out.append({"role": "system", "content": system})
    return out + _sharegpt_turns(turns)


def _sharegpt_turns(turns: list) -> list:
    out = []
    for j, t in enumerate(turns):
        if not isinstance(t, dict) or "from" not in t or "value" not in t:
            raise ValueError(f"turn {j}: expected {{\"from\": ..., \"value\": ...}}")
        frm, value = t["from"], t["value"]
        if not isinstance(frm, str):
            raise ValueError(f"turn {j}: 'from' must be a string (the speaker), got {type(frm).__name__}")
        if frm == "function_call":
            try:
                call = json.loads(value) if isinstance(value, str) else value
            except (ValueError, RecursionError):
                call = None
            if isinstance(call, dict) and "name" in call:
                msg = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": call}]}
            else:
                msg = {"role": "assistant", "content": value}
        else:
            role = SHAREGPT_ROLES.get(frm)
            if role is None:
                raise ValueError(f"turn {j}: unknown ShareGPT speaker {frm!r} "
                                 f"(known: {', '.join(sorted(SHAREGPT_ROLES))}, function_call)")
            msg = {"role": role, "content": value}
        if t.get("weight") is not None:
            msg["weight"] = _weight(t["weight"], j)
        out.append(msg)
    return out


def weight_error(conv) -> str | None:
    """What is wrong with the first bad ``"weight"`` of a conversation's messages (the rule of
    ShareGPT turns, for messages that carry their own), or None.

    Example:
        >>> weight_error([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "weight": "1"}])
        "message 1: 'weight' must be a number >= 0, got '1'"
    """
    for j, m in enumerate(conv):
        if type(m) is dict and m.get("weight") is not None:
            try:
                _weight(m["weight"], j, "message")
            except ValueError as err:
                return str(err)
    return None


def to_messages(rec, fmt: str = "auto") -> list:
    """The message list of one record; ``ValueError`` (one line) if it has no known shape."""
    if type(rec) is dict:
        if fmt in ("auto", "openai") and "messages" in rec:
            msgs = rec["messages"]
            if not isinstance(msgs, list):
                raise ValueError(f"'messages' must be a list, got {type(msgs).__name__}")
            return msgs
        if fmt in ("auto", "sharegpt") and "conversations" in rec:
            return _sharegpt(rec)
    elif type(rec) is list and fmt in ("auto", "bare"):
        return _sharegpt_turns(rec) if _is_sharegpt_turns(rec) else rec
    want = {"auto": '{"messages": [...]}, {"conversations": [...]} or a list of messages',
            "openai": '{"messages": [...]}', "sharegpt": '{"conversations": [...]}',
            "bare": "a list of messages"}[fmt]
    got = f"an object with keys {sorted(rec)[:5]}" if isinstance(rec, dict) else f"a {type(rec).__name__}"
    hint, shape = "", to_messages_shape(rec)
    if fmt != "auto" and shape not in (None, fmt):  # a --format that is not the data's
        hint = f" (this record is {shape}: pass --format {shape}, or leave --format out)"
    raise ValueError(f"expected {want}, got {got}{hint}")


def to_messages_shape(rec) -> str | None:
    """The ``--format`` a record has (``openai``, ``sharegpt``, ``bare``), or None.

    Example:
        >>> to_messages_shape({"conversations": []}), to_messages_shape([{"role": "user"}]), to_messages_shape(3)
        ('sharegpt', 'bare', None)
    """
    if type(rec) is dict:
        return "openai" if "messages" in rec else "sharegpt" if "conversations" in rec else None
    return "bare" if type(rec) is list else None


def document_records(doc, fmt: str = "auto") -> list:
    """The records of a whole JSON document: the items of a list of conversations, or the
    document itself when it is one conversation (an object, or a list of messages)."""
    if isinstance(doc, dict) or isinstance(doc, list) and doc and fmt in ("auto", "bare") and is_message(doc[0]):
        return [doc]
    if not isinstance(doc, list):
        raise ValueError("a JSON file must hold a list of conversations")
    return doc


_BAD = object()


def _value(line: bytes):
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return _BAD


def is_document(lines, limit: int | None = SNIFF_LINES) -> bool:
    """True if ``lines`` (bytes, from a file's start) read as one JSON document, False for JSON
    Lines; reads at most ``limit`` non-empty lines (None: all of them).

    A document spread over several lines starts with ``[`` or ``{`` on a line that is not whole
    JSON, ends on such a line, and never has whole values on two lines in a row (in a list only
    the last item can stand alone: after a value comes ``,``, ``]`` or ``}``). A file breaking one
    of these is JSON Lines, whose bad lines are then reported one by one. One line is a document
    when it is not JSON, or when it is a list of conversations (a list of messages is one
    conversation: a JSON Lines record)."""
    first = previous = _BAD
    n = 0
    for line in lines:
        s = line.strip()
        if not s:
            continue
        value = _value(s)
        n += 1
        if n == 1:
            first, opens = value, s.removeprefix(codecs.BOM_UTF8)[:1] in (b"[", b"{")
        elif first is not _BAD or not opens or (value is not _BAD and previous is not _BAD):
            return False
        if n == limit:
            return True
        previous = value
    if n == 1:
        return first is _BAD or isinstance(first, list) and bool(first) and not is_message(first[0])
    return n > 1 and previous is _BAD
