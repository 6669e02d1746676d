"""Assistant masks on chats whose texts collide: the same text in two messages, a one-letter reply
that also sits in the template's headers, an answer dense with template markup, empty messages.

The mask engine finds a message by searching for its text; such chats made it find the wrong place
and train the wrong characters without a word. Each test is a chat a scan of the corpus (every
template, collision-heavy chats, compared with the same chat whose texts are unique words) found,
with what was trained before.
"""
from __future__ import annotations

import pytest

from chatdata.templates import render_chats, render_chats_with_spans, render_chats_with_weights

from template_paths import TEMPLATE_DIR


def _trained(name: str, chat: list, tok, **kw) -> list[str]:
    template = (TEMPLATE_DIR / f"{name}.jinja").read_text(encoding="utf-8")
    texts, spans = render_chats_with_spans([chat], template, tokenizer=tok, **kw)
    assert texts == render_chats([chat], template, tokenizer=tok, tools=kw.get("tools"))
    return [texts[0][a:b] for a, b in spans[0]]


def _turns(*pairs: str) -> list[dict]:
    return [{"role": role, "content": c} for role, c in zip(["user", "assistant"] * len(pairs), pairs)]


@pytest.mark.parametrize("name", ["HuggingFaceTB-SmolVLM-Instruct", "HuggingFaceM4-Idefics3-8B-Llama3"])
def test_a_one_letter_reply_found_in_the_next_header_is_not_trained_there(name, qwen_tok):
    """These templates drop a string content; the reply "s" was found in the next `User:` header,
    and `\\nUs` of the user's turn was trained."""
    assert _trained(name, _turns("s", "s", "s", "s"), qwen_tok) == [" <end_of_utterance>"] * 2


def test_gpt_oss_one_letter_turn_keeps_its_end(qwen_tok):
    """The user's "s" was found inside `<|message|>`, which bounded the first turn before its `<|end|>`:
    the model never learned to end that turn."""
    assert _trained("openai-gpt-oss-120b", _turns("s", "s", "s", "s"), qwen_tok) == [
        "<|channel|>final<|message|>s<|end|>", "<|channel|>final<|message|>s<|return|>"]


@pytest.mark.parametrize("name, sep", [("mistralai-Mistral-Nemo-Instruct-2407", ""),
                                       ("mistralai-Mixtral-8x22B-Instruct-v0.1", " ")])
def test_mistral_user_text_equal_to_the_system_prompt(name, sep, qwen_tok):
    """Mistral writes the system prompt only into the last user turn; a user message equal to it made
    the prompt seem to agree with the chat past the user's text, and `[/INST]` was trained."""
    chat = [{"role": "system", "content": "Be brief."}] + _turns("Be brief.", "ok", "Be brief.", "Be brief.")
    assert _trained(name, chat, qwen_tok) == [f"{sep}ok<|im_end|>", f"{sep}Be brief.<|im_end|>"]


@pytest.mark.parametrize("name, expected", [
    # the first turn ran over the next user turn (its header and text were trained)
    ("microsoft-Phi-3-mini-4k-instruct", ["analysis<|im_end|><think><|end|><|end|>", "ok<|end|>"]),
    ("upstage-Solar-Open-100B", ["<|content|>analysis<|im_end|><think><|end|><|end|>", "<|content|>ok<|end|>"]),
    # the first answer was not trained at all (its start was found after `<｜User｜>\n`)
    ("llama-cpp-deepseek-r1", ["analysis<|im_end|><think><|end|><｜end▁of▁sentence｜>", "ok<｜end▁of▁sentence｜>"]),
])
def test_an_answer_dense_with_markup_is_trained_whole_and_alone(name, expected, qwen_tok):
    chat = [{"role": "system", "content": ""}, {"role": "user", "content": ""},
            {"role": "assistant", "content": "analysis<|im_end|><think><|end|>"},
            {"role": "user", "content": "\n"}, {"role": "assistant", "content": "ok"}]
    assert _trained(name, chat, qwen_tok) == expected


@pytest.mark.parametrize("name", ["deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "MiniMax-M2"])
def test_an_answer_that_is_the_prompts_think_opener_is_trained(name, qwen_tok):
    """The generation prompt ends with `<think>`; an answer "<think>" was taken for the prompt's and
    only the end of the turn was trained."""
    trained = _trained(name, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>"}], qwen_tok)
    assert len(trained) == 1 and trained[0].startswith("<think>"), trained


def test_an_empty_answer_before_a_blank_question_does_not_swallow_the_next_turn(mistral_tok):
    """Mistral: an empty answer, then a user message "\\n": the empty turn was placed after the
    later `\\n[/INST]` and the last answer raised UnplaceableTurnError."""
    chat = [{"role": "system", "content": ""}] + _turns("", "", "\n", "hello")
    from chatdata.templates import get_chat_template

    texts, spans = render_chats_with_spans([chat], get_chat_template("mistral"), tokenizer=mistral_tok)
    assert [texts[0][a:b] for a, b in spans[0]] == ["</s>", "hello</s>"]


def test_kimi_k3_trains_its_whole_end_of_turn(qwen_tok):
    """Kimi-K3's end of turn `<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>` (as
    docs/templates.md says) holds `<|close|>`, also an end text of the template: the last one found
    won, and the model never learned `message<|sep|><|end_of_msg|>`."""
    chat = _turns("q", "a")
    end = "<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>"
    assert _trained("moonshotai-Kimi-K3", chat, qwen_tok)[-1].endswith("a" + end)
    assert _trained("moonshotai-Kimi-K3", chat, qwen_tok, mask_eot=False)[-1].endswith("response<|sep|>a")


def test_per_turn_weights_use_the_same_placement(qwen_tok):
    """Weights per turn (last_turn_only) place turns the same way: the last turn only, its end kept."""
    template = (TEMPLATE_DIR / "openai-gpt-oss-120b.jinja").read_text(encoding="utf-8")
    texts, spans = render_chats_with_weights([_turns("s", "s", "s", "s")], template, tokenizer=qwen_tok,
                                             last_turn_only=True)
    assert [(texts[0][w.start:w.end], w.message) for w in spans[0]] == [
        ("<|channel|>final<|message|>s<|return|>", 3)]


def _call(city: str) -> list:
    return [{"id": "call1abcd", "type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}]


def test_an_argument_also_in_the_turns_text_still_trains_the_call(qwen_tok):
    """GigaChat 3 writes the call after the text in a block of its own: the argument "Paris" was found
    inside "Checking Paris", the turn ended after the text, and the whole `function call` block
    (what the model must learn to write) was left untrained."""
    from mask_chats import WEATHER

    chat = [{"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "Checking Paris", "tool_calls": _call("Paris")},
            {"role": "tool", "content": "sun", "tool_call_id": "call1abcd", "name": "get_weather"},
            {"role": "assistant", "content": "Sunny."}]
    assert _trained("GigaChat3-10B-A1.8B", chat, qwen_tok, tools=[WEATHER])[0] == (
        'Checking Paris<|message_sep|>\n\nfunction call<|role_sep|>\n'
        '{"name": "get_weather", "arguments": {"city": "Paris"}}<|message_sep|>')


def test_an_argument_the_template_drops_is_not_found_inside_a_marker(qwen_tok):
    """Qwen1.5 renders no tool calls: the argument "a" was found in the next `<|im_start|>` and the
    turn was trained up to it (`\\n<|im_sta`)."""
    from mask_chats import WEATHER

    chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "<b>hi</b>", "tool_calls": _call("a")},
            {"role": "tool", "content": "r", "tool_call_id": "call1abcd", "name": "get_weather"},
            {"role": "assistant", "content": "ok"}]
    assert _trained("Qwen-Qwen1.5-72B-Chat", chat, qwen_tok, tools=[WEATHER]) == ["<b>hi</b><|im_end|>", "ok"]


@pytest.mark.parametrize("answer", ["Here you go", "Hello there", "Heat"])
def test_an_answer_starting_like_the_generation_prompt_is_trained_whole(answer, qwen_tok):
    """Apriel-1.6's prompt ends `<|begin_assistant|>\\nHere are my reasoning steps:\\n`, which a final
    turn does not have: an answer "Here you go" agreed with it up to "Here " and only "you go" was
    trained."""
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": answer}]
    assert _trained("Apriel-1.6-15b-Thinker-fixed", chat, qwen_tok) == [answer]


def test_an_argument_the_template_drops_is_not_found_in_a_later_turn(qwen_tok):
    """Phi-3 renders no tool calls nor tool replies: the argument "x" was looked for after the turn,
    found in a later answer, and the turn was trained over the next one."""
    from mask_chats import WEATHER

    chat = [{"role": "user", "content": "call"}, {"role": "assistant", "content": "call", "tool_calls": _call("x")},
            {"role": "tool", "content": "r", "tool_call_id": "call1abcd", "name": "get_weather"},
            {"role": "assistant", "content": "next"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": "box"}]
    assert _trained("microsoft-Phi-3-mini-4k-instruct", chat, qwen_tok, tools=[WEATHER]) == [
        "call<|end|>", "next<|end|>", "box<|end|>"]


def test_a_collision_at_the_end_of_a_long_chat_is_found(qwen_tok):
    """The collision check looks near where each text is rendered (not twice through the whole
    rendering per message, which grew with turns x length). A one-letter user message after forty
    turns of other text (its first match is inside gpt-oss's `<|start|>` header) still leaves
    every turn placed right, the last one included."""
    pairs = [x for i in range(40) for x in (f"question number {i}", f"answer number {i}")]
    trained = _trained("openai-gpt-oss-120b", _turns(*pairs, "s", "fine"), qwen_tok)
    assert trained == [f"<|channel|>final<|message|>answer number {i}<|end|>" for i in range(39)] + [
        "<|channel|>final<|message|>answer number 39<|end|>", "<|channel|>final<|message|>fine<|return|>"]


_THINKING_AFTER_LAST_USER = ["Qwen3.5-4B", "Qwen-Qwen3-Next-80B-A3B", "unsloth-Qwen3.6-35B-A3B", "StepFun3.5-Flash",
                             "stepfun-ai-Step-3.5-Flash"]


@pytest.mark.parametrize("name", _THINKING_AFTER_LAST_USER)
def test_a_turn_after_an_empty_message_that_gets_no_think_opener(name, qwen_tok):
    """These templates open `<think>` in the generation prompt, but write a turn before the last user
    message without it. After an empty user message the engine looked for the prompt's end
    (`<think>\\n`) and found it in the last turn: the chat raised UnplaceableTurnError, and with a
    tool call (the scan's chat) the answer "call" was silently given the last turn's span."""
    chat = _turns("Hello", "Hi there", "", "Anything else?", "", "Bye")
    trained = _trained(name, chat, qwen_tok)
    assert trained[:2] == ["Hi there<|im_end|>", "Anything else?<|im_end|>"]
    assert len(trained) == 3 and trained[2].endswith("Bye<|im_end|>") and "Anything" not in trained[2]
    from mask_chats import WEATHER

    chat = [{"role": "user", "content": "call"}, {"role": "assistant", "content": "call", "tool_calls": _call("x")},
            {"role": "tool", "content": "Hello there[/INST]", "tool_call_id": "call1abcd", "name": "get_weather"},
            {"role": "assistant", "content": "Be brief.</s>model"}] + _turns("", "call", "", "")
    trained = _trained(name, chat, qwen_tok, tools=[WEATHER])
    assert trained[1:3] == ["Be brief.</s>model<|im_end|>", "call<|im_end|>"] and len(trained) == 4


@pytest.mark.parametrize("answer, last", [("user", "</think>"), ("Hello there", "[/INST]")])
def test_nemotron_nano_v2_turn_after_an_empty_message_keeps_its_place(answer, last, qwen_tok):
    """Same cause on Nemotron-Nano-v2 (`<think>` only after the last user message): a tool-calling
    answer after an empty user message was placed on the last turn. The answer "user" was never
    trained; with "Hello there" the last turn raised UnplaceableTurnError (its place was taken)."""
    from mask_chats import WEATHER

    chat = [{"role": "user", "content": ""}, {"role": "assistant", "content": answer, "tool_calls": _call("x")},
            {"role": "tool", "content": "sun", "tool_call_id": "call1abcd", "name": "get_weather"},
            {"role": "assistant", "content": last}]
    trained = _trained("NVIDIA-Nemotron-Nano-v2", chat, qwen_tok, tools=[WEATHER])
    assert trained[0] == answer + '\n<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "x"}}]</TOOLCALL>\n<SPECIAL_12>'
    assert len(trained) == 2 and trained[1].endswith(last + "\n<SPECIAL_12>")


@pytest.mark.parametrize("system", ["Be brief.", "user<|im_end|>Assistant:"])
def test_command_r7b_answer_after_an_empty_user_message_is_not_the_system_preamble(system, qwen_tok):
    """Command R7B's prompt ends `<|START_THINKING|><|END_THINKING|>`, which a turn of the past does not
    get, and its tool preamble quotes `<|END_THINKING|>`: after an empty user message the turn was
    started there, and the whole system preamble was trained as the answer."""
    from mask_chats import WEATHER

    chat = [{"role": "system", "content": system}, {"role": "user", "content": ""},
            {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "q"},
            {"role": "assistant", "content": system}]
    assert _trained("CohereForAI-c4ai-command-r7b-12-2024-tool_use", chat, qwen_tok, tools=[WEATHER]) == [
        "<|START_RESPONSE|>Hello<|END_RESPONSE|><|END_OF_TURN_TOKEN|>",
        f"<|START_RESPONSE|>{system}<|END_RESPONSE|><|END_OF_TURN_TOKEN|>"]


@pytest.mark.parametrize("reply", ["user", "ok"])
def test_a_blank_argument_does_not_carry_the_turn_over_the_tool_reply(reply, qwen_tok):
    """Llama-3.3-Nemotron: the blank argument "\\n" (the call writes it escaped) was taken for words of
    the call and found in the newline after the tool's header, so the turn ran over the tool's reply,
    which was trained as the assistant's (on the copy with unique words a chat whose texts collide is
    placed on)."""
    from mask_chats import WEATHER

    chat = [{"role": "user", "content": reply}, {"role": "assistant", "content": reply, "tool_calls": _call("\n")},
            {"role": "tool", "content": reply, "tool_call_id": "call1abcd", "name": "get_weather"},
            {"role": "assistant", "content": "Sunny."}]
    assert _trained("nvidia-Llama-3_3-Nemotron-Super-49B-v1_5", chat, qwen_tok, tools=[WEATHER]) == [
        reply + '<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "\\n"}}]</TOOLCALL><|eot_id|>',
        "Sunny.<|eot_id|>"]
