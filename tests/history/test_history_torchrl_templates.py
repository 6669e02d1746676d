"""torchrl's template names (``llama``, ``deepseek``, ``falcon``, ``dialogpt``), its
``add_chat_template(template_name=..., inverse_parser=..., model_family_keywords=...)`` signature,
and parsing with those names."""
from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from chatdata import History, add_chat_template
from chatdata.templates import get_chat_template, list_chat_templates, registry

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi there!"},
    {"role": "user", "content": "How are you?"},
]
TORCHRL_NAMES = ("llama", "deepseek", "falcon", "dialogpt")


def test_torchrl_names_are_registered():
    assert set(TORCHRL_NAMES) <= set(list_chat_templates())


@pytest.mark.parametrize("name, want", [
    ("falcon", "Be brief.\n\nUser: Hello\n\nAssistant: Hi there!\n\nUser: How are you?\n\nAssistant:"),
    ("deepseek", "Be brief.\n\nUser: Hello\n\nAssistant: Hi there!<|im_end|>User: How are you?\n\nAssistant:"),
    ("dialogpt", "Hello<|im_end|>Hi there!<|im_end|>How are you?<|im_end|>"),
    ("llama", "<|header_start|>system<|header_end|>\n\nBe brief.<|eot|><|header_start|>user<|header_end|>\n\nHello<|eot|>"
              "<|header_start|>assistant<|header_end|>\n\nHi there!<|eot|><|header_start|>user<|header_end|>\n\n"
              "How are you?<|eot|><|header_start|>assistant<|header_end|>\n\n"),
])
def test_torchrl_names_render_their_format(qwen_tok, name, want):
    # the Qwen tokenizer has no BOS and <|im_end|> as EOS: both come from the tokenizer
    text = History.from_chats(CHAT).apply_chat_template(tokenizer=qwen_tok, chat_template_name=name)
    assert text == want


@pytest.mark.parametrize("name", TORCHRL_NAMES)
def test_torchrl_names_mask_the_assistant_and_never_a_header(qwen_tok, name):
    chat = CHAT[:3]
    out = History.from_chats(chat).apply_chat_template(
        tokenizer=qwen_tok, chat_template_name=name, add_generation_prompt=False,
        return_dict=True, return_assistant_tokens_mask=True)
    said = qwen_tok.decode(out["input_ids"][out["assistant_masks"].bool()])
    assert "Hi there!" in said
    for other in ("Hello", "Be brief", "User:", "Assistant:", "<|header_start|>", "assistant<|header_end|>"):
        assert other not in said, (name, said)


@pytest.mark.parametrize("name", ["llama", "deepseek", "falcon"])
def test_torchrl_names_parse_back(qwen_tok, name):
    h = History.from_chats(CHAT)
    text = h.apply_chat_template(tokenizer=qwen_tok, chat_template_name=name, add_generation_prompt=False)
    assert History.from_text(text, chat_template_name=name).to_chats() == CHAT
    cut = History.from_text(text[:-4], chat_template_name=name)
    assert cut.role == h.role and cut.is_complete == [True, True, True, False]


TEXT = st.text(alphabet="ab \n", max_size=5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["deepseek", "falcon"]), system=st.one_of(st.none(), TEXT.filter(str.strip)),
       turns=st.lists(st.tuples(TEXT, TEXT), min_size=1, max_size=3))
def test_plain_text_names_keep_newlines_and_blank_lines_of_contents(qwen_tok, name, system, turns):
    # a content ending with a newline or holding a blank line was cut at its first blank line, the
    # rest read as a system message holding "Assistant: ..."
    chat = [{"role": "system", "content": system}] if system is not None else []
    for q, a in turns:
        chat += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    text = History.from_chats(chat).apply_chat_template(tokenizer=qwen_tok, chat_template_name=name,
                                                        add_generation_prompt=False)
    assert History.from_text(text, chat_template_name=name).to_chats() == chat


def test_deepseek_without_a_tokenizer_ends_an_assistant_turn_at_the_next_user():
    # its EOS comes from the tokenizer: without one, only the next "User:" says the reply ended
    chat = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    text = History.from_chats(chat).apply_chat_template(chat_template_name="deepseek", add_generation_prompt=False)
    assert History.from_text(text, chat_template_name="deepseek").to_chats() == chat


def test_deepseek_reply_that_says_user_before_its_eos_stays_whole():
    text = "User: hi\n\nAssistant: Type User: then your name<｜end▁of▁sentence｜>"
    assert History.from_text(text, chat_template_name="deepseek").to_chats() == [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Type User: then your name"}]


def test_dialogpt_writes_no_roles_so_it_has_no_parser():
    with pytest.raises(ValueError, match="no output parser"):
        History.from_text("Hello</s>", chat_template_name="dialogpt")


def test_chatml_parser_ends_a_turn_at_endoftext():
    text = ("<|im_start|>user\nTell me.<|im_end|>\n<|im_start|>assistant\nDone.<|endoftext|>\n"
            "<|im_start|>user\nMore?<|im_end|>\n<|im_start|>assistant\nSo")
    h = History.from_text(text, chat_template_name="qwen")
    assert h.role == ["user", "assistant", "user", "assistant"]
    assert h.content == ["Tell me.", "Done.", "More?", "So"]
    assert h.is_complete == [True, True, True, False]


# -- add_chat_template: torchrl's signature ------------------------------------------------
@pytest.fixture
def fresh_name():
    name = f"custom_{uuid.uuid4().hex}"
    yield name
    for table in (registry._CHAT_TEMPLATES, registry._CUSTOM_INVERSE_PARSERS, registry._CUSTOM_MODEL_FAMILY_KEYWORDS):
        table.pop(name, None)


BRACKETS = "{% for m in messages %}[{{ m.role | upper }}] {{ m.content }}\n{% endfor %}"


def test_add_chat_template_with_torchrl_keywords(fresh_name):
    add_chat_template(template_name=fresh_name, template=BRACKETS, inverse_parser=None, model_family_keywords=None)
    assert get_chat_template(fresh_name) == BRACKETS
    assert fresh_name not in registry._CUSTOM_MODEL_FAMILY_KEYWORDS


def test_add_chat_template_aliases_and_conflicts(fresh_name):
    add_chat_template(name=fresh_name, template=BRACKETS, parser=lambda t: [{"role": "user", "content": t}])
    assert History.from_text("x", chat_template_name=fresh_name).content == ["x"]
    with pytest.raises(TypeError, match="template_name= and name="):
        add_chat_template(template_name=fresh_name, name="other", template=BRACKETS)
    with pytest.raises(TypeError, match="inverse_parser= and parser="):
        add_chat_template(fresh_name, BRACKETS, inverse_parser=str, parser=repr)
    with pytest.raises(ValueError, match="overwrite=True"):
        add_chat_template(fresh_name, BRACKETS + " ")
    with pytest.raises(TypeError, match="model_family_keywords"):
        add_chat_template(fresh_name, BRACKETS, model_family_keywords="qwen")
    with pytest.raises(TypeError, match="non-empty str"):
        add_chat_template(template=BRACKETS)


def test_model_family_keywords_choose_the_template(qwen_tok, fresh_name):
    conv = History.from_chats(CHAT[1:3])
    own = conv.apply_chat_template(tokenizer=qwen_tok, add_generation_prompt=False)
    assert own.startswith("<|im_start|>")
    add_chat_template(template_name=fresh_name, template=BRACKETS, model_family_keywords=["QWEN"],
                      inverse_parser=lambda t: [{"role": r[1:].split("]")[0].lower(), "content": r.split("] ", 1)[1]}
                                                for r in t.splitlines()])
    text = conv.apply_chat_template(tokenizer=qwen_tok, add_generation_prompt=False)
    assert text == "[USER] Hello\n[ASSISTANT] Hi there!\n"
    # without a name or template, from_text parses with the keyword-chosen template too
    assert History.from_text(text, tokenizer=qwen_tok).to_chats() == CHAT[1:3]
    # explicit choices still win over keywords
    assert conv.apply_chat_template(tokenizer=qwen_tok, chat_template_name="chatml_format",
                                    add_generation_prompt=False).startswith("<|im_start|>user")
    # removing the template (as torchrl's tests do) drops the rule
    del registry._CHAT_TEMPLATES[fresh_name]
    assert conv.apply_chat_template(tokenizer=qwen_tok, add_generation_prompt=False) == own


def test_keywords_never_match_without_a_tokenizer_path(fresh_name):
    add_chat_template(template_name=fresh_name, template=BRACKETS, model_family_keywords=["qwen"])
    text = History.from_chats(CHAT[1:3]).apply_chat_template(add_generation_prompt=False)
    assert text.startswith("<|im_start|>user")  # no tokenizer: the ChatML default


@pytest.mark.parametrize("returns", [5, None, [{"role": "user", "content": "x"}, "stray"]], ids=["int", "None", "str item"])
def test_a_parser_returning_no_messages_is_named(fresh_name, returns):
    # the error was from_chats' ("takes a list of message dicts ..., got int"), naming no parser
    add_chat_template(fresh_name, BRACKETS, inverse_parser=lambda text: returns)
    with pytest.raises(TypeError, match=f"output parser registered for '{fresh_name}' returned"):
        History.from_text("[USER] x\n", chat_template_name=fresh_name)
