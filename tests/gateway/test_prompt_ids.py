"""The prompt's JSON text kept per branch (``gateway/prompt_ids.py``): over any sequence of
turns it is the JSON of the whole prompt, and a backend's echo is compared id for id."""
from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from chatdata.gateway.prompt_ids import IdsText, PromptIds

ids_st = st.lists(st.integers(0, 2**40), max_size=12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(ids_st, ids_st), min_size=1, max_size=8))
def test_the_kept_text_is_the_json_of_every_prompt(turns):
    """Each turn adds committed ids (the answer and the previous prompt) and pending ones (this
    request's new prompt, taken back if the request fails): the body always holds every id."""
    text, committed = IdsText(), []
    for kept, pending in turns:
        committed += kept
        ids = torch.tensor(committed + pending, dtype=torch.int64)
        p = text.prompt(ids, len(committed))
        assert json.loads(p.json()) == committed + pending
        assert p.json() == json.dumps(committed + pending, separators=(",", ":")).encode()
        assert len(p) == len(ids) and p.equals(committed + pending)
        assert text.n == len(committed)


def test_committed_ids_that_go_back_are_refused():
    text = IdsText()
    text.prompt(torch.tensor([1, 2, 3]), 3)
    with pytest.raises(RuntimeError, match="committed ids went back"):
        text.prompt(torch.tensor([1, 2]), 2)


@pytest.mark.parametrize("echo", [[1, 2], [1, 2, 4], [1, 2, 3, 4], [1, 2, 3.0], [1, 2, "3"], [1, 2, None],
                                  [1, 2, 2**70], "123", None])
def test_an_echo_that_is_not_the_prompt_is_told_apart(echo):
    p = PromptIds(torch.tensor([1, 2, 3]))
    assert p.equals([1, 2, 3]) and not p.equals(echo)
