"""Render chats with a chat template exactly as ``tokenizer.apply_chat_template(tokenize=False)``.

Inputs are normalised the way transformers does before rendering: message keys whose value is
``None`` are dropped, messages given as dataclasses or pydantic models (the OpenAI SDK's) become the
dicts of their fields, everything the template sees is rebuilt from plain JSON-like types, the
reasoning aliases (``reasoning_content`` / ``thinking`` / ``reasoning``) are filled in, tools
given as Python functions become JSON schemas, and ``continue_final_message`` tags the final
message, renders, and cuts the text right after that message's content.
"""
from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any, Sequence

import jinja2

from .errors import TemplateError
from .jinja_env import compile_template, generation_tracker, json_cached

_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
_REASONING_SET = frozenset(_REASONING_FIELDS)
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
_SCALARS = (str, int, float, bool)


def _plain(value: Any) -> Any:
    """A copy of ``value`` made of plain dict/list/tuple/str/int/float/bool/None only."""
    t = type(value)
    if value is None or t in _SCALARS:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if hasattr(value, "item") and callable(value.item) and getattr(value, "shape", None) == ():
        return _plain(value.item())  # numpy / torch scalars
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump())
    return f"<{type(value).__name__}>"


def unrenderable(value: Any, max_depth: int = 64) -> str | None:
    """Why a parsed JSON value cannot be rendered and stored, or None when it can: nested
    deeper than ``max_depth`` (rendering and serialising recurse per level: a few hundred
    levels overflow Python's stack), or a string holding a lone surrogate (``"\\ud800"`` is
    valid JSON but not text: it cannot be encoded as UTF-8). One call per container, so the
    recursion stops at ``max_depth``; ASCII strings cost nothing. (``chatdata.history``'s
    ``json_value_error`` walks for the same two faults, with a save's 512-level limit and the
    key path in its message.)

    Example:
        >>> import json
        >>> print(unrenderable(json.loads('{"a": ["\\ud800"]}')))
        holds a lone surrogate '\\ud800' (not valid Unicode text)
        >>> unrenderable([[[1]]], max_depth=2)
        'is nested more than 2 levels deep'
        >>> unrenderable({"a": ["ok", 1, None]}) is None
        True
    """
    return _problem(value, 0, max_depth)


def _problem(v: Any, depth: int, max_depth: int) -> str | None:
    """:func:`unrenderable` below ``depth`` levels; recursion stops at ``max_depth``, and plain
    values are looked at where they stand (a call per container, not per value)."""
    t = type(v)
    if t is str:
        return None if v.isascii() else _surrogate(v)
    if t is dict or t is not list and isinstance(v, Mapping):
        if depth >= max_depth:
            return f"is nested more than {max_depth} levels deep"
        for k in v:
            if type(k) is str and not k.isascii() and _surrogate(k):
                return _surrogate(k)
        v = v.values()
    elif t is list or t is tuple:
        if depth >= max_depth:
            return f"is nested more than {max_depth} levels deep"
    else:
        return None
    for x in v:
        t = type(x)
        if t is str:
            if not x.isascii() and _surrogate(x):
                return _surrogate(x)
        elif t is not int and t is not float and t is not bool and x is not None:
            found = _problem(x, depth + 1, max_depth)
            if found:
                return found
    return None


def _surrogate(s: str) -> str | None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"holds a lone surrogate {s[err.start]!r} (not valid Unicode text)"
    return None


def _prepare_message(message: Any) -> dict:
    if type(message) is dict and _REASONING_SET.isdisjoint(message):
        for v in message.values():
            if type(v) is not str:
                break
        else:  # nothing to normalise, and the sandbox is immutable: no copy needed
            return message
    if not isinstance(message, Mapping):
        if not _is_message_object(message):
            raise TemplateError(f"Chat messages should be dicts, dataclasses or pydantic models, got {message!r}")
        message = _plain(message)  # as transformers does: the OpenAI SDK's messages are pydantic models
    out = {}
    for key, val in message.items():
        if val is None:
            continue
        try:
            out[key] = val if type(val) is str else _plain(val)
        except RecursionError:
            raise TemplateError(f"message key {key!r} is nested too deeply to render (Python's recursion limit); "
                                "flatten the value") from None
    for field in _REASONING_FIELDS:
        reasoning = out.get(field)
        if reasoning is not None:
            out = {"thinking": reasoning, **out, "reasoning_content": reasoning}
            break
    return out


def _is_message_object(message: Any) -> bool:
    """A dataclass instance or a pydantic model: a message transformers reads as the dict of its fields."""
    if dataclasses.is_dataclass(message) and not isinstance(message, type):
        return True
    return callable(getattr(message, "model_dump", None))


def prepare_chat(chat: Sequence[Any]) -> list[dict]:
    """Normalise one conversation like transformers does before rendering (a fresh copy).

    Example:
        >>> prepare_chat([{"role": "user", "content": "hi", "name": None}])
        [{'role': 'user', 'content': 'hi'}]
    """
    if hasattr(chat, "messages"):
        chat = chat.messages
    return [_prepare_message(m) for m in chat]


def prepare_tools(tools: Any) -> Any:
    """JSON schemas for ``tools`` (dicts kept, Python functions converted)."""
    if tools is None:
        return None
    schemas = []
    for tool in tools:
        if isinstance(tool, Mapping):
            schemas.append(tool)
        elif inspect.isfunction(tool) or inspect.ismethod(tool):
            from transformers.utils import get_json_schema

            schemas.append(get_json_schema(tool))
        else:
            raise ValueError(
                "Tools should either be a JSON schema, or a callable function with type hints "
                "and a docstring suitable for auto-conversion to a schema."
            )
    return _plain(schemas)


def template_variables(tokenizer: Any = None, **template_kwargs: Any) -> dict:
    """The extra variables a template sees: the tokenizer's special tokens, then ``template_kwargs``."""
    special = dict(getattr(tokenizer, "special_tokens_map", None) or {}) if tokenizer is not None else {}
    special.update(template_kwargs)
    return _plain(special)


def _tag_final_message(chat: list[dict], field: Any, template: str) -> tuple[list[dict], str]:
    if not chat:
        raise TemplateError("continue_final_message is set but the conversation is empty!")
    field = field if isinstance(field, str) else "content"
    final = chat[-1].get(field)
    if final is None:
        raise TemplateError(f'continue_final_message is set but the final message has no "{field}" to continue!')
    fields = [field]
    if field in _REASONING_FIELDS:
        fields = [f for f in _REASONING_FIELDS if chat[-1].get(f) == final]
    if not any(f in template for f in fields):
        raise TemplateError(
            f'continue_final_message is set to "{field}" but this is not an accepted field in the chat_template'
        )
    last = dict(chat[-1])
    if isinstance(final, (list, tuple)):
        blocks = [dict(b) if isinstance(b, Mapping) else b for b in final]
        for block in reversed(blocks):
            if isinstance(block, dict) and "text" in block:
                final = block["text"]
                block["text"] = block["text"] + _CONTINUE_TAG
                break
        else:
            raise TemplateError("continue_final_message is set but we could not find any text to continue in the final message!")
        last[field] = blocks
    else:
        for f in fields:
            last[f] = last[f] + _CONTINUE_TAG
    return chat[:-1] + [last], final


def _cut_after_final(text: str, final: str) -> str:
    tag = _CONTINUE_TAG.strip()
    if final.strip() not in text or tag not in text:
        raise TemplateError(
            "continue_final_message is set but the final message does not appear in the chat after "
            "applying the chat template! This can happen if the chat template deletes portions of "
            "the final message. Please verify the chat template and final message in your chat to "
            f"ensure they are compatible.Final message to continue: {final.strip()}\nRendered chat:\n{text}"
        )
    loc = text.rindex(tag)
    if text[loc: loc + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
        return text[:loc]
    return text[:loc].rstrip()


def _run(compiled: jinja2.Template, variables: dict, track: bool) -> tuple[str, list]:
    try:
        if not track:
            return compiled.render(variables), []
        with generation_tracker() as tracker:
            for block in compiled.generate(variables):
                tracker.blocks.append(block)
            return "".join(tracker.blocks), tracker.spans
    except TemplateError:
        raise
    except RecursionError:
        raise TemplateError("chat template failed to render: a value is nested too deeply (Python's recursion "
                            "limit); flatten the value") from None
    except (jinja2.TemplateError, TypeError, AttributeError, KeyError, IndexError, ValueError) as err:
        raise TemplateError(f"chat template failed to render: {type(err).__name__}: {err}") from err


class Renderer:
    """A compiled template bound to its variables (special tokens, tools, documents, kwargs);
    renders already-normalised chats one at a time.

    Example:
        >>> r = Renderer("{{ messages[0].content }}{{ eos_token }}", eos_token="</s>")
        >>> r.render([{"role": "user", "content": "hi"}])
        'hi</s>'
    """

    def __init__(self, template: str, *, tools: Any = None, documents: Any = None, tokenizer: Any = None,
                 add_generation_prompt: bool = False, **template_kwargs: Any) -> None:
        if not isinstance(template, str):
            raise TypeError(f"chat template must be a str, got {type(template).__name__}")
        if documents is not None:
            for doc in documents:
                if not isinstance(doc, Mapping):
                    raise TypeError("Documents should be a list of dicts with 'title' and 'text' keys!")
        self.template = template
        self.compiled = compile_template(template)
        try:
            self.variables = template_variables(tokenizer, **template_kwargs)
            self.variables["tools"] = json_cached(prepare_tools(tools))  # the same in every render: JSON text made once
            self.variables["documents"] = _plain(documents)
        except RecursionError:
            raise TemplateError("tools, documents or a template variable is nested too deeply to render (Python's "
                                "recursion limit); flatten the value") from None
        self.add_generation_prompt = add_generation_prompt

    def render(self, chat: list, *, add_generation_prompt: bool | None = None, track: bool = False,
               continue_final_message: bool | str = False):
        """Render one normalised chat; with ``track`` returns ``(text, generation_spans)``."""
        variables = dict(self.variables)
        variables["add_generation_prompt"] = (
            self.add_generation_prompt if add_generation_prompt is None else add_generation_prompt)
        final = None
        if continue_final_message:
            chat, final = _tag_final_message(chat, continue_final_message, self.template)
        variables["messages"] = chat
        try:
            text, gen = _run(self.compiled, variables, track)
        except TemplateError as err:
            if chat:
                raise
            # a template reading messages[0] fails on an empty conversation with an error that
            # names neither: say what the template was given
            raise TemplateError(f"{err} (the conversation has no messages; this template needs at least one)") from err
        if continue_final_message:
            text = _cut_after_final(text, final)
        return (text, gen) if track else text


def render_in_batch(renderer: Renderer, chat: list, i: int, n: int, **kwargs: Any):
    """``renderer.render(chat, **kwargs)`` for chat ``i`` of a batch of ``n``: a TemplateError
    names the chat when the batch holds several (a template that fails on one of 10k chats).

    Example:
        >>> r = Renderer("{{ messages[0].content }}")
        >>> try:
        ...     render_in_batch(r, [], 1, 2)
        ... except TemplateError as err:
        ...     print(err)
        chat 1: chat template failed to render: UndefinedError: list object has no element 0 (the conversation has no messages; this template needs at least one)
    """
    try:
        return renderer.render(chat, **kwargs)
    except TemplateError as err:
        if n < 2:
            raise
        raise TemplateError(f"chat {i}: {err}") from err


def _check_chats(chats: Any) -> None:
    if isinstance(chats, (str, Mapping)) or (len(chats) and (isinstance(chats[0], Mapping)
                                                              or _is_message_object(chats[0]))):
        raise TypeError("expected a list of conversations (a list of lists of message dicts)")


def render_chats_detailed(
    chats: Sequence[Sequence[Any]],
    template: str,
    *,
    add_generation_prompt: bool = False,
    continue_final_message: bool | str = False,
    tools: Any = None,
    documents: Any = None,
    tokenizer: Any = None,
    track_generation: bool = False,
    **template_kwargs: Any,
) -> tuple[list[str], list[list[tuple[int, int]]]]:
    """Like :func:`render_chats`, also returning the ``{% generation %}`` spans of each text
    (empty lists unless ``track_generation``).

    Example:
        >>> t = "{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}|{% endfor %}"
        >>> render_chats_detailed([[{"role": "assistant", "content": "ab"}]], t, track_generation=True)
        (['ab|'], [[(0, 2)]])
    """
    if not isinstance(template, str):
        raise TypeError(f"chat template must be a str, got {type(template).__name__}")
    _check_chats(chats)
    if continue_final_message and add_generation_prompt:
        raise TemplateError(
            "continue_final_message and add_generation_prompt are not compatible. Use continue_final_message "
            "when you want the model to continue the final message, and add_generation_prompt when you want "
            "to add a header that will prompt it to start a new assistant message instead."
        )
    renderer = Renderer(template, tools=tools, documents=documents, tokenizer=tokenizer,
                        add_generation_prompt=add_generation_prompt, **template_kwargs)
    texts: list[str] = []
    spans: list[list[tuple[int, int]]] = []
    for i, chat in enumerate(chats):
        out = render_in_batch(renderer, prepare_chat(chat), i, len(chats), track=track_generation,
                              continue_final_message=continue_final_message)
        if track_generation:
            texts.append(out[0])
            spans.append(out[1])
        else:
            texts.append(out)
            spans.append([])
    return texts, spans


def render_chats(
    chats: Sequence[Sequence[Any]],
    template: str,
    *,
    add_generation_prompt: bool = False,
    continue_final_message: bool | str = False,
    tools: Any = None,
    documents: Any = None,
    tokenizer: Any = None,
    **template_kwargs: Any,
) -> list[str]:
    """Render each conversation with ``template``, byte-identical to
    ``tokenizer.apply_chat_template(chat, tokenize=False, ...)``.

    ``tokenizer`` (optional) supplies ``bos_token``, ``eos_token``, ... from its
    ``special_tokens_map``; extra ``template_kwargs`` override them and are passed to the
    template (e.g. ``enable_thinking=False``, ``date_string=...``). Errors raised by the
    template or by ``continue_final_message`` checks are :class:`TemplateError`.

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> render_chats([[{"role": "user", "content": "hi"}]], get_chat_template("chatml_format"),
        ...              add_generation_prompt=True)
        ['<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n']
    """
    texts, _ = render_chats_detailed(
        chats, template, add_generation_prompt=add_generation_prompt,
        continue_final_message=continue_final_message, tools=tools, documents=documents,
        tokenizer=tokenizer, **template_kwargs,
    )
    return texts
