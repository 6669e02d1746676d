"""Assistant masks on every real template x both tokenizers x plain / tool-calling / reasoning chats.

Each assistant turn's content, tool-call arguments and reasoning (where the template renders
them) must be learned, and nothing of system, user or tool turns; every turn ends with what
ends it in the rendering. Renders happen once per (template, kind, tokenizer) in a session
fixture; each tokenizer encodes all texts in one batch.
"""
from __future__ import annotations

import re

import pytest
import torch

from chatdata.templates import (TemplateError, render_chats, render_chats_with_spans, template_profile,
                                tokenize_chats)
from chatdata.templates.profile import MARKER_RE
from chatdata.templates.render import Renderer

from mask_chats import FOREIGN, KINDS, WEATHER, owned_pieces
from template_paths import TOKENIZER_NAMES, template_files

TEMPLATES = {p.stem: p.read_text(encoding="utf-8") for p in template_files()}
OPENER = re.compile(r"start|begin", re.IGNORECASE)
OPTIONS = {"default": {}, "no_reasoning": {"mask_reasoning": False}, "no_eot": {"mask_eot": False}}


def _string_args(chats):
    import json

    out = []
    for chat in chats:
        new = []
        for m in chat:
            if m.get("tool_calls"):
                m = dict(m, tool_calls=[dict(c, function=dict(c["function"], arguments=json.dumps(c["function"]["arguments"])))
                                        for c in m["tool_calls"]])
            new.append(m)
        out.append(new)
    return out


def _variants(kind):
    """(chats, tools) to try in order: as specified; tool_use templates need tools even in plain
    chats; some templates want tool-call arguments as JSON strings."""
    spec = KINDS[kind]
    yield spec["chats"], spec["tools"]
    if spec["tools"] is None:
        yield spec["chats"], [WEATHER]
    else:
        yield _string_args(spec["chats"]), spec["tools"]


def _case(name, kind, tok):
    template = TEMPLATES[name]
    errors = []
    for chats, tools in _variants(kind):
        try:
            render_chats(chats, template, tools=tools, tokenizer=tok)
        except TemplateError as err:
            errors.append(str(err).splitlines()[0][:120])
            continue
        case = {"chats": chats, "tools": tools, "profile": template_profile(Renderer(template, tools=tools, tokenizer=tok))}
        for opt, kw in OPTIONS.items():
            texts, spans = render_chats_with_spans(chats, template, tools=tools, tokenizer=tok, **kw)
            case[opt] = (texts, spans)
        return case
    return {"skip": errors[0]}


_TOKENIZER_FIXTURES = {"qwen2.5-instruct": "qwen_tok", "mistral-nemo-instruct-2407": "mistral_tok"}


@pytest.fixture(scope="session")
def corpus(request):
    out = {}
    for tok_name in TOKENIZER_NAMES:
        tok = request.getfixturevalue(_TOKENIZER_FIXTURES[tok_name])
        cases = {(name, kind): _case(name, kind, tok) for name in TEMPLATES for kind in KINDS}
        # one batch encode per tokenizer of every text of every case and option
        flat = [(key, opt, i) for key, c in cases.items() if "skip" not in c for opt in OPTIONS
                for i in range(len(c[opt][0]))]
        texts = [cases[key][opt][0][i] for key, opt, i in flat]
        spans = [cases[key][opt][1][i] for key, opt, i in flat]
        enc = tokenize_chats(texts, spans, tok, return_assistant_tokens_mask=True)
        for n, (key, opt, i) in enumerate(flat):
            ids, mask = enc["input_ids"][n], enc["assistant_masks"][n]
            cases[key].setdefault(opt + "_decoded", []).append(tok.decode(ids[mask.bool()].tolist()))
        out[tok_name] = (tok, cases)
    return out


def _ends_turn(text, s, e, profile):
    """The span ends with an end-of-turn text or marker, or the rendering ends / opens the next
    turn right there (the template writes nothing to end this turn)."""
    piece = text[s:e]
    if any(piece.endswith(x) for x in profile.eots + profile.stops):
        return True
    if any(m.end() == e for m in MARKER_RE.finditer(text, max(s, e - 80), e)):
        return True
    rest = text[e:]
    if not rest.strip():
        return True
    m = MARKER_RE.match(rest, len(rest) - len(rest.lstrip()))
    return bool(m and OPENER.search(m.group(0)))


def _turn_checks(chat, text, masked, opt):
    problems = []
    for m in chat:
        if m["role"] != "assistant":
            continue
        own = owned_pieces(m)
        learn = [own["content"]] + own["args"] + ([] if opt == "no_reasoning" else own["reasoning"])
        for piece in learn:
            if piece and piece in text and piece not in masked:
                problems.append(f"not learned: {piece!r}")
        if opt == "no_reasoning":
            problems += [f"reasoning learned: {r!r}" for r in own["reasoning"] if r in masked]
    problems += [f"learned foreign text {w}" for w in FOREIGN if w in masked]
    return problems


def _prompt_has_header(name, case, chat, piece, header, tok):
    """Whether the generation prompt of the turn ``piece`` belongs to ends with the header (a
    template may write a header in history that its generation prompt leaves to the model:
    DeepSeek-V3 after tool outputs)."""
    for k, m in enumerate(chat):
        own = owned_pieces(m) if m["role"] == "assistant" else None
        if own and any(p and p in piece for p in [own["content"]] + own["args"]):
            prompt = render_chats([chat[:k]], TEMPLATES[name], tools=case["tools"], tokenizer=tok,
                                  add_generation_prompt=True)[0]
            return prompt.rstrip().endswith(header)
    return True


@pytest.mark.parametrize("tok_name", TOKENIZER_NAMES)
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_masks(name, kind, tok_name, corpus):
    tok, cases = corpus[tok_name]
    case = cases[(name, kind)]
    if "skip" in case:
        # the template itself cannot render this chat: transformers raises too
        with pytest.raises(Exception):
            tok.apply_chat_template(KINDS[kind]["chats"][0], chat_template=TEMPLATES[name], tools=KINDS[kind]["tools"],
                                    tokenize=False)
        pytest.skip(f"template raises: {case['skip']}")
    profile = case["profile"]
    header = profile.header.strip()
    problems = []
    for opt in OPTIONS:
        texts, spans = case[opt]
        for chat, text, sp, decoded in zip(case["chats"], texts, spans, case[opt + "_decoded"]):
            masked = "\x00".join(text[s:e] for s, e in sp)
            problems += [f"[{opt}] chars: {p}" for p in _turn_checks(chat, text, masked, opt)]
            problems += [f"[{opt}] tokens: {p}" for p in _turn_checks(chat, text, decoded, opt)]
            for s, e in sp:
                if opt == "default" and header and text[s:e].startswith(header) and _prompt_has_header(
                        name, case, chat, text[s:e], header, tok):
                    problems.append(f"[{opt}] span starts with the generation header: {text[s:e][:40]!r}")
                if opt == "default" and not _ends_turn(text, s, e, profile):
                    problems.append(f"[{opt}] span does not end the turn: ...{text[max(s, e - 30):e]!r}")
                if opt == "no_eot" and any(text[s:e].rstrip().endswith(x.strip()) for x in profile.eots + profile.stops
                                           if x.strip()):
                    problems.append(f"[{opt}] end of turn learned: ...{text[max(s, e - 30):e]!r}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_continue_final_message(name, qwen_tok):
    template = TEMPLATES[name]
    chat = KINDS["plain"]["chats"][0][:-1] + [{"role": "assistant", "content": "Zqans partial"}]
    for tools in (None, [WEATHER]):
        try:
            text = render_chats([chat], template, tools=tools, tokenizer=qwen_tok, continue_final_message=True)[0]
            break
        except TemplateError as err:
            reason = str(err).splitlines()[0][:120]
    else:
        pytest.skip(f"template raises: {reason}")
    texts, spans = render_chats_with_spans([chat], template, tools=tools, tokenizer=qwen_tok,
                                           continue_final_message=True)
    assert texts == [text]
    s, e = spans[0][-1]
    assert e == len(text) and text[s:e].endswith("Zqans partial")
    masked = "".join(text[a:b] for a, b in spans[0])
    assert "Zqans first answer." in masked and not any(w in masked for w in FOREIGN)


def test_fast_path_places_turns_like_prefix_renderings(qwen_tok):
    """Where a template may use the one-render fast path, it gives the prefix renderings' bounds."""
    from chatdata.templates.fast_turns import fast_bounds, fast_path_ok
    from chatdata.templates.render import prepare_chat
    from chatdata.templates.turns import turn_bounds

    checked = 0
    for name, template in TEMPLATES.items():
        for kind in KINDS:
            chats, tools = KINDS[kind]["chats"], KINDS[kind]["tools"]
            renderer = Renderer(template, tools=tools, tokenizer=qwen_tok)
            try:
                texts = render_chats(chats, template, tools=tools, tokenizer=qwen_tok)
            except TemplateError:
                continue
            profile = template_profile(renderer)
            if not fast_path_ok(renderer, profile):
                continue
            for chat, text in zip(chats, texts):
                chat = prepare_chat(chat)
                fast = fast_bounds(chat, text, profile)
                if fast is not None:
                    assert fast == turn_bounds(renderer, chat, text, profile), (name, kind)
                    checked += 1
    assert checked > 50


@pytest.fixture(scope="session")
def spliced_vs_full(corpus):
    """Per tokenizer and template: the splice engine's ids and masks of every kind and option,
    and the full encode's (the reference path), computed in one batch each."""
    import os

    from chatdata.templates.splice import spliced_ids_and_masks
    from chatdata.templates.tiktoken_bpe import why_not_tiktoken

    out = {}
    for tok_name, (tok, cases) in corpus.items():
        assert why_not_tiktoken(tok) == "", why_not_tiktoken(tok)  # both test tokenizers have a twin
        flat = [(key, opt) for key, c in cases.items() if "skip" not in c for opt in OPTIONS]
        texts = [t for key, opt in flat for t in cases[key][opt][0]]
        spans = [s for key, opt in flat for s in cases[key][opt][1]]
        os.environ["CHATDATA_SPLICE"] = "0"
        try:
            full = tokenize_chats(texts, spans, tok, return_assistant_tokens_mask=True)
        finally:
            del os.environ["CHATDATA_SPLICE"]
        got = tokenize_chats(texts, spans, tok, return_assistant_tokens_mask=True)
        verdicts = {}
        for name in TEMPLATES:  # the once-per-template check against the full encode
            mine = [(t, s) for (key, opt) in flat if key[0] == name for t, s in zip(*cases[key][opt])]
            if mine:
                def reference(ts, ss, tok=tok):
                    os.environ["CHATDATA_SPLICE"] = "0"
                    try:
                        enc = tokenize_chats(ts, ss, tok, return_assistant_tokens_mask=ss is not None)
                    finally:
                        del os.environ["CHATDATA_SPLICE"]
                    return enc["input_ids"], enc.get("assistant_masks")
                ts, ss = [t for t, _ in mine], [s for _, s in mine]
                spliced_ids_and_masks(ts, ss, tok, reference=reference, template=TEMPLATES[name])
                from chatdata.templates.tiktoken_bpe import tiktoken_bpe_for

                verdicts[name] = tiktoken_bpe_for(tok).template_ok.get(TEMPLATES[name])
        rows, n = {}, 0
        for key, opt in flat:
            k = len(cases[key][opt][0])
            rows.setdefault(key[0], []).append((key[1], opt, full["input_ids"][n:n + k], got["input_ids"][n:n + k],
                                                full["assistant_masks"][n:n + k], got["assistant_masks"][n:n + k]))
            n += k
        out[tok_name] = (rows, verdicts)
    return out


@pytest.mark.parametrize("tok_name", TOKENIZER_NAMES)
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_spliced_ids_and_masks_equal_the_full_encode(name, tok_name, spliced_vs_full):
    """The splice engine (tiktoken twin + pieces) gives exactly the full encode's ids and masks on
    every kind (plain, tools, reasoning) and mask option, and passed its once-per-template check."""
    rows, verdicts = spliced_vs_full[tok_name]
    if name not in rows:
        pytest.skip("the template renders none of the kinds")
    for kind, opt, ids_full, ids_got, m_full, m_got in rows[name]:
        for a, b, c, d in zip(ids_full, ids_got, m_full, m_got):
            assert torch.equal(a, b), (kind, opt, "ids")
            assert torch.equal(c, d), (kind, opt, "masks")
    assert verdicts[name] is True
