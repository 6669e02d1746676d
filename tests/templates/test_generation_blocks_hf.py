"""Templates with ``{% generation %}`` blocks: chatdata's masks against transformers'.

transformers' ``apply_chat_template(..., return_assistant_tokens_mask=True)`` marks exactly the
tokens of the author's blocks. chatdata keeps those spans by default, so its ids and masks must
equal transformers' on every such template of the corpus, with both test tokenizers. transformers
has no ``mask_eot``: with ``mask_eot=False`` chatdata's mask is transformers' without the end of
each turn (``docs/masks.md``): every token it leaves out holds only end-of-turn text and the
whitespace around it, never a character the assistant says (an answer that quotes the end-of-turn
text keeps it).
"""
from __future__ import annotations

import re

import pytest

from chatdata.templates import (has_generation_tags, render_chats_detailed, render_chats_with_spans, template_profile,
                                tokenize_chats)
from chatdata.templates.render import Renderer

from template_paths import TOKENIZER_NAMES, template_files

TAGGED = {p.stem: p.read_text(encoding="utf-8") for p in template_files()
          if has_generation_tags(p.read_text(encoding="utf-8"))}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def _call(i: int, city: str) -> dict:
    return {"id": f"call{i}abcd", "type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}


def _chats(eot: str) -> list[tuple[list, list | None]]:
    """Plain, tool-calling and reasoning chats, answers ending with whitespace, and answers that
    are or quote the template's end-of-turn text."""
    def plain(a1: str, a2: str = "Zqa2q two.") -> list:
        return [{"role": "user", "content": "Zqu1q one?"}, {"role": "assistant", "content": a1},
                {"role": "user", "content": "Zqu2q two?"}, {"role": "assistant", "content": a2}]

    return [
        (plain("Zqa1q one."), None),
        (plain("Zqa1q one.\n", "Zqa2q two.\n\n"), None),
        (plain("Zqa1q ends with " + eot), None),
        (plain(eot, eot), None),
        (plain("", "Zqa2q two."), None),
        (plain("Zqa1q one.", " "), None),
        ([{"role": "user", "content": "Zqu1q weather?"}, {"role": "assistant", "content": "", "tool_calls": [
            _call(1, "Zqg1q")]}, {"role": "tool", "tool_call_id": "call1abcd", "name": "get_weather",
                                  "content": "Zqt1q rain"}, {"role": "assistant", "content": "Zqa1q done."}], [WEATHER]),
        ([{"role": "user", "content": "Zqu1q one?"},
          {"role": "assistant", "content": "Zqa1q one.", "reasoning_content": "Zqr1q think."},
          {"role": "user", "content": "Zqu2q two?"},
          {"role": "assistant", "content": "Zqa2q two.", "reasoning_content": "Zqr2q think."}], None),
    ]


def _own_words(chat: list) -> list[str]:
    out = []
    for m in chat:
        if m["role"] == "assistant":
            out += [x.strip() for x in (m.get("content"), m.get("reasoning_content")) if x and x.strip()]
            out += [c["function"]["arguments"]["city"] for c in m.get("tool_calls", ())]
    return out


def test_the_corpus_has_generation_block_templates():
    assert len(TAGGED) >= 7, sorted(TAGGED)


@pytest.mark.parametrize("tok_name", TOKENIZER_NAMES)
@pytest.mark.parametrize("name", sorted(TAGGED))
def test_masks_equal_transformers_and_mask_eot_drops_only_the_end_of_turn(name, tok_name, qwen_tok, mistral_tok):
    tok = qwen_tok if tok_name == "qwen2.5-instruct" else mistral_tok
    template = TAGGED[name]
    eots = template_profile(Renderer(template, tokenizer=tok)).eots
    assert eots, name
    checked = 0
    for chat, tools in _chats(eots[0]):
        for agp in (False, True):
            c = chat[:-1] if agp else chat
            try:
                hf = tok.apply_chat_template(c, chat_template=template, tools=tools, tokenize=True, return_dict=True,
                                             return_assistant_tokens_mask=True, add_generation_prompt=agp)
            except Exception:  # noqa: BLE001 - the template refuses the chat: chatdata refuses it too
                with pytest.raises(Exception):
                    render_chats_with_spans([c], template, tools=tools, tokenizer=tok, add_generation_prompt=agp)
                continue
            got = {}
            for opt in ({}, {"mask_eot": False}):
                texts, spans = render_chats_with_spans([c], template, tools=tools, tokenizer=tok,
                                                       add_generation_prompt=agp, **opt)
                enc = tokenize_chats(texts, spans, tok, return_assistant_tokens_mask=True)
                assert enc["input_ids"][0].tolist() == list(hf["input_ids"]), (name, c)
                got[bool(opt)] = (texts[0], spans[0], enc["assistant_masks"][0].tolist())
            text, spans, mask = got[False]
            assert mask == list(hf["assistant_masks"]), (name, c)
            authors = render_chats_detailed([c], template, tools=tools, tokenizer=tok, add_generation_prompt=agp,
                                            track_generation=True)[1][0]
            assert spans == authors, (name, c)  # the author's blocks, as transformers marks them
            cut = {a: b for a, b in got[True][1]}
            for a, b in authors:  # mask_eot=False: each block without the end of turn it ends with
                rest = text[cut.get(a, a):b]
                assert a in cut or not any(a < x < b for x in cut), (name, c)
                for eot in sorted(eots, key=len, reverse=True):
                    rest = rest.replace(eot, "")
                assert not rest.strip(), (name, c, text[cut.get(a, a):b])
            assert set(got[True][1]) <= {(a, cut[a]) for a, _ in authors if a in cut}
            trained = "".join(text[a:b] for a, b in got[True][1])
            for word in _own_words(c):
                if word in text:
                    assert word in trained, (name, c, word)  # an answer quoting the end of turn keeps it
            checked += 1
    assert checked >= 8


def test_a_quoted_end_of_turn_at_the_end_of_an_answer_is_kept_without_mask_eot():
    """A `{% generation %}` block ends with `<|im_end|>`: with mask_eot=False the end-of-turn texts
    the span ends with were cut as one run, and an answer ending with a quoted `<|im_end|>` lost
    it (an answer that is only `<|im_end|>` lost everything)."""
    template = TAGGED["microsoft-Phi-4-reasoning"]
    for answer in ("it ends with <|im_end|>", "<|im_end|>"):
        chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": answer},
                {"role": "user", "content": "q2"}, {"role": "assistant", "content": "ok"}]
        texts, spans = render_chats_with_spans([chat], template, mask_eot=False)
        assert [texts[0][a:b] for a, b in spans[0]] == [answer, "ok"]
    assert re.search(r"\{%-?\s*generation", template)
