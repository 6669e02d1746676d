"""Which chat-completion fields the gateway cannot honour, and so refuses.

The gateway sends token ids to a backend and samples one answer with the sampling fields it
passes on (:mod:`chatdata.gateway.requests`); it renders every request with the one template it
was started with and does not constrain decoding. A field that asks for something else was
answered as if it had been honoured; :func:`refuse_unhonoured` names it in a 400 instead. Each
field is refused only when set to something other than what the gateway does anyway
(``parallel_tool_calls: true``, ``modalities: ["text"]``, ``echo: false`` are served).

Two requests about tool calls are served although decoding is free, because agent harnesses send
them on every turn and a 400 would make the gateway useless to them (smolagents' tool-calling
agent asks ``tool_choice: "required"``; others ``parallel_tool_calls: false``):
``tool_choice: "required"`` or a named function, and ``parallel_tool_calls: false``. The policy
then may answer in text or with several calls, and the harness sees exactly what was sampled
(what is trained). vLLM would constrain the first and cut the answer to one call.

``logit_bias`` is not refused: both engines take OpenAI's shape (token ids as strings, biases in
[-100, 100]), so it is checked (:func:`~chatdata.gateway.requests.logit_bias`) and passed on.

Fields of OpenAI's platform that change nothing in the answer (``user``, ``metadata``,
``store``, ``service_tier``, ``prompt_cache_key``, ``safety_identifier``, ``prediction``,
``verbosity``, ...) and unknown fields are ignored, as vLLM ignores them (a ``user`` that is not
a string is a 400, as OpenAI's and vLLM's).

Example:
    >>> refuse_unhonoured({"tool_choice": "auto", "tools": [{"type": "function", "function": {"name": "f"}}]})
    >>> refuse_unhonoured({"use_beam_search": True}).message[:40]
    "'use_beam_search' is not supported: the "
"""
from __future__ import annotations

from typing import Any

from .errors import GatewayError

__all__ = ["refuse_unhonoured", "template_vars", "REASONING_EFFORTS"]

_UNCONSTRAINED = "the gateway does not constrain decoding (the backend gets token ids and samples freely)"

# name: (is the value one the gateway serves as asked?, why any other value is refused)
_REFUSED: dict[str, tuple] = {
    "chat_template": (lambda v: v is None, "every request is rendered with the template the gateway was started with "
                      "(chatdata serve --chat-template): a session's kept ids depend on it"),
    "audio": (lambda v: v is None, "the gateway answers with text only"),
    "modalities": (lambda v: v is None or (isinstance(v, list) and all(m == "text" for m in v)),
                   "the gateway answers with text only (modalities: [\"text\"])"),
    "web_search_options": (lambda v: v is None, "the gateway searches nothing (give the model a search tool instead)"),
    "use_beam_search": (lambda v: not v, "the gateway samples one answer (no beam search)"),
    "best_of": (lambda v: v in (None, 1), "the gateway samples one answer per request"),
    "bad_words": (lambda v: not v, _UNCONSTRAINED),
    "allowed_token_ids": (lambda v: v is None, _UNCONSTRAINED),
    "logits_processors": (lambda v: not v, _UNCONSTRAINED),
    "thinking_token_budget": (lambda v: v is None, _UNCONSTRAINED),
    "repetition_detection": (lambda v: v is None, "generation is not cut short by the gateway"),
    "include_reasoning": (lambda v: v is None or v is True, "the answer always holds the reasoning the template "
                          "parses (reasoning_content); leave it out or turn thinking off with chat_template_kwargs"),
    "echo": (lambda v: not v, "the answer is the new assistant turn only"),
    "prompt_logprobs": (lambda v: v is None, "the gateway returns the sampled tokens' logprobs only"),
    "logprob_token_ids": (lambda v: v is None, "the gateway returns the sampled tokens' logprobs only"),
    "return_tokens_as_token_ids": (lambda v: not v, "the answer's logprobs name each token by its text and bytes"),
    "truncate_prompt_tokens": (lambda v: v is None, "the gateway sends the whole conversation (a cut prompt would "
                               "not be the session's ids)"),
    "add_special_tokens": (lambda v: not v, "the prompt is the template's text and nothing else (the ids a "
                           "session keeps)"),
}

# vLLM's constrained decoding (extra_body) and SGLang's: like a JSON response_format, it cannot be honoured
_REFUSED.update({name: (lambda v: v is None, _UNCONSTRAINED) for name in (
    "guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs", "regex", "ebnf")})

# what OpenAI and vLLM accept (vLLM adds "max" for DeepSeek V4)
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


def _bad(message: str, param: str) -> GatewayError:
    return GatewayError(400, message, param=param)


def _tool_choice(body: dict) -> GatewayError | None:
    choice, tools = body.get("tool_choice"), body.get("tools")
    if choice is None or choice == "none" and not tools:
        return None
    if not tools:
        return _bad(f"'tool_choice' {choice!r:.100} needs 'tools' (none were given)", "tool_choice")
    if choice == "none":
        return _bad("'tool_choice': \"none\" with tools is not supported: the model is shown the tools and may still "
                    "call them (its calls are parsed); leave 'tools' out of this request instead", "tool_choice")
    return None  # "auto", "required" or a named function: served, a call is not forced (module docstring)


def refuse_unhonoured(body: dict) -> GatewayError | None:
    """The 400 for the first field of ``body`` the gateway would not honour (see the module
    docstring), or None. ``tool_choice`` ``"none"`` with tools is refused (the model is shown
    the tools and its calls are parsed); ``"required"``, a named function and
    ``parallel_tool_calls: false`` are served without being enforced (see below)."""
    for name in sorted(body.keys() & _REFUSED.keys()):  # one set operation for the usual body without them
        served, why = _REFUSED[name]
        v = body[name]
        if v is not None and not served(v):
            return _bad(f"'{name}' is not supported: {why}", name)
    err = _tool_choice(body)
    if err is not None:
        return err
    ptc = body.get("parallel_tool_calls")
    if ptc is not None and not isinstance(ptc, bool):
        return _bad(f"'parallel_tool_calls' must be true or false, got {ptc!r:.100}", "parallel_tool_calls")
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in REASONING_EFFORTS:
        return _bad(f"'reasoning_effort' must be one of {', '.join(REASONING_EFFORTS)}, got {effort!r:.100}",
                    "reasoning_effort")
    return None


def template_vars(body: dict, kwargs: dict | None) -> dict:
    """The template variables of a request, as vLLM passes them: ``chat_template_kwargs``, the
    top-level ``documents`` (a RAG template's), ``reasoning_effort`` and, unless the request
    sets it, ``enable_thinking`` (false for ``reasoning_effort: "none"``). Both were dropped: a
    harness turning thinking off got a thinking model's answer.

    Example:
        >>> template_vars({"reasoning_effort": "none"}, {"x": 1})
        {'x': 1, 'reasoning_effort': 'none', 'enable_thinking': False}
    """
    out = dict(kwargs or {})
    docs: Any = body.get("documents")
    if docs is not None:
        out["documents"] = docs
    effort = body.get("reasoning_effort")
    if effort is not None:
        out["reasoning_effort"] = effort
        out.setdefault("enable_thinking", effort != "none")
    return out
