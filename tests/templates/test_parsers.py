"""Output parsers: table-driven families, round trips, tool calls, errors."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatdata.templates import (ParserSpec, add_chat_template, get_chat_template, parse_chat_text,
                                render_chats)

MARKERS = ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40).filter(
    lambda s: not any(m in s for m in MARKERS) and "<|im" not in s and "\n<" not in s)
nonempty = text.filter(bool)
role_text = st.sampled_from(["user", "assistant", "system"])
chatml_chats = st.lists(st.fixed_dictionaries({"role": role_text, "content": text}), min_size=1, max_size=6)
args = st.dictionaries(st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=10), st.booleans()), max_size=3)
tool_call = st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
    {"name": st.from_regex(r"[a-z_]{1,10}", fullmatch=True), "arguments": args})})  # the shape chats are fed in


@st.composite
def qwen_chats(draw):
    chat = [{"role": "system", "content": draw(text)}]
    for _ in range(draw(st.integers(1, 4))):
        chat.append({"role": "user", "content": draw(nonempty)})
        if draw(st.booleans()):
            chat.append({"role": "assistant", "content": draw(text), "tool_calls": draw(st.lists(tool_call, min_size=1, max_size=2))})
            for _ in range(draw(st.integers(1, 2))):
                chat.append({"role": "tool", "content": draw(text)})
        chat.append({"role": "assistant", "content": draw(text)})
    return chat


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chatml_chats)
def test_roundtrip_chatml(chat):
    rendered = render_chats([chat], get_chat_template("chatml_format"))[0]
    assert parse_chat_text(rendered, "chatml_format") == chat


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(qwen_chats())
def test_roundtrip_qwen_with_tools(chat):
    rendered = render_chats([chat], get_chat_template("qwen"))[0]
    assert parse_chat_text(rendered, "qwen") == chat


def test_incomplete_last_message():
    out = parse_chat_text("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhal", "qwen")
    assert out[-1] == {"role": "assistant", "content": "hal", "is_complete": False}


def test_malformed_tool_call_raises():
    bad = "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{not json}\n</tool_call><|im_end|>\n"
    with pytest.raises(ValueError, match="message 1"):
        parse_chat_text(bad, "qwen")


def test_mixed_tool_response_turn():
    txt = "<|im_start|>user\nsee:\n<tool_response>\nR\n</tool_response><|im_end|>\n"
    assert parse_chat_text(txt, "qwen") == [{"role": "user", "content": "see:", "tool_responses": ["R"]}]


def test_llama3_and_mistral(mistral_tok):
    chat = [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}]
    llama = render_chats([chat], get_chat_template("llama3"), bos_token="<|begin_of_text|>")[0]
    parsed = parse_chat_text(llama, "llama3")
    assert parsed[0]["role"] == "system" and parsed[1:] == chat
    mistral = render_chats([chat], get_chat_template("mistral"), tokenizer=mistral_tok)[0]
    assert parse_chat_text(mistral, "mistral") == chat
    gen = render_chats([chat[:1]], get_chat_template("llama3"), bos_token="<|begin_of_text|>",
                       add_generation_prompt=True)[0] + "partial"
    assert parse_chat_text(gen, "llama3")[-1] == {"role": "assistant", "content": "partial", "is_complete": False}


def test_registered_parser_and_errors():
    spec = ParserSpec("pipe", turns=((None, r"(?P<role>\w+)\|(?P<content>.*?)(?:(?P<end>;)|\Z)"),))
    add_chat_template("pipe", "{% for m in messages %}{{ m.role }}|{{ m.content }};{% endfor %}", parser=spec)
    chat = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    assert parse_chat_text(render_chats([chat], get_chat_template("pipe"))[0], "pipe") == chat
    add_chat_template("upper", "{{ 1 }}", parser=lambda t: [{"role": "user", "content": t.upper()}])
    assert parse_chat_text("ab", "upper") == [{"role": "user", "content": "AB"}]
    add_chat_template("noparser", "{{ 1 }}")
    with pytest.raises(ValueError, match="no output parser"):
        parse_chat_text("x", "noparser")
    with pytest.raises(ValueError, match="chatml_format"):
        parse_chat_text("x", "does-not-exist")
    with pytest.raises(TypeError):
        parse_chat_text(b"x", "qwen")


# -- reasoning, tool-call formats, generated responses, family detection --------------------
from pathlib import Path  # noqa: E402

from chatdata.templates.parsers import BUILTIN_PARSERS, parse_response, parser_for_template  # noqa: E402

TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "templates"
QWEN3 = (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")


@st.composite
def qwen3_chats(draw):
    words = st.text(st.characters(whitelist_categories=("L", "N", "Zs")), min_size=1, max_size=20).map(str.strip).filter(bool)
    chat = [{"role": "user", "content": draw(words)}]
    for _ in range(draw(st.integers(0, 2))):
        chat.append({"role": "assistant", "content": draw(words), "reasoning_content": draw(words),
                     "tool_calls": draw(st.lists(tool_call, min_size=1, max_size=2))})
        chat.append({"role": "tool", "content": draw(words)})
    chat.append({"role": "assistant", "content": draw(words), "reasoning_content": draw(words)})
    return chat


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(qwen3_chats())
def test_roundtrip_qwen3_reasoning_and_tools(chat):
    rendered = render_chats([chat], QWEN3)[0]
    assert parse_chat_text(rendered, "qwen_reasoning") == chat


def test_parse_response_formats():
    hermes = parse_response('I will look.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call><|im_end|>',
                            BUILTIN_PARSERS["qwen"])
    assert hermes == {"role": "assistant", "content": "I will look.",
                      "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}
    think = parse_response("<think>\nhm\n</think>\n\nyes<|im_end|>", BUILTIN_PARSERS["qwen_reasoning"])
    assert think == {"role": "assistant", "content": "yes", "reasoning_content": "hm"}
    prompt_had_think = parse_response("hm</think>\n\nyes<|im_end|>", BUILTIN_PARSERS["qwen_reasoning"])
    assert prompt_had_think["reasoning_content"] == "hm" and prompt_had_think["content"] == "yes"
    mistral = parse_response('[TOOL_CALLS][{"name": "g", "arguments": {}, "id": "abcdefghi"}]</s>', BUILTIN_PARSERS["mistral"])
    assert mistral["tool_calls"] == [{"type": "function", "function": {"name": "g", "arguments": {}}, "id": "abcdefghi"}]
    assert mistral["content"] == ""
    v11 = parse_response('[TOOL_CALLS]g[CALL_ID]abcdefghi[ARGS]{"a": 1}[TOOL_CALLS]h[ARGS]{}</s>', BUILTIN_PARSERS["mistral"])
    assert v11["tool_calls"] == [{"type": "function", "function": {"name": "g", "arguments": {"a": 1}}, "id": "abcdefghi"},
                                 {"type": "function", "function": {"name": "h", "arguments": {}}}]
    with pytest.raises(ValueError, match="malformed tool-call JSON"):
        parse_response('[TOOL_CALLS]g[ARGS]{"a": }</s>', BUILTIN_PARSERS["mistral"])
    cut = parse_response('[TOOL_CALLS]g[ARGS]{"a": ', BUILTIN_PARSERS["mistral"])  # max_tokens hit: text kept
    assert "tool_calls" not in cut and cut["content"] == '[TOOL_CALLS]g[ARGS]{"a": ' and cut["is_complete"] is False
    for text in (' to=functions.f<|channel|>commentary json<|message|>{"q": "x"}<|call|>',
                 '<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"q": "x"}<|call|>'):
        assert parse_response(text, BUILTIN_PARSERS["gpt_oss"])["tool_calls"] == [
                {"type": "function", "function": {"name": "f", "arguments": {"q": "x"}}}]
    llama = parse_response('{"name": "h", "parameters": {"x": "y"}}<|eot_id|>', BUILTIN_PARSERS["llama3"])
    assert llama["tool_calls"] == [{"type": "function", "function": {"name": "h", "arguments": {"x": "y"}}}]
    harmony = parse_response("<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>",
                             BUILTIN_PARSERS["gpt_oss"])
    assert harmony == {"role": "assistant", "content": "ok", "reasoning_content": "think"}
    cut = parse_response("partial", BUILTIN_PARSERS["qwen"])
    assert cut == {"role": "assistant", "content": "partial", "is_complete": False}
    assert parse_response("a<eot>", None, stop="<eot>") == {"role": "assistant", "content": "a"}
    assert parse_response("a<eot>b", None, stop="<eot>")["is_complete"] is False  # the stop ends a response
    with pytest.raises(ValueError, match="message 0: malformed tool-call JSON"):
        parse_response("<tool_call>\n{oops}\n</tool_call><|im_end|>", BUILTIN_PARSERS["qwen"])
    with pytest.raises(TypeError):
        parse_response(b"x", BUILTIN_PARSERS["qwen"])


def test_parser_for_template_by_markers():
    def family(name):
        spec = parser_for_template((TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8"))
        return spec.name if spec else None

    assert parser_for_template(get_chat_template("qwen")).name == "qwen"
    assert family("Qwen-Qwen3-0.6B") == "qwen_reasoning" and family("Qwen-QwQ-32B") == "qwen_reasoning"
    assert family("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use") == "qwen"
    assert family("meta-llama-Llama-3.1-8B-Instruct") == "llama3"
    assert family("mistralai-Mistral-Nemo-Instruct-2407") == "mistral"
    assert family("google-gemma-2-2b-it") == "gemma"
    assert family("openai-gpt-oss-120b") == "gpt_oss"
    assert parser_for_template("{{ messages[0].content }}") is None


_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


@pytest.mark.parametrize("template, generated", [
    (get_chat_template("qwen"), '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call><|im_end|>'),
    (QWEN3, '<think>\n\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call><|im_end|>'),
    (get_chat_template("llama3"), '{"name": "get_weather", "parameters": {"city": "Zürich"}}<|eot_id|>'),
    ((TEMPLATES / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text(encoding="utf-8"),
     '{"name": "get_weather", "parameters": {"city": "Zürich"}}<|eot_id|>'),
    ((TEMPLATES / "mistralai-Mistral-Nemo-Instruct-2407.jinja").read_text(encoding="utf-8"),
     '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Zürich"}, "id": "abc123def"}]</s>'),
], ids=["qwen", "qwen3", "llama3", "llama3.1", "mistral-nemo"])
def test_parsed_tool_calls_have_the_input_shape_and_render_back_the_same(template, generated):
    """A generated tool call, parsed, has the shape users feed in ({"type": "function", "function":
    {...}}, with "id" where the template writes one) and renders back to the text the model wrote."""
    chat = [{"role": "user", "content": "weather?"}]
    specials = {"bos_token": "<s>", "eos_token": "</s>"}
    prompt = render_chats([chat], template, add_generation_prompt=True, tools=_TOOLS, **specials)[0]
    msg = parse_response(generated, parser_for_template(template))
    call = msg["tool_calls"][0]
    assert call["type"] == "function" and call["function"] == {"name": "get_weather", "arguments": {"city": "Zürich"}}
    assert ("id" in call) == ("abc123def" in generated)
    again = render_chats([chat + [msg]], template, tools=_TOOLS, **specials)[0]
    assert again.startswith(prompt) and again[len(prompt):].startswith(generated)
