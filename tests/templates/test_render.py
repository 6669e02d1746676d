"""Byte-identical rendering versus transformers' apply_chat_template, for every template."""
import pytest

from chatdata.templates import TemplateError, render_chats

from chats import SHAPES
from template_paths import template_files

TEMPLATES = {p.stem: p.read_text(encoding="utf-8") for p in template_files()}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_identical_to_transformers(name, shape, any_tok):
    template = TEMPLATES[name]
    kwargs = dict(SHAPES[shape])
    chat = kwargs.pop("chat")
    try:
        expected = any_tok.apply_chat_template(chat, chat_template=template, tokenize=False, **kwargs)
    except Exception as err:  # the template can't render this shape: we must raise too
        with pytest.raises((TemplateError, TypeError)):
            render_chats([chat], template, tokenizer=any_tok, **kwargs)
        return
    assert render_chats([chat], template, tokenizer=any_tok, **kwargs) == [expected]


def test_batch_and_kwargs(qwen_tok):
    template = TEMPLATES["Qwen-Qwen3-0.6B"]
    chats = [SHAPES["plain"]["chat"], SHAPES["system"]["chat"]]
    ours = render_chats(chats, template, tokenizer=qwen_tok, add_generation_prompt=True, enable_thinking=False)
    ref = qwen_tok.apply_chat_template(chats, chat_template=template, tokenize=False,
                                       add_generation_prompt=True, enable_thinking=False)
    assert ours == ref


def test_callable_tools(qwen_tok):
    def get_time(city: str) -> str:
        """Get the time.

        Args:
            city: The city.
        """
        return "noon"

    chat = SHAPES["plain"]["chat"][:2]
    template = TEMPLATES["Qwen-Qwen2.5-7B-Instruct"]
    ref = qwen_tok.apply_chat_template(chat, tools=[get_time], tokenize=False)
    assert render_chats([chat], template, tools=[get_time], tokenizer=qwen_tok) == [ref]
    with pytest.raises(ValueError):
        render_chats([chat], template, tools=[42])


def test_none_values_dropped_and_reasoning_alias(qwen_tok):
    template = TEMPLATES["Qwen-Qwen3-0.6B"]
    chat = [{"role": "user", "content": "q", "name": None},
            {"role": "assistant", "content": "a", "reasoning": "because"}]
    ref = qwen_tok.apply_chat_template(chat, chat_template=template, tokenize=False)
    assert render_chats([chat], template, tokenizer=qwen_tok) == [ref]


def test_continue_final_message_errors(qwen_tok):
    template = TEMPLATES["Qwen-Qwen2.5-7B-Instruct"]
    chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "par"}]
    assert render_chats([chat], template, continue_final_message=True)[0].endswith("assistant\npar")
    with pytest.raises(TemplateError):
        render_chats([chat], template, continue_final_message=True, add_generation_prompt=True)
    with pytest.raises(TemplateError):
        render_chats([[]], template, continue_final_message=True)
    with pytest.raises(TemplateError):
        render_chats([chat], template, continue_final_message="reasoning_content")
    # a template that drops the final message
    with pytest.raises(TemplateError):
        render_chats([chat], "{{ messages[0].content }}", continue_final_message=True)


def test_raise_exception_and_errors():
    with pytest.raises(TemplateError, match="boom"):
        render_chats([[{"role": "user", "content": "x"}]], "{{ raise_exception('boom') }}")
    with pytest.raises(TemplateError):
        render_chats([[{"role": "user", "content": "x"}]], "{% for %}")
    with pytest.raises(TypeError):
        render_chats([[{"role": "user", "content": "x"}]], 123)
    with pytest.raises(TypeError):
        render_chats([{"role": "user", "content": "x"}], "{{ 1 }}")  # not a batch


def test_environment_features():
    t = ("{{ messages[0] | tojson }}|{{ {'b': 1, 'a': '<é>'} | tojson(sort_keys=True, indent=1) }}|"
         "{% for m in messages %}{% if loop.first %}{% continue %}{% endif %}{{ m.content }}{% endfor %}|"
         "{{ strftime_now('%Y') | length }}|{% set ns = namespace(x=1) %}{{ ns.x }}")
    out = render_chats([[{"role": "user", "content": "<a&b>"}, {"role": "user", "content": "z"}]], t)[0]
    assert out == '{"role": "user", "content": "<a&b>"}|{\n "a": "<é>",\n "b": 1\n}|z|4|1'
    with pytest.raises(TemplateError):  # sandbox
        render_chats([[{"role": "user", "content": "x"}]], "{{ messages.__class__.__mro__ }}{{ ''.__class__.__subclasses__() }}")


def test_a_value_nested_too_deeply_to_render_is_a_template_error(qwen_tok):
    """A History holds tool arguments up to 512 levels deep; rendering recurses per level and
    runs out of Python's stack first: a TemplateError naming the key, never a RecursionError."""
    from chatdata import History

    deep = 1
    for _ in range(500):
        deep = [deep]
    call = {"type": "function", "function": {"name": "f", "arguments": {"x": deep}}}
    h = History.from_chats([[{"role": "user", "content": "a"}, {"role": "assistant", "content": "", "tool_calls": [call]}]])
    for kwargs in ({"tokenize": False}, {"tokenize": True, "return_dict": True, "return_assistant_tokens_mask": True}):
        with pytest.raises(TemplateError, match="'tool_calls' is nested too deeply to render"):
            h.apply_chat_template(tokenizer=qwen_tok, chat_template=TEMPLATES["Qwen-Qwen3-0.6B"], **kwargs)
    with pytest.raises(TemplateError, match="nested too deeply"):
        render_chats([[{"role": "user", "content": "a"}]], "{{ x | tojson }}", x=deep)


def test_a_template_failing_on_one_chat_of_a_batch_names_it():
    """A template that fails on one of many chats says which (it said only what failed)."""
    from chatdata import History
    from chatdata.data import load_sample_tokenizer

    tok = load_sample_tokenizer()
    h = History.from_chats([[{"role": "user", "content": "a"}], [], [{"role": "user", "content": "b"}]])
    for kwargs in ({}, {"tokenize": True, "return_dict": True, "return_assistant_tokens_mask": True}):
        with pytest.raises(TemplateError, match=r"^chat 1: chat template failed to render: .*no element 0"):
            h.apply_chat_template(tokenizer=tok, add_generation_prompt=True, **kwargs)
    with pytest.raises(TemplateError, match=r"^chat template failed to render"):  # one chat: nothing to name
        h[1:2].apply_chat_template(tokenizer=tok, add_generation_prompt=True)
    with pytest.raises(TemplateError, match=r"^chat 2: "):
        render_chats([[{"role": "user", "content": "a"}]] * 2 + [[]], "{{ messages[0].content }}")
