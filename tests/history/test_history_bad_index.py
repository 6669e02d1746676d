"""Indexing a History with every kind of index: what torch / numpy select, or a clear IndexError.

Bools are not ints here: ``h[True]`` on a batch of conversations used to give conversation 1 (and
``h[False]`` conversation 0, ``h[:, False]`` every first message), and a list starting with a bool
(``[True, 0]``) was read as a mask. torch reads True / False as a new dim (like None), which a
ragged batch cannot add, and a list mixing ints and bools as ints."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from chatdata import History

CHATS = [[{"role": "user", "content": "a"}],
         [{"role": "user", "content": "b"}, {"role": "assistant", "content": "B"}],
         [{"role": "user", "content": "c"}]]


@pytest.mark.parametrize("index", [True, False, (True,), (False, 0), torch.tensor(True), torch.tensor(False),
                                   np.bool_(True)], ids=repr)
def test_a_bool_never_selects_a_conversation_of_a_batch(index):
    with pytest.raises(IndexError, match="1-D selections"):
        History.from_chats(CHATS)[index]


@pytest.mark.parametrize("j", [True, False])
def test_a_bool_along_the_message_dim_of_a_batch_is_refused(j):
    with pytest.raises(IndexError, match="ragged dim"):
        History.from_chats(CHATS)[:, j]


def test_a_bool_on_one_conversation_adds_a_dim_as_torch_does():
    conv = History.from_chats(CHATS[1])
    assert conv[True].batch_size == torch.Size([1, 2]) and conv[True].to_chats() == [CHATS[1]]
    assert conv[False].batch_size == torch.Size([0, 2])
    assert History.from_chats(CHATS)[1, True].to_chats() == [CHATS[1]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.booleans(), st.integers(-3, 2)), min_size=1, max_size=6))
def test_a_list_of_ints_and_bools_selects_as_numpy_reads_it(index):
    h = History.from_chats(CHATS)
    ids = np.asarray(index)
    if ids.dtype == bool:  # bools only: a mask, one per conversation
        if len(index) != len(CHATS):
            with pytest.raises(IndexError):
                h[index]
            return
        want = [c for c, keep in zip(CHATS, index) if keep]
    else:  # any int among them: all are ints (True == 1)
        want = [CHATS[int(i)] for i in ids]
    assert h[index].to_chats() == want
    assert h[torch.as_tensor(ids)].to_chats() == want


@pytest.mark.parametrize("index, err", [
    (3, "out of range"), (-4, "out of range"), ((0, 1), "out of range"), ((slice(None), 1), "out of range"),
    (torch.tensor([True, False]), "mask"), ([True, False, True, True], "mask"), (None, "1-D selections"),
    ([[0, 1]], "1-D selections"), (slice(None, None, -1), "step"),
])
def test_bad_indices_of_a_batch_are_index_errors_saying_why(index, err):
    with pytest.raises((IndexError, ValueError), match=err):
        History.from_chats(CHATS)[index]


@pytest.mark.parametrize("index", [np.int64(1), np.int32(-2), torch.tensor(1), (np.int64(1), np.int64(0)),
                                   (torch.tensor(1), torch.tensor(-1))], ids=repr)
def test_numpy_and_0d_ints_select_like_ints(index):
    h = History.from_chats(CHATS)
    as_ints = tuple(int(i) for i in index) if isinstance(index, tuple) else int(index)
    assert h[index].to_chats() == h[as_ints].to_chats()


@pytest.mark.parametrize("index", [[0.5], [1.7, 0], [0, 0.5], [None], ["a"], [1, "a"], [1j], [[0, 1], [2]], [2**70]], ids=repr)
@pytest.mark.parametrize("batch", [True, False], ids=["batch", "conversation"])
def test_a_list_that_is_not_ints_or_bools_is_an_index_error(index, batch):
    # [0.5] used to give conversation 0 of a batch (an int64 cast truncates it); the others failed
    # inside torch (ValueError / RuntimeError)
    h = History.from_chats(CHATS) if batch else History.from_chats(CHATS[1])
    with pytest.raises(IndexError, match=r"ints or bools|out of range"):
        h[index]


@pytest.mark.parametrize("make", [lambda: History.from_chats(CHATS), lambda: History.from_chats(CHATS)[1],
                                  lambda: History.from_chats(CHATS)[1, 0]], ids=["batch", "conversation", "message"])
def test_a_key_that_is_no_field_is_a_key_error(make):
    # h["contents"] (a typo) gave None
    h = make()
    with pytest.raises(KeyError, match=r"History has no field 'contents'; its fields are \['role', 'content'"):
        h["contents"]
    assert h.get("contents") is None and h.get("contents", 0) == 0  # get keeps its default
    assert h["role"] == h.role
