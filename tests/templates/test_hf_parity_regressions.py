"""Cases where chatdata's token ids silently left Hugging Face's, each fixed and pinned here
(the hypothesis fuzzing that looks for more is in test_hf_differential.py)."""
from __future__ import annotations

import pytest
import torch

from chatdata import History
from chatdata.rollout import Rollout
from chatdata.templates import render_chats_with_spans, tokenize_chats
from chatdata.templates.backend import unpadded
from chatdata.templates.tiktoken_bpe import tiktoken_bpe_for, why_not_tiktoken

CHATS = [[{"role": "user", "content": "Write a long answer, please: " + "word " * 20},
          {"role": "assistant", "content": "Sure " * 30}]] * 2


def _fresh(tokenizer_dir, name="qwen2.5-instruct"):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tokenizer_dir / name))


def _hf_ids(tok, chats, **kw):
    try:
        out = tok.apply_chat_template(chats, tokenize=True, return_dict=True, add_generation_prompt=True, **kw)
    finally:
        unpadded(tok.backend_tokenizer)  # transformers leaves padding/truncation on the shared tokenizer
    return out["input_ids"]


def _our_ids(tok, chats, **kw):
    out = History.from_chats(chats).apply_chat_template(tokenizer=tok, tokenize=True, return_dict=True,
                                                         add_generation_prompt=True, **kw)
    ids = out["input_ids"]
    return [t.tolist() for t in ids.unbind(0)]


@pytest.mark.parametrize("kw", [
    {"truncation": "do_not_truncate", "max_length": 10},  # was cut to 10 tokens: bool("do_not_truncate") is True
    {"truncation": "longest_first", "max_length": 10},
    {"truncation": "only_first", "max_length": 10},
    {"padding": "do_not_pad"},  # was a ValueError
    {"padding": "longest", "truncation": True, "max_length": 12},
])
def test_strategy_names_mean_what_they_mean_for_the_tokenizer(any_tok, kw):
    if any_tok.pad_token_id is None:
        pytest.skip("no pad token")
    assert _our_ids(any_tok, CHATS, **kw) == _hf_ids(any_tok, CHATS, **kw)


@pytest.mark.parametrize("kw, match", [
    ({"truncation": "bogus", "max_length": 10}, r"truncation must be a bool or one of"),
    ({"truncation": "only_second", "max_length": 10}, r"only_second.*a chat is one text"),
    ({"padding": "bogus"}, r"padding must be True, False or one of"),
])
def test_unknown_strategy_names_are_refused(qwen_tok, kw, match):
    with pytest.raises(ValueError, match=match):
        tokenize_chats(["hello"], None, qwen_tok, **kw)


def test_a_new_normalizer_pre_tokenizer_or_dropout_is_seen_without_new_tokens(tokenizer_dir):
    """The twin was cached per vocabulary size: a normalizer, a pre-tokenizer or BPE dropout
    (subword regularisation) set afterwards, with no token added, kept the old twin, and its ids
    silently differed from the tokenizer's."""
    from tokenizers import normalizers, pre_tokenizers

    tok = _fresh(tokenizer_dir)
    text = "<|im_start|>user\nHeLLo World<|im_end|>"

    def same_ids():
        return tokenize_chats([text], None, tok)["input_ids"][0].tolist() == tok(text, add_special_tokens=False)["input_ids"]

    assert tiktoken_bpe_for(tok) is not None and same_ids()
    backend = tok.backend_tokenizer
    nfc, pre = backend.normalizer, backend.pre_tokenizer
    backend.normalizer = normalizers.Lowercase()
    assert "normalizer" in why_not_tiktoken(tok) and same_ids()
    backend.normalizer = nfc
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    assert "add_prefix_space" in why_not_tiktoken(tok) and same_ids()
    backend.pre_tokenizer = pre
    backend.model.dropout = 0.5
    assert "dropout" in why_not_tiktoken(tok)
    backend.model.dropout = None
    assert why_not_tiktoken(tok) == "" and same_ids()  # all put back: the twin again


@pytest.mark.parametrize("name", ["mistralai-Mistral-Nemo-Instruct-2407", "mistralai-Mixtral-8x22B-Instruct-v0.1"])
def test_an_empty_user_message_after_a_system_prompt_does_not_train_the_header(mistral_tok, name):
    """Mistral templates put the system prompt into the last user turn. With an empty user
    message in the middle, the turn after it was placed where the prefix rendering parted from
    the chat (``[INST]|S\\n\\n[/INST]`` vs ``[INST]|[/INST]``): ``[/INST]`` was trained."""
    from template_paths import TEMPLATE_DIR

    template = (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")

    def trained(middle):
        chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "u1"},
                {"role": "assistant", "content": "a1"}, {"role": "user", "content": middle},
                {"role": "assistant", "content": "a2"}, {"role": "user", "content": "u3"},
                {"role": "assistant", "content": "a3"}]
        out = History.from_chats([chat]).apply_chat_template(
            tokenizer=mistral_tok, chat_template=template, tokenize=True, return_dict=True,
            return_assistant_tokens_mask=True, add_generation_prompt=False)
        return mistral_tok.decode(out["input_ids"][0][out["assistant_masks"][0].bool()])

    assert trained("") == trained("x")
    assert "[/INST]" not in trained("")


@pytest.mark.parametrize("name", ["Qwen-Qwen1.5-72B-Chat", "Apertus-8B-Instruct", "zai-org-GLM-4.5", "tencent-Hy3",
                                  "upstage-SOLAR-10.7B-Instruct-v1.0"])
def test_a_user_repeating_the_assistant_is_not_trained(qwen_tok, name):
    """The end of an assistant turn is searched before the next user message's text, skipping
    the assistant's own words; every occurrence of those words was skipped, so a user who says
    what the assistant said ("ok" after "ok") had their message trained as part of the turn (or
    the next turn could not be placed)."""
    from template_paths import TEMPLATE_DIR

    template = (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")

    def trained(u1, a1, u2, a2):
        chat = [{"role": "user", "content": u1}, {"role": "assistant", "content": a1},
                {"role": "user", "content": u2}, {"role": "assistant", "content": a2},
                {"role": "user", "content": "u3"}, {"role": "assistant", "content": "a3"}]
        (text,), (spans,) = render_chats_with_spans([chat], template, tokenizer=qwen_tok)
        return "|".join(text[a:b] for a, b in spans)  # characters: other templates' markers are no tokens here

    distinct = trained("u1", "a1", "u2", "a2")
    assert trained("ok", "ok", "ok", "ok") == distinct.replace("a1", "ok").replace("a2", "ok")
    assert trained("u1", "a1", "a1", "a1") == distinct.replace("a2", "a1")


@pytest.mark.parametrize("name, reply", [("Qwen-Qwen1.5-72B-Chat", "d"), ("Qwen-Qwen1.5-72B-Chat", "start"),
                                         ("zai-org-GLM-4.5", "user"), ("upstage-SOLAR-10.7B-Instruct-v1.0", "User:"),
                                         ("THUDM-chatglm3-6b", "s")])
def test_a_reply_that_also_spells_the_next_header_ends_where_its_turn_does(qwen_tok, name, reply):
    """The end of an assistant's words was their last occurrence before the next user message:
    a short reply ("d", a multiple-choice answer) found again in the header after it (Qwen1.5's
    ``<|im_end|>\\n<|im_start|>user``) pulled the mask into that header."""
    from template_paths import TEMPLATE_DIR

    template = (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")

    def trained(a1):
        chat = [{"role": "user", "content": "u1"}, {"role": "assistant", "content": a1},
                {"role": "user", "content": "u2"}, {"role": "assistant", "content": "a2"}]
        (text,), (spans,) = render_chats_with_spans([chat], template, tokenizer=qwen_tok)
        return [text[a:b] for a, b in spans]

    assert trained(reply) == [t.replace("a1", reply) for t in trained("a1")]


@pytest.mark.parametrize("user", ["1", "S"])
def test_a_user_message_spelt_inside_a_marker_keeps_the_end_of_turn_trained(qwen_tok, user):
    """The next user message's text bounds an assistant turn; a message "1" or "S" was found in
    Nemotron's ``<SPECIAL_12>`` end-of-turn marker, so the turn ended before that marker and the
    model was never taught to stop."""
    from template_paths import TEMPLATE_DIR

    template = (TEMPLATE_DIR / "NVIDIA-Nemotron-Nano-v2.jinja").read_text(encoding="utf-8")

    def trained(u2):
        chat = [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"},
                {"role": "user", "content": u2}, {"role": "assistant", "content": "a2"}]
        (text,), (spans,) = render_chats_with_spans([chat], template, tokenizer=qwen_tok)
        return [text[a:b] for a, b in spans]

    assert trained(user) == trained("u2")
    assert trained(user)[0].endswith("<SPECIAL_12>")


@pytest.mark.parametrize("content", ["cafe\u0301 au lait, please: a long enough question", "a long enough question, plain"])
def test_a_rollout_ignores_padding_left_on_the_tokenizer_by_the_callers_own_calls(qwen_tok, content, monkeypatch):
    """``tok(texts, padding="max_length", truncation=True, max_length=N)`` (the policy's own use of
    the tokenizer) leaves padding and truncation on its Rust backend; a rollout encoded the text
    the twin does not cover (here: not NFC; all text with CHATDATA_SPLICE=0 or a tokenizer without
    a twin) with that backend, and its prompt_ids() were silently cut and padded with pad tokens."""
    if content.isascii():
        monkeypatch.setenv("CHATDATA_SPLICE", "0")
    try:
        ro = Rollout([[{"role": "user", "content": "hi"}]], tokenizer=qwen_tok)
        qwen_tok(["some text", "more"], padding="max_length", truncation=True, max_length=12)
        ro.add_response([torch.tensor(qwen_tok.encode("yo<|im_end|>"))])
        qwen_tok(["some text", "more"], padding="max_length", truncation=True, max_length=12)
        ro.add_messages([[{"role": "user", "content": content}]])
        fresh = _hf_ids(qwen_tok, ro.history.to_chats())[0]
        assert ro.prompt_ids()[0].tolist() == list(fresh)
        assert ro.drift() == [None]
    finally:
        unpadded(qwen_tok.backend_tokenizer)
