"""Differential fuzzing of chatdata's token ids against the Hugging Face tokenizer, on adversarial
text: added-token spellings and fragments of them, text the NFC normalizer changes (decomposed
accents, Hangul jamo, compatibility characters), whitespace runs with \\r\\n\\t, digit runs,
contractions in every case, emoji ZWJ sequences, non-BMP and private-use characters, long words.

Each fast path must give the reference's ids exactly: the tiktoken twin (``encode``, the splice
engine's batch encode), ``tokenize_chats`` (vs ``tokenizer(text, add_special_tokens=False)``),
``History.apply_chat_template(tokenize=True)`` (vs transformers' ``apply_chat_template``; masks vs
the full-encode path, and vs transformers' for a ``{% generation %}`` template) and a ``Rollout``
(kept ids vs a fresh full encode, ``drift()`` saying exactly when they differ); batches give
what one-by-one calls give. test_splice.py and test_tiktoken_cuts.py fuzz narrower alphabets.
"""
from __future__ import annotations

import os
from contextlib import contextmanager

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatdata import History
from chatdata.rollout import Rollout
from chatdata.templates import tokenize_chats
from chatdata.templates.tiktoken_bpe import tiktoken_bpe_for

from template_paths import TEMPLATE_DIR

ADDED = ["<|im_end|>", "<|endoftext|>", "<|im_start|>", "<tool_call>", "</tool_call>", "<s>", "</s>", "[INST]",
         "[/INST]", "[TOOL_CALLS]", "<SPECIAL_20>", "<unk>"]
PARTIAL = ["<|im_", "im_end|>", "<|", "|>", "<tool_", "</", "[/", "<SPECIAL_", "<|im_end|", "<<|im_end|>>", "[INST"]
NOT_NFC = ["e\u0301", "\u0301", "\u1100\u1161", "\u1100\u1161\u11a8", "\u11a8", "\uac00\u11a8", "\u212b", "\u2126",
           "A\u030a\u0327", "\u1ea1\u0302", "\u0f73", "\u1e9b\u0323", "\u0344", "\u0958", "\U00011935\U00011930"]
COMPAT = ["\ufb01", "\u2460", "\uff21", "\u2122", "\u01c5", "\u017f", "K", "\u0130", "\xdf", "\u1e9e", "\ufb06", "\xb2"]
SPACE = [" ", "  ", " " * 17, "\t", "\n", "\n\n", "\n" * 5, "\r\n", "\r", " \n", "\n ", "\r\n\t", "\t \t", "\xa0",
         "\u3000", "\u2028", "\x0b", "\x0c", "\x85", "\u200b", "\ufeff", "\u180e", "\x1c", "\x1f", "\u2003"]
DIGITS = ["0", "12", "1234", "9" * 25, "\u0663", "\u0661\u0662\u0663", "3.14", "1,000", "\U0001d7d8\U0001d7d9"]
WORDS = ["x", "Hello", "WORLD", "'s", "'S", "'LL", "'ll", "'re", "'VE", "'m", "'D", "'t", "'\u017f", "'\u212a",
         "'\ufb06", "don't", "I'M", "y'all", "a" * 300, "supercalifragilistic" * 6, "\u65e5\u672c\u8a9e",
         "\ud55c\uad6d\uc5b4", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629", "\u0939\u093f\u0928\u094d\u0926\u0940",
         "\u041f\u0440\u0438\u0432\u0435\u0442", "\u03a3\u0391\u03a3"]
SYMBOLS = ["\U0001f44b\U0001f3fd", "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f1eb\U0001f1f7", "\u2764\ufe0f",
           "\U0001f3f3\ufe0f\u200d\U0001f308", "\U0001d54f", "\U00013000", "\U00020000", "\U0010fffd", "\U000e0001",
           "\ue000", "\ufffd", "\uffff", "\x00", "\x7f", "\x80", "\x9f", "!", "--", "...", "{\"a\": 1}", "```", "'",
           "''", "'\n", "/\n", "?\r\n", "\\"]
PIECES = ADDED + PARTIAL + NOT_NFC + COMPAT + SPACE + DIGITS + WORDS + SYMBOLS

piece = st.one_of(st.sampled_from(PIECES), st.text(st.characters(blacklist_categories=("Cs",)), max_size=4))
adversarial = st.lists(piece, max_size=10).map("".join)
FUZZ = settings(max_examples=20, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@contextmanager
def full_encode_only():
    old = os.environ.get("CHATDATA_SPLICE")
    os.environ["CHATDATA_SPLICE"] = "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["CHATDATA_SPLICE"]
        else:
            os.environ["CHATDATA_SPLICE"] = old


def _lists(x):
    return [t.tolist() for t in x]


@FUZZ
@given(texts=st.lists(adversarial, min_size=1, max_size=8))
def test_tokenize_chats_and_the_twin_give_the_tokenizers_ids(any_tok, texts):
    want = any_tok(texts, add_special_tokens=False)["input_ids"]
    got = tokenize_chats(texts, None, any_tok)["input_ids"]
    assert _lists(got) == want
    assert [tokenize_chats([t], None, any_tok)["input_ids"][0].tolist() for t in texts] == want  # one by one
    bpe = tiktoken_bpe_for(any_tok)
    for text, ids in zip(texts, want):
        if bpe.supports(text):
            assert bpe.encode(text) == ids
            segments = bpe.special_re.split(text)[::2]  # what the splice engine hands the lookahead-free encode
            joined = bpe.encode_joined(segments).tolist()
            reference = any_tok.backend_tokenizer.encode_batch(segments, add_special_tokens=False)
            assert joined == [i for k, enc in enumerate(reference) for i in ([bpe.separator_id] if k else []) + enc.ids]


def _chat(contents: list[str], system: str | None) -> list[dict]:
    chat = [{"role": "system", "content": system}] if system is not None else []
    for k, c in enumerate(contents):
        chat.append({"role": "user" if k % 2 == 0 else "assistant", "content": c})
    return chat


chats = st.lists(st.builds(_chat, st.lists(adversarial, min_size=2, max_size=6).map(lambda c: c[:len(c) // 2 * 2]),
                           st.none() | adversarial), min_size=1, max_size=4)


def _hf(tok, chat, **kw):
    out = tok.apply_chat_template(chat, tokenize=True, return_dict=True, **kw)
    return list(out["input_ids"]), out.get("assistant_masks")


@FUZZ
@given(batch=chats)
def test_apply_chat_template_gives_transformers_ids_and_the_full_encodes_masks(any_tok, batch):
    kw = dict(tokenizer=any_tok, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
              add_generation_prompt=False)
    h = History.from_chats(batch)
    out = h.apply_chat_template(**kw)
    with full_encode_only():
        ref = h.apply_chat_template(**kw)
    for i, chat in enumerate(batch):
        assert out[i]["input_ids"].tolist() == _hf(any_tok, chat)[0]
        assert out[i]["assistant_masks"].tolist() == ref[i]["assistant_masks"].tolist()
        one = History.from_chats([chat]).apply_chat_template(**kw)
        assert one["input_ids"][0].tolist() == out[i]["input_ids"].tolist()
        assert one["assistant_masks"][0].tolist() == out[i]["assistant_masks"].tolist()


GENERATION_TEMPLATE = (TEMPLATE_DIR / "HuggingFaceTB-SmolLM3-3B-hfjs.jinja").read_text(encoding="utf-8")


@FUZZ
@given(contents=st.lists(adversarial.filter(bool), min_size=4, max_size=4))
def test_generation_template_masks_equal_transformers(any_tok, contents):
    """A template with ``{% generation %}`` blocks: transformers computes the masks itself."""
    chat = _chat(contents, None)
    want_ids, want_masks = _hf(any_tok, chat, chat_template=GENERATION_TEMPLATE, return_assistant_tokens_mask=True)
    out = History.from_chats([chat]).apply_chat_template(
        tokenizer=any_tok, chat_template=GENERATION_TEMPLATE, tokenize=True, return_dict=True,
        return_assistant_tokens_mask=True, add_generation_prompt=False)
    assert out["input_ids"][0].tolist() == want_ids
    assert out["assistant_masks"][0].tolist() == list(want_masks)


def _eot(tok) -> str:
    return "<|im_end|>" if "<|im_end|>" in tok.get_vocab() else "</s>"


@settings(max_examples=10, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(users=st.lists(adversarial.filter(bool), min_size=3, max_size=3),
       replies=st.lists(adversarial, min_size=2, max_size=2), clean=st.booleans())
def test_rollout_ids_equal_a_fresh_encode_or_drift_says_where(any_tok, users, replies, clean):
    """Kept ids + the template's new text, encoded by the twin, are the full encode of the
    rendered chat -- or ``drift()`` names the first difference (a reply that opens with
    whitespace merges with the header's newline in the full encode: BPE is not a bijection)."""
    eot = _eot(any_tok)
    ro = Rollout([[{"role": "user", "content": users[0]}]], tokenizer=any_tok)
    for reply, user in zip(replies, users[1:]):
        reply = reply.lstrip() or "ok" if clean else reply
        ids = any_tok.encode(reply + eot, add_special_tokens=False)
        ro.add_response([torch.tensor(ids)])
        ro.add_messages([[{"role": "user", "content": user}]])
    kept = ro.prompt_ids()[0].tolist()
    fresh = _hf(any_tok, ro.history.to_chats()[0], add_generation_prompt=True)[0]
    assert (ro.drift()[0] is None) == (kept == fresh)
    if clean and not any(a in r for r in replies for a in ADDED + ["<tool_call", "[TOOL_CALLS"]):
        assert kept == fresh  # nothing for the template to rewrite


COLLIDING = ["ok", "a", "d", "s", "1", "S", "u", "user", "assistant", "system", "model", "User:", "Assistant:", "start",
             "end", "im", "INST", "think", "eos"]
PLACEMENT_TEMPLATES = ["Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen1.5-72B-Chat", "zai-org-GLM-4.5", "NVIDIA-Nemotron-Nano-v2",
                       "upstage-SOLAR-10.7B-Instruct-v1.0", "tencent-Hy3", "Apertus-8B-Instruct",
                       "mistralai-Mistral-Nemo-Instruct-2407", "meta-llama-Llama-3.1-8B-Instruct", "THUDM-chatglm3-6b"]


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(name=st.sampled_from([n for n in PLACEMENT_TEMPLATES if (TEMPLATE_DIR / f"{n}.jinja").exists()]),
       contents=st.lists(st.sampled_from(COLLIDING), min_size=6, max_size=6))
def test_short_colliding_contents_are_trained_where_distinct_ones_are(qwen_tok, name, contents):
    """Short messages that repeat each other or spell part of the template's markup ("ok" after
    "ok", "d" inside <|im_end|>, "1" inside <SPECIAL_12>) are placed like distinct ones: the
    trained text is the placeholders' with each placeholder replaced by its message."""
    from chatdata.templates import render_chats_with_spans

    template = (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")
    marks = [f"\u24b6{k}\u24b7" for k in range(6)]  # placeholders no template writes

    def trained(words):
        chat = [{"role": "user" if k % 2 == 0 else "assistant", "content": w} for k, w in enumerate(words)]
        (text,), (spans,) = render_chats_with_spans([chat], template, tokenizer=qwen_tok)
        return [text[a:b] for a, b in spans]

    want = trained(marks)
    for mark, word in zip(marks, contents):
        want = [t.replace(mark, word) for t in want]
    assert trained(contents) == want
