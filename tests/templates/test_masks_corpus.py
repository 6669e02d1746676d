"""Assistant masks on every real template: continuing a final message, and the fast path.

The masks of the plain, tool-calling, reasoning and multimodal probes on every template with
both tokenizers are checked by the template matrix (tests/matrix), computed once per session.
"""
from __future__ import annotations

import pytest
import torch

from chatdata.templates import TemplateError, render_chats, render_chats_with_spans, template_profile, tokenize_chats
from chatdata.templates.render import Renderer

from mask_chats import FOREIGN, KINDS, WEATHER
from template_paths import TOKENIZER_NAMES, template_files

TEMPLATES = {p.stem: p.read_text(encoding="utf-8") for p in template_files()}


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


OPTIONS = {"default": {}, "no_reasoning": {"mask_reasoning": False}, "no_eot": {"mask_eot": False}}


@pytest.fixture(scope="session")
def corpus(qwen_tok, mistral_tok):
    """Per tokenizer: ``(tok, cases)``, ``cases[(template, kind)][option] = (texts, spans)`` of
    every kind the template renders (with its tools, else with the weather tool), or
    ``{"skip": reason}``."""
    out = {}
    for tok_name, tok in zip(TOKENIZER_NAMES, (qwen_tok, mistral_tok)):
        cases = {}
        for name, template in TEMPLATES.items():
            for kind, spec in KINDS.items():
                case, reason = None, ""
                for tools in (spec["tools"], [WEATHER]):
                    try:
                        case = {opt: render_chats_with_spans(spec["chats"], template, tools=tools, tokenizer=tok, **kw)
                                for opt, kw in OPTIONS.items()}
                        break
                    except TemplateError as err:
                        reason = str(err).splitlines()[0][:120]
                cases[(name, kind)] = case if case is not None else {"skip": reason}
        out[tok_name] = (tok, cases)
    return out


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
