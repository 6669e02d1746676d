"""Trained spans with a weight, a message and a role: roles beyond the assistant, the last turn
only, float loss weights.

A layer on top of the mask engine: :func:`render_chats_with_spans` finds the assistant spans as
always; a :class:`~chatdata.templates.selection.TrainSelection` gives every message a weight;
then

- each assistant span gets the weight of the assistant message it belongs to (the turn, placed
  as the engine places turns, that it overlaps most, else the last one starting before it; only
  needed when assistant turns differ in weight), and spans of weight 0 are dropped;
- the other messages with a weight > 0 are placed by :mod:`.message_spans`: their content as the
  template renders it, plus the end of their turn unless ``mask_eot=False``.

With the default selection (every assistant turn, weight 1.0) this is exactly
:func:`render_chats_with_spans`, at its cost.

Example:
    >>> from chatdata.templates import get_chat_template
    >>> chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
    ...         {"role": "user", "content": "r"}, {"role": "assistant", "content": "b"}]
    >>> texts, spans = render_chats_with_weights([chat], get_chat_template("chatml_format"),
    ...                                          loss_weights={"user": 0.5}, last_turn_only=False)
    >>> [(texts[0][s.start:s.end], s.weight, s.role) for s in spans[0]]  # doctest: +NORMALIZE_WHITESPACE
    [('q<|im_end|>', 0.5, 'user'), ('a<|im_end|>', 1.0, 'assistant'),
     ('r<|im_end|>', 0.5, 'user'), ('b<|im_end|>', 1.0, 'assistant')]
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple, Sequence

from .errors import UnplaceableTurnError
from .fast_turns import fast_path_ok
from .marked_turns import place_turns
from .message_spans import message_spans
from .profile import template_profile
from .render import Renderer, prepare_chat
from .selection import TrainSelection
from .spans import render_chats_with_spans, template_label

__all__ = ["WeightedSpan", "render_chats_with_weights", "span_owners"]


class WeightedSpan(NamedTuple):
    """A trained character span: ``[start, end)`` of the rendered text, its loss ``weight``,
    the index of its ``message`` (None when not asked for) and that message's ``role``."""

    start: int
    end: int
    weight: float
    message: int | None
    role: str


def span_owners(bounds: Sequence[tuple], spans: Sequence[tuple[int, int]], where: Callable[[int, str], str]) -> list[int]:
    """The assistant message each span belongs to, from the turn ``bounds``
    (``(message, start, end, eot)`` as the engine places them): the turn it overlaps most, else
    the last turn that starts before it (text a template writes after the turn, like Gemma-4's).

    Example:
        >>> span_owners([(1, 10, 20, 18), (3, 30, 40, 38)], [(10, 20), (22, 25), (30, 40)], str)
        [1, 1, 3]
    """
    out = []
    for a, b in spans:
        best, overlap = None, 0
        for k, s, e, _eot in bounds:
            ov = min(b, e) - max(a, s)
            if ov > overlap:
                best, overlap = k, ov
        if best is None:
            before = [k for k, s, _e, _eot in bounds if s <= a]
            if not before:
                raise UnplaceableTurnError(where(-1, f"the trained span at characters {a}-{b} belongs to no assistant turn"))
            best = before[-1]
        out.append(best)
    return out


def render_chats_with_weights(
    chats: Sequence[Sequence[Any]],
    template: str,
    *,
    train_on: str | Sequence[str] = "assistant",
    last_turn_only: bool = False,
    loss_weights: bool | Mapping[str, float] | Callable | None = None,
    selection: TrainSelection | None = None,
    owners: bool = False,
    add_generation_prompt: bool = False,
    continue_final_message: bool | str = False,
    tools: Any = None,
    documents: Any = None,
    tokenizer: Any = None,
    mask_reasoning: bool = True,
    mask_eot: bool = True,
    **template_kwargs: Any,
) -> tuple[list[str], list[list[WeightedSpan]]]:
    """Render chats (identical to :func:`~chatdata.templates.render_chats`) and return, per chat,
    its trained spans as :class:`WeightedSpan`, in text order (weight > 0 only).

    ``train_on``, ``last_turn_only`` and ``loss_weights`` are those of
    :class:`~chatdata.templates.selection.TrainSelection` (or pass a ready ``selection``); the other
    arguments those of :func:`~chatdata.templates.render_chats_with_spans`. ``owners=True`` names the
    message of every span where the turns can be placed (for views; assistant spans name it anyway
    when turns differ in weight, and then a turn that cannot be placed raises). A turn to train that
    cannot be placed raises :class:`~chatdata.templates.UnplaceableTurnError`.
    """
    sel = selection if selection is not None else TrainSelection(train_on, last_turn_only, loss_weights)
    common = dict(add_generation_prompt=add_generation_prompt, continue_final_message=continue_final_message,
                  tools=tools, documents=documents, tokenizer=tokenizer, **template_kwargs)
    texts, spans = render_chats_with_spans(chats, template, mask_reasoning=mask_reasoning, mask_eot=mask_eot, **common)
    if sel.is_default and not owners:
        return texts, [[WeightedSpan(s, e, 1.0, None, "assistant") for s, e in sp] for sp in spans]
    renderer = Renderer(template, tools=tools, documents=documents, tokenizer=tokenizer,
                        add_generation_prompt=add_generation_prompt, **template_kwargs)
    profile = template_profile(renderer)
    fast = None
    out = []
    present: set = set()  # the chats' roles: a role train_on / loss_weights names must be one (or far from all)
    for i, (chat, text, sp) in enumerate(zip(chats, texts, spans)):
        chat = prepare_chat(chat)
        present.update(m.get("role") for m in chat)
        weights = sel.message_weights(chat)

        def where(k, reason, i=i, chat=chat):
            who = f"message {k} ({chat[k].get('role')})" if k >= 0 else "a trained span"
            return (f"template {template_label(template)}, chat {i}, {who}: cannot place the turn to train: {reason}. "
                    "Check that this template renders this message, or leave its role out of train_on / give it "
                    "weight 0")

        assistant = {weights[k] for k, m in enumerate(chat) if m.get("role") == "assistant"}
        items: list[WeightedSpan] = []
        needed = len(assistant) > 1  # assistant turns differ in weight: each span must know its turn
        owned = None
        if sp and (owners or needed):
            if fast is None:
                fast = fast_path_ok(renderer, profile)
            try:
                bounds, _ = place_turns(renderer, chat, text, profile, continued=bool(continue_final_message),
                                        where=where, fast=fast)
                owned = span_owners(bounds, sp, where)
            except UnplaceableTurnError:
                if needed:
                    raise
        if owned is not None:
            items = [WeightedSpan(s, e, weights[k], k, "assistant") for (s, e), k in zip(sp, owned) if weights[k] > 0]
        elif sp:
            w = assistant.pop() if assistant else 0.0
            if w > 0:
                items = [WeightedSpan(s, e, w, None, "assistant") for s, e in sp]
        others = [k for k, m in enumerate(chat) if m.get("role") != "assistant" and weights[k] > 0]
        if others:
            placed = message_spans(renderer, chat, text, others, profile=profile, mask_eot=mask_eot,
                                   continue_final_message=continue_final_message, where=where)
            items += [WeightedSpan(s, e, weights[k], k, str(chat[k].get("role"))) for k in others for s, e in placed[k]]
        items.sort()
        out.append(items)
    sel.check_named_roles(present)
    return texts, out
