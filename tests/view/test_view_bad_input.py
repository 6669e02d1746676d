"""The HTML token view: hostile text stays text, bad rows and weights are refused by name, and a
refused page writes nothing."""
from __future__ import annotations

import html.parser
import math

import pytest

from chatdata.data import load_sample_tokenizer
from chatdata.view import TokenChip, ViewSection, chat_section, chips_from_ids, html_page, token_row_section, write_html


@pytest.fixture(scope="module")
def tok():
    return load_sample_tokenizer()


class _Attrs(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _parse(page):
    p = _Attrs()
    p.feed(page)
    return p.tags


def test_every_chip_attribute_is_escaped():
    evil = '0" onmouseover="alert(1)'
    page = html_page("t", [ViewSection("s", [], [TokenChip("a", evil, 1.0, '"><script>x</script>', evil)])])
    chips = [a for tag, a in _parse(page) if a.get("class") == "tok"]
    assert len(chips) == 1 and "onmouseover" not in chips[0]
    assert chips[0]["data-id"] == evil and chips[0]["data-msg"] == evil
    assert [tag for tag, _ in _parse(page)].count("script") == 1  # only the page's own


def test_hostile_chat_text_stays_text(tok):
    chat = [{"role": "user", "content": "<script>alert(1)</script>"},
            {"role": "assistant", "content": '</span><img src=x onerror="alert(1)">'}]
    page = html_page("t", [chat_section(chat, tok)])
    tags = [tag for tag, _ in _parse(page)]
    assert "img" not in tags and tags.count("script") == 1


@pytest.mark.parametrize("w", [math.nan, math.inf])
def test_non_finite_weights_are_refused_and_nothing_is_written(tmp_path, w):
    sec = ViewSection("s", [], [TokenChip("a", 1, 0.5, "assistant", 0), TokenChip("b", 2, w, "assistant", 0)])
    with pytest.raises(ValueError, match=r"section 0 \('s'\), token 1: weight .* is not finite"):
        write_html(tmp_path / "x.html", "t", [sec])
    assert list(tmp_path.iterdir()) == []


def test_sections_and_chips_of_the_wrong_type_are_named():
    with pytest.raises(TypeError, match=r"wrap a single one"):
        html_page("t", ViewSection("s"))
    with pytest.raises(TypeError, match=r"token 0: chips must be TokenChips"):
        html_page("t", [ViewSection("s", [], "abc")])


def test_token_row_lengths_must_match(tok):
    ids = tok.encode("hello world", add_special_tokens=False)
    # before: a loss_weights row of 1 item broadcast over every token
    with pytest.raises(ValueError, match=r"loss_weights has 1 items but the row has 2 token ids"):
        token_row_section(ids, [1, 1], [0.5], tok)
    with pytest.raises(ValueError, match=r"mask has 1 items"):
        token_row_section(ids, [1], None, tok)
    with pytest.raises(ValueError, match=r"must be 1-D"):
        token_row_section([ids], [[1, 1]], None, tok)


def test_bad_ids_weights_and_context(tok):
    with pytest.raises(ValueError, match=r"token 1 has id -5, outside the tokenizer's vocabulary"):
        chips_from_ids([1, -5], [1, 1], tok)
    with pytest.raises(ValueError, match=r"outside the tokenizer's vocabulary"):
        chips_from_ids([10**9], [1], tok)  # before: a chip with empty text
    with pytest.raises(TypeError, match=r"ids must be integers"):
        chips_from_ids([1.5], [1], tok)
    with pytest.raises(ValueError, match=r"token 0 has weight nan"):
        token_row_section([1], [1], [math.nan], tok)
    with pytest.raises(ValueError, match=r"context must be an int >= 0"):
        chips_from_ids([1, 2], [1, 1], tok, context=-1)  # before: every chip's text was empty
