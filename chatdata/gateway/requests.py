"""Chat-completion requests: the OpenAI fields, checked, and messages made ready to render.

:func:`parse_chat_request` takes the raw body and returns a :class:`ChatRequest`, or raises a
:class:`~chatdata.gateway.errors.GatewayError` (400) naming the field to fix. Messages are
checked one by one (:func:`normalize_message`) only where the session has not seen them: a
message equal to one already stored is not normalised again, and the messages a body repeats
byte for byte from the session's previous body are neither parsed nor checked again
(:mod:`chatdata.gateway.body_prefix`), so a request costs O(its new messages) plus one
``memcmp`` of the repeated bytes, not a parse of the whole chat.

Normalising follows what inference servers do before rendering: text content parts are
joined into one string, a ``developer`` message is a ``system`` one, tool-call ``arguments``
given as a JSON string become the object they encode (templates write them with ``tojson``).

Example:
    >>> req = parse_chat_request(b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}')
    >>> req.max_tokens, req.stream, req.raw_messages[0]["content"]
    (5, False, 'hi')
    >>> normalize_message({"role": "developer", "content": [{"type": "text", "text": "Be brief."}]}, 0)
    {'role': 'system', 'content': 'Be brief.'}
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..templates.render import unrenderable
from .body_prefix import BodyMemo, finite_float, not_json_constant, parse_body
from .errors import GatewayError
from .fields import refuse_unhonoured, template_vars

__all__ = ["ChatRequest", "parse_chat_request", "logit_bias", "normalize_message", "message_key", "reserved_names"]

_ROLES = ("system", "user", "assistant", "tool")
# not template variables: what the gateway renders with (the messages, tools, template, tokenizer)
# (``template`` and ``self`` name the renderer's and the conversation's own arguments: a TypeError, a 500)
_RESERVED = frozenset({"messages", "tools", "add_generation_prompt", "tokenizer", "chat_template",
                       "chat_template_name", "history", "template", "self"})


def reserved_names(kwargs: dict | None) -> str:
    """The keys of template variables ``kwargs`` that the gateway sets itself (the messages,
    tools, template, tokenizer, generation prompt), joined for a message; '' when none.

    Example:
        >>> reserved_names({"enable_thinking": False, "tools": [], "messages": []})
        'messages, tools'
    """
    return ", ".join(sorted(_RESERVED.intersection(kwargs))) if kwargs else ""


@dataclass
class ChatRequest:
    """One checked ``POST /v1/chat/completions`` body."""

    raw_messages: list  # as sent (dicts); normalised lazily by the session table
    model: str | None = None
    tools: list | None = None
    tool_choice: Any = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    min_tokens: int | None = None
    ignore_eos: bool = False
    stop_token_ids: list[int] = field(default_factory=list)
    logit_bias: dict[str, float] | None = None  # token id (a decimal string) -> bias, the engines' shape
    stream: bool = False
    include_usage: bool = False
    logprobs: bool = False
    template_kwargs: dict = field(default_factory=dict)
    known: int = 0  # leading messages taken from the session's previous body (checked then)
    memo: BodyMemo | None = None  # what the session's next body may repeat

    @property
    def engine_key(self) -> str:
        """What the rendering depends on besides the messages (tools, template variables)."""
        return json.dumps([self.tools, self.template_kwargs], sort_keys=True, ensure_ascii=False)


def _bad(message: str, param: str | None) -> GatewayError:
    return GatewayError(400, message, param=param)


MAX_DEPTH = 64  # nesting levels a request's values may have (rendering and storing them recurses per level)


def check_plain(value: Any, where: str) -> None:
    """Raise a 400 naming ``where`` when a parsed JSON value nests deeper than :data:`MAX_DEPTH`
    or holds a lone surrogate (``"\\ud800"`` is valid JSON but not text: it can be neither
    tokenized nor logged as UTF-8); see :func:`~chatdata.templates.render.unrenderable`.

    Example:
        >>> check_plain(json.loads('{"a": ["\\ud800"]}'), "tools")
        Traceback (most recent call last):
        ...
        chatdata.gateway.errors.GatewayError: tools holds a lone surrogate '\\ud800' (not valid Unicode text)
    """
    problem = unrenderable(value, MAX_DEPTH)
    if problem is not None:
        raise _bad(f"{where} {problem}", where)


_RECENT: list = []  # containers check_plain passed lately: a harness sends the same tools every turn


def _check_again(value: Any, where: str) -> None:
    """:func:`check_plain`, skipped for a container equal to one that passed lately (a C-level
    comparison that stops at the first difference costs far less than the walk)."""
    if not isinstance(value, (dict, list)):
        check_plain(value, where)
        return
    for seen in _RECENT:
        if value == seen:
            return
    check_plain(value, where)
    _RECENT.insert(0, value)
    del _RECENT[8:]


def _number(body: dict, name: str, lo: float, hi: float) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _bad(f"'{name}' must be a number, got {type(v).__name__} {v!r}", name)
    if not lo <= v <= hi:
        raise _bad(f"'{name}' must be between {lo} and {hi}, got {v}", name)
    return float(v)


_INT64 = 2**63


def _integer(body: dict, name: str, lo: int | None = None) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(f"'{name}' must be an integer, got {type(v).__name__} {v!r}", name)
    if not -_INT64 <= v < _INT64:  # the engines parse int64: a larger seed was their 500, seen here as a 502
        raise _bad(f"'{name}' must fit in 64 bits (between {-_INT64} and {_INT64 - 1}), got {str(v)[:40]}", name)
    if lo is not None and v < lo:
        raise _bad(f"'{name}' must be >= {lo}, got {v}", name)
    return v


def _positive(body: dict, name: str) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
        raise _bad(f"'{name}' must be a positive number, got {v!r}", name)
    return float(v)


def _flag(body: dict, name: str) -> bool:
    v = body.get(name)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise _bad(f"'{name}' must be true or false, got {v!r}", name)
    return v


def _tools(body: dict) -> list | None:
    tools = body.get("tools")
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise _bad(f"'tools' must be a list of {{\"type\": \"function\", \"function\": {{...}}}}, got {type(tools).__name__}",
                   "tools")
    for i, t in enumerate(tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if not isinstance(fn, dict) or t.get("type", "function") != "function" or not isinstance(fn.get("name"), str):
            raise _bad(f"tools[{i}] must be {{\"type\": \"function\", \"function\": {{\"name\": str, ...}}}}, got {t!r}",
                       f"tools[{i}]")
    return tools or None


def _tool_choice(body: dict) -> Any:
    v = body.get("tool_choice")
    if v is None or v in ("none", "auto", "required"):
        return v
    fn = v.get("function") if isinstance(v, dict) else None
    if isinstance(fn, dict) and isinstance(fn.get("name"), str):
        return v
    raise _bad(f"'tool_choice' must be \"none\", \"auto\", \"required\" or {{\"type\": \"function\", \"function\": "
               f"{{\"name\": ...}}}}, got {v!r}", "tool_choice")


def _stop(body: dict) -> list[str]:
    v = body.get("stop")
    if v is None:
        return []
    if isinstance(v, str) and v:
        return [v]
    if isinstance(v, list) and all(isinstance(s, str) and s for s in v):
        return list(v)
    raise _bad(f"'stop' must be a non-empty string or a list of non-empty strings, got {v!r:.200}", "stop")


def _unsupported(body: dict) -> None:
    """Refuse what the gateway cannot honour instead of answering as if it had: more than the
    sampled token's logprob, vLLM's prefill options (continuing the last assistant message), or a
    constrained output format (the backend gets token ids only)."""
    top = _integer(body, "top_logprobs", 0)
    if top:
        raise _bad(f"'top_logprobs' is not supported (got {top}): the gateway keeps and returns the sampled token's "
                   "logprob only; ask with logprobs: true and no top_logprobs (or 0)", "top_logprobs")
    if body.get("continue_final_message") or body.get("add_generation_prompt") is False:  # vLLM's prefill options
        raise _bad("'continue_final_message' / 'add_generation_prompt: false' are not supported: each request's answer "
                   "is a new assistant turn (an assistant message last is a whole turn, not a prefix to continue)",
                   "continue_final_message" if body.get("continue_final_message") else "add_generation_prompt")
    for name in ("functions", "function_call"):  # the deprecated form of tools: nothing would be rendered
        if body.get(name) is not None:
            raise _bad(f"'{name}' (the deprecated form of tools) is not supported: send 'tools' and 'tool_choice'", name)
    fmt = body.get("response_format")
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if fmt is not None and kind != "text":
        raise _bad(f"'response_format' {kind or fmt!r:.200} is not supported: the gateway does not constrain "
                   "decoding (only {\"type\": \"text\"}); ask for JSON in the messages instead", "response_format")
    err = refuse_unhonoured(body)
    if err is not None:
        raise err


def _token_ids(body: dict, name: str) -> list[int]:
    v = body.get(name)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2**31 for i in v):
        raise _bad(f"'{name}' must be a list of token ids (integers in [0, 2**31)), got {v!r:.200}", name)
    return v


def logit_bias(body: dict) -> dict[str, float] | None:
    """The request's ``logit_bias`` in the engines' shape (vLLM's ``/v1/completions`` and SGLang's
    ``sampling_params`` both take OpenAI's): token ids as decimal strings, each with a bias in
    [-100, 100] (as floats); None when absent or empty. Anything else is a 400 naming the field
    (vLLM clamps a bias outside the range; OpenAI refuses it, and so does the gateway).

    Example:
        >>> logit_bias({"logit_bias": {"15": -100, "0042": 2.5}})
        {'15': -100.0, '42': 2.5}
        >>> logit_bias({"logit_bias": {"15": 101}})
        Traceback (most recent call last):
        ...
        chatdata.gateway.errors.GatewayError: 'logit_bias' values must be numbers between -100 and 100, got 101 for token '15'
    """
    v = body.get("logit_bias")
    if v is None:
        return None
    if not isinstance(v, dict):
        raise _bad("'logit_bias' must be an object mapping token ids (as strings, e.g. {\"15\": -100}) to biases "
                   f"between -100 and 100, got {type(v).__name__} {v!r:.100}", "logit_bias")
    out: dict[str, float] = {}
    for key, bias in v.items():
        if not (key.isascii() and key.isdigit()) or int(key) >= 2**31:
            raise _bad(f"'logit_bias' keys must be token ids written as decimal strings (integers in [0, 2**31), "
                       f"e.g. \"15\"), got {key!r:.100}", "logit_bias")
        if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not -100 <= bias <= 100:
            raise _bad(f"'logit_bias' values must be numbers between -100 and 100, got {bias!r:.100} for token "
                       f"{key!r:.100}", "logit_bias")
        tid = str(int(key))
        if tid in out:
            raise _bad(f"'logit_bias' names token {tid} twice (as {key!r} and another spelling)", "logit_bias")
        out[tid] = float(bias)
    return out or None


def parse_chat_request(raw: bytes, memo: BodyMemo | None = None) -> ChatRequest:
    """Check a request body (JSON bytes) and return a :class:`ChatRequest`. ``memo``: the
    session's previous body (:mod:`chatdata.gateway.body_prefix`); the messages this body
    repeats byte for byte are not parsed or checked again.

    Example:
        >>> parse_chat_request(b'{"messages": []}')
        Traceback (most recent call last):
        ...
        chatdata.gateway.errors.GatewayError: 'messages' must be a non-empty list of message objects
    """
    try:
        body, known, memo = parse_body(raw, memo)
    except (ValueError, UnicodeDecodeError) as err:
        raise _bad(f"the request body is not valid JSON: {err}", None) from None
    except RecursionError:
        raise _bad(f"the request body is nested too deeply (at most {MAX_DEPTH} levels)", None) from None
    if not isinstance(body, dict):
        raise _bad(f"the request body must be a JSON object, got {type(body).__name__}", None)
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise _bad("'messages' must be a non-empty list of message objects", "messages")
    for i in range(known, len(msgs)):
        m = msgs[i]
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad(f"messages[{i}] must be an object with a string 'role', got {m!r:.200}", f"messages[{i}]")
        check_plain(m, f"messages[{i}]")  # the messages taken from the memo were checked with their body
    for key, value in body.items():
        if key != "messages":
            _check_again(value, key)
    tools, tool_choice = _tools(body), _tool_choice(body)  # their forms, before what is refused of them
    _unsupported(body)
    n = _integer(body, "n", 1)
    if n not in (None, 1):
        raise _bad(f"'n' must be 1 (one choice per request), got {n}", "n")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise _bad(f"'model' must be a string, got {model!r}", "model")
    user = body.get("user")  # ignored, as vLLM does; but OpenAI and vLLM refuse one that is not a string
    if user is not None and not isinstance(user, str):
        raise _bad(f"'user' must be a string (the end user's id), got {type(user).__name__} {user!r:.100}", "user")
    max_tokens = _integer(body, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", 1)
    opts = body.get("stream_options")
    if opts is not None and not (isinstance(opts, dict) and isinstance(opts.get("include_usage", False), bool)):
        raise _bad(f"'stream_options' must be an object like {{\"include_usage\": true}}, got {opts!r}", "stream_options")
    stream = _flag(body, "stream")
    if opts and not stream:  # OpenAI's and vLLM's 400 (it was ignored: a client asking for usage chunks got none)
        raise _bad("'stream_options' is only allowed when 'stream' is true: send stream: true, or leave "
                   "stream_options out", "stream_options")
    kwargs = body.get("chat_template_kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise _bad(f"'chat_template_kwargs' must be an object, got {kwargs!r}", "chat_template_kwargs")
    taken = reserved_names(kwargs)
    if taken:
        raise _bad(f"'chat_template_kwargs' may not set {taken} (only template variables; the gateway sets these "
                   "itself)", "chat_template_kwargs")
    for where, docs in (("chat_template_kwargs.documents", (kwargs or {}).get("documents")),
                        ("documents", body.get("documents"))):
        if docs is not None and not (isinstance(docs, list) and all(isinstance(d, dict) for d in docs)):
            raise _bad(f"'{where}' must be a list of objects, got {docs!r:.200}", where.split(".")[0])
    seed = _integer(body, "seed")
    return ChatRequest(
        raw_messages=msgs, model=model, tools=tools, tool_choice=tool_choice,
        temperature=_number(body, "temperature", 0.0, 2.0), top_p=_number(body, "top_p", 0.0, 1.0),
        max_tokens=max_tokens, stop=_stop(body), seed=seed,
        presence_penalty=_number(body, "presence_penalty", -2.0, 2.0),
        frequency_penalty=_number(body, "frequency_penalty", -2.0, 2.0),
        top_k=_integer(body, "top_k", -1), min_p=_number(body, "min_p", 0.0, 1.0),
        repetition_penalty=_positive(body, "repetition_penalty"), min_tokens=_integer(body, "min_tokens", 0),
        ignore_eos=_flag(body, "ignore_eos"), stop_token_ids=_token_ids(body, "stop_token_ids"),
        logit_bias=logit_bias(body),
        stream=stream, include_usage=bool(opts and opts.get("include_usage")),
        logprobs=_flag(body, "logprobs"), template_kwargs=template_vars(body, kwargs), known=known, memo=memo,
    )


# -- messages -------------------------------------------------------------------------------
def _text(content: Any, where: str) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for j, p in enumerate(content):
            if isinstance(p, str):
                parts.append(p)
            elif isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str):
                parts.append(p["text"])
            elif isinstance(p, dict) and p.get("type") == "text":  # was "only text parts are supported, got 'text'"
                raise _bad(f"{where}.content[{j}]: a text part needs a string 'text', got {p.get('text')!r:.100}",
                           f"{where}.content")
            else:
                kind = p.get("type") if isinstance(p, dict) else type(p).__name__
                raise _bad(f"{where}.content[{j}]: only text parts are supported, got {kind!r}", f"{where}.content")
        return "".join(parts)
    raise _bad(f"{where}.content must be a string, a list of text parts or null, got {type(content).__name__}",
               f"{where}.content")


def _arguments(args: Any, where: str) -> Any:
    if isinstance(args, str):
        try:
            value = json.loads(args, parse_constant=not_json_constant, parse_float=finite_float)
        except ValueError:
            return args  # not JSON (NaN too, which no save could hold as a number): the template writes the string
        except RecursionError:
            raise _bad(f"{where}.arguments is nested more than {MAX_DEPTH} levels deep", where) from None
        if not isinstance(value, dict):
            return args
        check_plain(value, f"{where}.arguments")  # the string was plain; what its escapes decode to may not be
        return value
    if isinstance(args, dict):
        return args
    raise _bad(f"{where}.arguments must be a JSON string or an object, got {type(args).__name__}", where)


def _calls(calls: Any, where: str) -> list[dict]:
    if not isinstance(calls, list):
        raise _bad(f"{where}.tool_calls must be a list, got {type(calls).__name__}", f"{where}.tool_calls")
    out = []
    for j, c in enumerate(calls):
        w = f"{where}.tool_calls[{j}]"
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise _bad(f"{w} must be {{\"type\": \"function\", \"function\": {{\"name\": str, \"arguments\": ...}}}}, "
                       f"got {c!r:.200}", w)
        call = {"type": "function", "function": {"name": fn["name"], "arguments": _arguments(fn.get("arguments", {}), w)}}
        if c.get("id") is not None:
            if not isinstance(c["id"], str):
                raise _bad(f"{w}.id must be a string, got {c['id']!r}", w)
            call["id"] = c["id"]
        out.append(call)
    return out


def normalize_message(m: dict, i: int) -> dict:
    """One message made ready for the template (see the module docstring); raises a 400
    :class:`GatewayError` naming ``messages[i]`` when it is malformed.

    Example:
        >>> normalize_message({"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
        ...     "function": {"name": "f", "arguments": '{"x": 1}'}}]}, 1)["tool_calls"]
        [{'type': 'function', 'function': {'name': 'f', 'arguments': {'x': 1}}, 'id': 'c1'}]
    """
    where = f"messages[{i}]"
    role = m.get("role")
    if role == "developer":
        role = "system"
    if role not in _ROLES:
        raise _bad(f"{where}.role must be one of system, developer, user, assistant, tool; got {role!r}", f"{where}.role")
    content = _text(m.get("content"), where)
    out: dict = {"role": role, "content": content if content is not None else ""}
    if role == "assistant":
        if m.get("function_call") is not None:  # dropped, the call was lost from the stored chat
            raise _bad(f"{where}.function_call (the deprecated form of tool_calls) is not supported: send tool_calls",
                       f"{where}.function_call")
        if m.get("tool_calls") is not None:
            calls = _calls(m["tool_calls"], where)
            if calls:
                out["tool_calls"] = calls
        reasoning = m.get("reasoning_content", m.get("reasoning"))
        if reasoning is not None:
            if not isinstance(reasoning, str):
                raise _bad(f"{where}.reasoning_content must be a string", f"{where}.reasoning_content")
            out["reasoning_content"] = reasoning
    elif content is None:
        raise _bad(f"{where}: a {role} message needs 'content'", f"{where}.content")
    for key in ("name", "tool_call_id"):
        v = m.get(key)
        if v is not None:
            if not isinstance(v, str):
                raise _bad(f"{where}.{key} must be a string, got {v!r}", f"{where}.{key}")
            out[key] = v
    return out


def message_key(m: dict) -> tuple:
    """What makes two normalised messages the same turn for a session: role, text, name,
    tool-call id and the calls (name and arguments). Call ids a client was given and reasoning a
    client may drop do not count.

    Example:
        >>> message_key({"role": "assistant", "content": "", "tool_calls": [{"type": "function",
        ...     "function": {"name": "f", "arguments": {"b": 1, "a": 2}}, "id": "x"}]})
        ('assistant', '', None, None, (('f', '{"a": 2, "b": 1}'),))
    """
    calls = m.get("tool_calls") or ()
    if calls:
        calls = tuple((c["function"]["name"], c["function"]["arguments"] if isinstance(c["function"]["arguments"], str)
                       else json.dumps(c["function"]["arguments"], sort_keys=True, ensure_ascii=False)) for c in calls)
    return (m["role"], m.get("content") or "", m.get("name"), m.get("tool_call_id"), calls)
