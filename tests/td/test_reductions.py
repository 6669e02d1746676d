"""Reductions of a TensorDict holding text: text columns are left out of every reduction (with or
without ``dim``), constants are kept with the result's batch size; ``reduce=True`` with ``dim``
pools the leaves along the batch dims into one tensor (tensordict 0.14.3's results, checked side
by side); nested TensorDicts of more batch dims reduce to batch ``()``."""
from __future__ import annotations

import pytest
import torch

from chatdata import TensorDict, tensorclass
from chatdata.td import NonTensorData, NonTensorStack

REDUCTIONS = ["sum", "mean", "nansum", "nanmean", "std", "var", "prod", "max", "min", "amax", "amin"]


def _td():
    return TensorDict({"x": torch.arange(6.0).reshape(3, 2), "s": ["a", "b", "c"], "c": "const",
                       "n": {"y": torch.ones(3), "t": ["p", "q", "r"], "k": "kc"}}, [3])


def _text_leaves(td):
    return {k: type(v).__name__ for k, v in ((k, td.get(k)) for k in td.keys(True))
            if isinstance(v, (NonTensorData, NonTensorStack))}


@pytest.mark.parametrize("name", REDUCTIONS)
def test_no_dim_leaves_text_columns_out_keeps_constants(name):
    r = getattr(_td(), name)()
    assert r.batch_size == ()
    assert _text_leaves(r) == {"c": "NonTensorData", ("n", "k"): "NonTensorData"}
    assert r["c"] == "const" and r["n", "k"] == "kc" and r.get("c").batch_size == ()
    assert r["x"].shape == () and r["n", "y"].shape == ()


@pytest.mark.parametrize("name", ["sum", "mean", "std", "prod", "amax", "amin"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_over_a_dim_leaves_text_columns_out_keeps_constants(name, keepdim):
    r = getattr(_td(), name)(dim=0, keepdim=keepdim)
    assert r.batch_size == ((1,) if keepdim else ())
    assert set(_text_leaves(r)) == {"c", ("n", "k")} and r.get("c").batch_size == r.batch_size


def test_values_of_the_tensor_leaves_are_torchs():
    td = _td()
    assert td.sum()["x"].item() == 15.0 and td.mean()["n", "y"].item() == 1.0
    assert td.max()["x"].item() == 5.0 and td.prod()["x"].item() == 0.0
    assert td.std(0)["x"].tolist() == [2.0, 2.0]


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_over_a_dim_keeps_constants_in_the_values_not_in_the_indices(name):
    r = getattr(_td(), name)(dim=0)
    assert set(_text_leaves(r.values)) == {"c", ("n", "k")}
    assert _text_leaves(r.indices) == {} and r.indices["x"].tolist() == ([2, 2] if name == "max" else [0, 0])


@pytest.mark.parametrize("name", ["any", "all"])
def test_any_all_over_a_dim_leave_text_columns_out(name):
    td = _td().apply(lambda t: t > 1)
    r = getattr(td, name)(0)
    assert r.batch_size == () and set(_text_leaves(r)) == {"c", ("n", "k")}
    assert r["x"].tolist() == ([True, True] if name == "any" else [False, False])
    assert getattr(td, name)() is (name == "any")


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "max", "std"])
def test_no_dim_with_a_nested_td_of_more_batch_dims(name):
    # before: BatchSizeError, the nested result kept its extra batch dim (2,) around a 0-dim leaf
    td = TensorDict({"x": torch.ones(3), "n": TensorDict({"y": torch.ones(3, 2), "k": "c", "t": [["a", "b"]] * 3},
                                                         [3, 2])}, [3])
    r = getattr(td, name)()
    assert r["n"].batch_size == () and r["n", "y"].shape == () and r["n", "k"] == "c"
    assert ("n", "t") not in r.keys(True)


def test_no_dim_with_a_nested_tensorclass_of_more_batch_dims():
    @tensorclass
    class Pair:
        x: torch.Tensor
        name: str

    td = TensorDict({"p": Pair(x=torch.ones(3, 2), name="k", batch_size=[3, 2]), "a": torch.ones(3)}, [3])
    r = td.sum()
    assert isinstance(r["p"], Pair) and r["p"].batch_size == () and r["p"].x.item() == 6.0 and r["p"].name == "k"


@pytest.mark.parametrize("name,expected", [("sum", [9.0, 12.0]), ("mean", [1.5, 2.0]), ("nansum", [9.0, 12.0]),
                                           ("prod", [0.0, 15.0]), ("amax", [4.0, 5.0]), ("amin", [0.0, 1.0])])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reduce_true_with_dim_pools_the_leaves(name, expected, keepdim):
    # before: reduce=True was ignored with a dim (a TensorDict came back)
    td = TensorDict({"x": torch.arange(6.0).reshape(3, 2), "y": torch.ones(3, 2), "s": ["a", "b", "c"], "c": "k"}, [3])
    r = getattr(td, name)(dim=0, keepdim=keepdim, reduce=True)
    assert isinstance(r, torch.Tensor)
    assert r.tolist() == ([expected] if keepdim else expected)


def test_reduce_true_with_dim_std_var_pool_every_row():
    td = TensorDict({"x": torch.arange(6.0).reshape(3, 2), "y": torch.ones(3, 2)}, [3])
    pooled = torch.cat([td["x"], td["y"]])
    assert torch.allclose(td.std(dim=0, reduce=True), pooled.std(0))
    assert torch.allclose(td.var(dim=0, reduce=True, correction=0), pooled.var(0, correction=0))


def test_reduce_true_over_several_dims():
    td = TensorDict({"x": torch.arange(6.0).reshape(2, 3), "y": torch.ones(2, 3)}, [2, 3])
    assert td.sum(dim=(0, 1), reduce=True).item() == 21.0
    assert td.sum(dim=1, reduce=True).tolist() == [6.0, 15.0]


@pytest.mark.parametrize("call,exc,words", [
    (lambda td: td.sum(dim=0, reduce=True), ValueError, "need one shape"),
    (lambda td: td.select("s").mean(dim=0, reduce=True), ValueError, "no tensor leaf"),
    (lambda td: td.max(dim=0, reduce=True), ValueError, "amax(dim=..., reduce=True)"),
])
def test_reduce_true_bad_input(call, exc, words):
    td = TensorDict({"x": torch.ones(3, 2), "y": torch.ones(3), "s": ["a", "b", "c"]}, [3])
    with pytest.raises(exc) as err:
        call(td)
    assert words in str(err.value)
