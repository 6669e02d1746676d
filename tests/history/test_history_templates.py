"""History.apply_chat_template / from_text against transformers and the template engine."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

from chatdata.history import History
from chatdata.td import RaggedTensorDict, TensorDict

CHATS = [
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "and 3+3?"},
    ],
    [{"role": "user", "content": "héllo 🌍"}, {"role": "assistant", "content": "bonjour"}],
    [{"role": "user", "content": "hi"}],
]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
TOOL_CHAT = [
    {"role": "user", "content": "weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "{\"temp\": 21}", "tool_call_id": "c1"},
    {"role": "assistant", "content": "21 °C"},
]


@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_render_matches_transformers(qwen_tok, add_generation_prompt):
    h = History.from_chats(CHATS)
    texts = h.apply_chat_template(tokenizer=qwen_tok, add_generation_prompt=add_generation_prompt)
    want = [qwen_tok.apply_chat_template(c, tokenize=False, add_generation_prompt=add_generation_prompt) for c in CHATS]
    assert texts == want
    one = History.from_chats(CHATS[0]).apply_chat_template(tokenizer=qwen_tok)
    assert one == qwen_tok.apply_chat_template(CHATS[0], tokenize=False, add_generation_prompt=True)


def test_render_tools_and_extra_keys(qwen_tok):
    h = History.from_chats([TOOL_CHAT])
    got = h.apply_chat_template(tokenizer=qwen_tok, tools=TOOLS, add_generation_prompt=False)
    assert got == [qwen_tok.apply_chat_template(TOOL_CHAT, tools=TOOLS, tokenize=False, add_generation_prompt=False)]
    # extra keys reach the template
    tmpl = "{% for m in messages %}{{ m.role }}:{{ m.name }}|{% endfor %}"
    named = History.from_chats([{"role": "user", "content": "a", "name": "bob"}])
    assert named.apply_chat_template(chat_template=tmpl, add_generation_prompt=False) == "user:bob|"


def test_render_mistral(mistral_tok):
    chats = [CHATS[1][:1], CHATS[1] + [{"role": "user", "content": "again"}]]
    got = History.from_chats(chats).apply_chat_template(tokenizer=mistral_tok, add_generation_prompt=False)
    assert got == [mistral_tok.apply_chat_template(c, tokenize=False) for c in chats]


def test_template_choice(qwen_tok):
    h = History.from_chats(CHATS[2])
    chatml = h.apply_chat_template(tokenizer=qwen_tok, chat_template_name="chatml_format")
    assert chatml == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert h.apply_chat_template(chat_template="{{ messages[0].content }}") == "hi"
    assert h.apply_chat_template() == chatml  # no tokenizer, no template: chatml_format
    with pytest.raises(ValueError, match="chatml_format"):
        h.apply_chat_template(chat_template_name="nope")


def test_continue_final_message(qwen_tok):
    chat = CHATS[1]
    got = History.from_chats(chat).apply_chat_template(tokenizer=qwen_tok, continue_final_message=True)
    assert got == qwen_tok.apply_chat_template(chat, tokenize=False, continue_final_message=True)


def test_tokenize_batch_ragged(qwen_tok):
    h = History.from_chats(CHATS)
    out = h.apply_chat_template(tokenizer=qwen_tok, tokenize=True, return_dict=True,
                                return_assistant_tokens_mask=True, add_generation_prompt=False)
    assert isinstance(out, RaggedTensorDict) and out.batch_size == torch.Size([3, -1])
    texts = h.apply_chat_template(tokenizer=qwen_tok, add_generation_prompt=False)
    for i, text in enumerate(texts):
        ids = qwen_tok(text, add_special_tokens=False)["input_ids"]
        row = out[i]
        assert row["input_ids"].tolist() == ids
        assert row["attention_mask"].tolist() == [1] * len(ids)
        mask = row["assistant_masks"]
        assert mask.shape == (len(ids),)
        decoded = qwen_tok.decode([t for t, m in zip(ids, mask.tolist()) if m])
        want = "".join(m["content"] + "<|im_end|>" for m in CHATS[i] if m["role"] == "assistant")
        assert decoded == want
    assert out["input_ids"].is_nested


def test_tokenize_equal_length_batch_indexes_with_its_mask(qwen_tok):
    """A batch whose conversations tokenize to one length gives dense columns (as torchrl's lazy
    stack does), so ``ids[mask.bool()]`` selects the trained tokens; one conversation is such a batch."""
    chat = [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi there!"}]
    for h in (History.from_chats([chat]), History.from_chats([chat, chat])):
        out = h.apply_chat_template(tokenizer=qwen_tok, tokenize=True, return_dict=True,
                                    return_assistant_tokens_mask=True, add_generation_prompt=False)
        assert isinstance(out, RaggedTensorDict)
        ids, mask = out["input_ids"], out["assistant_masks"]
        assert not ids.is_nested and ids.shape == mask.shape and ids.shape[0] == h.batch_size[0]
        assert qwen_tok.decode(ids[mask.bool()]) == "Hi there!<|im_end|>" * h.batch_size[0]


def test_tokenize_padded_and_single(qwen_tok):
    h = History.from_chats(CHATS)
    out = h.apply_chat_template(tokenizer=qwen_tok, tokenize=True, padding=True, return_dict=True,
                                return_assistant_tokens_mask=True)
    assert isinstance(out, TensorDict)
    lengths = out["attention_mask"].sum(-1)
    assert out.batch_size == out["input_ids"].shape and out["input_ids"].shape[0] == 3
    assert int(lengths.max()) == out["input_ids"].shape[1]
    ids = h.apply_chat_template(tokenizer=qwen_tok, tokenize=True, padding=True)
    assert torch.equal(ids, out["input_ids"])
    single = History.from_chats(CHATS[0])
    one = single.apply_chat_template(tokenizer=qwen_tok, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    want = qwen_tok(single.apply_chat_template(tokenizer=qwen_tok), add_special_tokens=False)["input_ids"]
    assert one["input_ids"].tolist() == want and one["assistant_masks"].sum() > 0
    t = single.apply_chat_template(tokenizer=qwen_tok, tokenize=True)
    assert t.shape == (1, len(want))


def test_none_role_is_skipped():
    h = History.from_chats([{"role": "user", "content": "a"}, {"role": "<none>", "content": ""}])
    assert h.apply_chat_template(chat_template_name="chatml_format", add_generation_prompt=False) == \
        "<|im_start|>user\na<|im_end|>\n"


# -- from_text ------------------------------------------------------------------------------------
def test_from_text_incomplete():
    text = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhal"
    h = History.from_text(text, chat_template_name="chatml_format")
    assert h.role == ["user", "assistant"] and h.is_complete == [True, False]
    assert h.to_chats()[-1] == {"role": "assistant", "content": "hal", "is_complete": False}
    b = History.from_text([text, text + "f<|im_end|>"], chat_template_name="chatml_format")
    assert b.batch_size == torch.Size([2, -1]) and b.is_complete == [[True, False], [True, True]]


def test_from_text_tokenizer_template(qwen_tok):
    chat = CHATS[0] + [{"role": "assistant", "content": "6"}]
    text = History.from_chats(chat).apply_chat_template(tokenizer=qwen_tok, chat_template_name="qwen",
                                                         add_generation_prompt=False)
    assert History.from_text(text, chat_template_name="qwen").to_chats() == chat


_content = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="<>|\r"), min_size=1,
                   max_size=30).filter(lambda s: s == s.strip())


@st.composite
def _chat(draw):
    n = draw(st.integers(1, 6))
    roles = (["system"] if draw(st.booleans()) else []) + ["user", "assistant"] * 3
    return [{"role": r, "content": draw(_content)} for r in roles[:n]]


@settings(max_examples=60, deadline=None)
@given(_chat(), st.sampled_from(["chatml_format", "qwen"]))
def test_from_text_round_trip(chat, name):
    if name == "qwen" and chat[0]["role"] != "system":
        chat = [{"role": "system", "content": "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."}] + chat
    h = History.from_chats(chat)
    text = h.apply_chat_template(chat_template_name=name, add_generation_prompt=False)
    assert History.from_text(text, chat_template_name=name).to_chats() == chat


# -- from_text(render(h)) == h with tool calls (qwen) ----------------------------------------
_MARKERS = ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
_free_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30).filter(
    lambda s: not any(m in s for m in _MARKERS) and "<|im" not in s and "\n<" not in s)
_args = st.dictionaries(st.text(max_size=6), st.one_of(st.integers(), st.text(max_size=8), st.booleans()), max_size=3)
_tool_call = st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
    {"name": st.from_regex(r"[a-z_]{1,10}", fullmatch=True), "arguments": _args})})  # the shape chats are fed in


@st.composite
def _qwen_tool_chat(draw):
    chat = [{"role": "system", "content": draw(_free_text)}]
    for _ in range(draw(st.integers(1, 3))):
        chat.append({"role": "user", "content": draw(_free_text.filter(bool))})
        if draw(st.booleans()):
            chat.append({"role": "assistant", "content": draw(_free_text),
                         "tool_calls": draw(st.lists(_tool_call, min_size=1, max_size=2))})
            chat += [{"role": "tool", "content": draw(_free_text)} for _ in range(draw(st.integers(1, 2)))]
        chat.append({"role": "assistant", "content": draw(_free_text)})
    return chat


@settings(max_examples=60, deadline=None)
@given(st.lists(_qwen_tool_chat(), min_size=1, max_size=3))
def test_from_text_of_rendered_history_with_tool_calls(chats):
    h = History.from_chats(chats)
    texts = h.apply_chat_template(chat_template_name="qwen", add_generation_prompt=False)
    back = History.from_text(texts, chat_template_name="qwen")
    assert back.to_chats() == chats
    assert back.batch_size == h.batch_size
    assert back.role == h.role and back.content == h.content and back.tool_calls == h.tool_calls
