"""A History built without a batch size from lists (torchrl's way of writing one conversation)
fits the conversation spec ``History.default_spec()`` (shape ``(-1,)``): its lists give the
message dim."""
from __future__ import annotations

import pytest

from chatdata import History
from chatdata.specs import Composite, NonTensor, Unbounded
from chatdata.td import TensorDict

ROLES = ["system", "user", "assistant", "user"]
CONTENTS = ["s", "u", "a", "u2"]


def test_unbatched_history_of_lists_fits_the_default_spec():
    h = History(role=ROLES, content=CONTENTS)
    assert h.batch_size == ()
    spec = h.default_spec()
    assert spec.is_in(h)
    assert spec.is_in(spec.zero())
    spec.assert_is_in(h)


def test_unbatched_lists_must_fit_the_spec_length():
    h = History(role=ROLES, content=CONTENTS)
    assert History.default_spec(shape=(4,)).is_in(h)
    assert not History.default_spec(shape=(3,)).is_in(h)
    with pytest.raises(ValueError, match="batch size"):
        History.default_spec(shape=(3,)).assert_is_in(h)


def test_unbatched_history_without_a_message_dim_is_refused():
    assert not History.default_spec().is_in(History(role="user", content="a"))  # one message, not a conversation


@pytest.mark.parametrize("role, content", [
    (["user"], ["a", "b"]),      # lists of different lengths
    (ROLES, "one string"),       # a value without a message dim
    ("user", ["a", "b"]),        # one role, a list of contents (not content parts)
], ids=["uneven", "mixed", "mixed_contents"])
def test_unbatched_lists_that_do_not_pair_up_are_refused_when_built(role, content):
    # they were built (to_chats gave the lists as they were, rendering refused them); the spec said no
    with pytest.raises(ValueError, match="needs one content per role"):
        History(role=role, content=content)
    h = History(role=ROLES, content=CONTENTS)
    with pytest.raises(ValueError, match="needs one content per role"):
        h.set("content", content if isinstance(content, str) else ["a"])
    assert h.content == CONTENTS


def test_batched_histories_still_checked_by_batch_size():
    spec = History.default_spec()
    assert spec.is_in(History.from_chats([{"role": "user", "content": "x"}]))
    assert spec.is_in(History.from_chats([[{"role": "user", "content": "x"}], []]))  # (2, -1): a leading batch dim


def test_only_non_tensor_entries_imply_dims():
    spec = Composite(obs=Unbounded(shape=(4,)), text=NonTensor(shape=(4,)), shape=(4,))
    td = TensorDict({"text": ["a", "b", "c", "d"]}, batch_size=())
    assert not spec.is_in(td)  # a tensor entry of the spec is missing: lists alone do not make it fit
