"""The lookahead-free twin encode (chatdata.templates.tiktoken_cuts): the ids of the full split
pattern, exactly, on whitespace-heavy text; and only patterns of the proven shape get it."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatdata.templates.tiktoken_bpe import tiktoken_bpe_for
from chatdata.templates.tiktoken_cuts import LOOKAHEAD_TAIL, plain_pattern

# every Unicode White_Space character, and what sits around runs of them in chats
WHITE = ["\t", "\n", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0", "\u1680", "\u2000", "\u2005", "\u200a", "\u2028",
         "\u2029", "\u202f", "\u205f", "\u3000", "\r\n", "  ", "    ", "\n    "]
OTHER = ["x", "Hello", "'s", "'LL", "12", "3.5", "é", "日本", "👋🏽", "{\"a\": 1}", "!!", "--/", "\u200b", "\ufeff",
         "\x1c", "\x1f", "ǅ", "e\u0301"]
_segment = st.lists(st.sampled_from(WHITE + OTHER), max_size=12).map("".join)


def _ids_both_ways(bpe, segments):
    assert bpe.plain is not None  # else both ways are the full pattern and nothing is tested
    fast = bpe.encode_joined(segments)
    plain, bpe.plain = bpe.plain, None
    try:
        full = bpe.encode_joined(segments)
    finally:
        bpe.plain = plain
    return fast, full


def test_both_tokenizers_get_the_lookahead_free_encode(any_tok):
    assert tiktoken_bpe_for(any_tok).plain is not None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segments=st.lists(_segment, min_size=1, max_size=6))
def test_lookahead_free_ids_equal_the_full_pattern_and_the_tokenizer(any_tok, segments):
    bpe = tiktoken_bpe_for(any_tok)
    segments = [s for s in segments if bpe.supports(s)] or [""]
    fast, full = _ids_both_ways(bpe, segments)
    assert np.array_equal(fast, full)
    want = []
    for i, enc in enumerate(any_tok.backend_tokenizer.encode_batch(segments, add_special_tokens=False)):
        want += ([bpe.separator_id] if i else []) + enc.ids
    assert fast.tolist() == want


def test_whitespace_before_the_separator_and_at_the_ends(any_tok):
    bpe = tiktoken_bpe_for(any_tok)
    segments = ["a  ", "  b", " \t c\n\n  d", "", "\u3000\u3000x  \n", "    "]
    fast, full = _ids_both_ways(bpe, segments)
    assert np.array_equal(fast, full)


@pytest.mark.parametrize("pattern", [
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",  # GPT-2: no \s*[\r\n]+
    r"(?=x)\p{L}+|\p{N}" + LOOKAHEAD_TAIL,  # another lookahead
    r"\p{L}+\s\p{L}+|\p{N}" + LOOKAHEAD_TAIL,  # whitespace inside a piece
    r"[^\p{L}]+|\p{N}" + LOOKAHEAD_TAIL,  # a class that holds whitespace
])
def test_other_pattern_shapes_keep_the_full_pattern(pattern):
    assert plain_pattern(pattern) is None


def test_ascii_and_unicode_texts_are_cut_alike(any_tok):
    """ASCII text is cut with numpy, other text with the regex: the same places either way."""
    bpe = tiktoken_bpe_for(any_tok)
    ascii_text = "a  b\t\tc \n  d\x0b e\x0c\x0cf   \r\n   g  " + bpe.separator + "  h \t"
    assert ascii_text.isascii()
    marked, cuts = bpe.plain._ascii_cuts(ascii_text)
    assert (marked, cuts) == bpe.plain.cut.subn(bpe.plain._insert, ascii_text) and cuts == 7
    fast, full = _ids_both_ways(bpe, ascii_text.split(bpe.separator))
    assert np.array_equal(fast, full)
