"""Per-token columns the collates used to choke on, through the public collates."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from chatdata.train import collate_padded, collate_padding_free, collate_prefix_tree

COLLATES = {"padding_free": collate_padding_free, "padded": lambda rows: collate_padded(rows, pad_token_id=0),
            "tree": collate_prefix_tree}


@pytest.mark.parametrize("kind", list(COLLATES))
def test_columns_that_carry_autograd_history_keep_it(kind):
    """Logprobs (and weights) from a forward run with grad: every collate stopped with torch's
    "Can't call numpy() on Tensor that requires grad", naming nothing the caller passed; they now
    come out aligned and gradients flow back to each row's own tensor."""
    lp = [torch.randn(3, requires_grad=True), torch.randn(2, requires_grad=True)]
    w = torch.tensor([1.0, 0.0, 2.0], requires_grad=True)
    rows = [{"input_ids": torch.tensor([1, 2, 3]), "logprobs": lp[0] * 1, "loss_weights": w * 1,
             "assistant_masks": torch.tensor([False, True, True])},
            {"input_ids": torch.tensor([1, 2]), "logprobs": lp[1] * 1, "loss_weights": torch.ones(2)}]
    b = COLLATES[kind](rows)
    assert b["logprobs"].requires_grad and b["loss_weights"].requires_grad
    got = b["logprobs"].reshape(-1)
    assert torch.equal(got[got != 0].detach(), torch.cat(lp).detach()[torch.cat(lp).detach() != 0])
    (b["logprobs"] * 2).sum().backward(retain_graph=True)
    assert lp[0].grad.tolist() == [2.0] * 3 and lp[1].grad.tolist() == [2.0] * 2
    b["loss_weights"].sum().backward()
    assert w.grad.tolist() == [0.0, 0.0, 1.0]  # untrained tokens (mask off, weight 0) carry no weight
    flat = b["loss_weights"].detach().reshape(-1).tolist()
    assert sorted(flat)[-3:] == [1.0, 1.0, 2.0] or sorted(flat)[-2:] == [1.0, 2.0]


@pytest.mark.parametrize("kind", list(COLLATES))
def test_a_mask_of_more_than_one_flag_per_token_is_refused(kind):
    """A (T, k) assistant_masks broadcast the labels made from it: the padded batch came out with
    labels of shape (B, L, k), the padding-free one failed in a reshape, the tree kept the mask."""
    rows = [{"input_ids": [1, 2], "assistant_masks": torch.ones(2, 2, dtype=torch.bool)}]
    with pytest.raises(ValueError, match=r"row 0: assistant_masks must hold one flag per token .*\(2, 2\)"):
        COLLATES[kind](rows)


@pytest.mark.parametrize("kind", list(COLLATES))
def test_labels_with_another_ignore_value_are_refused(kind):
    """-1 (or any negative label but -100) went through every collate; the loss then stopped with
    torch's "Target -1 is out of bounds"."""
    rows = [{"input_ids": [1, 2]}, {"input_ids": [1, 2, 3], "labels": [-100, 2, -1]}]
    with pytest.raises(ValueError, match=r"row 1: labels holds -1 at position 2: .* -100"):
        COLLATES[kind](rows)
    rows[1]["labels"] = [-100, 2, 3]
    assert COLLATES[kind](rows)["labels"].min() == -100


@pytest.mark.parametrize("kind", list(COLLATES))
def test_numpy_arrays_of_strings_are_per_row_data(kind):
    """A numpy array of strings (a tags field of a numpy-formatted dataset) was taken for a per-token
    column and failed in torch ("can't convert np.ndarray of type numpy.str_"); like strings, it is
    now left out."""
    rows = [{"input_ids": [1, 2, 3], "tags": np.array(["a", "b"]), "logprobs": np.zeros(3, dtype=np.float32)},
            {"input_ids": [4, 5], "tags": np.array(["c"], dtype=object), "logprobs": np.zeros(2, dtype=np.float32)}]
    b = COLLATES[kind](rows)
    assert "tags" not in b and b["logprobs"].dtype == torch.float32


def test_float_labels_are_refused_on_every_path():
    """A ragged set (or TokenDataset rows) with a float labels column was cast to int64, cutting
    1.7 to 1 silently; rows as dicts already refused it. The tree collate now refuses it too, and
    gives int64 labels whatever integer dtype the rows hold."""
    from chatdata.td import RaggedTensorDict, TensorDict

    ragged = RaggedTensorDict(TensorDict({"input_ids": torch.tensor([1, 2, 3]),
                                          "labels": torch.tensor([1.7, -100.0, 3.0])}, [3]), torch.tensor([0, 1, 3]))
    for kind, collate in COLLATES.items():
        with pytest.raises(TypeError, match=r"the ragged stack's labels must be 1-D integer ids .*float32"):
            collate(ragged)
    with pytest.raises(TypeError, match=r"row 0: labels must be 1-D integer ids"):
        collate_prefix_tree([{"input_ids": [1, 2], "labels": [1.5, 2.0]}])
    tree = collate_prefix_tree([{"input_ids": [1, 2], "labels": torch.tensor([-100, 2], dtype=torch.int32)}])
    assert tree["labels"].dtype == torch.int64 and tree["labels"].tolist() == [[-100, 2]]


def test_pad_to_multiple_of_takes_a_numpy_int_as_pad_token_id_does():
    rows = [{"input_ids": [1, 2, 3]}]
    assert collate_padded(rows, np.int64(0), pad_to_multiple_of=np.int64(8))["input_ids"].shape == (1, 8)
    for bad in (np.bool_(True), 2.0, np.int64(0)):
        with pytest.raises(ValueError, match="pad_to_multiple_of must be a positive int"):
            collate_padded(rows, 0, pad_to_multiple_of=bad)
