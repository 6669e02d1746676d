"""PackedBatchSampler: what it is given comes back out of state_dict() in a form a checkpoint keeps."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from chatdata.train import PackedBatchSampler


@pytest.mark.parametrize("max_tokens", [np.int64(8), np.int32(8), torch.tensor(8)])
def test_a_numpy_or_tensor_max_tokens_gives_a_state_torch_load_reads(tmp_path, max_tokens):
    """A numpy max_tokens went into state_dict() as it was: torch.save kept it, and the resume's
    torch.load(weights_only=True) (torch's default) refused the checkpoint."""
    lengths = torch.tensor([5, 3, 4, 2, 6, 7, 1])
    s = PackedBatchSampler(lengths, max_tokens=max_tokens, seed=1)
    it = iter(s)
    next(it)
    torch.save({"sampler": s.state_dict()}, tmp_path / "ckpt.pt")
    rest = list(it)
    state = torch.load(tmp_path / "ckpt.pt", weights_only=True)["sampler"]
    assert type(state["max_tokens"]) is int and state["max_tokens"] == 8
    fresh = PackedBatchSampler(lengths, max_tokens=8, seed=1)
    fresh.load_state_dict(state)
    assert list(fresh) == rest


def test_a_state_taken_before_the_first_batch_of_a_pass_resumes_the_whole_pass():
    """iter() reset the count only at the first next(): after a whole pass over an epoch, a state
    taken at the top of the next pass over it (set_epoch not moved on, a checkpoint before the
    first batch) said the epoch was done, and a resume from it skipped every batch."""
    lengths = torch.tensor([5, 3, 4, 2, 6, 7, 1, 8, 8])
    s = PackedBatchSampler(lengths, max_tokens=8, seed=1)
    full = list(s)
    loader = torch.utils.data.DataLoader(list(range(len(lengths))), batch_sampler=s)
    it = iter(loader)
    state = s.state_dict()
    assert state["batches_done"] == 0
    fresh = PackedBatchSampler(lengths, max_tokens=8, seed=1)
    fresh.load_state_dict(state)
    assert list(fresh) == full
    assert [b.tolist() for b in it] == full  # the pass itself is unchanged


def test_an_empty_row_is_refused_when_a_tree_plan_is_made():
    """The tree planner put an empty row into a bin, and collate_prefix_tree refused that batch
    only when the loader reached it (mid-epoch); the sampler now says so when it is built."""
    from chatdata.train import pack

    rows = [{"input_ids": [1, 2, 3]}, {"input_ids": []}, {"input_ids": [1, 2, 4]}]
    with pytest.raises(ValueError, match="row 1 has no tokens: a prefix-tree batch cannot hold an empty row"):
        PackedBatchSampler(rows, max_tokens=8, strategy="tree")
    with pytest.raises(ValueError, match="row 1 has no tokens"):
        pack(rows, 8, strategy="tree")
    assert len(PackedBatchSampler(rows[::2], max_tokens=8, strategy="tree")) == 1
