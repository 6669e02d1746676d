"""train_on, last_turn_only and loss_weights through History.apply_chat_template and the templates layer."""
from __future__ import annotations

import math

import pytest
import torch

from chatdata import History
from chatdata.templates import (TemplateError, TrainSelection, UnplaceableTurnError, final_answer, get_chat_template,
                                render_chats_with_spans, render_chats_with_weights, tokenize_chats)

from gen_templates import MISTRAL_GEN, QWEN_GEN
from template_paths import TEMPLATE_DIR

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": "Zqarg a"}}}
CHAT = [
    {"role": "system", "content": "Zqsys terse."},
    {"role": "user", "content": "Zqusr one?"},
    {"role": "assistant", "content": "Zqans one."},
    {"role": "user", "content": "Zqusr two?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "Zqtool out"},
    {"role": "assistant", "content": "Zqans two."},
]


def _by_weight(tok, out):
    ids, w = out["input_ids"], out["loss_weights"]
    return {float(v): tok.decode(ids[w == v].tolist()) for v in torch.unique(w).tolist() if v > 0}


def _learned(tok, out):
    return tok.decode(out["input_ids"][out["assistant_masks"].bool()].tolist())


def test_role_weights_reach_the_tokens(qwen_tok):
    out = History.from_chats(CHAT).apply_chat_template(
        tokenizer=qwen_tok, add_generation_prompt=False, loss_weights={"tool": 0.25, "user": 0.5})
    assert out["loss_weights"].dtype == torch.float32
    assert ((out["loss_weights"] > 0) == out["assistant_masks"].bool()).all()
    got = _by_weight(qwen_tok, out)
    assert got[0.25] == "Zqtool out\n</tool_response><|im_end|>"
    assert got[0.5] == "Zqusr one?<|im_end|>Zqusr two?<|im_end|>"
    assert "Zqans one.<|im_end|>" in got[1.0] and "Zqarg a" in got[1.0] and "Zqusr" not in got[1.0]
    # the default masks are untouched: the same tokens, the assistant's alone
    plain = History.from_chats(CHAT).apply_chat_template(tokenizer=qwen_tok, add_generation_prompt=False,
                                                         return_assistant_tokens_mask=True)
    assert "loss_weights" not in plain.keys()
    assert (plain["input_ids"] == out["input_ids"]).all()
    assert (plain["assistant_masks"].bool() == (out["loss_weights"] == 1.0)).all()


def test_train_on_roles_and_last_turn_only(qwen_tok):
    h = History.from_chats(CHAT)
    kw = dict(tokenizer=qwen_tok, add_generation_prompt=False)
    out = h.apply_chat_template(train_on=["tool"], **kw)  # implies the mask, no weights column
    assert "loss_weights" not in out.keys() and _learned(qwen_tok, out) == "Zqtool out\n</tool_response><|im_end|>"
    assert _learned(qwen_tok, h.apply_chat_template(train_on="system", **kw)) == "Zqsys terse.<|im_end|>"
    assert _learned(qwen_tok, h.apply_chat_template(last_turn_only=True, **kw)) == "Zqans two.<|im_end|>"
    # the last trained turn, whatever its role
    assert _learned(qwen_tok, h.apply_chat_template(train_on=["user", "tool"], last_turn_only=True, **kw)) == \
        "Zqtool out\n</tool_response><|im_end|>"
    # content only: no end of turn for any role
    out = h.apply_chat_template(train_on=["user"], mask_eot=False, **kw)
    assert _learned(qwen_tok, out) == "Zqusr one?Zqusr two?"


def test_per_turn_callable_final_answer_and_message_weights(qwen_tok):
    h = History.from_chats(CHAT)
    kw = dict(tokenizer=qwen_tok, add_generation_prompt=False)
    out = h.apply_chat_template(loss_weights=lambda chat, k: 0.5 ** (len(chat) - 1 - k), **kw)
    got = _by_weight(qwen_tok, out)
    assert got[1.0] == "Zqans two.<|im_end|>" and got[0.0625] == "Zqans one.<|im_end|>" and "Zqarg a" in got[0.25]
    assert _learned(qwen_tok, h.apply_chat_template(loss_weights=final_answer, **kw)) == "Zqans two.<|im_end|>"
    ends_on_call = History.from_chats(CHAT[:5])
    assert ends_on_call.apply_chat_template(loss_weights=final_answer, **kw)["assistant_masks"].sum() == 0
    # a message's own "weight" key (kept by History as an extra field) wins over its role
    weighted = [dict(m) for m in CHAT]
    weighted[2]["weight"], weighted[1]["weight"] = 0, 0.3
    h = History.from_chats(weighted)
    assert h.to_chats()[2]["weight"] == 0
    got = {round(k, 4): v for k, v in _by_weight(qwen_tok, h.apply_chat_template(loss_weights=True, **kw)).items()}
    assert got[0.3] == "Zqusr one?<|im_end|>" and "Zqans one." not in got[1.0] and "Zqans two." in got[1.0]
    # without loss_weights the key is not read: plain assistant masks
    assert "Zqans one." in _learned(qwen_tok, h.apply_chat_template(return_assistant_tokens_mask=True, **kw))


def test_batches_ragged_padded_and_single(qwen_tok):
    h = History.from_chats([CHAT, CHAT[:3]])
    kw = dict(tokenizer=qwen_tok, add_generation_prompt=False, loss_weights={"user": 0.5})
    ragged = h.apply_chat_template(**kw)
    padded = h.apply_chat_template(padding=True, **kw)
    assert padded["loss_weights"].dtype == torch.float32 and padded["loss_weights"].shape == padded["input_ids"].shape
    for i in range(2):
        n = int(padded["attention_mask"][i].sum())
        assert padded["loss_weights"][i, :n].tolist() == ragged[i]["loss_weights"].tolist()
        assert padded["loss_weights"][i, n:].abs().sum() == 0
    single = History.from_chats(CHAT[:3]).apply_chat_template(**kw)
    assert single["loss_weights"].tolist() == ragged[1]["loss_weights"].tolist()


def test_generation_tagged_templates(qwen_tok):
    """{% generation %} spans keep their author's extent and get per-turn weights and roles."""
    chat = [m for m in CHAT if m["role"] != "tool" and not m.get("tool_calls")]
    for template in (QWEN_GEN, MISTRAL_GEN):
        if template is MISTRAL_GEN:
            chat = chat[1:]  # this Mistral template takes no system message
        texts, spans = render_chats_with_weights([chat], template, tokenizer=qwen_tok, last_turn_only=True)
        _, tagged = render_chats_with_spans([chat], template, tokenizer=qwen_tok)
        assert [(s.start, s.end) for s in spans[0]] == tagged[0][-1:]
        texts, spans = render_chats_with_weights([chat], template, tokenizer=qwen_tok,
                                                 loss_weights=lambda c, k: float(k), train_on=["assistant", "user"])
        text = texts[0]
        for s in spans[0]:
            assert s.weight == s.message and chat[s.message]["content"] in text[s.start:s.end]
            assert s.role == chat[s.message]["role"]
        assert [(s.start, s.end) for s in spans[0] if s.role == "assistant"] == tagged[0]


def test_continue_final_message_last_turn(qwen_tok):
    chat = CHAT[:4] + [{"role": "assistant", "content": "Zqans partial"}]
    out = History.from_chats(chat).apply_chat_template(tokenizer=qwen_tok, continue_final_message=True,
                                                       last_turn_only=True, loss_weights={"user": 0.5})
    got = _by_weight(qwen_tok, out)
    assert got == {1.0: "Zqans partial"}


def test_content_parts_train_their_text_never_the_placeholder(qwen_tok):
    template = (TEMPLATE_DIR / "Qwen3.5-4B.jinja").read_text(encoding="utf-8")
    chat = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Zqusr what is it?"}]},
            {"role": "assistant", "content": "Zqans a cat."}]
    texts, spans = render_chats_with_weights([chat], template, tokenizer=qwen_tok, train_on=["user", "assistant"])
    text = texts[0]
    user = [text[s.start:s.end] for s in spans[0] if s.role == "user"]
    assert user == ["Zqusr what is it?<|im_end|>"] and "<|image_pad|>" in text


def test_templates_that_drop_a_message_raise_naming_it(qwen_tok):
    phi = (TEMPLATE_DIR / "microsoft-Phi-3.5-mini-instruct.jinja").read_text(encoding="utf-8")
    with pytest.raises(UnplaceableTurnError, match=r"chat 0, message 5 \(tool\).*not in the rendering"):
        render_chats_with_weights([CHAT], phi, tokenizer=qwen_tok, train_on=["assistant", "tool"])
    # not asking to train it is fine
    texts, spans = render_chats_with_weights([CHAT], phi, tokenizer=qwen_tok, train_on=["assistant"])
    assert spans[0]


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(train_on=5), TypeError, "train_on"),
    (dict(train_on=["assistant", ""]), TypeError, "role names"),
    (dict(last_turn_only="yes"), TypeError, "last_turn_only"),
    (dict(loss_weights={"tool": -1}), ValueError, "finite number >= 0"),
    (dict(loss_weights={"tool": math.nan}), ValueError, "finite number >= 0"),
    (dict(loss_weights={"tool": 10 ** 400}), ValueError, "finite number >= 0"),  # too large for a float
    (dict(loss_weights={"tool": "high"}), TypeError, "number"),
    (dict(loss_weights=[1.0]), TypeError, "loss_weights must be"),
    # were torch's "only one element tensors can be converted" and "train_on must be a role name ..., got 1"
    (dict(loss_weights={"tool": torch.tensor([1.0, 2.0])}), TypeError, r"loss_weights\['tool'\] must be one number"),
    (dict(loss_weights={1: 2.0}), TypeError, "loss_weights maps role names .* got the key 1"),
    (dict(loss_weights=lambda chat, k: "x"), TypeError, "loss_weights"),
    (dict(loss_weights=lambda chat, k: -0.5), ValueError, "message"),
    (dict(train_on="tool", tokenize=False), ValueError, "tokenize=True"),
])
def test_bad_options_fail_clearly(qwen_tok, kwargs, error, match):
    with pytest.raises(error, match=match):
        History.from_chats(CHAT).apply_chat_template(tokenizer=qwen_tok, add_generation_prompt=False, **kwargs)


@pytest.mark.parametrize("kwargs, match", [
    (dict(train_on=["asistant"]), "train_on names the role 'asistant', which no message has; the chats have 'assistant'"),
    (dict(train_on=["assistant", "tools"]), "train_on names the role 'tools', .* the chats have 'tool'"),
    (dict(loss_weights={"Assistant": 2.0}), "loss_weights names the role 'Assistant', .* the chats have 'assistant'"),
])
def test_a_misspelt_role_is_refused_not_silently_untrained(qwen_tok, kwargs, match):
    # was: train_on=["asistant"] trained nothing, loss_weights={"Assistant": 2} kept every weight at 1
    with pytest.raises(ValueError, match=match):
        History.from_chats([CHAT, CHAT]).apply_chat_template(tokenizer=qwen_tok, **kwargs)


def test_a_role_the_chats_lack_is_fine_when_nothing_is_spelt_like_it(qwen_tok):
    # custom roles and roles a batch happens to lack are legitimate
    chat = [m for m in CHAT if m["role"] != "tool" and not m.get("tool_calls")]
    out = History.from_chats(chat).apply_chat_template(tokenizer=qwen_tok, train_on=["assistant", "tool", "critic"])
    assert _learned(qwen_tok, out).count("Zqans") == 2


def test_bad_message_weight_names_the_message(qwen_tok):
    chat = [dict(m) for m in CHAT]
    chat[3]["weight"] = -2
    with pytest.raises(ValueError, match="message 3's 'weight'"):
        TrainSelection(loss_weights=True).message_weights(chat)


def test_tokenize_chats_span_weights_checks_and_slow_path(qwen_tok):
    texts, spans = render_chats_with_spans([CHAT], get_chat_template("qwen"))
    with pytest.raises(ValueError, match="return_assistant_tokens_mask=True"):
        tokenize_chats(texts, spans, qwen_tok, span_weights=[[1.0] * len(spans[0])])
    with pytest.raises(ValueError, match="span weights for"):
        tokenize_chats(texts, spans, qwen_tok, return_assistant_tokens_mask=True, span_weights=[[1.0]])
    weights = [[0.5 + i for i in range(len(spans[0]))]]
    fast = tokenize_chats(texts, spans, qwen_tok, return_assistant_tokens_mask=True, span_weights=weights)

    class Slow:  # a tokenizer without offsets: the piecewise path
        is_fast = False
        pad_token_id = qwen_tok.pad_token_id

        def encode(self, text, add_special_tokens=False):
            return qwen_tok.encode(text, add_special_tokens=add_special_tokens)

    class OffsetsOnly:  # a fast tokenizer seen through __call__ only: the char -> token offsets path
        is_fast = True
        pad_token_id = qwen_tok.pad_token_id

        def __call__(self, texts, **kw):
            return qwen_tok(texts, **kw)

    for other in (Slow(), OffsetsOnly()):
        got = tokenize_chats(texts, spans, other, return_assistant_tokens_mask=True, span_weights=weights)
        assert got["input_ids"][0].tolist() == fast["input_ids"][0].tolist()
        assert got["loss_weights"][0].tolist() == fast["loss_weights"][0].tolist()
        assert got["assistant_masks"][0].tolist() == fast["assistant_masks"][0].tolist()
    assert sorted(set(fast["loss_weights"][0].tolist())) == [0.0] + [w for w in weights[0]]
