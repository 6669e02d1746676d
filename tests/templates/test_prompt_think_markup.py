"""The `</think>` a turn writes where its generation prompt holds reasoning markup (docs/masks.md).

DeepSeek-V3.2 without thinking (its default) prompts ``<｜Assistant｜><think></think>`` and writes a
turn of the chat as ``<｜Assistant｜></think>answer``: the model is given the empty block and writes
the answer, so the ``</think>`` is not learned. With thinking it prompts ``<｜Assistant｜><think>``:
the last turns write ``<think>reasoning</think>answer`` and the reasoning, the ``</think>`` the model
writes to close it and the answer are learned; turns before the last user message lose their
reasoning and write ``</think>answer``, where the ``</think>`` is kept, as for DeepSeek-V4, GLM-4.7 /
5.1, Nemotron-3 and EXAONE-4 (the deliberate choice that page states); ``mask_reasoning=False`` cuts it
with the rest of the reasoning.
"""
from __future__ import annotations

import pytest

from chatdata.templates import render_chats, render_chats_with_spans

from template_paths import TEMPLATE_DIR

V32 = "deepseek-ai-DeepSeek-V3.2"
EOS = "<｜end▁of▁sentence｜>"
CHAT = [{"role": "user", "content": "Zqu1q one?"},
        {"role": "assistant", "content": "Zqa1q one.", "reasoning_content": "Zqr1q think."},
        {"role": "user", "content": "Zqu2q two?"},
        {"role": "assistant", "content": "Zqa2q two.", "reasoning_content": "Zqr2q think."}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def _pieces(name: str, chat: list, **kwargs) -> tuple[str, list[str]]:
    template = (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")
    texts, spans = render_chats_with_spans([chat], template, **kwargs)
    kwargs.pop("mask_eot", None)
    kwargs.pop("mask_reasoning", None)
    assert texts == render_chats([chat], template, **kwargs)
    return texts[0], [texts[0][a:b] for a, b in spans[0]]


@pytest.mark.parametrize("variables", [{}, {"thinking": False}, {"enable_thinking": False}])
def test_deepseek_v32_without_thinking_learns_no_think_tag(variables):
    text, pieces = _pieces(V32, CHAT, **variables)
    assert "<｜Assistant｜></think>Zqa1q one." in text  # what the template writes
    assert pieces == [f"Zqa1q one.{EOS}", f"Zqa2q two.{EOS}"]
    _, pieces = _pieces(V32, CHAT, mask_eot=False, **variables)
    assert pieces == ["Zqa1q one.", "Zqa2q two."]


def test_deepseek_v32_without_thinking_after_tool_results():
    """After the tool results the prompt writes ``\\n\\n<think></think>``, the chat ``\\n\\n</think>``."""
    chat = [{"role": "user", "content": "Zqu1q weather?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zqg1q"}}}]},
            {"role": "tool", "content": "Zqt1q rain", "tool_call_id": "c1"},
            {"role": "assistant", "content": "Zqa2q done."}]
    text, pieces = _pieces(V32, chat, tools=[WEATHER])
    assert "</function_results>\n\n</think>Zqa2q done." in text
    assert pieces[-1] == f"Zqa2q done.{EOS}"
    assert pieces[0].startswith("\n\n<｜DSML｜function_calls>") and "</think>" not in pieces[0]


def test_deepseek_v32_answer_that_writes_its_own_think_block_learns_it():
    """The rule skips the prompt's markup only: an answer that itself holds ``<think></think>``
    (rendered as given) is learned whole."""
    chat = [{"role": "user", "content": "Zqu1q one?"}, {"role": "assistant", "content": "<think></think>Zqa1q one."}]
    text, pieces = _pieces(V32, chat)
    assert "<｜Assistant｜></think><think></think>Zqa1q one." in text
    assert pieces == [f"<think></think>Zqa1q one.{EOS}"]


def test_deepseek_v32_empty_answer_still_learns_its_end():
    chat = [{"role": "user", "content": "Zqu1q one?"}, {"role": "assistant", "content": ""}]
    assert _pieces(V32, chat)[1] == [EOS]


@pytest.mark.parametrize("name", [V32, "deepseek-ai-DeepSeek-V4"])
def test_deepseek_with_thinking_learns_the_reasoning_and_its_close(name):
    _, pieces = _pieces(name, CHAT, thinking=True)
    # the turn before the last user message: reasoning dropped, `</think>` kept (documented choice)
    assert pieces == [f"</think>Zqa1q one.{EOS}", f"Zqr2q think.</think>Zqa2q two.{EOS}"]
    _, pieces = _pieces(name, CHAT, thinking=True, mask_reasoning=False)  # the whole block, its `</think>` too
    assert pieces == [f"Zqa1q one.{EOS}", f"Zqa2q two.{EOS}"]


def test_deepseek_v31_thinking_prompt_opens_think_and_the_model_closes_it():
    """V3.1 prompts ``<think>`` and writes ``<think></think>answer``: the model writes the ``</think>``."""
    text, pieces = _pieces("deepseek-ai-DeepSeek-V3.1", CHAT, thinking=True)
    assert "<｜Assistant｜><think></think>Zqa1q one." in text
    assert pieces == [f"</think>Zqa1q one.{EOS}", f"</think>Zqa2q two.{EOS}"]


def test_deepseek_v32_systems_gathered_at_the_top():
    """A second system message is written at the top: the prompt before a turn disagrees with the
    chat there, and the turn is placed after its header; the prompt's ``</think>`` is still skipped."""
    chat = [{"role": "system", "content": "Zqs1q rules."}, {"role": "user", "content": "Zqu1q one?"},
            {"role": "assistant", "content": "Zqa1q one."}, {"role": "system", "content": "Zqs2q more."},
            {"role": "user", "content": "Zqu2q two?"}, {"role": "assistant", "content": "Zqa2q two."}]
    assert _pieces(V32, chat)[1] == [f"Zqa1q one.{EOS}", f"Zqa2q two.{EOS}"]


def test_qwq_prompt_closes_the_think_block_it_opens():
    """QwQ without thinking prompts ``<think>\\n</think>``: an answer written ``<think></think>...``
    has both tags where the prompt writes them, and learns what follows; with thinking the prompt
    opens ``<think>\\n`` only, and the answer's ``</think>`` is learned."""
    chat = [{"role": "user", "content": "Zqu1q one?"}, {"role": "assistant", "content": "<think></think>Zqa1q one."}]
    assert _pieces("Qwen-QwQ-32B", chat)[1] == ["Zqa1q one.<|im_end|>"]
    assert _pieces("Qwen-QwQ-32B", chat, enable_thinking=True)[1] == ["</think>Zqa1q one.<|im_end|>"]


@pytest.mark.parametrize("name, first", [("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "Zqa1q one."),
                                         ("zai-org-GLM-5.1", "Zqa1q one."), ("LGAI-EXAONE-4.0", "Zqa1q one.")])
def test_mask_reasoning_false_cuts_the_close_a_past_turn_keeps(name, first):
    """Turns whose reasoning the template drops start with the ``</think>`` that closes what the
    prompt opens; without reasoning, the turn starts at its answer."""
    _, kept = _pieces(name, CHAT, enable_thinking=True)
    assert "</think>" in kept[0] and kept[0].lstrip().startswith("</think>")
    _, pieces = _pieces(name, CHAT, enable_thinking=True, mask_reasoning=False)
    assert pieces[0].startswith(first) and all("think" not in p for p in pieces)
