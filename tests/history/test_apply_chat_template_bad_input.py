"""apply_chat_template / from_text with bad arguments: a clear error, never a silent fallback.

Before: ``tokenizer="Qwen/..."`` (a model name where a tokenizer object belongs) rendered with
``chatml_format`` without a word, and failed deep in the tokenizer call once tokenising
(``TypeError: 'add_special_tokens' is an invalid keyword argument for encode()``); a negative
``max_length`` with truncation silently did not truncate (fast tokenizers) or cut the last token
(slow ones); a str ``max_length`` failed inside a comparison."""
import pathlib

import pytest

from chatdata import History

CHATS = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}],
         [{"role": "user", "content": "x"}]]


@pytest.mark.parametrize("tokenizer", ["Qwen/Qwen2.5-0.5B-Instruct", b"Qwen", pathlib.Path("/models/qwen")], ids=repr)
@pytest.mark.parametrize("kwargs", [{}, {"tokenize": True}, {"return_assistant_tokens_mask": True}], ids=str)
def test_a_model_name_is_not_a_tokenizer(tokenizer, kwargs):
    with pytest.raises(TypeError, match=r"tokenizer must be a tokenizer object, e\.g\. transformers\.AutoTokenizer"):
        History.from_chats(CHATS).apply_chat_template(tokenizer=tokenizer, **kwargs)


def test_from_text_refuses_a_model_name_too():
    with pytest.raises(TypeError, match="tokenizer must be a tokenizer object"):
        History.from_text("<|im_start|>user\nhi<|im_end|>\n", tokenizer="Qwen/Qwen2.5-0.5B-Instruct")


@pytest.mark.parametrize("max_length", [-1, -100, "5", 5.0, True], ids=repr)
@pytest.mark.parametrize("masks", [False, True])
def test_max_length_must_be_an_int_at_least_zero(qwen_tok, max_length, masks):
    with pytest.raises(ValueError, match=r"max_length must be an int >= 0 \(or None\), got"):
        History.from_chats(CHATS).apply_chat_template(tokenizer=qwen_tok, tokenize=True, truncation=True,
                                                      max_length=max_length, return_assistant_tokens_mask=masks)


@pytest.mark.parametrize("max_length", [0, 3, 10**6])
def test_valid_max_length_truncates_ids_and_masks_together(qwen_tok, max_length):
    full = History.from_chats(CHATS).apply_chat_template(tokenizer=qwen_tok, return_assistant_tokens_mask=True)
    cut = History.from_chats(CHATS).apply_chat_template(tokenizer=qwen_tok, return_assistant_tokens_mask=True,
                                                        truncation=True, max_length=max_length)
    for i in range(len(CHATS)):
        n = min(max_length, full[i]["input_ids"].numel())
        assert cut[i]["input_ids"].tolist() == full[i]["input_ids"][:n].tolist()
        assert cut[i]["assistant_masks"].tolist() == full[i]["assistant_masks"][:n].tolist()
