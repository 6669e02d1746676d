"""The render and mask columns of the template matrix: one template, one tokenizer, one probe kind.

:func:`render_case` fits the probe chats of a kind to the template (:func:`~.probes.fit`), renders
them with chatdata and with ``tokenizer.apply_chat_template`` (they must be byte-identical) and
computes the trained spans with the default options and with ``mask_reasoning=False`` /
``mask_eot=False``. :func:`audit` then checks the token masks (made in one batch for many cases
by the caller) against what a model must learn:

- every word the assistant owns (content, tool-call arguments, reasoning where the template
  renders it) is trained, as characters and as tokens;
- no word of a system, user or tool message is trained, and no placeholder of an image, video
  or audio part (character ranges found by rendering without the part), nor any token touching one;
- a trained span does not start with the generation header (unless the template's own
  ``{% generation %}`` block puts it there) and ends the turn (an end-of-turn text, a marker, or
  the next turn's opener); with ``mask_eot=False`` it does not end with an end-of-turn text;
  with ``mask_reasoning=False`` no reasoning is trained.

Example:
    >>> from chatdata.templates import get_chat_template
    >>> case = render_case(get_chat_template("chatml_format"), None, "plain")
    >>> case.outcome.status, case.variant
    ('ok', 'as is')
"""
from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from ..templates import (TemplateError, UnplaceableTurnError, has_generation_tags, render_chats, render_chats_with_spans,
                         tokenize_chats)
from ..templates.parts import has_media, message_texts, placeholder_ranges
from ..templates.profile import MARKER_RE, TemplateProfile, template_profile
from ..templates.render import Renderer, prepare_chat
from .probes import FOREIGN, MATRIX_TOOL, fit, media_free, probe_chats_of

__all__ = ["Outcome", "MaskCase", "OPTIONS", "render_case", "audit", "audit_case"]

OPTIONS = {"default": {}, "no_reasoning": {"mask_reasoning": False}, "no_eot": {"mask_eot": False}}
_OPENER = re.compile(r"start|begin", re.IGNORECASE)


@dataclasses.dataclass
class Outcome:
    """One cell of the matrix: ``status`` (``ok``, ``wrong``, ``raise``, ``n/a``, ``differs``,
    ``exact``, ``flagged``, ``silent``) and a one-line ``detail``."""

    status: str
    detail: str = ""


@dataclasses.dataclass
class MaskCase:
    """A fitted probe kind: the chats, the variant used, renderings and spans per option."""

    kind: str
    outcome: Outcome
    variant: str = ""
    render: Outcome | None = None
    chats: list = dataclasses.field(default_factory=list)
    tools: Any = None
    kwargs: dict = dataclasses.field(default_factory=dict)
    texts: dict = dataclasses.field(default_factory=dict)  # option -> [text per chat]
    spans: dict = dataclasses.field(default_factory=dict)  # option -> [spans per chat]
    profile: TemplateProfile | None = None
    tagged: bool = False
    placeholders: list = dataclasses.field(default_factory=list)  # per chat: [(start, end)]
    renderer: Any = None


def _transformers_render(tokenizer: Any, chat: list, template: str, tools: Any, kwargs: dict) -> str | None:
    if tokenizer is None or not hasattr(tokenizer, "apply_chat_template"):
        return None
    return tokenizer.apply_chat_template(chat, chat_template=template, tools=tools, tokenize=False, **kwargs)


def render_case(template: str, tokenizer: Any, kind: str) -> MaskCase:
    """Fit, render (checked against transformers) and place the spans of the ``kind`` probe.

    ``outcome`` is ``ok`` so far, ``n/a`` when the template refuses every variant of the probe
    (or, for ``parts``, takes no media part at all), ``raise`` when the mask engine raises.
    """
    unplaceable = []

    def attempt(v):
        chats = [v.apply(c) for c in probe_chats_of(kind)]
        tools = [MATRIX_TOOL] if v.tools else None
        kw = v.template_kwargs(tokenizer)
        texts = render_chats(chats, template, tools=tools, tokenizer=tokenizer, **kw)
        try:
            spans = {opt: render_chats_with_spans(chats, template, tools=tools, tokenizer=tokenizer, **kw, **okw)
                     for opt, okw in OPTIONS.items()}
        except UnplaceableTurnError as err:  # another variant may place (text in a tool-calling turn)
            reason = str(err).split("cannot place the turn to learn: ")[-1].split(". Check")[0]
            unplaceable.append((reason, v, (chats, tools, kw, texts, None)))
            raise
        return chats, tools, kw, texts, spans

    variant, fitted, err = fit(kind, attempt)
    if variant is None and unplaceable:
        reason, variant, fitted = unplaceable[0]
    elif variant is None:
        return MaskCase(kind, Outcome("n/a", f"the template refuses the probe: {err}"))
    chats, tools, kw, texts, spans = fitted
    case = MaskCase(kind, Outcome("ok"), variant.label(), chats=chats, tools=tools, kwargs=kw)
    if spans is None:
        case.outcome = Outcome("raise", f"the mask engine cannot place a turn: {reason}")
    elif kind == "parts" and (all(media_free(c) for c in chats) or any(_as_text(t) for t in texts)):
        detail = "no media part survives" if all(media_free(c) for c in chats) else "writes the list of parts as text"
        case.outcome = Outcome("n/a", f"the template takes no media parts ({detail})")
    case.render = _render_outcome(tokenizer, chats, template, tools, kw, texts)
    if case.outcome.status != "ok":
        return case
    case.renderer = renderer = Renderer(template, tools=tools, tokenizer=tokenizer, **kw)
    case.tagged = has_generation_tags(template)
    case.profile = template_profile(renderer)
    for opt in OPTIONS:
        case.texts[opt], case.spans[opt] = spans[opt]
    case.placeholders = [_placeholders(renderer, prepare_chat(c), t) for c, t in zip(chats, texts)]
    return case


def _render_outcome(tokenizer: Any, chats: list, template: str, tools: Any, kw: dict, texts: list) -> Outcome:
    """``ok`` when transformers renders ``chats`` as ``texts`` (or there is no tokenizer to ask)."""
    try:
        expected = [_transformers_render(tokenizer, c, template, tools, kw) for c in chats]
    except Exception as err:  # noqa: BLE001 - transformers refuses what chatdata rendered
        return Outcome("differs", f"transformers raises: {type(err).__name__}: {str(err)[:100]}")
    if expected == texts or expected[0] is None:
        return Outcome("ok")
    return Outcome("differs", f"chat {next(i for i, (a, b) in enumerate(zip(expected, texts)) if a != b)} differs")


def _as_text(text: str) -> bool:
    """Whether a rendering holds a list of parts written out as Python or JSON text."""
    return "'type': 'image'" in text or '"type": "image"' in text or "'type': 'text'" in text


def _placeholders(renderer: Renderer, chat: list, text: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for k, m in enumerate(chat):
        if has_media(m):
            out += placeholder_ranges(renderer, chat, k, text, 0, len(text))
    return sorted(set(out))


def _owned(message: dict, with_reasoning: bool) -> list[str]:
    """Texts the assistant owns in ``message``: content texts, tool-call argument values, and
    reasoning (``reasoning_content`` or an inline ``<think>`` block) when asked."""
    pieces = list(message_texts(message))
    for call in message.get("tool_calls") or ():
        args = call.get("function", call).get("arguments")
        args = json.loads(args) if isinstance(args, str) else args
        pieces += [v for v in (args or {}).values() if isinstance(v, str)]
    if with_reasoning:
        pieces += _reasoning(message)
    return [p for p in pieces if p]


def _reasoning(message: dict) -> list[str]:
    out = [message["reasoning_content"].strip()] if message.get("reasoning_content") else []
    content = message.get("content")
    if isinstance(content, str) and "</think>" in content:
        out.append(content.split("</think>", 1)[0].replace("<think>", "").strip())
    return out


def _ends_turn(text: str, s: int, e: int, profile: TemplateProfile) -> bool:
    piece = text[s:e]
    if any(piece.endswith(x) for x in profile.eots + profile.stops):
        return True
    if profile.header.strip() and text[e:].lstrip().startswith(profile.header.strip()):
        return True  # the next assistant turn opens right there (templates without an end of turn)
    if any(m.end() == e for m in MARKER_RE.finditer(text, max(s, e - 80), e)):
        return True
    rest = text[e:]
    if not rest.strip():
        return True
    m = MARKER_RE.match(rest, len(rest) - len(rest.lstrip()))
    return bool(m and _OPENER.search(m.group(0)))


def _words(chat: list, text: str, masked: str, opt: str, where: str) -> list[str]:
    problems = []
    for m in chat:
        if m.get("role") != "assistant":
            continue
        for piece in _owned(m, opt != "no_reasoning"):
            if piece in text and piece not in masked:
                problems.append(f"{where}: not learned {piece!r}")
        if opt == "no_reasoning":
            problems += [f"{where}: reasoning learned {r!r}" for r in _reasoning(m) if r and r in masked]
    return problems + [f"{where}: learned foreign text {w}" for w in FOREIGN if w in masked]


def _joined(spans: list, holes: list) -> list[tuple[int, int]]:
    """``spans`` with pieces that touch, or are separated only by a placeholder, joined again
    (one turn: Gemma 4 writes a tool-calling turn's text right before the next turn's)."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and (s == out[-1][1] or any(a <= out[-1][1] and s <= b for a, b in holes)):
            out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _span_problems(case: MaskCase, chat: list, text: str, spans: list, opt: str, holes: list) -> list[str]:
    spans = _joined(spans, holes)
    problems = []
    header = case.profile.header.strip() if case.profile else ""
    for s, e in spans:
        if (opt == "default" and header and not case.tagged and text[s:e].startswith(header)
                and _prompt_ends_with_header(case, chat, text[s:e], header)):
            problems.append(f"span starts with the generation header: {text[s:s + 40]!r}")
        if opt == "default" and not case.tagged and (case.profile.eots or case.profile.stops) and \
                not _ends_turn(text, s, e, case.profile):
            problems.append(f"span does not end the turn: ...{text[max(s, e - 30):e]!r}")
        if opt == "no_eot" and any(text[s:e].rstrip().endswith(x.strip()) for x in case.profile.eots + case.profile.stops
                                   if x.strip()):
            problems.append(f"end of turn learned with mask_eot=False: ...{text[max(s, e - 30):e]!r}")
    return problems


def audit(case: MaskCase, ids: dict, masks: dict, offsets: dict, decode: Any) -> Outcome:
    """The mask outcome of a rendered ``case``: ``ok`` or ``wrong`` with the first problem.

    ``ids``, ``masks``, ``offsets``: option -> per chat, the token ids, the 0/1 token mask made
    by :func:`chatdata.templates.tokenize_chats` and each token's ``(start, end)`` characters;
    ``decode``: ids -> text.
    """
    if case.outcome.status != "ok":
        return case.outcome
    problems: list[str] = []
    for opt in OPTIONS:
        for i, (chat, text, sp) in enumerate(zip(case.chats, case.texts[opt], case.spans[opt])):
            chat = prepare_chat(chat)
            masked_chars = "\x00".join(text[s:e] for s, e in sp)
            mask = masks[opt][i]
            masked_ids = [t for t, b in zip(ids[opt][i], mask) if b]
            problems += _words(chat, text, masked_chars, opt, f"[{opt}] chars")
            problems += _words(chat, text, decode(masked_ids), opt, f"[{opt}] tokens")
            problems += [f"[{opt}] {p}" for p in _span_problems(case, chat, text, sp, opt, case.placeholders[i])]
            for a, b in case.placeholders[i] if opt == "default" else ():
                if any(s < b and a < e for s, e in sp):
                    problems.append(f"[{opt}] placeholder learned: {text[a:b]!r}")
                if any(m and s < b and a < e for m, (s, e) in zip(mask, offsets[opt][i])):
                    problems.append(f"[{opt}] a token of the placeholder {text[a:b]!r} is learned")
    if problems:
        return Outcome("wrong", problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""))
    if case.profile and not case.tagged and not case.profile.eots and not case.profile.stops:
        return Outcome("ok", "the template writes nothing that ends an assistant turn: stopping cannot be learned")
    return Outcome("ok")


def _prompt_ends_with_header(case: MaskCase, chat: list, piece: str, header: str) -> bool:
    """Whether the generation prompt of the turn ``piece`` belongs to ends with the header (a
    template may write a header in history that its prompt leaves to the model, as DeepSeek-V3
    after tool outputs: then the span may start with it)."""
    for k, m in enumerate(chat):
        if m.get("role") == "assistant" and any(p in piece for p in _owned(m, False)):
            try:
                prompt = case.renderer.render(chat[:k], add_generation_prompt=True)
            except (TemplateError, TypeError):
                return True
            return prompt.rstrip().endswith(header)
    return True


def audit_case(case: MaskCase, tokenizer: Any) -> Outcome:
    """:func:`audit` of one case, tokenized here (the corpus run tokenizes many cases at once).

    Example:
        >>> from chatdata.data import load_sample_tokenizer
        >>> from chatdata.templates import get_chat_template
        >>> tok = load_sample_tokenizer()
        >>> case = render_case(get_chat_template("qwen"), tok, "tools")
        >>> audit_case(case, tok).status
        'ok'
        >>> case.spans["default"][0][0] = (0, len(case.texts["default"][0]))  # train everything
        >>> audit_case(case, tok).detail
        '[default] chars: learned foreign text Wqsys (+5 more)'
    """
    if case.outcome.status != "ok":
        return case.outcome
    ids, masks, offsets = {}, {}, {}
    for opt in OPTIONS:
        enc = tokenize_chats(case.texts[opt], case.spans[opt], tokenizer, return_assistant_tokens_mask=True)
        ids[opt] = [t.tolist() for t in enc["input_ids"]]
        masks[opt] = [m.tolist() for m in enc["assistant_masks"]]
        offsets[opt] = [token_offsets(tokenizer, t) if holes else [] for t, holes in zip(case.texts[opt], case.placeholders)]
    return audit(case, ids, masks, offsets, tokenizer.decode)


def token_offsets(tokenizer: Any, text: str) -> list[tuple[int, int]]:
    """``(start, end)`` characters of each token of ``text`` (no special tokens added)."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return [tuple(o) for o in enc["offset_mapping"]]
