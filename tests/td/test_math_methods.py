"""Element-wise math on every tensor leaf (log, sigmoid, round, ..., add_, sub_, mul_, div_, pow, maximum, lerp,
addcmul, clamp_min_, ...), with numbers, tensors and other TensorDicts; text leaves are kept (tensordict 0.14.3's
results, checked side by side); in-place forms write nothing when one leaf cannot take its result."""
from __future__ import annotations

import math

import pytest
import torch

from chatdata import TensorDict


def _td():
    return TensorDict({"x": torch.tensor([1.0, 4.0, 9.0]), "i": torch.tensor([1, 2, 3]), "s": ["a", "b", "c"],
                       "c": "k", "n": {"y": torch.ones(3, 2)}}, [3])


def _other():
    return TensorDict({"x": torch.full((3,), 2.0), "i": torch.full((3,), 3), "s": ["p", "q", "r"], "c": "z",
                       "n": {"y": torch.full((3, 2), 2.0)}}, [3])


def _text_kept(td):
    assert td["s"] == ["a", "b", "c"] and td["c"] == "k"


@pytest.mark.parametrize("name", ["log", "log1p", "log2", "log10", "neg", "sign", "sigmoid", "tanh", "round", "floor",
                                  "ceil", "trunc", "frac", "reciprocal", "sin", "cos", "erf", "expm1"])
def test_unary_is_torchs_on_every_tensor_leaf(name):
    td = _td() if name != "frac" else _td().exclude("i")  # torch has no frac of an int
    r = getattr(td, name)()
    fn = getattr(torch, name)
    assert torch.equal(r["x"], fn(td["x"])) and torch.equal(r["n", "y"], fn(td["n", "y"]))
    if "i" in td.keys():
        assert torch.equal(r["i"], fn(td["i"])) and r["i"].dtype == fn(td["i"]).dtype
    _text_kept(r)
    assert td["x"].tolist() == [1.0, 4.0, 9.0]  # out of place


@pytest.mark.parametrize("name", ["log", "sigmoid", "round", "neg", "abs", "exp", "sqrt", "floor"])
def test_unary_in_place_on_float_leaves(name):
    td = _td().exclude("i")
    expected = getattr(torch, name)(td["x"])
    assert getattr(td, name + "_")() is td
    assert torch.equal(td["x"], expected)
    _text_kept(td)


def test_round_takes_decimals():
    td = TensorDict({"x": torch.tensor([1.234, 5.678])}, [2])
    assert td.round(decimals=1)["x"].tolist() == pytest.approx([1.2, 5.7])


@pytest.mark.parametrize("name", ["log_", "sqrt_", "exp_", "sigmoid_"])
def test_in_place_that_an_int_leaf_cannot_hold_writes_nothing(name):
    td = _td()
    with pytest.raises(TypeError, match="entry 'i' is torch.int64"):
        getattr(td, name)()
    assert td["x"].tolist() == [1.0, 4.0, 9.0] and td["n", "y"].sum() == 6  # tensordict wrote 'x' first


def test_in_place_binary_with_numbers_tensors_and_tds():
    td = _td()
    assert td.add_(1)["x"].tolist() == [2.0, 5.0, 10.0] and td["i"].tolist() == [2, 3, 4]
    td.add_(_other(), alpha=2)
    assert td["x"].tolist() == [6.0, 9.0, 14.0] and td["i"].tolist() == [8, 9, 10]
    td.sub_(torch.tensor(1))
    assert td["i"].tolist() == [7, 8, 9]
    td.mul_(_other())
    assert td["i"].tolist() == [21, 24, 27] and td["n", "y"][0].tolist() == [10.0, 10.0]
    td.exclude("i").div_(2)
    assert td["x"].tolist() == [5.0, 8.0, 13.0]
    td.clamp_min_(6).clamp_max_(10)
    assert td["x"].tolist() == [6.0, 8.0, 10.0] and td["i"].tolist() == [10, 10, 10]
    _text_kept(td)


def test_sub_of_a_fraction_on_an_int_leaf_writes_nothing():
    td = _td()
    with pytest.raises(TypeError, match="'i'.*nothing was written"):
        td.sub_(1.5)
    assert td["x"].tolist() == [1.0, 4.0, 9.0]


def test_out_of_place_binary():
    td = _td()
    assert td.pow(2)["x"].tolist() == [1.0, 16.0, 81.0] and td.pow(_other())["i"].tolist() == [1, 8, 27]
    assert td.maximum(_other())["x"].tolist() == [2.0, 4.0, 9.0] and td.minimum(2)["i"].tolist() == [1, 2, 2]
    assert td.maximum(2.5)["i"].tolist() == [2.5, 2.5, 3.0]  # promoted as torch.maximum does, not truncated
    assert td.mod(2)["i"].tolist() == [1, 0, 1] and td.rsub(10)["x"].tolist() == [9.0, 6.0, 1.0]
    f = td.exclude("i")
    assert f.lerp(_other().exclude("i"), 0.5)["x"].tolist() == [1.5, 3.0, 5.5]
    assert f.addcmul(_other().exclude("i"), _other().exclude("i"), value=0.5)["x"].tolist() == [3.0, 6.0, 11.0]
    assert f.addcdiv(_other().exclude("i"), _other().exclude("i"))["x"].tolist() == [2.0, 5.0, 10.0]
    for r in (td.pow(2), td.maximum(_other()), f.lerp(_other().exclude("i"), 0.5)):
        _text_kept(r)
    assert td["x"].tolist() == [1.0, 4.0, 9.0]


def test_in_place_binary_pow_maximum_lerp():
    f = _td().exclude("i")
    f.pow_(0.5).maximum_(2.5).lerp_(_other().exclude("i"), 0.5)
    assert f["x"].tolist() == [2.25, 2.25, 2.5]
    _text_kept(f)


def test_other_td_missing_a_tensor_leaf_is_named_and_nothing_written():
    td = _td()
    with pytest.raises(KeyError, match="no entry 'i'"):
        td.add_(_other().select("x", "n"))
    assert td["x"].tolist() == [1.0, 4.0, 9.0]
    with pytest.raises(TypeError, match="'x' is a NonTensorData"):
        td.add_(TensorDict({"x": "oops"}, []))
    # the other's text leaves are never read: they may be missing
    assert td.add_(_other().exclude("s", "c"))["x"].tolist() == [3.0, 6.0, 11.0]


def test_result_that_does_not_fit_the_leaf_writes_nothing():
    td = TensorDict({"x": torch.ones(2), "y": torch.ones(2, 3)}, [2])
    with pytest.raises(RuntimeError, match="'x'.*does not fit"):
        td.add_(torch.ones(2, 1))  # y (2, 3) takes it; x (2,) would become (2, 2)
    assert td["y"].sum() == 6
    with pytest.raises(RuntimeError, match="add_: entry 'x'"):  # torch's broadcast error, with the entry named
        td.add_(torch.ones(3))
    with pytest.raises(NotImplementedError, match="lerp_: entry 'i'"):
        _td().lerp_(_other(), 0.5)


def test_a_dict_other():
    td = _td().exclude("i")
    assert td.add_({"x": 1.0, "n": {"y": torch.zeros(3, 2)}})["x"].tolist() == [2.0, 5.0, 10.0]
    assert math.isclose(td.log()["x"][0].item(), math.log(2.0), rel_tol=1e-6)
