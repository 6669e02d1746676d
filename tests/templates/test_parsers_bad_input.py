"""Output parsers, the parser registry and the template helpers: what a model writes that is not a well-formed call is
refused by name (or stays content), never silently cut; a parser that could not run is refused
when it is registered."""
from __future__ import annotations

import pytest

from chatdata.templates import add_chat_template, get_chat_template, list_chat_templates, parse_chat_text
from chatdata.templates.parsers import BUILTIN_PARSERS, parse_response
from chatdata.templates.registry import get_parser, register_parser

QWEN = BUILTIN_PARSERS["qwen"]
LLAMA3 = BUILTIN_PARSERS["llama3"]


def _call(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call><|im_end|>"


@pytest.mark.parametrize("body, match", [
    ('{"name": 5, "arguments": {}}', "name must be a non-empty string"),
    ('{"name": "", "arguments": {}}', "name must be a non-empty string"),
    ('{"name": "f", "arguments": {}, "reason": "why"}', r"keys a call does not have \('reason'\)"),
    ('{"name": "f", "arguments": {"a": NaN}}', "NaN, which is not JSON"),
    ('{"name": "f", "arguments": {"a": -1e999}}', "-1e999, too large for a float"),  # was read as -inf
    ('{"name": "f", "arguments": {"a": ' + "9" * 5000 + "}}", "malformed tool-call JSON"),
])
def test_calls_that_would_lose_or_corrupt_data_are_refused(body, match):
    with pytest.raises(ValueError, match=rf"message 0: .*{match}"):
        parse_response(_call(body), QWEN)


def test_a_call_with_id_and_type_is_still_a_call():
    got = parse_response(_call('{"type": "function", "name": "f", "arguments": {"a": 1}, "id": "c1"}'), QWEN)
    assert got["tool_calls"] == [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}, "id": "c1"}]


def test_llama3_json_answers_stay_content():
    # before: {"name": "Bob", "age": 3} became a call to "Bob" with no arguments, "age" lost
    got = parse_response('{"name": "Bob", "age": 3}<|eot_id|>', LLAMA3)
    assert got == {"role": "assistant", "content": '{"name": "Bob", "age": 3}'}
    call = parse_response('{"name": "h", "parameters": {"x": 1}}<|eot_id|>', LLAMA3)
    assert call["tool_calls"] == [{"type": "function", "function": {"name": "h", "arguments": {"x": 1}}}]


def test_parse_response_names_bad_spec_and_stop():
    with pytest.raises(TypeError, match=r"spec must be a ParserSpec .* got 'qwen'"):
        parse_response("hi", "qwen")
    with pytest.raises(TypeError, match="stop must be a str"):
        parse_response("hi", QWEN, stop=5)


def test_a_parser_that_cannot_run_is_refused_at_registration():
    with pytest.raises(TypeError, match=r"parser for 'zq_bad' must be a ParserSpec or a callable"):
        add_chat_template("zq_bad", "{{ 1 }}", inverse_parser="qwen")
    assert "zq_bad" not in list_chat_templates()  # nothing registered
    before = get_parser("qwen")
    with pytest.raises(TypeError, match=r"parser for 'qwen' must be"):
        register_parser("qwen", 5)
    assert get_parser("qwen") is before
    assert parse_chat_text("<|im_start|>user\nhi<|im_end|>\n", "qwen") == [{"role": "user", "content": "hi"}]
    assert get_chat_template("qwen")


def test_template_helpers_name_what_they_take():
    from chatdata.templates import Renderer, has_generation_tags, template_profile

    source = get_chat_template("llama3")
    assert template_profile(source) is template_profile(Renderer(source))  # a source is taken as its Renderer
    with pytest.raises(TypeError, match="takes a Renderer or a template source"):
        template_profile(5)
    with pytest.raises(TypeError, match="chat template must be a str"):
        has_generation_tags(None)
