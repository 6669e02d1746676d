"""What a chat template writes around assistant turns, learned from probe renderings.

A :class:`TemplateProfile` is computed once per template + variables (cached) by rendering a
few probe conversations whose contents are marker words, and comparing the renderings:

- ``eots``: the *end-of-turn texts*. After the first assistant answer of ``user, assistant,
  user, assistant`` the template writes ``tail_next`` (up to the next user content); when the
  conversation stops after that answer it writes ``tail_end``. From the two,
  :mod:`chatdata.templates.end_of_turn` (the one owner of that rule) gives what closes an
  assistant turn whatever follows (``<|im_end|>``, ``<|eot_id|>``, ``</s>``, ``<end_of_turn>``,
  ...). The first marker after the final answer is added (gpt-oss closes its last turn with
  ``<|return|>``, the others with ``<|end|>``).
- ``stops``: for templates whose assistant turns have no end-of-turn text (GLM-4.x, Apertus,
  RWKV-world, ...), the marker that opens what follows an assistant turn -- the next user turn
  (``<|user|>``) or a tool reply (``<|observation|>``). The model ends such a turn by emitting
  that marker, so it is the turn's end.
- ``header``: the generation prompt, what ``add_generation_prompt=True`` appends after a user
  turn (``<|im_start|>assistant\\n``). It is never learned.

No template name is ever looked at: everything comes from renderings.

Example:
    >>> from chatdata.templates import get_chat_template
    >>> from chatdata.templates.render import Renderer
    >>> p = template_profile(Renderer(get_chat_template("chatml_format")))
    >>> p.eots, p.header
    (('<|im_end|>',), '<|im_start|>assistant\\n')
"""
from __future__ import annotations

from typing import Sequence

from .end_of_turn import FRAGMENT_RE as _FRAGMENT_RE, MARKER_RE, OPENER_RE as _OPENER_RE
from .end_of_turn import common_prefix_len, end_of_turn, first_marker
from .errors import TemplateError
from .render import Renderer

_PROBE = ("Vqzuser0", "Vqzasst0", "Vqzuser1", "Vqzasst1", "Vqztool0")
_RENDER_ERRORS = (TemplateError, TypeError)


def end_of_turn_text(tail_next: str, tail_end: str) -> str:
    """The end-of-turn text the masks train, from what follows an assistant message when another
    turn follows (``tail_next``) and when the conversation ends there (``tail_end``): the rule of
    :func:`~chatdata.templates.end_of_turn.end_of_turn` with both of its options on (a
    whitespace-only end is the EOT; gpt-oss's ``<|end|>`` is, though the last turn ends ``<|return|>``).

    Example:
        >>> end_of_turn_text("<|im_end|>\\n<|im_start|>user\\n", "<|im_end|>\\n")
        '<|im_end|>'
        >>> end_of_turn_text("<|end|><|start|>user", "<|return|>")
        '<|end|>'
        >>> end_of_turn_text("<|user|>", "")
        ''
    """
    return end_of_turn(tail_next, tail_end, whitespace_end=True, differing_final_marker=True).text


class TemplateProfile:
    """End-of-turn texts, stop markers and generation header of one template (see module doc)."""

    __slots__ = ("eots", "stops", "header")

    def __init__(self, eots: Sequence[str] = (), stops: Sequence[str] = (), header: str = "") -> None:
        self.eots = tuple(sorted(set(e for e in eots if e), key=len, reverse=True))
        self.stops = tuple(sorted(set(s for s in stops if s), key=len, reverse=True))
        self.header = header

    def __repr__(self) -> str:
        return f"TemplateProfile(eots={self.eots!r}, stops={self.stops!r}, header={self.header!r})"


_PROFILES: dict[tuple, TemplateProfile] = {}


def template_profile(renderer: Renderer | str) -> TemplateProfile:
    """The :class:`TemplateProfile` of a template with its variables (cached); a template
    source (str) is taken as ``Renderer(source)``.

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> template_profile(Renderer(get_chat_template("llama3"))).eots
        ('<|eot_id|>',)
    """
    if isinstance(renderer, str):
        renderer = Renderer(renderer)
    elif not isinstance(renderer, Renderer):
        raise TypeError(f"template_profile takes a Renderer or a template source (str), got {type(renderer).__name__}")
    key = (renderer.template, repr(sorted((k, repr(v)) for k, v in renderer.variables.items())))
    prof = _PROFILES.get(key)
    if prof is None:
        prof = _PROFILES[key] = _compute_profile(renderer)
    return prof


def _msg(role: str, content: str, **extra) -> dict:
    return {"role": role, "content": content, **extra}


def _try_render(renderer: Renderer, chat: list, agp: bool = False) -> str | None:
    try:
        return renderer.render(chat, add_generation_prompt=agp)
    except _RENDER_ERRORS:
        return None


def _tool_probe(renderer: Renderer) -> tuple[str, str]:
    """What ends an assistant turn holding only a tool call, from ``user, assistant(tool call)``
    and the same plus a tool reply: ``(end marker, '')`` when the marker the two renderings
    share last is followed by an opening header or by no marker; ``('', stop)`` when the tool
    reply opens with a marker of its own (``<|observation|>``), the turn's stop."""
    tools = renderer.variables.get("tools") or []
    name = "probe_tool"
    if tools and isinstance(tools[0], dict):
        fn = tools[0].get("function", tools[0])
        name = fn.get("name", name) if isinstance(fn, dict) else name
    # an empty content first; " " for templates that read ``content[0]`` (Command A reasoning)
    variants = [(args, content) for content in ("", " ") for args in ({"x": "Vqzarg0"}, '{"x": "Vqzarg0"}')]
    for args, content in variants:
        call = {"id": "call0", "type": "function", "function": {"name": name, "arguments": args}}
        head = [_msg("user", _PROBE[0]), _msg("assistant", content, tool_calls=[call])]
        upto = _try_render(renderer, head)
        full = _try_render(renderer, head + [_msg("tool", _PROBE[4], tool_call_id="call0", name=name)])
        if upto is not None and full is not None:
            break
    else:
        return "", ""
    c = common_prefix_len(upto, full)
    m = _FRAGMENT_RE.search(full, max(0, c - 70), c)
    c = m.start() if m else c
    args_at = full.find("Vqzarg0")
    if args_at < 0:  # the template drops tool calls: what opens a tool reply after a text turn
        return "", _reply_marker(renderer)
    if not args_at < c:  # the renderings part before the call: nothing to learn from them
        return "", ""
    for m in MARKER_RE.finditer(full, max(0, args_at), c):
        if _OPENER_RE.search(m.group(0)):  # both go on with a turn opener: cut before it
            c = m.start()
            break
    after = first_marker(full, c)
    if after and _PROBE[4] not in after and not _OPENER_RE.search(after):
        return "", after
    seg = full[:c].rstrip()
    end = ""
    for m in MARKER_RE.finditer(seg, args_at):
        end = m.group(0) if m.end() == len(seg) else ""
    return end, ""


def _reply_marker(renderer: Renderer) -> str:
    """The marker that opens a tool reply right after an assistant's text (ChatGLM's
    ``<|tool|>``), or ''."""
    full = _try_render(renderer, [_msg("user", _PROBE[0]), _msg("assistant", _PROBE[1]),
                                  _msg("tool", _PROBE[4], tool_call_id="call0", name="probe_tool")])
    if full is None or _PROBE[1] not in full:
        return ""
    after = first_marker(full, full.index(_PROBE[1]) + len(_PROBE[1]))
    return after if after and _PROBE[4] not in after and not _OPENER_RE.search(after) else ""


def _compute_profile(renderer: Renderer) -> TemplateProfile:
    u0, a0, u1, a1 = (_msg(r, c) for r, c in zip(("user", "assistant", "user", "assistant"), _PROBE))
    full = _try_render(renderer, [u0, a0, u1, a1])
    short = _try_render(renderer, [u0, a0])
    user_only = _try_render(renderer, [u0])
    prompt = _try_render(renderer, [u0], agp=True)
    header = ""
    if user_only is not None and prompt is not None:
        n = common_prefix_len(user_only, prompt)
        m = _FRAGMENT_RE.search(prompt, max(0, n - 70), n)
        header = prompt[m.start() if m else n:]
    if full is None or short is None or any(m["content"] not in full for m in (a0, u1, a1)):
        return TemplateProfile((), (), header)
    i = full.index(a0["content"]) + len(a0["content"])
    tail_next = full[i: full.index(u1["content"], i)]
    tail_end = short[short.index(a0["content"]) + len(a0["content"]):] if a0["content"] in short else ""
    eots = [end_of_turn_text(tail_next, tail_end)]
    last = first_marker(full, full.index(a1["content"]) + len(a1["content"]))
    if last and not eots[0]:
        pass  # nothing closes a non-final turn: the final marker is not an end of turn either
    elif last:
        eots.append(last)
    stops: list[str] = []
    tool_end, tool_stop = _tool_probe(renderer)
    if not any(eots):
        stops = [first_marker(tail_next), tool_stop]
    eots.append(tool_end)
    return TemplateProfile(eots, stops, header)
