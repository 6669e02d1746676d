"""The splice engine and the tiktoken twin: the same ids and masks as the full encode, always.

The corpus-wide identity (every template x tokenizer x kind) is in test_masks_corpus.py; here:
hostile text (whitespace runs at piece boundaries, added-token spellings inside messages,
text the NFC normalizer changes, a sweep of the Unicode planes), what makes a tokenizer not
representable, and the fallbacks giving identical results.
"""
from __future__ import annotations

import os
import sys
from contextlib import contextmanager

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatdata import History
from chatdata.templates import get_chat_template, render_chats_with_spans, tokenize_chats
from chatdata.templates.splice import splice_encode, spliced_ids_and_masks, template_fallbacks
from chatdata.templates.tiktoken_bpe import _build, tiktoken_bpe_for, why_not_tiktoken

from template_paths import TEMPLATE_DIR


@contextmanager
def full_encode_only():
    os.environ["CHATDATA_SPLICE"] = "0"
    try:
        yield
    finally:
        del os.environ["CHATDATA_SPLICE"]


def both(texts, spans, tok, **kw):
    got = tokenize_chats(texts, spans, tok, return_assistant_tokens_mask=spans is not None, **kw)
    with full_encode_only():
        ref = tokenize_chats(texts, spans, tok, return_assistant_tokens_mask=spans is not None, **kw)
    return got, ref


def assert_same(got, ref):
    for key in ref:
        a, b = got[key], ref[key]
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b), key
        else:
            assert len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b)), key


def test_unicode_sweep_and_added_tokens_agree(any_tok):
    """Every 29th code point of the Unicode planes, between spaces, newlines, digits and letters,
    and every added token glued to text: the twin's ids are the tokenizer's."""
    bpe = tiktoken_bpe_for(any_tok)
    points = [chr(c) for c in range(0x20, 0x110000, 29) if not 0xD800 <= c < 0xE000]
    texts = []
    for i in range(0, len(points), 500):
        chunk = points[i:i + 500]
        texts += ["".join(chunk), " ".join(chunk), "\n".join(chunk), "a".join(chunk) + "1", " \n".join(chunk)]
    added = [t.content for t in any_tok.backend_tokenizer.get_added_tokens_decoder().values()]
    texts += [f"x{a}\n\n{a}  {a}é{a}'s" for a in added[:200]]
    texts = [t for t in texts if bpe.supports(t)]
    want = [e.ids for e in any_tok.backend_tokenizer.encode_batch(texts, add_special_tokens=False)]
    assert [bpe.encode(t) for t in texts] == want
    ids, offsets, _ = splice_encode(bpe, texts, None)
    assert ids.tolist() == [i for w in want for i in w]


PIECES = ["\n", "\n\n", " ", "  ", "\t", "\r\n", " \n", "\u00a0", "\u3000", "x", "Hello", "WORLD", "'s", "'LL", "12",
          "3.5", "é", "e\u0301", "日本", "👋🏽", "<|im_end|>", "<|im_start|>", "[INST]", "</s>", "<tool_call>",
          "{\"a\": 1}", "!!", "--", "ſ", "ǅ"]
TEMPLATES = {name: (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8") for name in (
    "Qwen-Qwen3-0.6B", "mistralai-Mistral-Nemo-Instruct-2407", "meta-llama-Llama-3.1-8B-Instruct", "google-gemma-3-it")}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.sampled_from(PIECES), min_size=0, max_size=6).map("".join), min_size=4, max_size=8),
       st.sampled_from(sorted(TEMPLATES)))
def test_hostile_messages_give_the_full_encodes_ids_and_masks(any_tok, contents, name):
    """Messages that start or end with whitespace, hold added-token spellings, non-NFC text."""
    chat = [{"role": "user" if i % 2 == 0 else "assistant", "content": c or "."} for i, c in enumerate(contents)]
    if chat[-1]["role"] == "user":
        chat.pop()
    try:
        texts, spans = render_chats_with_spans([chat, chat[:2]], TEMPLATES[name], tokenizer=any_tok)
    except Exception:  # the template refuses this chat (e.g. its roles): nothing to compare
        return
    got, ref = both(texts, spans, any_tok)
    assert_same(got, ref)


def test_text_the_normalizer_changes_takes_the_full_encode(qwen_tok):
    bpe = tiktoken_bpe_for(qwen_tok)
    texts = ["<|im_start|>user\ncafe\u0301<|im_end|>\n", "<|im_start|>user\ncafé<|im_end|>\n"]
    assert not bpe.supports(texts[0]) and bpe.supports(texts[1])
    got, ref = both(texts, [[(5, 12)], [(5, 12)]], qwen_tok)
    assert_same(got, ref)
    assert got["input_ids"][0].tolist() == qwen_tok.encode(texts[0], add_special_tokens=False)


def test_padding_and_truncation_match(qwen_tok):
    texts, spans = render_chats_with_spans([[{"role": "user", "content": "hi " * 30},
                                             {"role": "assistant", "content": "yo " * 40}]] * 3,
                                           get_chat_template("qwen"), tokenizer=qwen_tok)
    for kw in ({"padding": True}, {"truncation": True, "max_length": 37}, {"padding": "max_length", "max_length": 200}):
        got, ref = both(texts, spans, qwen_tok, **kw)
        assert_same(got, ref)


def test_switched_off_gives_identical_results(qwen_tok):
    """CHATDATA_SPLICE=0 (the reference path) and the default give the same History tokens."""
    chats = [[{"role": "user", "content": f"q{i} \n\n weird  spacing"}, {"role": "assistant", "content": f"a{i}\n"}]
             for i in range(20)]
    h = History.from_chats(chats)
    kw = dict(tokenizer=qwen_tok, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    got = h.apply_chat_template(**kw)
    with full_encode_only():
        ref = h.apply_chat_template(**kw)
    for k in ("input_ids", "attention_mask", "assistant_masks"):
        assert torch.equal(got.values[k], ref.values[k])


def _fresh(tokenizer_dir, name="qwen2.5-instruct"):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_dir / name))


def test_changes_to_the_tokenizer_are_seen(tokenizer_dir):
    """Tokens added later rebuild the twin; what it cannot represent turns it off (the full encode
    runs, silently); putting things back turns it on again."""
    from tokenizers import AddedToken, normalizers

    tok = _fresh(tokenizer_dir)
    first = tiktoken_bpe_for(tok)
    tok.add_tokens(["<my_marker>"])  # normalized=True, like every add_tokens
    text = "user\nsee <my_marker> here<|im_end|>"
    assert tiktoken_bpe_for(tok) not in (None, first)
    got, ref = both([text], [[(5, 12)]], tok)
    assert_same(got, ref)
    assert got["input_ids"][0].tolist() == tok.encode(text, add_special_tokens=False)

    tok.backend_tokenizer.encode_special_tokens = True
    assert "split_special_tokens" in why_not_tiktoken(tok)
    tok.backend_tokenizer.encode_special_tokens = False
    assert why_not_tiktoken(tok) == ""
    nfc = tok.backend_tokenizer.normalizer
    tok.backend_tokenizer.normalizer = normalizers.Lowercase()
    tok.add_tokens(["<other>"])  # a new vocabulary size: the twin is rebuilt and refused
    assert "normalizer" in why_not_tiktoken(tok)
    got, ref = both(["<|im_start|>user\nHeLLo<|im_end|>"], [[(12, 17)]], tok)
    assert_same(got, ref)
    tok.backend_tokenizer.normalizer = nfc
    tok.add_tokens(["<my_marker>x"])  # normalized tokens that overlap
    assert "prefix" in why_not_tiktoken(tok)
    tok.add_special_tokens({"additional_special_tokens": [AddedToken("<stripped>", rstrip=True)]})
    assert "rstrip" in why_not_tiktoken(tok)
    assert why_not_tiktoken(object()) == "not a fast (Rust) Hugging Face tokenizer"


def test_without_tiktoken_the_full_encode_runs(tokenizer_dir, monkeypatch):
    tok = _fresh(tokenizer_dir)
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # as if not installed
    bpe, why = _build(tok)
    assert bpe is None and "not installed" in why
    texts, spans = render_chats_with_spans([[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]],
                                           get_chat_template("qwen"), tokenizer=tok)
    out = tokenize_chats(texts, spans, tok, return_assistant_tokens_mask=True)
    assert out["input_ids"][0].tolist() == tok.encode(texts[0], add_special_tokens=False)


def test_a_template_that_disagrees_falls_back(qwen_tok, mistral_tok):
    """The once-per-template check: when the full encode disagrees (here: another real tokenizer's
    encode stands in for it), that template takes the reference path from then on."""
    template = "{% for m in messages %}{{ m.content }}\n{% endfor %}"  # a template no other test uses

    def reference(texts, spans):
        enc = tokenize_chats(texts, spans, mistral_tok, return_assistant_tokens_mask=spans is not None)
        return enc["input_ids"], enc.get("assistant_masks")

    texts = ["hello there\n", "general kenobi\n"]
    assert spliced_ids_and_masks(texts, None, qwen_tok, reference=reference, template=template) is None
    assert template in template_fallbacks()
    assert spliced_ids_and_masks(texts, None, qwen_tok, reference=reference, template=template) is None
    assert spliced_ids_and_masks(texts, None, qwen_tok, reference=reference) is not None  # no template named
