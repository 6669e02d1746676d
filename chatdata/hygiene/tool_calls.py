"""Tool-call checks: ``check_tool_calls(history, tools=None)`` and ``decode_arguments(history)``.

Accepted call shapes: OpenAI ``{"id", "type": "function", "function": {"name", "arguments"}}``
and the flat ``{"name", "arguments"}`` some datasets use. A tool reply is a ``role: "tool"``
message; it answers a call by ``tool_call_id`` where it has one, otherwise by count and order
(the n-th id-less reply after an assistant turn answers that turn's n-th call).

Problems (the ``problem`` value of each reported dict):

====================== ================================================================
``malformed_call``     a call that is not an object, has no string name, or no arguments
``arguments_not_json`` ``arguments`` is a string that does not parse as JSON
``arguments_not_object`` ``arguments`` (parsed) is not a JSON object
``unknown_tool``       the name is not among the conversation's tools (when tools are known)
``schema_mismatch``    the arguments break the tool's JSON schema (``jsonschema``)
``bad_tool_schema``    the tool's own ``parameters`` is not a valid JSON schema
``orphan_tool_reply``  a tool reply that answers no call
====================== ================================================================

Example:
    >>> from chatdata import History
    >>> h = History.from_chats([[{"role": "user", "content": "hi"},
    ...     {"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": "{oops"}]},
    ...     {"role": "tool", "content": "1"}, {"role": "tool", "content": "2"}]])
    >>> [(p["conversation"], p["message"], p["problem"]) for p in check_tool_calls(h)]
    [(0, 1, 'arguments_not_json'), (0, 3, 'orphan_tool_reply')]
"""
from __future__ import annotations

import functools
import json
import math
import re
from fractions import Fraction
from collections.abc import Sequence

from .columns import conversation_offsets, extra_values, message_values

__all__ = ["check_tool_calls", "decode_arguments", "PROBLEMS", "tool_schemas", "loads_strict"]

PROBLEMS = ("malformed_call", "arguments_not_json", "arguments_not_object", "unknown_tool", "schema_mismatch",
            "bad_tool_schema", "orphan_tool_reply")


def _call_parts(call):
    """``(name, arguments, id)`` of a call in either shape; ``None`` if it is not a call."""
    if not isinstance(call, dict):
        return None
    fn = call.get("function")
    body = fn if isinstance(fn, dict) else call
    return body.get("name"), body.get("arguments", _MISSING), call.get("id")


_MISSING = object()
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON (JSON has no NaN or Infinity)")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400: Python reads inf, which no JSON writer can write back
        raise ValueError(f"the number {text[:40]} is too large for a double (it reads as infinity)")
    return value


def _unique_keys(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):  # '{"a": 1, "a": 2}': which one the model meant is unknowable
        seen = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"the key {twice!r} appears twice in one object (decoding would keep only the last)")
    return out


def loads_strict(text: str):
    """``json.loads`` of standard JSON only: ``NaN`` / ``Infinity``, a number too large for a
    double (``1e400``, which reads as infinity), a key twice in one object (decoding would drop
    all but the last value) and lone UTF-16 surrogate escapes (``"\\ud800"``, which are not text
    and cannot be stored as UTF-8) are a ValueError.

    Example:
        >>> loads_strict('{"x": NaN}')
        Traceback (most recent call last):
        ...
        ValueError: NaN is not JSON (JSON has no NaN or Infinity)
        >>> loads_strict('{"x": 1, "x": 2}')
        Traceback (most recent call last):
        ...
        ValueError: the key 'x' appears twice in one object (decoding would keep only the last)
    """
    value = json.loads(text, parse_constant=_no_constant, parse_float=_finite, object_pairs_hook=_unique_keys)
    if _SURROGATE_ESCAPE.search(text):  # rare: only then the check that walks the value
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("a string holds a lone surrogate escape (\\ud800-\\udfff alone), which is not text") \
                from None
    return value


def tool_schemas(tools) -> dict:
    """``{name: parameters schema or None}`` of a list of tool specs (OpenAI
    ``{"type": "function", "function": {...}}`` or flat ``{"name", "parameters"}``; a JSON string
    of such a list is read too).

    Example:
        >>> tool_schemas([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
        {'f': {'type': 'object'}}
    """
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except (ValueError, RecursionError):
            raise ValueError("tools is a string that is not JSON") from None
    if tools is not None and not isinstance(tools, (list, tuple)):
        raise ValueError(f"tools must be a list of tool objects, got {type(tools).__name__}")
    out = {}
    for t in tools or ():
        if not isinstance(t, dict):
            raise ValueError(f"a tool must be an object, got {type(t).__name__}")
        body = t.get("function") if isinstance(t.get("function"), dict) else t
        name = body.get("name")
        if not isinstance(name, str):
            raise ValueError(f"a tool has no string 'name' (keys: {sorted(body)})")
        schema = body.get("parameters", body.get("input_schema"))
        if name in out and out[name] != schema:  # which one a call means is unknowable: a later one won silently
            raise ValueError(f"two tools are named {name!r}, with different parameters: give each tool its own name")
        out[name] = schema
    return out


class _Validators:
    """One validator per distinct schema: ``get(schema)`` gives ``check(args) -> error text or
    None``, or the error text of a schema that is not valid.

    The backend is ``jsonschema-rs`` (Rust; about 200x faster than ``jsonschema`` on the sample
    tools' schemas: 0.4 us against 87 us a call) when installed, else ``jsonschema``. Neither
    fetches a remote ``$ref``: rs runs offline, and jsonschema does not retrieve by default."""

    def __init__(self, backend: str | None = None):
        if backend is None:
            try:
                import jsonschema_rs  # noqa: F401

                backend = "rs"
            except ImportError:
                backend = "py"
        if backend not in ("rs", "py"):
            raise ValueError(f"backend must be 'rs' (jsonschema-rs) or 'py' (jsonschema), got {backend!r}")
        self.backend = backend
        self._by_id: dict[int, tuple] = {}
        self._by_text: dict[str, object] = {}

    def get(self, schema):
        hit = self._by_id.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        key = json.dumps(schema, sort_keys=True)
        if key not in self._by_text:
            self._by_text[key] = self._build(schema)
        if len(self._by_id) > 10_000:
            self._by_id.clear()
        self._by_id[id(schema)] = (schema, self._by_text[key])  # holds the schema: its id stays unique
        return self._by_text[key]

    def _build(self, schema):
        if self.backend == "rs":
            import jsonschema_rs

            try:
                v = jsonschema_rs.validator_for(schema, offline=True)
            except (jsonschema_rs.ValidationError, ValueError) as err:
                return f"invalid parameters schema: {str(err).splitlines()[0]}"

            return functools.partial(_first_error, v, "instance_path")
        from .deps import require_jsonschema

        js = require_jsonschema()
        cls = js.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except js.exceptions.SchemaError as err:
            return f"invalid parameters schema: {err.message}"
        if "multipleOf" in cls.VALIDATORS:
            cls = js.validators.extend(cls, {"multipleOf": _multiple_of})
        return functools.partial(_first_error, cls(schema), "absolute_path")


def _multiple_of(validator, divisor, instance, schema):
    """``multipleOf`` on the numbers as written: jsonschema divides floats, so 0.07 was not a
    multiple of 0.01 (0.07 / 0.01 = 7.000000000000001) where jsonschema-rs, and the JSON Schema
    spec, say it is. Both numbers are taken exactly: a float from its shortest decimal form, an int
    as it is (an int of any size is valid JSON: no float conversion, no decimal string)."""
    if not validator.is_type(instance, "number") or isinstance(divisor, bool) or not isinstance(divisor, (int, float)):
        return
    n, d = _exact(instance), _exact(divisor)
    if n is None or d is None or d == 0:
        return
    if (n / d).denominator != 1:
        from .deps import require_jsonschema

        yield require_jsonschema().exceptions.ValidationError(f"{instance!r} is not a multiple of {divisor!r}")


def _exact(number) -> Fraction | None:
    """``number`` as an exact fraction (None for inf/nan): an int as is, a float by its repr."""
    if isinstance(number, int):
        return Fraction(number)
    return Fraction(repr(number)) if math.isfinite(number) else None


class SchemaUnusable(Exception):
    """The schema cannot be applied: a ``$ref`` that resolves nowhere, or only to itself."""


def _first_error(validator, path_attr: str, args) -> str | None:
    """None if ``args`` is valid, else its first error (by instance path) as ``path: message``.
    Raises :class:`SchemaUnusable` when the schema cannot be applied (jsonschema finds a bad
    ``$ref`` only when it follows it)."""
    try:
        if validator.is_valid(args):
            return None
        err = min(validator.iter_errors(args), key=lambda e: list(map(str, getattr(e, path_attr))))
    except RecursionError:
        raise SchemaUnusable("its $ref chain never reaches a schema (a cycle)") from None
    except Exception as err:  # referencing.exceptions.Unresolvable: the python backend's bad $ref
        if type(err).__module__.split(".")[0] not in ("referencing", "jsonschema"):
            raise
        raise SchemaUnusable(f"a $ref cannot be resolved ({str(err).splitlines()[0]})") from None
    return f"{'/'.join(map(str, getattr(err, path_attr))) or 'arguments'}: {err.message}"


def _per_conversation_tools(tools, n: int) -> list:
    """``tools`` -> one name->schema dict (None: tools unknown; a str: why the conversation's own
    tools cannot be read) per conversation."""
    if tools is None:
        return [None] * n
    if isinstance(tools, Sequence) and not isinstance(tools, str) and len(tools) == n and n and \
            all(t is None or isinstance(t, (list, str)) for t in tools):
        out = []
        for t in tools:
            try:
                out.append(None if t is None else tool_schemas(t))
            except ValueError as err:
                out.append(f"the conversation's tools cannot be read: {err}")
        return out
    shared = tool_schemas(tools)
    return [shared] * n


def _check_call(call, schemas, validators, problem) -> object:
    """Check one call; returns its decoded arguments (or None)."""
    parts = _call_parts(call)
    if parts is None:
        problem("malformed_call", f"a tool call must be an object, got {type(call).__name__}")
        return None
    name, args, _ = parts
    if not isinstance(name, str) or not name:
        problem("malformed_call", "a tool call has no function name")
        return None
    if args is _MISSING or args is None:
        problem("malformed_call", f"the call to {name!r} has no arguments")
        return None
    if isinstance(args, str):
        try:
            args = loads_strict(args)
        except (ValueError, RecursionError) as err:
            why = err if isinstance(err, ValueError) else "nested too deeply"
            problem("arguments_not_json", f"the arguments of {name!r} are not JSON ({why}): {args[:60]!r}")
            return None
    if not isinstance(args, dict):
        problem("arguments_not_object", f"the arguments of {name!r} are a {type(args).__name__}, not an object")
        return None
    if isinstance(schemas, str):
        problem("bad_tool_schema", schemas)
        return args
    if schemas is not None:
        if name not in schemas:
            known = ", ".join(sorted(schemas)[:8]) or "none"
            problem("unknown_tool", f"{name!r} is not among the tools ({known})")
            return args
        schema = schemas[name]
        if schema is not None and not isinstance(schema, (dict, bool)):
            problem("bad_tool_schema", f"tool {name!r}: its parameters schema must be an object (or true/false), "
                                       f"got {type(schema).__name__}")
        elif schema is not None:
            check = validators.get(schema)
            if isinstance(check, str):
                problem("bad_tool_schema", f"tool {name!r}: {check}")
            else:
                try:
                    err = check(args)
                except SchemaUnusable as why:
                    problem("bad_tool_schema", f"tool {name!r}: invalid parameters schema: {why}")
                else:
                    if err is not None:
                        problem("schema_mismatch", f"{name!r} {err}")
    return args


def check_tool_calls(history, tools=None, *, backend: str | None = None) -> list[dict]:
    """Check the tool calls and tool replies of every conversation of ``history``.

    ``tools``: ``None`` (names and schemas are then not checked), one list of tool specs for all
    conversations, or one list (or ``None``) per conversation. Returns one dict per problem:
    ``{"conversation": i, "message": j, "problem": code, "detail": text}`` (codes in the module
    docstring), in order. ``backend``: ``"rs"`` (jsonschema-rs) or ``"py"`` (jsonschema) for the
    schema checks; default: rs when installed.

    Example:
        >>> from chatdata import History
        >>> tools = [{"name": "get_weather", "parameters": {"type": "object", "required": ["city"]}}]
        >>> h = History.from_chats([[{"role": "assistant", "content": "",
        ...                           "tool_calls": [{"name": "get_weather", "arguments": {}}]}]])
        >>> check_tool_calls(h, tools, backend="py")[0]["detail"]
        "'get_weather' arguments: 'city' is a required property"
    """
    offsets = conversation_offsets(history)
    n = len(offsets) - 1
    calls = message_values(history, "tool_calls")
    roles = message_values(history, "role")
    extras = None
    per_conv = _per_conversation_tools(tools, n)
    validators = _Validators(backend)
    problems: list[dict] = []
    busy = sorted({k for k, c in enumerate(calls) if c is not None} | {k for k, r in enumerate(roles) if r == "tool"})
    if not busy:
        return problems
    extras = extra_values(history)
    import numpy as np

    conv_of = np.searchsorted(offsets, np.array(busy), side="right") - 1
    for i in sorted(set(conv_of.tolist())):
        a, b = int(offsets[i]), int(offsets[i + 1])
        pending_ids: list = []  # call ids not answered yet, in call order
        pending_plain = 0  # id-less calls of the latest assistant turn not answered yet
        for k in range(a, b):
            def problem(code, detail, k=k):
                problems.append({"conversation": i, "message": k - a, "problem": code, "detail": detail})

            if calls[k] is not None:
                pending_plain = 0
                for call in calls[k]:
                    _check_call(call, per_conv[i], validators, problem)
                    parts = _call_parts(call)
                    if parts is not None and parts[2] is not None:
                        pending_ids.append(parts[2])
                    else:
                        pending_plain += 1
            if roles[k] == "tool":
                extra = extras[k] or {}
                cid = extra.get("tool_call_id")
                if cid is not None:
                    if cid in pending_ids:
                        pending_ids.remove(cid)
                    else:
                        problem("orphan_tool_reply", f"tool_call_id {cid!r} answers no open call")
                elif pending_plain:
                    pending_plain -= 1
                elif pending_ids:
                    pending_ids.pop(0)
                else:
                    problem("orphan_tool_reply", "a tool reply with no open call before it")
    return problems


def decode_arguments(history):
    """``history`` with every tool call's string ``arguments`` that parses as a JSON object
    replaced by the object (the call's shape is kept); the same History if none needs it.

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "assistant", "content": "",
        ...                           "tool_calls": [{"name": "f", "arguments": '{"x": 1}'}]}]])
        >>> decode_arguments(h).to_chats()[0][0]["tool_calls"]
        [{'name': 'f', 'arguments': {'x': 1}}]
    """
    calls = message_values(history, "tool_calls")
    changed = False
    out = []
    for c in calls:
        if c is not None and any(_string_object(x) is not None for x in c):
            c = [_decoded(x) for x in c]
            changed = True
        out.append(c)
    if not changed:
        return history
    columns = {}
    for name in ("role", "content", "is_complete", "tool_responses", "extra", "_flags"):
        try:
            columns[name] = history.message_column(name)
        except KeyError:
            continue
    columns["tool_calls"] = out
    return type(history).from_message_columns(columns, history.conversation_offsets())


def _string_object(call):
    parts = _call_parts(call)
    if parts is None or not isinstance(parts[1], str):
        return None
    try:
        value = loads_strict(parts[1])
    except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
        return None
    return value if isinstance(value, dict) else None


def _decoded(call):
    value = _string_object(call)
    if value is None:
        return call
    call = dict(call)
    if isinstance(call.get("function"), dict):
        call["function"] = {**call["function"], "arguments": value}
    else:
        call["arguments"] = value
    return call
