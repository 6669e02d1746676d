import pytest

from chatdata.templates import (add_chat_template, get_chat_template, list_chat_templates,
                                render_chats, resolve_chat_template)
from template_paths import TEMPLATE_DIR


def test_bundled():
    assert {"chatml_format", "qwen", "llama3", "mistral"} <= set(list_chat_templates())
    assert get_chat_template("qwen") == (TEMPLATE_DIR / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
    assert get_chat_template("llama3") == (TEMPLATE_DIR / "meta-llama-Llama-3.1-8B-Instruct.jinja").read_text()
    assert get_chat_template("mistral") == (TEMPLATE_DIR / "mistralai-Mistral-Nemo-Instruct-2407.jinja").read_text()


def test_chatml_format():
    chat = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    out = render_chats([chat], get_chat_template("chatml_format"), add_generation_prompt=True)[0]
    assert out == "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nu<|im_end|>\n<|im_start|>assistant\n"


def test_qwen_bundled_matches_tokenizer(qwen_tok):
    chat = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    assert render_chats([chat], get_chat_template("qwen"), tokenizer=qwen_tok) == [
        qwen_tok.apply_chat_template(chat, tokenize=False)]


@pytest.mark.parametrize("typo, meant", [("qwn", "qwen"), ("Qwen", "qwen"), ("QWEN", "qwen"), ("chatml", "chatml_format"),
                                         ("llama-3", "llama3"), ("Llama_3", "llama3"), ("mistrl", "mistral")])
def test_a_misspelt_name_suggests_the_close_ones(typo, meant):
    with pytest.raises(ValueError, match=f"did you mean '{meant}'") as err:
        get_chat_template(typo)
    assert "known templates: chatml_format" in str(err.value)  # and every name, for the unrelated guess
    with pytest.raises(ValueError, match=f"did you mean '{meant}'"):
        resolve_chat_template(chat_template_name=typo)


def test_an_unrelated_name_suggests_nothing():
    with pytest.raises(ValueError) as err:
        get_chat_template("gpt4")
    assert "did you mean" not in str(err.value) and "known templates: chatml_format" in str(err.value)


def test_bad_names():
    with pytest.raises(ValueError, match="chatml_format"):
        get_chat_template("nope")
    with pytest.raises(TypeError):
        get_chat_template(None)
    with pytest.raises(TypeError):
        add_chat_template("x", 42)
    with pytest.raises(ValueError):
        add_chat_template("bad_syntax", "{% for %}")
    with pytest.raises(TypeError):
        resolve_chat_template(chat_template=3)


def test_add_and_overwrite():
    add_chat_template("test_simple", "{% for m in messages %}{{ m.content }}{% endfor %}")
    assert "test_simple" in list_chat_templates()
    with pytest.raises(ValueError):
        add_chat_template("test_simple", "{{ 1 }}")
    add_chat_template("test_simple", "{{ 1 }}", overwrite=True)
    assert get_chat_template("test_simple") == "{{ 1 }}"


class _Tok:
    def __init__(self, tmpl):
        self.chat_template = tmpl


def test_resolve_priority(qwen_tok):
    assert resolve_chat_template(qwen_tok, chat_template="X", chat_template_name="llama3") == "X"
    assert resolve_chat_template(qwen_tok, chat_template_name="llama3") == get_chat_template("llama3")
    assert resolve_chat_template(qwen_tok) == qwen_tok.chat_template
    assert resolve_chat_template(_Tok(None)) == get_chat_template("chatml_format")
    assert resolve_chat_template() == get_chat_template("chatml_format")


def test_resolve_dict_templates():
    tok = _Tok({"default": "D", "tool_use": "T"})
    assert resolve_chat_template(tok) == "D"
    assert resolve_chat_template(tok, tools=[{}]) == "T"
    assert resolve_chat_template(tok, chat_template="tool_use") == "T"
    with pytest.raises(ValueError):
        resolve_chat_template(_Tok({"a": "A"}))
