"""Categorical masks (torchrl's ``mask=`` / ``update_mask``): values come only from allowed
categories, ``is_in`` refuses masked ones, and the mask follows the spec through reshaping.

Before, ``Categorical(n, mask=...)`` dropped the mask without a word: ``rand`` sampled masked
categories and ``is_in`` accepted them."""
from __future__ import annotations

import pickle

import pytest
import torch

from chatdata.specs import Binary, Categorical, Composite

M = torch.tensor([True, False, True, False])


def test_rand_zero_one_give_only_allowed_categories():
    spec = Categorical(4, shape=(500,), mask=M)
    r = spec.rand()
    assert set(r.unique().tolist()) <= {0, 2} and spec.is_in(r)
    assert spec.zero().tolist() == [0] * 500 and spec.is_in(spec.one())
    assert Categorical(4, mask=torch.tensor([False, True, True, True])).one().item() == 1
    assert Categorical(4, mask=torch.tensor([False, False, False, True])).zero().item() == 3
    batched = spec.rand((3, 2))
    assert batched.shape == (3, 2, 500) and spec.is_in(batched)


def test_is_in_refuses_masked_categories_with_a_reason():
    spec = Categorical(4, shape=(2,), mask=M)
    assert spec.is_in(torch.tensor([0, 2])) and not spec.is_in(torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"value 1 at index \(1,\) is a masked category"):
        spec.assert_is_in(torch.tensor([0, 1]))
    assert not spec.is_in(torch.tensor([0, 2], dtype=torch.int32))  # dtype still checked
    assert not spec.is_in(torch.tensor([0, 7]))  # out of range is named as such, no gather error


def test_per_position_masks_and_any_length_dims():
    per_pos = torch.tensor([[True, False, False], [False, False, True]])
    spec = Categorical(3, shape=(2,), mask=per_pos)
    assert spec.rand((50,)).unique(dim=0).tolist() == [[0, 2]]
    assert spec.is_in(torch.tensor([0, 2])) and not spec.is_in(torch.tensor([2, 0]))
    ragged = Categorical(3, shape=(-1,), mask=torch.tensor([False, True, True]))
    assert ragged.is_in(torch.tensor([1, 2, 2, 1])) and not ragged.is_in(torch.tensor([1, 0]))


def test_project_moves_masked_values_to_the_nearest_allowed_category():
    spec = Categorical(5, shape=(4,), mask=torch.tensor([True, False, False, True, False]))
    assert spec.project(torch.tensor([1, 2, 4, 9])).tolist() == [0, 3, 3, 3]
    assert spec.project(torch.tensor([1.4, 2.6, -3.0, 3.0])).tolist() == [0, 3, 0, 3]


def test_the_mask_follows_index_expand_unsqueeze_squeeze_clone_and_to():
    per_pos = torch.tensor([[True, False, False], [False, False, True]])
    spec = Categorical(3, shape=(2,), mask=per_pos)
    assert spec[1].mask.tolist() == [False, False, True] and spec[1].zero().item() == 2
    assert spec[[1, 1, 0]].mask.tolist() == [per_pos[1].tolist(), per_pos[1].tolist(), per_pos[0].tolist()]
    assert spec[..., 0].mask.tolist() == per_pos[0].tolist()
    expanded = spec.expand(3, 2)
    assert expanded.mask.shape == (3, 2, 3) and expanded.rand().tolist() == [[0, 2]] * 3
    assert spec.unsqueeze(0).squeeze(0) == spec and spec.clone() == spec and spec.to("cpu") == spec
    assert spec.to(torch.int32).mask.tolist() == per_pos.tolist()
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert spec != Categorical(3, shape=(2,)) and Categorical(3, shape=(2,)) != spec
    assert Composite(a=spec, shape=(2,)).rand((4,))["a"].tolist() == [[0, 2]] * 4


def test_update_mask_sets_and_removes_the_mask():
    spec = Categorical(3, shape=(2,))
    spec.update_mask([True, False, True])
    assert spec.mask.shape == (2, 3) and not spec.is_in(torch.tensor([1, 1]))
    spec.update_mask(None)
    assert spec.mask is None and spec.is_in(torch.tensor([1, 1]))
    assert Categorical(3, mask=[[1, 0, 1]]).mask.tolist() == [True, False, True]  # (1, n) and 0/1 ints, as torchrl


@pytest.mark.parametrize("mask, err, msg", [
    ([True, False], ValueError, "needs a last dim of n=3"),
    (torch.ones(3, 3, dtype=torch.bool), ValueError, "does not broadcast to"),
    (torch.tensor([0.5, 1.0, 1.0]), TypeError, "must hold bools"),
    (torch.tensor([2, 0, 1]), TypeError, "must hold bools"),
    ("abc", TypeError, "must be a bool tensor"),
])
def test_a_bad_mask_is_refused_and_leaves_the_spec_unchanged(mask, err, msg):
    with pytest.raises(err, match=msg):
        Categorical(3, shape=(2,), mask=mask)
    spec = Categorical(3, shape=(2,), mask=[True, True, False])
    with pytest.raises(err, match=msg):
        spec.update_mask(mask)
    assert spec.mask.tolist() == [[True, True, False]] * 2


def test_a_position_with_every_category_masked_has_no_value():
    spec = Categorical(3, shape=(2,), mask=torch.tensor([[True, True, True], [False, False, False]]))
    for make in (spec.rand, spec.zero, spec.one):
        with pytest.raises(ValueError, match=r"every category is masked at index \(1,\)"):
            make()
    with pytest.raises(ValueError, match="every category is masked"):
        spec.project(torch.tensor([0, 0]))
    assert not spec.is_in(torch.tensor([0, 0]))


def test_binary_takes_no_mask():
    with pytest.raises(TypeError, match="Binary takes no mask"):
        Binary(3, mask=torch.tensor([True, False]))
    with pytest.raises(TypeError, match="Binary takes no mask"):
        Binary(3).update_mask(torch.tensor([True, False]))
