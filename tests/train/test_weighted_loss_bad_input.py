"""weighted_causal_lm_loss: labels the logits cannot score get a clear error."""
from __future__ import annotations

import pytest
import torch

from chatdata.train import collate_padded, weighted_causal_lm_loss


@pytest.mark.parametrize("bad", [7, 5, -1, -5])
def test_labels_outside_the_vocabulary_are_named(bad):
    """A label >= V (logits of another model's head) or a negative one other than -100 stopped
    in torch's cross-entropy with "Target 7 is out of bounds", naming nothing the caller passed."""
    logits = torch.randn(1, 4, 5)
    labels = torch.tensor([[-100, 1, bad, 2]])
    with pytest.raises(ValueError, match=rf"labels hold {bad}, .* \[0, 5\) .* -100"):
        weighted_causal_lm_loss(logits, labels, torch.ones(1, 4))


def test_every_label_in_range_or_ignored_is_scored():
    b = collate_padded([{"input_ids": [1, 4, 0]}, {"input_ids": [2]}], pad_token_id=0)
    logits = torch.zeros(2, 3, 5)  # uniform: every trained token costs log 5
    w = torch.ones(2, 3)
    loss = weighted_causal_lm_loss(logits, b["labels"], w)  # the first label (4 in row 0's shift) counts
    assert torch.allclose(loss, torch.log(torch.tensor(5.0)))
    assert weighted_causal_lm_loss(logits, torch.full((2, 3), -100), w) == 0
