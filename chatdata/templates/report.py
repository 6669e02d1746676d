"""A per-template report: what a model trained on this template's renderings will learn.

:func:`check_template` renders a probe chat of each kind (plain, tool-calling, reasoning; see
:mod:`.probes`) and returns a list of :class:`Section`: first the facts the mask engine learned
about the template (end-of-turn texts, stop markers, generation header, placement path), then
one section per kind with the rendered text and its trained spans. ``chatdata templates check``
prints it.

To report more, append a builder to :data:`SECTION_BUILDERS`: a function taking the
:class:`CheckContext` and returning a list of sections.

Example:
    >>> from chatdata.templates import get_chat_template
    >>> sections = check_template(get_chat_template("chatml_format"))
    >>> [s.title for s in sections]
    ['template facts', 'plain chat', 'tool-calling chat', 'reasoning chat', 'reasoning chat (2)']
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from .errors import TemplateError
from .fast_turns import fast_path_ok
from .jinja_env import has_generation_tags
from .probes import KINDS, PROBE_TOOL, probe_chats, tool_name_of
from .profile import TemplateProfile, template_profile
from .render import Renderer
from .selection import TrainSelection
from .spans import template_label
from .weighted_spans import render_chats_with_weights


@dataclasses.dataclass
class Section:
    """One part of a template report: a title, lines of facts, and optionally a rendered text
    with its trained character ``spans``."""

    title: str
    lines: list = dataclasses.field(default_factory=list)
    text: str | None = None
    spans: list = dataclasses.field(default_factory=list)
    weighted: list = dataclasses.field(default_factory=list)  # the spans as WeightedSpan (weight, message, role)


@dataclasses.dataclass
class CheckContext:
    """What section builders get: the template, its variables and the mask options."""

    template: str
    renderer: Renderer
    profile: TemplateProfile | None
    tools: Any
    tokenizer: Any
    mask_reasoning: bool
    mask_eot: bool
    template_kwargs: dict
    selection: TrainSelection | None = None


def _facts(ctx: CheckContext) -> list[Section]:
    lines = [f"template: {template_label(ctx.template)}"]
    if ctx.profile is None:
        lines.append("masks: the template's own {% generation %} blocks")
        return [Section("template facts", lines)]
    p = ctx.profile
    show = (lambda xs: ", ".join(repr(x) for x in xs) or "none")
    lines += [
        f"end of turn: {show(p.eots)}",
        f"stop markers (the next turn's opener, learned where no end of turn is written): {show(p.stops)}",
        f"generation header (never learned): {p.header!r}",
        "placement: " + ("one render per chat (fast path agrees with prefix renderings on the probes)"
                         if fast_path_ok(ctx.renderer, p) else "prefix renderings (two extra renders per turn)"),
    ]
    return [Section("template facts", lines)]


def _probes(ctx: CheckContext) -> list[Section]:
    titles = {"plain": "plain chat", "tools": "tool-calling chat", "reasoning": "reasoning chat"}
    out = []
    chats = probe_chats(tool_name_of(ctx.tools))
    for kind in KINDS:
        for n, chat in enumerate(chats[kind]):
            title = titles[kind] + (f" ({n + 1})" if len(chats[kind]) > 1 and n else "")
            err = None
            for tools in ((ctx.tools,) if kind == "tools" else (None, ctx.tools)):  # tool_use templates need tools
                try:
                    texts, weighted = render_chats_with_weights(
                        [chat], ctx.template, tools=tools, tokenizer=ctx.tokenizer, mask_reasoning=ctx.mask_reasoning,
                        mask_eot=ctx.mask_eot, selection=ctx.selection, owners=True, **ctx.template_kwargs)
                    spans = [[(w.start, w.end) for w in weighted[0]]]
                    err = None
                    break
                except TemplateError as e:
                    err = err or e
            if err is not None:
                out.append(Section(title, [f"cannot render / mask this chat: {err}"]))
                break
            trained = sum(e - s for s, e in spans[0])
            out.append(Section(title, [f"{len(spans[0])} trained spans, {trained} characters"], texts[0], spans[0],
                               weighted[0]))
            if kind != "reasoning":
                break
    return out


SECTION_BUILDERS: list[Callable[[CheckContext], list[Section]]] = [_facts, _probes]


def check_template(template: str, *, tokenizer: Any = None, tools: Any = None, mask_reasoning: bool = True,
                   mask_eot: bool = True, selection: TrainSelection | None = None,
                   **template_kwargs: Any) -> list[Section]:
    """The report of ``template``: a list of :class:`Section` (see the module docstring).
    ``tools`` default to a probe tool; ``selection`` chooses the trained turns (default: the
    assistant's, see :class:`~chatdata.templates.TrainSelection`).

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> facts = check_template(get_chat_template("qwen"))[0]
        >>> facts.lines[1]
        "end of turn: '<|im_end|>'"
    """
    tools = tools if tools is not None else [PROBE_TOOL]
    renderer = Renderer(template, tools=tools, tokenizer=tokenizer, **template_kwargs)
    profile = None if has_generation_tags(template) else template_profile(renderer)
    ctx = CheckContext(template, renderer, profile, tools, tokenizer, mask_reasoning, mask_eot, template_kwargs,
                       selection if selection is not None else TrainSelection())
    return [s for build in SECTION_BUILDERS for s in build(ctx)]


def mark_spans(text: str, spans, start: str = "«", end: str = "»") -> str:
    """``text`` with each trained span wrapped in ``start`` / ``end``.

    Example:
        >>> mark_spans("user: hi bot: yo.", [(14, 17)])
        'user: hi bot: «yo.»'
    """
    out, pos = [], 0
    for s, e in sorted(spans):
        out += [text[pos:s], start, text[s:e], end]
        pos = e
    out.append(text[pos:])
    return "".join(out)
