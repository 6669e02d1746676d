"""Rows as TRL writes them: ``completion_mask`` trains the completion only, and a row packed by
``pack_dataset`` (``seq_lengths``) is as many sequences in a padding-free batch, refused by the others."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from chatdata.train import TokenRows, collate_padded, collate_padding_free, collate_prefix_tree


def _same_batch(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k, v in b.items():
        if isinstance(v, torch.Tensor):
            assert a[k].dtype == v.dtype and torch.equal(a[k], v), k
        else:
            assert a[k] == v, k


@pytest.mark.parametrize("as_tensor", [False, True])
def test_completion_mask_trains_the_completion_only(as_tensor):
    t = torch.tensor if as_tensor else list
    rows = [{"input_ids": t([1, 2, 3, 4]), "completion_mask": t([0, 0, 1, 1])},
            {"input_ids": t([5, 6, 7]), "completion_mask": t([0, 1, 1]), "assistant_masks": t([1, 1, 0])},
            {"input_ids": t([8, 9])}]  # no mask: every token trained, as a row without assistant_masks
    b = collate_padding_free(rows)
    assert b["labels"].tolist() == [[-100, -100, 3, 4, -100, 6, -100, -100, 9]]
    assert "completion_mask" not in b  # folded, not passed to the model as a stray column
    p = collate_padded(rows, pad_token_id=0)
    assert p["labels"].tolist() == [[-100, -100, 3, 4], [-100, 6, -100, -100], [8, 9, -100, -100]]
    assert "completion_mask" not in p
    tree = collate_prefix_tree(rows)
    assert tree["assistant_masks"].tolist() == [[False, False, True, True], [False, True, False, False],
                                                [True, True, False, False]]
    # given labels are used as they are, as TRL and chatdata's assistant_masks rule do
    own = collate_padding_free([{"input_ids": [1, 2, 3], "labels": [1, 2, 3], "completion_mask": [0, 0, 1]}])
    assert own["labels"].tolist() == [[-100, 2, 3]]


def test_completion_mask_of_flat_rows_and_of_a_ragged_stack():
    rows = TokenRows(torch.tensor([1, 2, 3, 4, 5]), torch.ones(5, dtype=torch.bool), torch.tensor([0, 3, 5]),
                     {"completion_mask": torch.tensor([0, 1, 1, 0, 1])})
    assert collate_padding_free(rows)["labels"].tolist() == [[-100, 2, 3, -100, 5]]
    from chatdata import RaggedTensorDict, TensorDict

    ragged = RaggedTensorDict(TensorDict({"input_ids": torch.tensor([1, 2, 3, 4, 5]),
                                          "completion_mask": torch.tensor([0, 1, 1, 1, 0])}, batch_size=[5]),
                              torch.tensor([0, 3, 5]))
    assert collate_padded(ragged, pad_token_id=0)["labels"].tolist() == [[-100, 2, 3], [4, -100, -100]]


def test_bad_completion_mask_is_refused():
    with pytest.raises(ValueError, match="row 0: completion_mask has 2 entries"):
        collate_padding_free([{"input_ids": [1, 2, 3], "completion_mask": [0, 1]}])
    with pytest.raises(ValueError, match="completion_mask must hold one flag per token"):
        collate_padding_free([{"input_ids": [1, 2], "completion_mask": torch.ones(2, 3)}])


@st.composite
def packed_rows(draw):
    """Rows of 1-3 sequences each (some of one token, some empty), with labels and loss weights."""
    rows, split = [], []
    for _ in range(draw(st.integers(1, 4))):
        seqs = [draw(st.lists(st.integers(0, 9), min_size=0 if k else 1, max_size=5)) for k in range(draw(st.integers(1, 3)))]
        ids = [t for s in seqs for t in s]
        labels = [t if draw(st.booleans()) else -100 for t in ids]
        weights = [draw(st.sampled_from([0.0, 0.5, 1.0])) for _ in ids]
        rows.append({"input_ids": torch.tensor(ids), "labels": torch.tensor(labels), "loss_weights": torch.tensor(weights),
                     "seq_lengths": [len(s) for s in seqs]})
        at = 0
        for s in seqs:
            if s:
                split.append({"input_ids": torch.tensor(s), "labels": torch.tensor(labels[at:at + len(s)]),
                              "loss_weights": torch.tensor(weights[at:at + len(s)])})
            at += len(s)
    return rows, split


@settings(max_examples=60, deadline=None)
@given(packed_rows())
def test_a_packed_row_collates_as_its_sequences_as_rows(case):
    """What TRL's padding-free collator makes of pack_dataset's rows: positions, cu_seq_lens and
    seq_idx restart at every sequence, and each sequence's first label is -100."""
    rows, split = case
    _same_batch(collate_padding_free(rows), collate_padding_free(split))


def test_padded_and_tree_batches_refuse_a_row_that_packs_several_sequences():
    packed = [{"input_ids": [1, 2, 3], "seq_lengths": [2, 1]}]
    for collate in (lambda r: collate_padded(r, pad_token_id=0), collate_prefix_tree):
        with pytest.raises(ValueError, match="row 0 holds seq_lengths.*collate_padding_free"):
            collate(packed)
    one = [{"input_ids": [1, 2, 3], "seq_lengths": [3]}, {"input_ids": [4], "seq_lengths": torch.tensor([0, 1])}]
    assert collate_padded(one, pad_token_id=0)["input_ids"].tolist() == [[1, 2, 3], [4, 0, 0]]


@pytest.mark.parametrize("seq_lengths, err, match", [
    ([2], ValueError, "adds up to 2 tokens but input_ids has 3"),
    ([4, -1], ValueError, "holds -1"),
    ([1.5, 1.5], TypeError, "integer lengths"),
    ([[1, 2]], TypeError, "1-D"),
    ("3", TypeError, "integer lengths"),
])
def test_bad_seq_lengths_are_refused(seq_lengths, err, match):
    with pytest.raises(err, match=match):
        collate_padding_free([{"input_ids": [1, 2, 3], "seq_lengths": seq_lengths}])
