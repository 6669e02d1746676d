"""Adversarial chats where the mask engine trained the wrong text, found by ``tools/mask_edge_scan.py``.

Each test names the template family and what was wrong. The scan renders every corpus template with
both tokenizers and such chats (empty, blank and unicode contents, contents equal to the template's
header or end of turn, odd tool calls, reasoning only, several systems, answers in a row) and checks
that every trained token is an assistant's own words or its turn's markup, and every such word is
trained -- or the template refuses the chat with a clear error.
"""
from __future__ import annotations

import pytest

from chatdata.templates import UnplaceableTurnError, render_chats, render_chats_with_spans, tokenize_chats

from template_paths import TEMPLATE_DIR

GUARD = "meta-llama-Llama-Guard-3-11B-Vision"


def _template(name: str) -> str:
    return (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")


def _pieces(name: str, chat: list, **kwargs) -> list[str]:
    texts, spans = render_chats_with_spans([chat], _template(name), **kwargs)
    assert texts == render_chats([chat], _template(name), tools=kwargs.get("tools"))
    return [texts[0][a:b] for a, b in spans[0]]


def _text(s: str) -> list:
    return [{"type": "text", "text": s}]


@pytest.mark.parametrize("question", ["", " ", "Zqu1q is this safe?"])
@pytest.mark.parametrize("parts", [True, False])
def test_llama_guard_refuses_every_chat_also_when_the_user_content_is_empty(question, parts):
    """Llama Guard writes the whole chat into one user turn and words its task by the chat's length
    ("'User' messages" for one message, "'Agent' messages" for two). With an empty question the
    empty message gave no floor to the answer's start, which was put where the prompt stops
    agreeing: the guard's task, its categories and the question were trained. It is refused like
    any other chat of the classifier."""
    content = _text(question) if parts else question
    chat = [{"role": "user", "content": content}, {"role": "assistant", "content": _text("Zqa1q ok") if parts else "ok"}]
    with pytest.raises(UnplaceableTurnError, match="message 1 \\(assistant\\)"):
        render_chats_with_spans([chat], _template(GUARD))
    with pytest.raises(UnplaceableTurnError):
        render_chats_with_spans([chat + [{"role": "user", "content": content},
                                         {"role": "assistant", "content": content}]], _template(GUARD))


def test_an_empty_question_still_places_the_answer_after_it():
    """The Llama Guard rule does not touch templates whose prompt differs from the chat after the
    empty question (Gemma-4 opens `<|channel>thought` only in the prompt, CodeLlama-70b writes
    `Destination: user`, Apriel-1.6 `Here are my reasoning steps:`)."""
    chat = [{"role": "system", "content": "Zqs1q rules."}, {"role": "user", "content": ""},
            {"role": "assistant", "content": "Zqa1q one."}, {"role": "user", "content": "Zqu2q two?"},
            {"role": "assistant", "content": "Zqa2q two."}]
    assert _pieces("google-gemma-4-31B-it", chat) == ["Zqa1q one.<turn|>", "Zqa2q two.<turn|>"]
    assert _pieces("Apriel-1.6-15b-Thinker-fixed", chat)[0] == "Zqa1q one.\n<|end|>"


@pytest.mark.parametrize("name, pieces", [
    ("Qwen-Qwen1.5-72B-Chat", ["Zqa1q one.<|im_end|>", "Zqa2q two."]),
    ("GigaChat3-10B-A1.8B", ["Zqa1q one.<|message_sep|>", "Zqa2q two.<|message_sep|>"]),
    ("GigaChat3.1-10B-A1.8B", ["Zqa1q one.<|message_sep|>", "Zqa2q two.<|message_sep|>"]),
    ("Reka-Edge", [" Zqa1q one.\n\n<sep>", " Zqa2q two.\n\n<sep>"]),
])
def test_a_second_answer_in_a_row_does_not_train_its_header(name, pieces, qwen_tok):
    """These templates write no generation prompt after an assistant message: the prompt before
    the second answer ended where the first one did, and the second answer's header
    (`<|im_start|>assistant\\n`, `assistant<|role_sep|>\\n`, `assistant:`) was trained."""
    chat = [{"role": "user", "content": "Zqu1q one?"}, {"role": "assistant", "content": "Zqa1q one."},
            {"role": "assistant", "content": "Zqa2q two."}]
    texts, spans = render_chats_with_spans([chat], _template(name), tokenizer=qwen_tok)
    assert [texts[0][a:b] for a, b in spans[0]] == pieces


@pytest.mark.parametrize("answer", [
    {"role": "assistant", "content": ""},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zqg1q"}}}]},
])
def test_an_answer_the_template_does_not_render_trains_nothing(answer, qwen_tok):
    """GLM-4-9B writes neither an empty answer nor tool calls, not even its `<|assistant|>` header:
    the turn was placed where the prompt stops agreeing and ended at the next turn's opener, so the
    `<|user|>` / `<|tool|>` that follows the question was trained (with the Qwen tokenizer the
    question's last character shares that token)."""
    follow = ({"role": "tool", "content": "Zqt1q rain", "tool_call_id": "c1", "name": "get_weather"}
              if answer.get("tool_calls") else {"role": "user", "content": "Zqu2q two?"})
    chat = [{"role": "user", "content": "Zqu1q one?"}, answer, follow, {"role": "assistant", "content": "Zqa2q two."}]
    texts, spans = render_chats_with_spans([chat], _template("THUDM-glm-4-9b-chat"), tokenizer=qwen_tok)
    assert [texts[0][a:b] for a, b in spans[0]] == ["\nZqa2q two."]
    ids = tokenize_chats(texts, spans, qwen_tok, return_assistant_tokens_mask=True)
    trained = qwen_tok.decode(ids["input_ids"][0][ids["assistant_masks"][0].bool()])
    assert "Zqu" not in trained and "Zqt" not in trained and "<|" not in trained


def test_an_empty_answer_the_template_renders_still_trains_its_end():
    """The rule above keeps the end of an empty answer the template does write (Cohere2's
    `<|START_TEXT|><|END_TEXT|><|END_OF_TURN_TOKEN|>`, MiniMax-M2's `[e~[`): the model learns to stop."""
    chat = [{"role": "user", "content": "Zqu1q one?"}, {"role": "assistant", "content": ""}]
    assert _pieces("MiniMax-M2", chat) == ["[e~["]
    assert _pieces("Cohere2MoE", chat) == ["<|START_TEXT|><|END_TEXT|><|END_OF_TURN_TOKEN|>"]


@pytest.mark.parametrize("name, eot", [("LFM2.5-8B-A1B", "<|im_end|>"), ("poolside-Laguna-S-2.1", "</assistant>"),
                                       ("EssentialAI-rnj-1", "<|eot_id|>")])
def test_an_answer_that_is_the_end_of_turn_text_is_trained_without_mask_eot(name, eot):
    """`{% generation %}` templates: with mask_eot=False the run of end-of-turn texts a span ends
    with was cut, and an answer that is (or ends with) that text was cut with it."""
    chat = [{"role": "user", "content": "Zqu1q one?"}, {"role": "assistant", "content": eot},
            {"role": "user", "content": "Zqu2q two?"}, {"role": "assistant", "content": "Zqa2q " + eot}]
    pieces = _pieces(name, chat, mask_eot=False)
    assert pieces[0].endswith(eot) and pieces[1].endswith("Zqa2q " + eot), pieces
    assert not any(p.endswith(eot + eot) for p in pieces)


@pytest.mark.parametrize("reply", ["", " "])
def test_an_empty_tool_reply_written_as_a_response_block_is_not_the_answers_start(reply, qwen_tok):
    """deepseek-coder writes every role but user as a `### Response:` block. An empty tool reply set
    no floor, and the one-render fast path took the reply's header for the answer's: the reply's
    `<|EOT|>` and the answer's own `### Response:` header were trained."""
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zqg1q"}}}
    chat = [{"role": "user", "content": "Zqu1q weather?"}, {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": reply, "tool_call_id": "c1", "name": "get_weather"},
            {"role": "assistant", "content": "Zqa1q done."}]
    texts, spans = render_chats_with_spans([chat], _template("deepseek-ai-deepseek-coder-33b-instruct"),
                                           tokenizer=qwen_tok)
    assert [texts[0][a:b] for a, b in spans[0]][-1] == "Zqa1q done.\n<|EOT|>"


@pytest.mark.parametrize("content", ["", " "])
@pytest.mark.parametrize("name", ["GigaChat3-10B-A1.8B", "GigaChat3.1-10B-A1.8B"])
def test_a_tool_call_argument_equal_to_the_end_of_turn_is_not_the_end(name, content):
    """GigaChat writes an empty content as ``<|message_sep|>`` before the function call. A call whose
    argument is ``<|message_sep|>`` had its words found at the template's own separator, so the
    one-render path ended the turn at the argument: the call's closing ``"}}`` and the real end of
    the turn were not trained (with ``mask_eot=False`` the argument itself neither)."""
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}
    chat = [{"role": "user", "content": "Zqu1q weather?"},
            {"role": "assistant", "content": content, "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "get_weather", "arguments": {"city": "<|message_sep|>"}}}]},
            {"role": "tool", "content": "Zqt1q rain", "tool_call_id": "c1", "name": "get_weather"},
            {"role": "assistant", "content": "Zqa1q done."}]
    first = _pieces(name, chat, tools=[weather])[0]
    assert first.endswith('{"city": "<|message_sep|>"}}<|message_sep|>'), first
    first = _pieces(name, chat, tools=[weather], mask_eot=False)[0]
    assert first.endswith('{"city": "<|message_sep|>"}}'), first


def test_an_answer_quoting_the_whole_generation_prompt_with_its_think_block_is_learned():
    """QwQ's prompt is ``<|im_start|>assistant\\n<think>\\n</think>``. An answer that is that text holds
    ``</think>``, so it was kept as it is for its reasoning (it has none) and the quoted header was
    taken for the turn's: nothing of it was trained. It is placed on a copy with a unique word."""
    for answer in ("<|im_start|>assistant\n<think>\n</think>", "<|im_start|>assistant\n<think>\n</think>ok"):
        chat = [{"role": "user", "content": "Zqu1q one?"}, {"role": "assistant", "content": answer}]
        assert _pieces("Qwen-QwQ-32B", chat) == [answer + "<|im_end|>"]
    # an answer with a reasoning block before </think> stays as it is (mask_reasoning=False finds it)
    chat = [{"role": "user", "content": "Zqu1q one?"},
            {"role": "assistant", "content": "<think>Zqr1q <|im_start|></think>Zqa1q one."}]
    assert _pieces("Qwen-QwQ-32B", chat, mask_reasoning=False) == ["Zqa1q one.<|im_end|>"]
