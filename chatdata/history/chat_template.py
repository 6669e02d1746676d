"""History <-> the chat-template engine: ``apply_chat_template`` and ``from_text``.

Rendering, assistant spans, tokenisation and parsing live in :mod:`chatdata.templates`; this
module turns a History into the message dicts the engine takes and shapes the results like
the History (a string for one conversation, a list for a batch; token tensors ragged or padded).
"""
from __future__ import annotations

import os
from typing import Any

import torch

from ..td import RaggedTensorDict, TensorDict

__all__ = ["apply_chat_template", "parse_text", "template_name_for", "check_tokenizer", "check_options"]

_KEYS = ("input_ids", "attention_mask", "assistant_masks", "loss_weights")


def _chats_of(history) -> tuple[list, bool]:
    """(list of conversations, whether the History was a single conversation)."""
    chats = history.to_chats()
    if history.ndim == 0:
        if type(chats.get("role")) is list:
            raise ValueError("this History has no batch dims but holds lists (torchrl's unbatched form): build it with "
                             "batch_size=(n_messages,) or with History.from_chats to render it")
        return [[chats]], True
    if history.ndim == 1:
        chats, single = [chats], True
    elif history.ndim == 2:
        single = False
    else:
        raise ValueError(f"apply_chat_template takes a conversation or a batch of them, got batch size {tuple(history.batch_size)}")
    # "<none>" messages are placeholders (padding of stacked histories): never rendered
    if any(m.get("role") == "<none>" for c in chats for m in c):
        chats = [[m for m in c if m.get("role") != "<none>"] for c in chats]
    return chats, single


def check_tokenizer(tokenizer: Any) -> None:
    """A name or path is not a tokenizer: refused (it would silently render ``chatml_format``).

    Example:
        >>> check_tokenizer(None)
        >>> check_tokenizer("Qwen/Qwen2.5-0.5B")
        Traceback (most recent call last):
        ...
        TypeError: tokenizer must be a tokenizer object, e.g. transformers.AutoTokenizer.from_pretrained('Qwen/Qwen2.5-0.5B'), not a str
    """
    if isinstance(tokenizer, (str, bytes, os.PathLike)):
        raise TypeError(f"tokenizer must be a tokenizer object, e.g. transformers.AutoTokenizer.from_pretrained("
                        f"{os.fsdecode(tokenizer)!r}), not a {type(tokenizer).__name__}")
    if tokenizer is not None and not hasattr(tokenizer, "chat_template") and not callable(getattr(tokenizer, "encode", None)):
        raise TypeError(f"tokenizer must be a tokenizer object (with a chat_template or an encode method, e.g. "
                        f"transformers.AutoTokenizer.from_pretrained(...)), got {type(tokenizer).__name__}")


def check_options(tokenize, return_dict, add_generation_prompt, continue_final_message,
                  return_assistant_tokens_mask, truncation) -> None:
    """Refuse option values that would be read as something else (``tokenize="no"`` is truthy,
    ``truncation="do_not_truncate"`` too; transformers' strategy names for one sequence are
    taken), before anything is rendered. Whether to truncate also depends on ``max_length`` and
    ``padding`` (``truncation=None``): ``tokenize_chats`` decides.

    Example:
        >>> check_options(None, None, True, False, False, "do_not_truncate")
        >>> check_options("no", None, True, False, False, False)
        Traceback (most recent call last):
        ...
        TypeError: tokenize must be True, False or None, got 'no'
    """
    for name, value, none_ok in (("tokenize", tokenize, True), ("return_dict", return_dict, True),
                                 ("add_generation_prompt", add_generation_prompt, False),
                                 ("continue_final_message", continue_final_message, False),
                                 ("return_assistant_tokens_mask", return_assistant_tokens_mask, False)):
        if type(value) is not bool and not (none_ok and value is None):
            raise TypeError(f"{name} must be {'True, False or None' if none_ok else 'True or False'}, got {value!r:.60}")
    if tokenize is False and return_assistant_tokens_mask:  # as transformers; return_dict is ignored, as there
        raise ValueError("return_assistant_tokens_mask=True needs tokens: pass tokenize=True (or leave tokenize unset)")
    from ..templates.tokenization import truncation_on

    truncation_on(truncation)


def _ragged(seqs: list[torch.Tensor], empty_dtype: torch.dtype = torch.int64) -> tuple[torch.Tensor, torch.Tensor]:
    offsets = torch.zeros(len(seqs) + 1, dtype=torch.int64)
    if seqs:
        torch.cumsum(torch.tensor([len(s) for s in seqs], dtype=torch.int64), 0, out=offsets[1:])
    flat = torch.cat(seqs) if seqs else torch.zeros(0, dtype=empty_dtype)
    return flat, offsets


def apply_chat_template(
    history,
    *,
    tokenizer: Any = None,
    add_generation_prompt: bool = True,
    chat_template: str | None = None,
    chat_template_name: str | None = None,
    continue_final_message: bool = False,
    tokenize: bool | None = None,
    padding: bool | str = False,
    truncation: bool | str = False,
    max_length: int | None = None,
    return_tensors: str | None = None,
    return_dict: bool | None = None,
    return_assistant_tokens_mask: bool = False,
    tools: Any = None,
    documents: Any = None,
    mask_reasoning: bool = True,
    mask_eot: bool = True,
    train_on: Any = "assistant",
    last_turn_only: bool = False,
    loss_weights: Any = None,
    **template_kwargs: Any,
):
    """See :meth:`chatdata.History.apply_chat_template`. With ``return_assistant_tokens_mask``,
    ``mask_reasoning=False`` leaves rendered reasoning untrained and ``mask_eot=False`` the end of
    each turn (content-only masks, as torchrl's History gives). ``train_on``, ``last_turn_only``
    and ``loss_weights`` choose the trained turns and their weights (they imply
    ``return_assistant_tokens_mask``; ``loss_weights`` adds a float ``loss_weights`` column)."""
    from ..templates import (TrainSelection, render_chats, render_chats_with_weights, resolve_chat_template,
                             tokenize_chats)

    check_tokenizer(tokenizer)
    check_options(tokenize, return_dict, add_generation_prompt, continue_final_message,
                  return_assistant_tokens_mask, truncation)  # truncation is resolved with max_length and padding
    selection = TrainSelection(train_on, last_turn_only, loss_weights)
    if not selection.is_default:
        if tokenize is False:
            raise ValueError("train_on / last_turn_only / loss_weights choose the trained tokens: they need "
                             "tokenize=True (they imply return_assistant_tokens_mask=True)")
        return_assistant_tokens_mask = True
    if return_assistant_tokens_mask and return_dict is False:  # as transformers: the masks would be dropped
        raise ValueError("return_assistant_tokens_mask=True (and train_on / last_turn_only / loss_weights) returns "
                         "the masks in a dict: pass return_dict=True (or leave it unset)")
    chats, single = _chats_of(history)
    template = resolve_chat_template(tokenizer, chat_template, chat_template_name, tools)
    if continue_final_message:
        add_generation_prompt = False  # the two are exclusive; continuing wins (torchrl's default is True)
    if tokenize is None:
        tokenize = bool(return_assistant_tokens_mask or return_tensors is not None)
    common = dict(add_generation_prompt=add_generation_prompt, tools=tools, documents=documents,
                  tokenizer=tokenizer, **template_kwargs)
    if not tokenize:
        texts = render_chats(chats, template, continue_final_message=continue_final_message, **common)
        return texts[0] if single else texts
    if tokenizer is None:
        raise ValueError("tokenize=True needs a tokenizer")
    if not callable(getattr(tokenizer, "encode", None)):
        raise TypeError(f"tokenize=True needs a tokenizer that encodes text (e.g. transformers.AutoTokenizer."
                        f"from_pretrained(...)); {type(tokenizer).__name__} has no encode method")
    if return_tensors not in (None, "pt"):
        raise ValueError(f"return_tensors must be None or 'pt' (torch tensors), got {return_tensors!r}")
    span_weights = None
    if return_assistant_tokens_mask:
        texts, weighted = render_chats_with_weights(chats, template, continue_final_message=continue_final_message,
                                                    mask_reasoning=mask_reasoning, mask_eot=mask_eot,
                                                    selection=selection, **common)
        spans = [[(w.start, w.end) for w in ws] for ws in weighted]
        if selection.writes_weights:
            span_weights = [[w.weight for w in ws] for ws in weighted]
    else:
        texts = render_chats(chats, template, continue_final_message=continue_final_message, **common)
        spans = None
    out = tokenize_chats(texts, spans, tokenizer, padding=padding, truncation=truncation,
                         max_length=max_length, return_assistant_tokens_mask=return_assistant_tokens_mask,
                         span_weights=span_weights, template=template)
    if return_dict is None:
        return_dict = bool(return_assistant_tokens_mask)
    keys = [k for k in _KEYS if k in out]
    padded = isinstance(out["input_ids"], torch.Tensor)
    if single:
        row = {k: out[k][0] for k in keys}
        if not return_dict:
            return row["input_ids"].unsqueeze(0)
        return TensorDict._new_unsafe(row, row["input_ids"].shape[:1], None)
    if padded:
        if not return_dict:
            return out["input_ids"]
        return TensorDict._new_unsafe({k: out[k] for k in keys}, out["input_ids"].shape[:2], None)
    flat = {}
    offsets = None
    for k in keys:
        flat[k], offsets = _ragged(out[k], torch.float32 if k == "loss_weights" else torch.int64)
    if not return_dict:
        return torch.nested.nested_tensor_from_jagged(flat["input_ids"], offsets)
    values = TensorDict._new_unsafe(flat, flat["input_ids"].shape[:1], None)
    return RaggedTensorDict(values, offsets)


def template_name_for(chat_template: str | None = None, tokenizer: Any = None) -> str:
    """The registered template name whose source is ``chat_template`` (or the tokenizer's own
    template); ``chatml_format`` when neither is given. Never guessed from a model name."""
    from ..templates import get_chat_template, list_chat_templates
    from ..templates.registry import template_name_for_model

    if chat_template is None:
        by_keyword = template_name_for_model(tokenizer)  # the user's model_family_keywords
        if by_keyword is not None:
            return by_keyword
    source = chat_template
    if source is None and tokenizer is not None:
        source = getattr(tokenizer, "chat_template", None)
        if isinstance(source, dict):
            source = source.get("default")
    if source is None:
        return "chatml_format"
    for name in list_chat_templates():
        if get_chat_template(name) == source:
            return name
    raise ValueError(
        "from_text: the chat template is not a registered one, so no parser is known for it; pass "
        f"chat_template_name= one of {', '.join(list_chat_templates())} (or register it with "
        "chatdata.templates.add_chat_template(name, template, parser=...))"
    )


def parse_text(text, chat_template_name=None, chat_template=None, tokenizer=None):
    """Message dicts parsed from rendered text: a list of dicts for a str, a list of lists for a
    list of str."""
    from ..templates import parse_chat_text

    check_tokenizer(tokenizer)
    # an empty name is refused as apply_chat_template refuses it, not read as "no name" (chatml_format)
    name = chat_template_name if chat_template_name is not None else template_name_for(chat_template, tokenizer)
    if isinstance(text, str):
        return _messages(parse_chat_text(text, name), text, name, "")
    if not isinstance(text, (list, tuple)) or not all(isinstance(t, str) for t in text):
        raise TypeError("from_text takes a str or a list of str")
    return [_messages(parse_chat_text(t, name), t, name, f"text {i}: ") for i, t in enumerate(text)]


def _messages(parsed, text: str, name: str, where: str):
    """A parser's result as message dicts (torchrl-style parsers return a History); text that is
    not blank but holds no message of the format is refused, not read as an empty chat."""
    to_chats = getattr(parsed, "to_chats", None)
    msgs = parsed if to_chats is None else to_chats()
    msgs = [msgs] if isinstance(msgs, dict) else msgs
    if not isinstance(msgs, (list, tuple)) or not all(isinstance(m, dict) for m in msgs):
        bad = msgs if not isinstance(msgs, (list, tuple)) else next(m for m in msgs if not isinstance(m, dict))
        raise TypeError(f"{where}the output parser registered for {name!r} returned {type(bad).__name__} "
                        f"{bad!r:.40}; a parser returns a list of message dicts (or a History)")
    if not msgs and text.strip():
        raise ValueError(f"{where}from_text found no message of the {name!r} format in {text[:60]!r}"
                         f"{'...' if len(text) > 60 else ''}; was it rendered with another template? Pass "
                         "chat_template_name= the one that rendered it")
    return msgs
