"""Setting entries and parts of a TensorDict: nested collections adopt the parent's batch size,
mismatches name the offending leaf, in-place writes of the wrong kind are refused clearly."""
from __future__ import annotations

import pytest
import torch

from chatdata import TensorDict, tensorclass
from chatdata.td import BatchSizeError


@tensorclass
class Pair:
    x: torch.Tensor
    tag: str


def test_nested_tensordict_adopts_the_parent_batch_size_when_its_leaves_fit():
    td = TensorDict(a=torch.zeros(3, 4), batch_size=[3, 4])
    td["sub"] = TensorDict()
    assert td["sub"].batch_size == (3, 4)
    sub = TensorDict(y=torch.ones(3, 4, 2))
    td["sub2"] = sub
    assert td["sub2"].batch_size == (3, 4) and sub.batch_size == ()  # the caller's object is left alone
    td["pair"] = Pair(x=torch.zeros(3, 4), tag="t")
    assert type(td["pair"]) is Pair and td["pair"].batch_size == (3, 4)


def test_a_misfit_names_the_key_and_the_leaf():
    td = TensorDict(batch_size=[3, 4])
    with pytest.raises(BatchSizeError, match=r"cannot set 'z'.*the Tensor smth has shape torch.Size\(\[1\]\) which"):
        td["z"] = TensorDict({"smth": torch.zeros(1)}, [])
    assert "z" not in td.keys()
    with pytest.raises(RuntimeError, match="the Tensor smth has shape"):  # BatchSizeError is a RuntimeError
        td.set("z", TensorDict({"smth": torch.zeros(1)}, []))


def test_setting_a_part_checks_the_batch_sizes():
    td = TensorDict(a=torch.zeros(3, 4, 5), batch_size=[3, 4])
    with pytest.raises(BatchSizeError, match=r"indexed destination TensorDict batch size is \(3, 2\)"):
        td[:, [1, 2]] = td.clone()
    td[:2] = TensorDict(a=torch.ones(4, 5), batch_size=[4])  # broadcasts over the first dim
    assert (td["a"][:2] == 1).all() and (td["a"][2] == 0).all()
    td[:, 1:3] = TensorDict(a=torch.full((3, 2, 5), 2.0), batch_size=[3, 2])
    assert (td["a"][:, 1:3] == 2).all()


def test_in_place_writes_of_the_wrong_kind_are_refused():
    td = TensorDict(v=torch.ones(3), s="text", batch_size=[3])
    with pytest.raises(RuntimeError, match="Cannot update an existing tensor entry 'v'"):
        td.set("v", "a string", inplace=True)
    with pytest.raises(ValueError, match="Failed to update 's' in place"):
        td.set("s", torch.zeros(3), inplace=True)
    assert td["v"].tolist() == [1.0] * 3 and td["s"] == "text"
    td.set("v", "now text")  # without inplace: replaced
    assert td["v"] == "now text"


def test_list_of_same_shape_tensors_becomes_one_tensor():
    td = TensorDict(a=[torch.zeros(3), torch.ones(3)], batch_size=[2])
    assert isinstance(td["a"], torch.Tensor) and td["a"].shape == (2, 3)
    ragged = TensorDict(a=[torch.zeros(3), torch.ones(2)], batch_size=[2])
    assert not isinstance(ragged.get("a"), torch.Tensor)  # different shapes stay a stack of values


def test_indexing_an_empty_batch_is_refused():
    td = TensorDict(a=torch.zeros(3))
    with pytest.raises(IndexError, match="batch_dims==0 is not permitted"):
        td[0]
    with pytest.raises(RuntimeError, match="index its entries instead"):
        Pair(x=torch.zeros(2), tag="t")[1]
    assert td[None].batch_size == (1,)


def test_text_against_a_number_is_left_out_of_comparisons():
    p = Pair(x=torch.ones(3), tag="t", batch_size=[3])
    eq = p == 1
    assert eq.all() and eq.tag is None
    same = p == p.clone()
    assert same.all() and same.tag is not None
    td = TensorDict(a=torch.ones(2), s="x", batch_size=[2])
    assert (td == 1).all() and "s" not in (td == 1).keys()
