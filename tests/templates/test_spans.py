"""Assistant spans: conversation shapes on every template, end-of-turn rules, options, errors."""
import warnings

import pytest

from chatdata.templates import (UnplaceableTurnError, assistant_spans, get_chat_template, has_generation_tags,
                                render_chats, render_chats_with_spans, template_profile)
from chatdata.templates.render import Renderer
from chatdata.templates.spans import end_of_turn_text

from chats import SHAPES, TOOL_CALL, WEATHER_TOOL
from gen_templates import QWEN_GEN
from template_paths import template_files

TEMPLATES = {p.stem: p.read_text(encoding="utf-8") for p in template_files()}
UNPLACEABLE = {"meta-llama-Llama-Guard-3-11B-Vision"}
EXPECTED_EOT = {
    "Qwen-Qwen2.5-7B-Instruct": "<|im_end|>", "meta-llama-Llama-3.1-8B-Instruct": "<|eot_id|>",
    "google-gemma-2-2b-it": "<end_of_turn>", "microsoft-Phi-3.5-mini-instruct": "<|end|>",
    "deepseek-ai-DeepSeek-V3.1": "<｜end▁of▁sentence｜>",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": "<|END_RESPONSE|><|END_OF_TURN_TOKEN|>",
    "openai-gpt-oss-120b": "<|end|>", "MiniMax-M2": "[e~[", "ByteDance-Seed-OSS": "<seed:eos>",
}


@pytest.mark.parametrize("shape", ["plain", "system", "unicode", "genprompt_multi"])
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_spans_cover_content_and_end(name, shape, mistral_tok):
    template = TEMPLATES[name]
    kwargs = dict(SHAPES[shape])
    chat = kwargs.pop("chat")
    try:
        expected_text = render_chats([chat], template, tokenizer=mistral_tok, **kwargs)[0]
    except Exception:
        pytest.skip("template cannot render this conversation shape")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            texts, spans = render_chats_with_spans([chat], template, tokenizer=mistral_tok, **kwargs)
        except UnplaceableTurnError:
            assert name in UNPLACEABLE, name  # a classifier template: the chat is inside one user turn
            return
    assert texts == [expected_text]
    text = texts[0]
    pieces = [text[s:e] for s, e in spans[0]]
    assistants = [m["content"] for m in chat if m["role"] == "assistant"]
    assert len(pieces) == len(assistants)
    profile = template_profile(Renderer(template, tokenizer=mistral_tok))
    for piece, content in zip(pieces, assistants):
        assert content.strip() in piece or content.strip() not in text  # some templates drop string content
        if not has_generation_tags(template):  # an author's {% generation %} block may hold the header
            assert not piece.startswith(profile.header.strip() or "\x00")
        for m in chat:
            if m["role"] != "assistant":
                assert m["content"].strip() not in piece
    if kwargs.get("add_generation_prompt"):
        assert spans[0][-1][1] <= len(text) - len(profile.header.strip())  # the prompt is not learned
    if name in EXPECTED_EOT and len(pieces) > 1:  # a non-final turn (a final one may end differently)
        assert pieces[0].endswith(EXPECTED_EOT[name])


def test_mistral_eot_is_eos(mistral_tok):
    texts, spans = render_chats_with_spans([SHAPES["plain"]["chat"]], get_chat_template("mistral"),
                                           tokenizer=mistral_tok)
    assert [texts[0][s:e] for s, e in spans[0]] == ["It is 4.</s>", "6, of course.</s>"]


def test_tool_call_spans():
    texts, spans = render_chats_with_spans([TOOL_CALL], get_chat_template("qwen"), tools=[WEATHER_TOOL])
    pieces = [texts[0][s:e] for s, e in spans[0]]
    assert pieces == ['<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
                      "It is 22 degrees and sunny in Paris.<|im_end|>"]
    texts, spans = render_chats_with_spans([TOOL_CALL], get_chat_template("llama3"), tools=[WEATHER_TOOL])
    assert [texts[0][s:e] for s, e in spans[0]] == [
        '{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>',
        "It is 22 degrees and sunny in Paris.<|eot_id|>"]


def test_no_end_of_turn_token_learns_the_stop_marker():
    # GLM-4.6 writes no end-of-turn token: a turn ends with the marker that opens the next one
    chat = TOOL_CALL + [{"role": "user", "content": "thanks"}, {"role": "assistant", "content": "welcome"}]
    texts, spans = render_chats_with_spans([chat], TEMPLATES["GLM-4.6"], tools=[WEATHER_TOOL])
    pieces = [texts[0][s:e] for s, e in spans[0]]
    assert pieces[0].endswith("</tool_call><|observation|>")
    assert pieces[1].endswith("sunny in Paris.<|user|>")
    assert pieces[2] == "\n<think></think>\nwelcome"  # the last turn: the rendering ends there
    _, no_eot = render_chats_with_spans([chat], TEMPLATES["GLM-4.6"], tools=[WEATHER_TOOL], mask_eot=False)
    assert [texts[0][s:e] for s, e in no_eot[0]][1].endswith("sunny in Paris.")


def test_reasoning_and_options():
    chat = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "answer", "reasoning_content": "thinking hard"}]
    template = TEMPLATES["Qwen-Qwen3-0.6B"]
    texts, spans = render_chats_with_spans([chat], template)
    assert [texts[0][s:e] for s, e in spans[0]] == ["<think>\nthinking hard\n</think>\n\nanswer<|im_end|>"]
    _, spans = render_chats_with_spans([chat], template, mask_reasoning=False)
    assert [texts[0][s:e] for s, e in spans[0]] == ["answer<|im_end|>"]
    _, spans = render_chats_with_spans([chat], template, mask_reasoning=False, mask_eot=False)
    assert [texts[0][s:e] for s, e in spans[0]] == ["answer"]
    # inline <think> in a template that writes content as-is
    chat[1] = {"role": "assistant", "content": "<think>hmm</think>\nanswer"}
    texts, spans = render_chats_with_spans([chat], get_chat_template("chatml_format"), mask_reasoning=False)
    assert [texts[0][s:e] for s, e in spans[0]] == ["answer<|im_end|>"]


def test_generation_tags_used_verbatim_and_options():
    chat = SHAPES["plain"]["chat"]
    texts, spans = render_chats_with_spans([chat], QWEN_GEN)
    assert [texts[0][s:e] for s, e in spans[0]] == ["It is 4.<|im_end|>", "6, of course.<|im_end|>"]
    _, spans = render_chats_with_spans([chat], QWEN_GEN, mask_eot=False)
    assert [texts[0][s:e] for s, e in spans[0]] == ["It is 4.", "6, of course."]


def test_continue_final_message_masks_the_open_turn():
    chat = SHAPES["continue"]["chat"]
    texts, spans = render_chats_with_spans([chat], get_chat_template("qwen"), continue_final_message=True)
    assert texts == render_chats([chat], get_chat_template("qwen"), continue_final_message=True)
    assert [texts[0][s:e] for s, e in spans[0]] == ["It is"]
    with pytest.raises(ValueError, match="not compatible"):
        render_chats_with_spans([chat], get_chat_template("qwen"), continue_final_message=True,
                                add_generation_prompt=True)


def test_stripping_template_alignment():
    # llama3 trims contents: spans must point at the trimmed text
    chat = [{"role": "user", "content": " q "}, {"role": "assistant", "content": "  spaced answer \n"}]
    texts, spans = render_chats_with_spans([chat], get_chat_template("llama3"))
    assert [texts[0][s:e] for s, e in spans[0]] == ["spaced answer<|eot_id|>"]


def test_content_with_unusual_chars():
    chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "odd \U000F0100 char"}]
    texts, spans = render_chats_with_spans([chat], get_chat_template("chatml_format"))
    assert [texts[0][s:e] for s, e in spans[0]] == ["odd \U000F0100 char<|im_end|>"]


def test_assistant_spans_doc_and_eot_rule():
    chat = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    assert assistant_spans([chat], get_chat_template("chatml_format")) == [[(51, 62)]]
    assert end_of_turn_text("<|im_end|>\n<|im_start|>user\n", "<|im_end|>\n") == "<|im_end|>"
    assert end_of_turn_text("</s>[INST]", "</s>") == "</s>"
    assert end_of_turn_text("<|user|>", "") == ""
    assert end_of_turn_text("\n\nUser: ", "\n\n") == "\n\n"


def test_no_assistant_no_spans():
    assert assistant_spans([SHAPES["genprompt"]["chat"]], get_chat_template("qwen"),
                           add_generation_prompt=True) == [[]]


def test_unplaceable_turn_raises_naming_template_chat_and_message():
    # a template that silently drops assistant turns holding tool calls
    template = ("{% for m in messages %}{% if m.role == 'user' %}U:{{ m.content }}\n"
                "{% elif m.role == 'assistant' and not m.tool_calls %}A:{{ m.content }}\n{% endif %}{% endfor %}"
                "{% if add_generation_prompt %}A:{% endif %}")
    ok = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "fine"}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UnplaceableTurnError) as err:
            render_chats_with_spans([ok, TOOL_CALL], template)
    msg = str(err.value)
    assert "chat 1, message " in msg and "unregistered template sha1:" in msg
    assert render_chats_with_spans([ok], template)[1] == [[(6, 11)]]  # "fine\n": a newline ends the turn
