"""Page sections from the things people look at: a chat (rendered and tokenized as training does),
a row of a token set, and the report of ``chatdata templates check``.

Example:
    >>> from chatdata.data import load_sample_tokenizer
    >>> tok = load_sample_tokenizer()
    >>> chat = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]
    >>> sec = chat_section(chat, tok, train_on=["assistant", "user"])
    >>> sec.lines[1:]
    ['assistant: 2 tokens, weight 1', 'user: 5 tokens, weight 1']
"""
from __future__ import annotations

from collections import defaultdict
from typing import Any, Sequence

from .chips import TokenChip, row_tensor, chips_from_ids, chips_from_rendering
from .html import ViewSection

__all__ = ["chat_section", "token_row_section", "report_sections", "summary_lines"]


def summary_lines(chips: Sequence[TokenChip]) -> list[str]:
    """A line of totals, then per role: trained tokens and their weights.

    Example:
        >>> summary_lines([TokenChip("a", 1, 0.5, "tool", 2), TokenChip("b", 2, 0.0, None, None)])
        ['2 tokens, 1 trained', 'tool: 1 token, weight 0.5']
    """
    per_role: dict = defaultdict(list)
    for c in chips:
        if c.weight > 0:
            per_role[c.role or "trained"].append(c.weight)
    trained = sum(len(v) for v in per_role.values())
    lines = [f"{len(chips):,} token{'s' * (len(chips) != 1)}, {trained:,} trained"]
    for role in sorted(per_role):
        ws = sorted(set(per_role[role]))
        shown = f"{ws[0]:g}" if len(ws) == 1 else f"{ws[0]:g} to {ws[-1]:g}"
        n = len(per_role[role])
        lines.append(f"{role}: {n:,} token{'s' * (n != 1)}, weight {shown}")
    return lines


def chat_section(chat: Sequence[dict], tokenizer: Any, *, template: str | None = None, title: str = "conversation",
                 tools: Any = None, train_on: Any = "assistant", last_turn_only: bool = False, loss_weights: Any = None,
                 mask_reasoning: bool = True, mask_eot: bool = True, **template_kwargs: Any) -> ViewSection:
    """One chat rendered with ``template`` (default: the tokenizer's), its trained spans chosen
    as ``History.apply_chat_template`` chooses them, as chips."""
    from ..templates import render_chats_with_weights, resolve_chat_template

    template = template if template is not None else resolve_chat_template(tokenizer, None, None, tools)
    texts, spans = render_chats_with_weights([chat], template, owners=True, tools=tools, tokenizer=tokenizer,
                                             train_on=train_on, last_turn_only=last_turn_only, loss_weights=loss_weights,
                                             mask_reasoning=mask_reasoning, mask_eot=mask_eot, **template_kwargs)
    chips = chips_from_rendering(texts[0], spans[0], tokenizer)
    lines = summary_lines(chips)
    lines[0] = f"{len(chat)} message{'s' * (len(chat) != 1)}, " + lines[0]
    return ViewSection(title, lines, chips)


def token_row_section(ids, mask, weights, tokenizer: Any, title: str = "sequence") -> ViewSection:
    """One row of a token set: ``ids``, its assistant ``mask`` and its ``loss_weights`` (or None:
    the mask as weights 0/1), decoded with ``tokenizer``."""
    import torch

    n = len(row_tensor(ids, "ids"))
    m = row_tensor(mask, "mask", n)  # each checked for its own length: a short one would broadcast
    w = m.to(torch.float32) if weights is None else row_tensor(weights, "loss_weights", n).to(torch.float32) * m.to(torch.bool)
    chips = chips_from_ids(ids, w, tokenizer)
    return ViewSection(title, summary_lines(chips), chips)


def report_sections(sections: Sequence[Any], tokenizer: Any) -> list[ViewSection]:
    """The sections of a template report (``chatdata.templates.report.check_template``) as page
    sections: facts as lines, probe chats as chips."""
    out = []
    for sec in sections:
        chips: Sequence[TokenChip] = ()
        if getattr(sec, "text", None) is not None:
            spans = getattr(sec, "weighted", None) or [(s, e, 1.0, None, "assistant") for s, e in sec.spans]
            chips = chips_from_rendering(sec.text, spans, tokenizer)
        out.append(ViewSection(sec.title, list(sec.lines), chips))
    return out
