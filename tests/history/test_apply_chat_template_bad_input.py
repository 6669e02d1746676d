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


@pytest.mark.parametrize("kwargs, err, match", [
    (dict(tokenize="yes"), TypeError, r"tokenize must be True, False or None, got 'yes'"),
    (dict(tokenize=True, return_dict="no"), TypeError, r"return_dict must be True, False or None, got 'no'"),
    (dict(add_generation_prompt="no"), TypeError, r"add_generation_prompt must be True or False, got 'no'"),
    (dict(continue_final_message=1), TypeError, r"continue_final_message must be True or False, got 1"),
    (dict(return_assistant_tokens_mask="yes"), TypeError, r"return_assistant_tokens_mask must be True or False"),
    (dict(tokenize=False, return_assistant_tokens_mask=True), ValueError, r"return_assistant_tokens_mask=True needs tokens"),
    (dict(tokenize=True, truncation="nope", max_length=3), ValueError, r"truncation must be a bool or one of \['do_not_truncate'"),
], ids=["tokenize str", "return_dict str", "generation prompt str", "continue int", "mask str", "mask untokenized",
        "truncation name"])
def test_options_that_would_be_read_as_another_value_are_refused(qwen_tok, kwargs, err, match):
    # before: "no" was truthy (a generation prompt added, a dict returned), tokenize=False silently
    # dropped the masks asked for (transformers refuses it), and an unknown truncation name truncated
    with pytest.raises(err, match=match):
        History.from_chats(CHATS).apply_chat_template(tokenizer=qwen_tok, **kwargs)


def test_truncation_strategy_names_mean_what_transformers_means(qwen_tok):
    h = History.from_chats(CHATS)
    full = h.apply_chat_template(tokenizer=qwen_tok, tokenize=True)
    # "do_not_truncate" was bool("do_not_truncate") == True: it truncated
    kept = h.apply_chat_template(tokenizer=qwen_tok, tokenize=True, truncation="do_not_truncate", max_length=3)
    cut = h.apply_chat_template(tokenizer=qwen_tok, tokenize=True, truncation="longest_first", max_length=3)
    assert [t.tolist() for t in kept.unbind()] == [t.tolist() for t in full.unbind()]
    assert [t.tolist() for t in cut.unbind()] == [t[:3].tolist() for t in full.unbind()]


def test_return_dict_without_tokens_gives_the_text_as_transformers_and_torchrl_do(qwen_tok):
    h = History.from_chats(CHATS)
    want = h.apply_chat_template(tokenizer=qwen_tok)
    assert h.apply_chat_template(tokenizer=qwen_tok, return_dict=True) == want
    assert h.apply_chat_template(tokenizer=qwen_tok, return_dict=True, tokenize=False) == want


@pytest.mark.parametrize("tokenizer", [3, object()], ids=["int", "object"])
def test_an_object_that_is_no_tokenizer_is_refused(tokenizer):
    # tokenizer=3 silently rendered chatml_format, or failed with "'int' object has no attribute 'encode'"
    with pytest.raises(TypeError, match=r"tokenizer must be a tokenizer object \(with a chat_template or an encode"):
        History.from_chats(CHATS).apply_chat_template(tokenizer=tokenizer)


def test_a_template_only_tokenizer_renders_but_cannot_tokenize(qwen_tok):
    class TemplateOnly:
        chat_template = qwen_tok.chat_template

    h = History.from_chats(CHATS)
    assert h.apply_chat_template(tokenizer=TemplateOnly()) == h.apply_chat_template(tokenizer=qwen_tok)
    with pytest.raises(TypeError, match="tokenize=True needs a tokenizer that encodes text"):
        h.apply_chat_template(tokenizer=TemplateOnly(), tokenize=True)


@pytest.mark.parametrize("text, name", [("hello world", None),
                                        ("<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>", None),
                                        ("<|im_start|>user\nhi<|im_end|>", "llama3")], ids=["plain", "llama3 as chatml", "chatml as llama3"])
def test_from_text_of_another_format_is_refused_not_read_as_an_empty_chat(text, name):
    # was: an empty History, without a word
    with pytest.raises(ValueError, match=r"from_text found no message of the '\w+' format in .*chat_template_name="):
        History.from_text(text, chat_template_name=name)
    with pytest.raises(ValueError, match=r"^text 1: from_text found no message"):
        good = {"llama3": "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"}.get(name, "<|im_start|>user\nhi<|im_end|>")
        History.from_text([good, text], chat_template_name=name)
    assert History.from_text(["", " \n"]).to_chats() == [[], []]  # blank text: no messages


def _lengths(out):
    ids = out["input_ids"]
    return [int(t.numel()) for t in (ids.unbind() if ids.is_nested else ids)]


@pytest.mark.parametrize("masks", [False, True])
def test_truncation_none_with_max_length_truncates_as_transformers_does(qwen_tok, masks):
    """transformers' rule: ``truncation=None`` with ``max_length`` and no padding cuts to
    ``max_length`` (``tokenizer.apply_chat_template(..., truncation=None, max_length=5)`` gives 5
    ids). Before, None was read as False: the ids came back whole, longer than asked."""
    h = History.from_chats(CHATS)
    kw = dict(tokenizer=qwen_tok, tokenize=True, return_dict=True, add_generation_prompt=False,
              return_assistant_tokens_mask=masks)
    want = qwen_tok.apply_chat_template(CHATS, tokenize=True, return_dict=True, truncation=None, max_length=5)
    assert [len(x) for x in want["input_ids"]] == [5, 5]
    out = h.apply_chat_template(truncation=None, max_length=5, **kw)
    assert [t.tolist() for t in out["input_ids"].unbind()] == want["input_ids"]
    if masks:
        assert _lengths({"input_ids": out["assistant_masks"]}) == [5, 5]
    # the default stays False (transformers' apply_chat_template default): max_length alone does not cut
    full = h.apply_chat_template(max_length=5, **kw)
    assert _lengths(full) == [len(x) for x in qwen_tok.apply_chat_template(CHATS, tokenize=True, max_length=5)["input_ids"]]
    assert min(_lengths(full)) > 5
    # None without max_length, or with padding, does not cut (transformers neither)
    assert _lengths(h.apply_chat_template(truncation=None, **kw)) == _lengths(full)
    padded = h.apply_chat_template(truncation=None, max_length=5, padding=True, **kw)
    assert padded["input_ids"].shape == (2, max(_lengths(full)))


def test_padding_to_max_length_never_cuts_silently(qwen_tok):
    """``padding="max_length"`` with a chat longer than ``max_length`` and no truncation silently
    kept its first ``max_length`` ids (even with left padding and ``truncation_side="left"``);
    transformers keeps it whole and cannot make a tensor of it. Now: a ValueError naming the chat."""
    h = History.from_chats(CHATS)
    for trunc in (False, None, "do_not_truncate"):
        with pytest.raises(ValueError, match=r"chat 0 has \d+ tokens, more than max_length=5: padding='max_length' "
                                             r"cannot fit it; pass truncation=True"):
            h.apply_chat_template(tokenizer=qwen_tok, tokenize=True, padding="max_length", max_length=5,
                                  truncation=trunc, return_assistant_tokens_mask=True)
    out = h.apply_chat_template(tokenizer=qwen_tok, tokenize=True, padding="max_length", max_length=5,
                                truncation=True, return_dict=True)
    assert out["input_ids"].shape == (2, 5)
    wide = h.apply_chat_template(tokenizer=qwen_tok, tokenize=True, padding="max_length", max_length=64,
                                 return_dict=True)
    assert wide["input_ids"].shape == (2, 64)


def test_a_tokenizer_without_a_length_limit_truncates_nothing_and_pads_nowhere(mistral_tok):
    """Mistral-Nemo's model_max_length is transformers' "not set" placeholder (1e30).
    ``truncation=True`` without max_length took it as the limit, so ``padding="max_length"``
    then failed inside torch ("Overflow when unpacking long long"); now it means no limit, and
    padding to max_length asks for max_length."""
    assert mistral_tok.model_max_length > 10**20
    h = History.from_chats(CHATS[:1])
    out = h.apply_chat_template(tokenizer=mistral_tok, tokenize=True, truncation=True, return_dict=True)
    full = h.apply_chat_template(tokenizer=mistral_tok, tokenize=True, return_dict=True)
    assert out["input_ids"].tolist() == full["input_ids"].tolist()
    with pytest.raises(ValueError, match=r"padding='max_length' needs max_length=N"):
        h.apply_chat_template(tokenizer=mistral_tok, tokenize=True, truncation=True, padding="max_length")


@pytest.mark.parametrize("batched", [False, True], ids=["empty conversation", "batch"])
def test_an_empty_conversation_a_template_cannot_render_is_named(qwen_tok, batched):
    # Qwen2.5's template reads messages[0]: the error said only "list object has no element 0"
    h = History.from_chats([[{"role": "user", "content": "a"}], []])
    with pytest.raises(Exception, match=r"the conversation has no messages") as err:
        (h if batched else h[1]).apply_chat_template(tokenizer=qwen_tok, tokenize=True)
    assert type(err.value).__name__ == "TemplateError"
    assert ("chat 1: " in str(err.value)) == batched


@pytest.mark.parametrize("kwargs", [{"return_assistant_tokens_mask": True}, {"train_on": ["assistant", "tool"]},
                                    {"loss_weights": {"assistant": 1.0}}], ids=["mask", "train_on", "loss_weights"])
def test_masks_with_return_dict_false_are_refused(qwen_tok, kwargs):
    # the masks (and loss weights) were computed, then dropped: only input_ids came back
    # (transformers and torchrl raise a ValueError)
    with pytest.raises(ValueError, match="pass return_dict=True"):
        History.from_chats(CHATS).apply_chat_template(tokenizer=qwen_tok, return_dict=False, **kwargs)
    out = History.from_chats(CHATS).apply_chat_template(tokenizer=qwen_tok, **kwargs)
    assert "assistant_masks" in out


def test_from_text_refuses_an_empty_template_name_as_apply_chat_template_does():
    # chat_template_name="" parsed with chatml_format (the default for no name) without a word
    with pytest.raises(ValueError, match="Unknown chat template name ''"):
        History.from_text("<|header_start|>user<|header_end|>\n\nhi<|eot|>", chat_template_name="")
    with pytest.raises(ValueError, match="Unknown chat template name ''"):
        History.from_chats(CHATS).apply_chat_template(chat_template_name="")
