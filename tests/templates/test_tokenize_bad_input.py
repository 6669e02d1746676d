"""tokenize_chats refuses texts, spans and span weights that would silently give wrong ids, masks
or loss weights (a bare str tokenized per character, spans outside the text clamped or dropped,
float positions truncated, NaN / negative weights reaching the loss)."""
from __future__ import annotations

import math

import pytest

from chatdata.templates import get_chat_template, render_chats_with_spans, tokenize_chats

CHAT = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]


@pytest.fixture(scope="module")
def rendered():
    return render_chats_with_spans([CHAT, CHAT], get_chat_template("qwen"))


def test_a_single_str_is_not_a_batch_of_characters(qwen_tok):
    with pytest.raises(TypeError, match=r"single str; wrap it: \[text\]"):
        tokenize_chats("hello", None, qwen_tok)


@pytest.mark.parametrize("bad, error, match", [
    ((-5, 3), ValueError, r"text 1: span \(-5, 3\) must have 0 <= start <= end <= \d+"),
    ((30, 10_000), ValueError, r"text 1: span \(30, 10000\) must have 0 <= start"),
    ((40, 30), ValueError, r"text 1: span \(40, 30\)"),
    ((30.5, 40), TypeError, r"text 1: spans must be \(start, end\) pairs of int"),
    ((1, 2, 3), TypeError, r"text 1: .*\(1, 2, 3\)"),
    ("ab", TypeError, r"text 1: .*'ab'"),
])
def test_bad_spans_name_the_text_and_span(qwen_tok, rendered, bad, error, match):
    texts, spans = rendered
    with pytest.raises(error, match=match):
        tokenize_chats(texts, [spans[0], [bad]], qwen_tok, return_assistant_tokens_mask=True)


def test_a_flat_span_list_is_refused(qwen_tok, rendered):
    texts, spans = rendered
    with pytest.raises(TypeError, match="text 0: spans must be"):
        tokenize_chats(texts[:1], [spans[0][0]], qwen_tok, return_assistant_tokens_mask=True)


def test_good_spans_still_pass_including_empty_and_whole_text(qwen_tok, rendered):
    texts, spans = rendered
    out = tokenize_chats(texts, [[(0, 0), (0, len(texts[0]))], []], qwen_tok, return_assistant_tokens_mask=True)
    assert out["assistant_masks"][0].all() and not out["assistant_masks"][1].any()


@pytest.mark.parametrize("w, error", [(math.nan, ValueError), (math.inf, ValueError), (-0.5, ValueError),
                                      ("high", TypeError)])
def test_bad_span_weights_are_refused(qwen_tok, rendered, w, error):
    texts, spans = rendered
    weights = [[1.0] * len(spans[0]), [1.0] * (len(spans[1]) - 1) + [w]]
    with pytest.raises(error, match=rf"text 1, span {len(spans[1]) - 1}: a span weight must be a"):
        tokenize_chats(texts, spans, qwen_tok, return_assistant_tokens_mask=True, span_weights=weights)


def test_char_masks_need_one_length_span_list_and_offsets_per_text():
    import torch

    from chatdata.templates import char_masks_to_token_masks

    off = [torch.tensor([[0, 2], [2, 5]])]
    with pytest.raises(ValueError, match="got 2 lengths, 1 span lists and 1 offsets"):
        char_masks_to_token_masks([5, 3], [[(2, 3)]], off)  # was a bare torch size-mismatch RuntimeError
    assert char_masks_to_token_masks([5], [[(2, 3)]], off)[0].tolist() == [0, 1]


@pytest.mark.parametrize("masks", [False, True], ids=["ids", "ids and masks"])
def test_a_lone_surrogate_names_its_text(qwen_tok, masks):
    # before: a bare UnicodeEncodeError from inside tiktoken's joined batch, naming no text
    texts = (t for t in ["ok", "fine", "a\ud800b"])  # a generator: read again to name the text
    spans = [[(0, 1)], [(0, 1)], [(0, 2)]] if masks else None
    with pytest.raises(ValueError, match=r"texts\[2\] holds a lone surrogate '\\ud800' \(not valid Unicode text\); "
                                         r"fix the text's encoding"):
        tokenize_chats(texts, spans, qwen_tok, return_assistant_tokens_mask=masks)
    ids = tokenize_chats((t for t in ["ok", "fine"]), None, qwen_tok)["input_ids"]  # a generator still works
    assert [x.tolist() for x in ids] == [qwen_tok.encode(t, add_special_tokens=False) for t in ["ok", "fine"]]
