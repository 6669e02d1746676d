"""TokenDataset: what it reports agrees with the rows it gives."""
from __future__ import annotations

import torch

from chatdata.rollout import Rollout
from chatdata.train import ConcatTokenDataset, TokenDataset


def test_trained_lengths_leave_out_tokens_of_weight_zero(sample_tokenizer, tmp_path):
    """A rollout whose responses carry a loss_weights extra (0 on a turn the loss must skip):
    ds[i] turned the mask off where the weight is 0, but trained_lengths() (what `chatdata info`
    reports as the trained share) still counted those tokens."""
    tok = sample_tokenizer
    ro = Rollout([[{"role": "user", "content": "hi"}], [{"role": "user", "content": "yo"}]], tokenizer=tok)
    r1, r2 = torch.tensor(tok.encode("hello<|im_end|>")), torch.tensor(tok.encode("a b c<|im_end|>"))
    assert len(r2) == 4  # 'a', ' b', ' c', '<|im_end|>'
    ro.add_response([r1, r2], extras={"loss_weights": [torch.zeros(len(r1)), torch.tensor([1.0, 0.0, 0.5, 1.0])]})
    ro.tokens().memmap(tmp_path / "t")
    for ds in (TokenDataset(tmp_path / "t"), ConcatTokenDataset([tmp_path / "t", ro.tokens()])):
        per_item = [int(ds[i]["assistant_masks"].sum()) for i in range(len(ds))]
        assert ds.trained_lengths().tolist() == per_item
        assert per_item[:2] == [0, len(r2) - 1]
