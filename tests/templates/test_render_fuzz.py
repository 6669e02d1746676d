"""Differential fuzzing of the template engine against transformers, and the cases it found.

The regression tests below are chats the fuzz found where the mask engine went wrong; each names
the template family and what was wrong.
"""
from __future__ import annotations

import pytest

from chatdata.templates import render_chats, render_chats_with_spans

from template_paths import TEMPLATE_DIR

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def _template(name: str) -> str:
    return (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")


def _call(city: str) -> dict:
    return {"id": "call1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}


# a tool-calling turn, the tool's reply, the answer, then a new question and its answer
AGENT = [{"role": "user", "content": "Zqu1"},
         {"role": "assistant", "content": "Zqa1", "tool_calls": [_call("Zqg1")]},
         {"role": "tool", "content": "Zqt1", "tool_call_id": "call1", "name": "get_weather"},
         {"role": "assistant", "content": "Zqa2"},
         {"role": "user", "content": "Zqu2"},
         {"role": "assistant", "content": "Zqa3"}]


def _trained(name: str, chat: list, tok) -> tuple[str, list[str]]:
    texts, spans = render_chats_with_spans([chat], _template(name), tools=[WEATHER], tokenizer=tok)
    assert texts == render_chats([chat], _template(name), tools=[WEATHER], tokenizer=tok)
    return texts[0], [texts[0][a:b] for a, b in spans[0]]


@pytest.mark.parametrize("name", ["Qwen3.5-4B", "unsloth-Qwen3.6-35B-A3B", "stepfun-ai-Step-3.5-Flash",
                                  "zai-org-GLM-5.1"])
def test_answer_after_a_tool_reply_then_a_new_question_is_placed(name, qwen_tok):
    """These templates write an assistant turn of the past without the `<think>` their generation
    prompt opens (`<|im_start|>assistant\\n<think>\\n` vs `<|im_start|>assistant\\nZqa2`): the
    answer after the tool's reply could not be placed, and the whole chat raised
    UnplaceableTurnError -- the commonest agent chat shape."""
    text, trained = _trained(name, AGENT, qwen_tok)
    assert [sum(w in t for t in trained) for w in ("Zqa2", "Zqa3", "Zqg1")] == [1, 1, 1]
    assert not any(w in t for t in trained for w in ("Zqu", "Zqt"))


def test_glm51_tool_call_of_the_past_trains_its_closing_markup(qwen_tok):
    """GLM-5.1 renders a tool-calling turn of the past without `<think>`: its span stopped at the
    last argument value, leaving `</arg_value></tool_call><|observation|>` untrained (the model
    would not learn to close a call)."""
    text, trained = _trained("zai-org-GLM-5.1", AGENT, qwen_tok)
    assert trained[0].endswith("Zqg1</arg_value></tool_call><|observation|>")


def test_command_a_reasoning_tool_turn_stops_before_the_next_turn(qwen_tok):
    """Command A reasoning reads `content[0]` and writes a tool reply as JSON of its characters:
    the tool-calling turn's span ran over the tool's reply and the next answer, up to that
    answer's <|END_RESPONSE|>."""
    text, trained = _trained("CohereLabs-command-a-reasoning-08-2025", AGENT, qwen_tok)
    assert trained[0].endswith("<|END_ACTION|><|END_OF_TURN_TOKEN|>") and "TOOL_RESULT" not in trained[0]
    assert [sum(w in t for t in trained) for w in ("Zqa2", "Zqa3", "Zqg1")] == [1, 1, 1]


@pytest.mark.parametrize("city", ["line one\nline two", 'say "hi"', "C:\\temp", "tab\there"])
def test_tool_call_arguments_written_escaped_are_trained(city, qwen_tok):
    """An argument holding a newline, a quote or a backslash is written JSON-escaped: it was not
    found, so GigaChat 3's `function call` block after the turn's text was left untrained."""
    chat = [dict(m) for m in AGENT[:4]]
    chat[1]["tool_calls"] = [_call(city + " Zqg1")]
    text, trained = _trained("GigaChat3-10B-A1.8B", chat, qwen_tok)
    assert any("Zqg1" in t and t.endswith("<|message_sep|>") for t in trained)


@pytest.mark.parametrize("question", ["", "what closes a thought? </think>"])
def test_user_turn_is_never_trained_when_its_content_is_empty_or_holds_a_think_tag(question, qwen_tok):
    """Mistral v0.3 writes the tools before the last user turn, so the prompt before an answer
    disagrees with the chat before the question; the question's text is then what marks the
    turn's start. An empty question, or one holding `</think>` (its text was cut as if it were an
    assistant's reasoning), marked nothing: `[INST] ... [/INST]` was trained with the answer."""
    chat = [dict(m) for m in AGENT[:4]] + [{"role": "user", "content": question},
                                            {"role": "assistant", "content": "Zqa3"},
                                            {"role": "user", "content": "Zqu3"}, {"role": "assistant", "content": "Zqa4"}]
    text, trained = _trained("mistralai-Mistral-7B-Instruct-v0.3", chat, qwen_tok)
    assert not any("[INST]" in t or "Zqu" in t for t in trained), trained
    assert [sum(w in t for t in trained) for w in ("Zqa2", "Zqa3", "Zqa4", "Zqg1")] == [1, 1, 1, 1]
