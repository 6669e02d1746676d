"""Checks at the door (``History.from_chats``): values a save could not keep exactly are refused.

A saved History keeps message values as JSON. JSON has no tuples, sets or non-string keys, so
``{"pair": (1, 2)}`` or ``{1: "a"}`` would come back changed (``[1, 2]``, ``{"1": "a"}``). UTF-8
cannot hold a lone surrogate (``"\\ud800"``), which Python strings can. JSON has no NaN or
infinity: a save would write ``NaN`` / ``Infinity``, which other JSON readers refuse. Rather
than change such values silently on a save, ``from_chats`` refuses them, naming the chat, the
message, the field and the key path. The walk is iterative: a value nested 100,000 levels
deep gets the same clear error, never a ``RecursionError``.

It also applies the content rule: a ``user``, ``system`` or ``tool`` message needs content; an
``assistant`` message may lack it only when it has tool calls or reasoning.

The checks run in bulk first (:func:`texts_ok`: one strict UTF-8 encode of all non-ASCII strings
joined; :func:`json_values_ok`: type checks over all values of a column, one nesting level at a
time, and one ``sum`` of each level's floats, finite unless a value is not). Only when a bulk
check fails is each value walked (:func:`json_value_error`, :func:`text_error`) to name the
culprit, so valid data pays a few C-level passes per column.

Example:
    >>> json_value_error({"pair": (1, 2)}, "extra")
    "extra['pair'] is a tuple, which a save would turn into a list; use a list"
"""
from __future__ import annotations

from itertools import chain, compress
from math import isfinite
from operator import not_

__all__ = ["json_value_error", "text_error", "content_rule_error", "texts_ok", "json_values_ok", "type_name", "MAX_DEPTH"]

MAX_DEPTH = 512
_SCALARS = (int, float, bool, type(None))
_NEEDS_CONTENT = ("user", "system", "tool")
_REASONING_KEYS = ("reasoning_content", "reasoning")
_JSON_TYPES = frozenset({str, int, float, bool, type(None), list, dict})
_LEAF_TYPES = frozenset({str, int, float, bool, type(None)})
_JSON_SPELLING = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def type_name(value) -> str:
    """The name of ``value``'s type for an error message: a builtin's bare name, else the
    qualified name (numpy's ``bool`` is not Python's) with what to do about it.

    Example:
        >>> import numpy as np
        >>> type_name(3), type_name(np.bool_(True))
        ('int', 'numpy.bool (a numpy scalar: use .item())')
    """
    t = type(value)
    if t.__module__ == "builtins":
        return t.__name__
    name = f"{t.__module__}.{t.__qualname__}"
    if t.__module__.split(".")[0] == "numpy":
        if getattr(value, "ndim", 0):
            return f"{name} (a numpy array: use .tolist())"
        return f"{name} (a numpy scalar: use .item())"
    if isinstance(value, str):
        return f"{name} (a str subclass: pass a plain str)"
    return name


def texts_ok(texts) -> bool:
    """Whether no str of ``texts`` holds a lone surrogate: one strict UTF-8 encode of the
    non-ASCII ones joined (a lone surrogate cannot pair up across two strings: Python's strict
    encoder refuses every surrogate code point).

    Example:
        >>> texts_ok(["a", "é", "日本"]), texts_ok(["a", "x\\ud800"])
        (True, False)
    """
    if all(map(str.isascii, texts)):  # O(1) per str in CPython
        return True
    try:  # only the non-ASCII ones: joining ASCII text with wider text would widen it all
        "".join(compress(texts, map(not_, map(str.isascii, texts)))).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def json_values_ok(values) -> bool:
    """Whether every value of ``values`` round-trips a save exactly (the rule of
    :func:`json_value_error`), checked over all of them at once: one set of types per nesting
    level, every dict key a str, no lone surrogate, at most :data:`MAX_DEPTH` levels.

    Example:
        >>> json_values_ok([None, {"a": [1, 2.5, "x"]}, [True]]), json_values_ok([{"a": (1, 2)}])
        (True, False)
    """
    level, depth, strings = list(values), 0, []
    while level:
        types = set(map(type, level))
        if not types <= (_JSON_TYPES if depth < MAX_DEPTH else _LEAF_TYPES):
            return False
        nxt: list = []
        if str in types:
            strings += [v for v in level if type(v) is str]
        if float in types:  # NaN / inf: a sum of finite floats is finite unless it overflows (then look at each)
            floats = level if len(types) == 1 else [v for v in level if type(v) is float]
            if not isfinite(sum(floats)) and not all(map(isfinite, floats)):
                return False
        if list in types:
            nxt += chain.from_iterable([v for v in level if type(v) is list])
        if dict in types:
            dicts = [v for v in level if type(v) is dict]
            keys = list(chain.from_iterable(dicts))
            if keys and set(map(type, keys)) != {str}:
                return False
            strings += keys
            nxt += chain.from_iterable(map(dict.values, dicts))
        level, depth = nxt, depth + 1
    return texts_ok(strings)


def text_error(s: str, field: str) -> str | None:
    """An error if the str ``s`` holds a lone surrogate (which UTF-8 cannot store).

    Example:
        >>> text_error("ok \\ud800", "content")
        "content holds a lone surrogate ('\\\\ud800' at index 3), which UTF-8 cannot store; fix the text's encoding (e.g. decode with errors='replace')"
    """
    if s.isascii():  # O(1) in CPython
        return None
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as err:
        return (f"{field} holds a lone surrogate ({s[err.start]!r} at index {err.start}), which UTF-8 "
                "cannot store; fix the text's encoding (e.g. decode with errors='replace')")
    return None


def _show(path: tuple) -> str:
    return "".join(f"[{p!r}]" for p in path)


def json_value_error(value, field: str) -> str | None:
    """An error naming ``field`` and the key path of the first part of ``value`` that JSON
    would not keep exactly (a tuple, set, non-str key, other type, lone surrogate, or more
    than :data:`MAX_DEPTH` levels of nesting); None if ``value`` round-trips exactly.

    Example:
        >>> json_value_error({"a": [1, {True: 2}]}, "tool_calls") is not None
        True
    """
    stack = [(value, ())]
    while stack:
        v, path = stack.pop()
        t = type(v)
        if t is str:
            err = text_error(v, field + _show(path))
            if err:
                return err
        elif t is float and not isfinite(v):
            return (f"{field}{_show(path)} is {v!r}, which JSON cannot hold (a save would write "
                    f"{_JSON_SPELLING[repr(v)]}, which other JSON readers refuse); use None or a finite number")
        elif t in _SCALARS:
            continue
        elif len(path) >= MAX_DEPTH:
            return f"{field} is nested more than {MAX_DEPTH} levels deep; a save cannot keep it"
        elif t is list:
            stack.extend((x, (*path, i)) for i, x in enumerate(v))
        elif t is dict:
            for k, x in v.items():
                if type(k) is not str:
                    return (f"{field}{_show(path)} has the key {k!r} ({type_name(k)}), which a save "
                            "would turn into a string; use str keys")
                err = text_error(k, f"{field}{_show(path)} key {k!r}")
                if err:
                    return err
                stack.append((x, (*path, k)))
        elif t is tuple:
            return f"{field}{_show(path)} is a tuple, which a save would turn into a list; use a list"
        else:
            return (f"{field}{_show(path)} is a {type_name(v)}, which a save cannot keep exactly (messages "
                    "hold str, int, float, bool, None, lists and dicts with str keys)")
    return None


def content_rule_error(msg, content) -> str | None:
    """The content rule for a message whose content is None or absent.

    Example:
        >>> content_rule_error({"role": "user"}, None)
        "a 'user' message needs 'content' (got none)"
        >>> content_rule_error({"role": "assistant", "tool_calls": [{"id": "1"}]}, None) is None
        True
    """
    if content is not None:
        return None
    role = msg.get("role")
    if role in _NEEDS_CONTENT:
        return f"a {role!r} message needs 'content' (got {'None' if 'content' in msg else 'none'})"
    if role == "assistant" and not (msg.get("tool_calls") or any(msg.get(k) for k in _REASONING_KEYS)):
        return "an 'assistant' message without 'content' must have 'tool_calls' or 'reasoning_content'"
    return None
