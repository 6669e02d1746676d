"""Differential fuzzing of the template engine against transformers, and the cases it found.

Random chats (hypothesis, derandomized: the same examples on every run) drawn for templates of the
corpus (tests/data/templates), with the real Qwen2.5 tokenizer:

1. :func:`render_chats` is byte-identical to ``tokenizer.apply_chat_template(tokenize=False)``;
   when transformers raises, chatdata raises a TemplateError (or the TypeError / ValueError
   transformers raises for the same input) and renders nothing.
2. The trained characters are the pieces the assistant turns contribute: every content is built
   around a marker word (``Zqa3q``: assistant content, ``Zqg``: tool-call argument, ``Zqr``:
   reasoning, ``Zqu`` / ``Zqs`` / ``Zqt``: user, system, tool). Wherever the template renders an
   assistant's marker it is trained, and its whole (stripped) content when rendered as given; no
   character of a user, system or tool content is trained (the marker and the noise around it, as
   far as the rendering writes them as given). With ``mask_reasoning=False`` no reasoning is
   trained. The token mask of :func:`tokenize_chats` marks every token inside a trained span and
   none outside. Both test tokenizers (their special tokens differ) are drawn.

The regression tests below are chats the fuzz found where the mask engine went wrong; each names
the template family and what was wrong.
"""
from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatdata.templates import (TemplateError, UnplaceableTurnError, render_chats, render_chats_with_spans,
                                tokenize_chats)

from template_paths import TEMPLATE_DIR, template_files

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TEMPLATES = {p.stem: p.read_text(encoding="utf-8") for p in template_files()}
#: puts the whole chat inside one user turn (a safety classifier): no assistant turn can be placed
CLASSIFIERS = {"meta-llama-Llama-Guard-3-11B-Vision"}
FUZZ = settings(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def fuzz(n: int) -> settings:
    return settings(FUZZ, max_examples=n)

# what real chats hold: unicode (combining marks, RTL, emoji, a zero-width joiner, line and paragraph
# separators), control characters other than NUL, whitespace, HTML, code, template syntax
TEXT = ["", " ", "\n", "\n\n", "  ", "\t", "\r\n", "hello", "é", "e\u0301", "שלום", "مرحبا", "\u202e", "🎉",
        "👩\u200d👩\u200d👧", "\x01", "\x1b[0m", "\u2028", "\x85", "\ufeff", "<div>", "</div>", "<br/>", "a < b > c",
        "#include <stdio.h>", "```python\n", "```", "[1]", "- [ ] item", "{{ x }}", "{%", "%}", "{#", "&lt;", "'", '"',
        "\\", "User:", "Assistant:", '{"a": 1}', "None"]
# a template's own markup, in content: rendering must still be transformers'
MARKUP = ["<|im_end|>", "<|im_start|>assistant\n", "[INST]", "[/INST]", "</s>", "<s>", "<think>", "</think>",
          "<tool_call>", "<|eot_id|>", "<end_of_turn>", "<|user|>", "<|end|>", "<｜Assistant｜>"]

noise = st.lists(st.sampled_from(TEXT), max_size=3).map("".join)
markup = st.lists(st.sampled_from(TEXT + MARKUP), max_size=4).map("".join)
wild = st.one_of(noise, markup,
                 st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=6))
json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(-2, 2, width=32), wild),
                           lambda inner: st.one_of(st.lists(inner, max_size=2),
                                                   st.dictionaries(st.sampled_from(["a", "é", "x y", "", "items"]),
                                                                   inner, max_size=2)), max_leaves=4)


@st.composite
def chats(draw, text, marked: bool):
    """``(messages, marks, kwargs)``: a chat in the order templates take (system first, then user /
    assistant turns, tool calls answered by tool replies, ending on user or assistant). With
    ``marked``, every text is noise + marker + noise and ``marks`` lists ``(index, kind, marker)``."""
    n = [0]
    marks = []

    def content(kind, index=None):
        if not marked:
            return draw(text)
        n[0] += 1
        m = f"Zq{kind}{n[0]}q"
        marks.append((len(msgs) if index is None else index, kind, m))
        return draw(text) + m + draw(text)

    msgs: list = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": content("s")})
    turns = draw(st.integers(1, 3))
    for t in range(turns):
        msgs.append({"role": "user", "content": content("u")})
        if t == turns - 1 and draw(st.booleans()):
            break
        if draw(st.integers(0, 3)) == 0:
            calls = []
            for j in range(draw(st.integers(1, 2))):
                n[0] += 1
                if marked:
                    args = {"city": draw(text) + f"Zqg{n[0]}q"}
                    marks.append((len(msgs), "g", f"Zqg{n[0]}q"))
                    if draw(st.integers(0, 2)) == 0:
                        args = json.dumps(args, ensure_ascii=draw(st.booleans()))
                else:
                    args = draw(st.dictionaries(st.sampled_from(["city", "q", "é"]), json_values, max_size=2))
                    if draw(st.booleans()):
                        args = json.dumps(args, ensure_ascii=draw(st.booleans()))
                call = {"type": "function", "function": {"name": "get_weather", "arguments": args}}
                if draw(st.integers(0, 4)):
                    call["id"] = f"call{n[0]}abcd"
                calls.append(call)
            msgs.append({"role": "assistant", "content": content("a"), "tool_calls": calls})
            for call in calls:
                msgs.append({"role": "tool", "content": content("t"), "tool_call_id": call.get("id", "x"),
                             "name": "get_weather"})
        msgs.append({"role": "assistant", "content": content("a")})
        if draw(st.integers(0, 3)) == 0:
            msgs[-1]["reasoning_content"] = content("r", len(msgs) - 1)
    kwargs = {}
    if msgs[-1]["role"] == "user" and draw(st.booleans()):
        kwargs["add_generation_prompt"] = True
    if any("tool_calls" in m for m in msgs) or draw(st.integers(0, 3)) == 0:
        kwargs["tools"] = [WEATHER]
    if draw(st.integers(0, 3)) == 0:
        kwargs["enable_thinking"] = draw(st.booleans())
    return msgs, marks, kwargs


@fuzz(300)
@given(name=st.sampled_from(sorted(TEMPLATES)), case=chats(wild, marked=False), mistral=st.booleans())
def test_random_chats_render_as_transformers_does(name, case, mistral, qwen_tok, mistral_tok):
    chat, _, kwargs = case
    qwen_tok = mistral_tok if mistral else qwen_tok  # their special tokens (bos, eos) differ
    try:
        expected = qwen_tok.apply_chat_template(chat, chat_template=TEMPLATES[name], tokenize=False, **kwargs)
    except Exception:  # the template refuses this chat: chatdata must refuse it too, not render something
        with pytest.raises((TemplateError, TypeError, ValueError)):
            render_chats([chat], TEMPLATES[name], tokenizer=qwen_tok, **kwargs)
        return
    assert render_chats([chat], TEMPLATES[name], tokenizer=qwen_tok, **kwargs) == [expected]


def _region(text: str, at: int, marker: str, content: str) -> tuple[int, int]:
    """The stretch of ``text`` around ``marker`` (at ``at``) that is ``content`` as given, as far
    as the rendering writes it so (templates strip or escape the ends)."""
    before, after = content.split(marker, 1)
    lo = at - next((n for n in range(len(before), 0, -1) if text.endswith(before[-n:], 0, at)), 0)
    hi = at + len(marker)
    hi += next((n for n in range(len(after), 0, -1) if text.startswith(after[:n], hi)), 0)
    return lo, hi


@fuzz(150)
@given(name=st.sampled_from(sorted(TEMPLATES)), case=chats(st.one_of(noise, markup), marked=True),
       mistral=st.booleans(), options=st.sampled_from([{}, {"mask_reasoning": False}, {"mask_eot": False}]))
def test_random_chats_train_exactly_what_the_assistant_says(name, case, mistral, options, qwen_tok, mistral_tok):
    chat, marks, kwargs = case
    qwen_tok = mistral_tok if mistral else qwen_tok
    template = TEMPLATES[name]
    try:
        text = render_chats([chat], template, tokenizer=qwen_tok, **kwargs)[0]
    except TemplateError:
        return  # the template refuses this chat (checked against transformers above)
    try:
        _, spans = render_chats_with_spans([chat], template, tokenizer=qwen_tok, **kwargs, **options)
    except UnplaceableTurnError:
        assert name in CLASSIFIERS
        return
    spans = spans[0]
    trained = bytearray(len(text))
    for a, b in spans:
        trained[a:b] = b"\x01" * (b - a)
    for i, kind, marker in marks:
        message = chat[i]
        original = {"r": message.get("reasoning_content"), "g": None}.get(kind, message["content"])
        for hit in re.finditer(re.escape(marker), text):
            at = hit.start()
            if kind == "r" and options.get("mask_reasoning") is False:
                assert not any(trained[at:at + len(marker)]), (marker, text, spans)
            elif kind == "a" and "</think>" in original and options.get("mask_reasoning") is False:
                continue  # what comes before `</think>` is reasoning by convention (Qwen3 templates split there)
            elif kind in "agr":
                assert all(trained[at:at + len(marker)]), (marker, text, spans)
                if kind == "a":
                    whole = original.strip()
                    lo = at - whole.index(marker)
                    # rendered as given: all of it is learned (a `<think>` in it is reasoning to templates)
                    if text.startswith(whole, lo) and "think>" not in whole:
                        assert all(trained[lo:lo + len(whole)]), (whole, text, spans)
            else:
                lo, hi = _region(text, at, marker, original)
                assert not any(trained[lo:hi]), (text[lo:hi], text, spans)
    enc = qwen_tok(text, add_special_tokens=False, return_offsets_mapping=True)
    mask = tokenize_chats([text], [spans], qwen_tok, return_assistant_tokens_mask=True)["assistant_masks"][0]
    for (a, b), m in zip(enc["offset_mapping"], mask.tolist()):
        if a < b and all(trained[a:b]):
            assert m == 1, (text[a:b], text)
        elif a < b and not any(trained[a:b]):
            assert m == 0, (text[a:b], text)


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


@pytest.mark.parametrize("name", ["Qwen-Qwen3-Next-80B-A3B", "Qwen-Qwen3-0.6B", "Qwen3.5-4B"])
def test_an_answer_quoting_the_end_of_turn_token_is_trained_whole(name, qwen_tok):
    """An answer holding the template's own `<|im_end|>` (a chat about chat formats): where the
    turn is placed by prefix renderings (Qwen3 writes a past turn without `<think>`), the turn
    ended at that quoted token, and the rest of the answer was silently not trained."""
    answer = "it ends with <|im_end|> then Zqa1 more"
    chat = [{"role": "user", "content": "Zqu1"}, {"role": "assistant", "content": answer},
            {"role": "user", "content": "Zqu2"}, {"role": "assistant", "content": "Zqa2"}]
    text, trained = _trained(name, chat, qwen_tok)
    assert any(answer in t for t in trained) and not any("Zqu" in t for t in trained), trained


def test_messages_given_as_dataclasses_or_pydantic_models_render_as_transformers_does(qwen_tok):
    """transformers reads a message object (a dataclass, a pydantic model such as the OpenAI SDK's
    ChatCompletionMessage) as the dict of its fields, dropping the None ones; chatdata refused it.
    A batch-less list of such messages is refused as a batch-less list of dicts is."""
    import dataclasses

    pydantic = pytest.importorskip("pydantic")

    @dataclasses.dataclass
    class Turn:
        role: str
        content: str

    class Message(pydantic.BaseModel):
        role: str
        content: str | None = None
        tool_calls: list | None = None

    template = _template("Qwen-Qwen2.5-7B-Instruct")
    for chat in ([Turn("user", "Zqu1"), Turn("assistant", "Zqa1")],
                 [Message(role="user", content="Zqu1"), Message(role="assistant", content="Zqa1")]):
        expected = qwen_tok.apply_chat_template(chat, chat_template=template, tokenize=False)
        assert render_chats([chat], template, tokenizer=qwen_tok) == [expected]
        texts, spans = render_chats_with_spans([chat], template, tokenizer=qwen_tok)
        assert [texts[0][a:b] for a, b in spans[0]] == ["Zqa1<|im_end|>"]
        with pytest.raises(TypeError, match="list of conversations"):
            render_chats(chat, template)
    with pytest.raises(TemplateError, match="dicts, dataclasses or pydantic models, got 5"):
        render_chats([[5]], template)


@pytest.mark.parametrize("splice", ["1", "0"])
@pytest.mark.parametrize("last", ["\u2028", "\u9fa5", "\u4e02"])
def test_a_character_split_over_byte_tokens_at_the_end_of_a_span_is_trained_whole(last, splice, qwen_tok,
                                                                                    monkeypatch):
    """Qwen's byte-level BPE writes some characters as two tokens with the same offsets. At the
    end of a trained span (an answer ending with one, with mask_eot=False; any span of
    ``train_on``) only the first was trained, by the splice engine and by the full encode: the
    model learned to write half a character. Now every token holding the character is, as
    transformers masks `{% generation %}` spans."""
    from chatdata.templates import get_chat_template

    monkeypatch.setenv("CHATDATA_SPLICE", splice)
    chat = [{"role": "user", "content": "Zqu1"}, {"role": "assistant", "content": "Zqa1 " + last}]
    texts, spans = render_chats_with_spans([chat], get_chat_template("qwen"), mask_eot=False)
    out = tokenize_chats(texts, spans, qwen_tok, return_assistant_tokens_mask=True)
    ids, mask = out["input_ids"][0], out["assistant_masks"][0].bool()
    assert qwen_tok.decode(ids[mask]) == "Zqa1 " + last
