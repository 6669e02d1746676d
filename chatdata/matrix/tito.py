"""The token-in, token-out column of the template matrix: 3-turn rollouts and replayed failure modes.

For one template and one tokenizer, :func:`role_set_case` plays a 3-turn conversation through a
:class:`~chatdata.rollout.Rollout` for each set of roles appended between the assistant turns --
``{tool}``, ``{tool, user}``, ``{tool, user, system}`` -- and :func:`failure_case` replays the
ways renderers are known to break token in, token out: a ``False`` tool argument, BPE merges
across a turn boundary, XML inside tool arguments, a ``<think>`` the template strips from
history, and a truncated response (``max_tokens`` hit, no end of turn).

Each assistant turn is "generated" as the ids of the text the template writes for it, so a
template that only appends gives back exactly the ids of a fresh tokenization. The outcome
(:func:`tito_outcome`) compares the kept ids with ``tokenizer.apply_chat_template`` of the
rollout's own history:

- ``exact``: the same ids (a fresh render may go on with what the template writes after the final
  end of turn);
- ``flagged``: they differ and ``Rollout.drift()`` reports where;
- ``silent``: they differ and ``drift()`` says nothing -- a bug, never expected;
- ``raise``: the template refuses every variant of the conversation (with the reason).

The tokenizer has the template's markers as special tokens, as the model's own tokenizer has
them (:func:`family_tokenizer`).

Example:
    >>> from chatdata.data import load_sample_tokenizer
    >>> from chatdata.templates import get_chat_template
    >>> role_set_case(get_chat_template("qwen"), load_sample_tokenizer(), ("tool", "user")).status
    'exact'
"""
from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any, Iterable, Sequence

import torch

from ..rollout import Rollout, template_facts
from ..templates import TemplateError, render_chats
from ..templates.profile import MARKER_RE, common_prefix_len
from .masks import Outcome
from .probes import MATRIX_TOOL, Variant

__all__ = ["ROLE_SETS", "FAILURE_MODES", "TitoResult", "family_tokenizer", "template_markers", "placeholder_markers", "role_set_case",
           "failure_case", "tito_outcome", "per_turn_problem"]

ROLE_SETS = (("tool",), ("tool", "user"), ("tool", "user", "system"))
FAILURE_MODES = ("false_arg", "bpe_boundary", "xml_args", "stripped_think", "truncated")
_PIPES = re.compile(r"<\|[^<>|\s]{1,40}\|>|<｜[^<>｜]{1,40}｜>|\[/?[A-Z][A-Z_]{1,40}\]")  # also [INST], [TOOL_CALLS]
_NAME = MATRIX_TOOL["function"]["name"]


@dataclasses.dataclass
class TitoResult(Outcome):
    """An :class:`Outcome` with the ids behind it: ``kept`` (the rollout's), ``fresh`` (a fresh
    tokenization) and ``turn_prompts`` (the prompt ids the policy saw before each turn)."""

    variant: str = ""
    kept: list = dataclasses.field(default_factory=list)
    fresh: list = dataclasses.field(default_factory=list)
    turn_prompts: list = dataclasses.field(default_factory=list)


def template_markers(template: str, tokenizer: Any = None) -> set[str]:
    """The special-token-like markers of a template: ``<|...|>`` / ``<｜...｜>`` / ``[INST]``
    literals, the ``<think>`` tags, its end-of-turn text and the markers of its generation prompt.

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> sorted(template_markers(get_chat_template("chatml_format")))
        ['</think>', '<think>', '<|im_end|>', '<|im_start|>']
    """
    markers = set(_PIPES.findall(template)) | {"<think>", "</think>"} | placeholder_markers(template, tokenizer)
    try:
        facts = template_facts(template, tokenizer=tokenizer)
    except (TemplateError, TypeError, ValueError):
        return markers
    if facts.eot.strip():
        markers.add(facts.eot)
    markers |= {m.group(0) for m in MARKER_RE.finditer(facts.generation_prompt)}
    return markers


def placeholder_markers(template: str, tokenizer: Any = None) -> set[str]:
    """The markers a template writes for an image, a video and an audio part of a user message
    (found by rendering the message with and without the part), as a processor's tokenizer has
    them as special tokens.

    Example:
        >>> t = ("{% for m in messages %}{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}"
        ...      "{% else %}<|vision_start|><|image_pad|><|vision_end|>{% endif %}{% endfor %}{% endfor %}")
        >>> sorted(placeholder_markers(t))
        ['<|image_pad|>', '<|vision_end|>', '<|vision_start|>']
    """
    out: set[str] = set()
    text_part = {"type": "text", "text": "Wqusr look."}
    for media in ({"type": "image"}, {"type": "video"}, {"type": "audio"}):
        try:
            with_part, without = render_chats([[{"role": "user", "content": [media, text_part]}],
                                               [{"role": "user", "content": [text_part]}]], template, tokenizer=tokenizer)
        except (TemplateError, TypeError, ValueError):
            continue
        n = common_prefix_len(with_part, without)
        m = common_prefix_len(with_part[n:][::-1], without[n:][::-1])
        found = with_part[n:len(with_part) - m].strip()
        markers = [x.group(0) for x in MARKER_RE.finditer(found)]
        out |= set(markers)
        if found and "".join(markers) != "".join(found.split()):  # ']<]image[>[': the whole placeholder
            out.add(found)
    return out


def family_tokenizer(tokenizer: Any, templates: Iterable[str]) -> Any:
    """A copy of ``tokenizer`` with the markers of all ``templates`` added as special tokens
    (one copy for a whole corpus: copying a tokenizer takes about a second).

    Example:
        >>> from chatdata.data import load_sample_tokenizer
        >>> tok = family_tokenizer(load_sample_tokenizer(), ["<|user|>{{ messages[0].content }}"])
        >>> tok.convert_tokens_to_ids("<|user|>") is not None
        True
    """
    markers: set[str] = set()
    for src in templates:
        markers |= template_markers(src, tokenizer)
    tok = copy.deepcopy(tokenizer)
    tok.add_special_tokens({"additional_special_tokens": sorted(m for m in markers if m.strip())})
    return tok


def _call(i: int, args: dict) -> dict:
    return {"id": f"call{i}wqid", "type": "function", "function": {"name": _NAME, "arguments": args}}


def _tool(i: int, text: str) -> dict:
    return {"role": "tool", "tool_call_id": f"call{i}wqid", "name": _NAME, "content": text}


def _script(roles: Sequence[str]) -> tuple[list[dict], list[tuple[dict, list[dict]]]]:
    """``(start, [(assistant turn, messages appended after it), ...])`` of the 3-turn probe."""
    start = [{"role": "system", "content": "Wqsys rules."}, {"role": "user", "content": "Wqusr look it up?"}]
    first = ({"role": "assistant", "content": "", "tool_calls": [_call(1, {"word": "Wqarg first"})]},
             [_tool(1, "Wqtool found")])
    if "user" not in roles:
        second = ({"role": "assistant", "content": "Wqans one more.", "tool_calls": [_call(2, {"word": "Wqarg second"})]},
                  [_tool(2, "Wqtool found too")])
    else:
        after = ([{"role": "system", "content": "Wqsys new rules."}] if "system" in roles else []) + \
                [{"role": "user", "content": "Wqusr and then?"}]
        second = ({"role": "assistant", "content": "Wqans found it."}, after)
    return start, [first, second, ({"role": "assistant", "content": "Wqans done."}, [])]


def _failure_script(mode: str) -> tuple[list[dict], list[tuple[dict, list[dict]]]]:
    start = [{"role": "user", "content": "Wqusr look it up?"}]
    user = [{"role": "user", "content": "Wqusr thanks, and?"}]
    last = ({"role": "assistant", "content": "Wqans done."}, [])
    if mode == "false_arg":
        first = ({"role": "assistant", "content": "", "tool_calls": [_call(1, {"word": "Wqarg x", "exact": False})]},
                 [_tool(1, "Wqtool found")])
    elif mode == "xml_args":
        first = ({"role": "assistant", "content": "",
                  "tool_calls": [_call(1, {"word": "<b>Wqarg</b></arg_value></parameter></tool_call>"})]},
                 [_tool(1, "Wqtool found")])
    elif mode == "stripped_think":
        first = ({"role": "assistant", "content": "Wqans one.", "reasoning_content": "Wqrsn thought it through."}, user)
    elif mode in ("bpe_boundary", "truncated"):
        first = ({"role": "assistant", "content": "Wqans first answer."}, user)
    else:
        raise ValueError(f"unknown failure mode {mode!r}; modes: {', '.join(FAILURE_MODES)}")
    return start, [first, last]


def _turn_text(template: str, tok: Any, chat: list[dict], k: int, tools: Any, kw: dict, facts: Any) -> str:
    """What the template writes for assistant message ``k`` after its generation prompt (what a
    policy would generate), without what follows the end of turn."""
    before = render_chats([chat[:k]], template, tools=tools, tokenizer=tok, add_generation_prompt=True, **kw)[0]
    after = render_chats([chat[:k + 1]], template, tools=tools, tokenizer=tok, **kw)[0]
    text = after[len(before):] if after.startswith(before) else after[common_prefix_len(before, after):]
    if facts.eot and facts.after_eot and text.endswith(facts.eot + facts.after_eot):
        text = text[: len(text) - len(facts.after_eot)]
    return text


class _EmptyTurn(TemplateError):
    """The template writes nothing for an assistant turn of the probe (it drops tool calls)."""


def _encode(tok: Any, text: str) -> torch.Tensor:
    return torch.tensor(tok.encode(text, add_special_tokens=False), dtype=torch.int64)


def _play(template: str, tok: Any, start: list[dict], turns: list[tuple[dict, list[dict]]], tools: Any, kw: dict,
          mode: str = "") -> TitoResult:
    facts = template_facts(template, tokenizer=tok, tools=tools, **kw)
    known = list(start)
    ro = Rollout([start], tokenizer=tok, chat_template=template, tools=tools, **kw)
    prompts, sampled = [], []
    for n, (assistant, appended) in enumerate(turns):
        text = _turn_text(template, tok, known + [assistant], len(known), tools, kw, facts)
        if n == 0 and mode == "bpe_boundary":
            text = "\n" + text  # the policy opens its turn with a newline: merges with the prompt's
        if n == 0 and mode == "truncated" and facts.eot and facts.eot in text:
            text = text[: text.rindex(facts.eot)]  # max_tokens hit before the end of turn
        if not text:
            raise _EmptyTurn(f"the template writes nothing for assistant turn {n + 1}")
        prompts.append(ro.prompt_ids()[0].tolist())
        sampled.append(_encode(tok, text))
        ro.add_response([sampled[-1]])
        known += [assistant] + appended
        if appended:
            ro.add_messages([appended])
    return tito_outcome(ro, template, tok, tools, kw, facts, prompts, sampled)


def per_turn_problem(ro: Rollout, turn_prompts: list, turn_ids: list) -> str:
    """``""`` when every row of ``ro.tokens(per_turn=True)`` (one-row rollout) is the prompt the
    policy was given for that turn followed by the turn's sampled ids verbatim, with the mask on
    exactly those ids; else what differs."""
    rows = ro.tokens(per_turn=True)
    if len(rows) != len(turn_ids):
        return f"per-turn rows: {len(rows)} rows for {len(turn_ids)} turns"
    for i, (prompt, ids) in enumerate(zip(turn_prompts, turn_ids)):
        row = rows[i]
        want = list(prompt) + ids.tolist()
        mask = row["assistant_masks"].bool().tolist()
        if row["input_ids"].tolist() != want:
            return f"per-turn row {i}: its ids are not the prompt of turn {i + 1} then its sampled ids"
        if mask != [False] * len(prompt) + [True] * len(ids):
            return f"per-turn row {i}: the mask is not exactly on the sampled ids of turn {i + 1}"
    return ""


def tito_outcome(ro: Rollout, template: str, tok: Any, tools: Any, kw: dict, facts: Any,
                 turn_prompts: list, turn_ids: list | None = None) -> TitoResult:
    """Classify a finished one-row rollout: ``exact``, ``flagged`` or ``silent`` (see the module
    docstring). ``turn_prompts``: the prompt ids seen before each turn; ``turn_ids``: each turn's
    sampled ids. With them, a drifting rollout is ``flagged`` only when its per-turn rows
    (``ro.tokens(per_turn=True)``) are exact -- the data a user trains on instead -- and
    ``silent`` otherwise (:func:`per_turn_problem`)."""
    kept = ro.prompt_ids()[0].tolist()
    history = ro.history.to_chats()[0]
    try:
        fresh = tok.apply_chat_template(history, chat_template=template, tools=tools, tokenize=True, **kw)
    except Exception as err:  # noqa: BLE001 - jinja2's or the template's own error
        raise TemplateError(f"transformers cannot render the rollout's history: {err}") from err
    fresh = list(fresh["input_ids"] if isinstance(fresh, dict) or hasattr(fresh, "keys") else fresh)
    tail = tok.decode(fresh[len(kept):]) if len(fresh) > len(kept) else ""
    same = fresh[: len(kept)] == kept and tail in ("", facts.after_eot)
    drift = ro.drift()[0]
    out = TitoResult("exact" if same else ("flagged" if drift is not None else "silent"), kept=kept, fresh=fresh,
                     turn_prompts=turn_prompts)
    problem = per_turn_problem(ro, turn_prompts, turn_ids) if turn_ids is not None else ""
    if problem:
        out.status, out.detail = "silent", problem
    elif same and drift is not None:
        out.detail = "drift() reports a difference, but the ids equal a fresh tokenization"
    elif not same:
        j = next((i for i, (a, b) in enumerate(zip(kept, fresh)) if a != b), min(len(kept), len(fresh)))
        out.detail = f"kept {tok.decode(kept[j:j + 4])!r}, a fresh tokenization {tok.decode(fresh[j:j + 4])!r}"
    return out


_TITO_VARIANTS = [Variant(tools=True, string_args=a, no_system=s, specials=p, as_parts=q, call_text=c)
                  for c in (False, True) for q in (False, True) for p in (False, True) for s in (False, True)
                  for a in (False, True)]


def _apply(v: Variant, script: tuple) -> tuple[list[dict], list[tuple[dict, list[dict]]]]:
    """``script`` presented as ``v``: ``no_system`` drops the leading system message only (a
    role set may append one)."""
    start, turns = script
    keep = dataclasses.replace(v, no_system=False)
    return v.apply(start), [(keep.apply([a])[0], keep.apply(appended)) for a, appended in turns]


def _known(start: list[dict], turns: list) -> list[dict]:
    chat = list(start)
    for assistant, appended in turns:
        chat += [assistant] + appended
    return chat


def _fitted(template: str, tok: Any, script: tuple, mode: str = "") -> TitoResult:
    """Play the first variant whose whole conversation the template renders; ``raise`` (with
    the reason) when it renders none, or when the rollout itself is refused."""
    first = ""
    for v in _TITO_VARIANTS:
        start, turns = _apply(v, script)
        kw = v.template_kwargs(tok)
        try:
            render_chats([_known(start, turns)], template, tools=[MATRIX_TOOL], tokenizer=tok, **kw)
        except (TemplateError, TypeError, ValueError) as err:
            first = first or _line(err)
            continue
        try:
            out = _play(template, tok, start, turns, [MATRIX_TOOL], kw, mode)
        except _EmptyTurn as err:
            first = first or _line(err)
            continue
        except (TemplateError, TypeError, ValueError, KeyError) as err:
            return TitoResult("raise", "the template refuses the rollout's history (its tool calls as chatdata's "
                                       f"parser reads them back): {_line(err)}", variant=v.label())
        out.variant = v.label()
        return out
    return TitoResult("raise", _explain(template, tok, script, first))


def _line(err: BaseException) -> str:
    text = (str(err).strip().splitlines() or [type(err).__name__])[0]
    for noise in ("row 0: the chat template cannot render this conversation: ", "chat template failed to render: ",
                  "transformers cannot render the rollout's history: "):
        text = text.replace(noise, "")
    return text[:160]


def _explain(template: str, tok: Any, script: tuple, error: str) -> str:
    """Why no variant of ``script`` renders: the first message kind the template refuses."""
    start, turns = script
    known = list(start)
    for assistant, appended in turns:
        known.append(assistant)
        for m in appended:
            known.append(m)
            reason = ""
            for v in _TITO_VARIANTS:
                s, t = _apply(v, (known, []))
                try:
                    render_chats([s], template, tools=[MATRIX_TOOL], tokenizer=tok, **v.template_kwargs(tok))
                    break
                except (TemplateError, TypeError, ValueError) as err:
                    reason = reason or _line(err)
            else:
                what = "a tool reply" if m["role"] == "tool" else f"a {m['role']} message after the first turn"
                return f"the template refuses {what}: {reason}"
    return f"the template refuses the conversation: {error}"


def role_set_case(template: str, tokenizer: Any, roles: Sequence[str]) -> TitoResult:
    """The outcome of the 3-turn rollout whose appended roles are ``roles`` (see ``ROLE_SETS``)."""
    return _fitted(template, tokenizer, _script(roles))


def failure_case(template: str, tokenizer: Any, mode: str) -> TitoResult:
    """The outcome of replaying the failure mode ``mode`` (one of ``FAILURE_MODES``)."""
    return _fitted(template, tokenizer, _failure_script(mode), mode)
