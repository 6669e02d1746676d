"""named_apply, masked_fill(_), roll, split_keys, isfinite/isnan/..., clamp*, max/min/amax/amin,
filter_non_tensor_data, non_tensor_items, sorted_keys: the values expected below are what
tensordict 0.14.3 gives on the same inputs, except the differences docs/compat.md records (text
leaves roll with their rows, roll(dims=None) rolls the rows, reductions over batch dims leave text
columns out)."""
from __future__ import annotations

import math

import pytest
import torch

from chatdata.td import TensorDict

NAN, INF = float("nan"), float("inf")
MASK = torch.tensor([True, False, True])


def _td():
    return TensorDict({"x": torch.tensor([1.0, NAN, INF]), "i": torch.tensor([3, 1, 2]), "s": ["a", "b", "c"], "c": "k",
                       "n": {"y": torch.tensor([[1.0, -2.0], [3.0, 4.0], [5.0, 6.0]])}}, [3])


def _same(a, b):
    return all(x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))


def test_named_apply_gives_keys_and_drops_none():
    seen = []
    r = _td().named_apply(lambda k, v: (seen.append(k), None if k == "i" else v * 2)[1])
    assert seen == ["x", "i", "y"]
    assert "i" not in r.keys() and r["n", "y"][0].tolist() == [2.0, -4.0] and r["s"] == ["a", "b", "c"]
    seen.clear()
    _td().named_apply(lambda k, v: seen.append(k) or v, nested_keys=True)
    assert seen == ["x", "i", ("n", "y")]
    seen.clear()
    _td().named_apply(lambda k, v: seen.append(k) or v, nested_keys=True, prefix=("p",))
    assert seen == [("p", "x"), ("p", "i"), ("p", "n", "y")]
    both = _td().select("x", "i").named_apply(lambda k, a, b: a + b, _td().select("x", "i"))
    assert both["i"].tolist() == [6, 2, 4]
    td = _td()
    td.named_apply(lambda k, v: v * 0, inplace=True)
    assert td["i"].tolist() == [0, 0, 0]
    with pytest.raises(KeyError, match="default="):
        _td().named_apply(lambda k, a, b: a, _td().select("x"))


def test_masked_fill_fills_tensor_leaves_along_the_leading_batch_dims():
    r = _td().masked_fill(MASK, 0)
    assert _same(r["x"].tolist(), [0.0, NAN, 0.0]) and r["i"].tolist() == [0, 1, 0]
    assert r["n", "y"].tolist() == [[0.0, 0.0], [3.0, 4.0], [0.0, 0.0]] and r["s"] == ["a", "b", "c"]
    td = _td()
    assert td.masked_fill_(MASK, -1) is td and td["i"].tolist() == [-1, 1, -1]


@pytest.mark.parametrize("call, error, match", [
    (lambda td: td.masked_fill(torch.tensor([True, False]), 0), RuntimeError, r"shape \(2,\)"),
    (lambda td: td.masked_fill(torch.tensor([1, 0, 1]), 0), RuntimeError, "boolean"),
    (lambda td: td.masked_fill(MASK, "z"), TypeError, "tensor leaves only"),
    (lambda td: td.masked_fill_(MASK, "z"), TypeError, "tensor leaves only"),
    (lambda td: td.roll(1, 1), IndexError, "out of range"),
    (lambda td: td.split_keys(["zz"]), KeyError, "strict=False"),
    (lambda td: td.split_keys("x"), TypeError, "lists of keys"),
    (lambda td: td.max(dim=0, reduce=True), ValueError, "no dim"),
    (lambda td: td.max(dim=(0, 1)), TypeError, "one int"),
    (lambda td: td.select("s").max(reduce=True), RuntimeError, "no tensor"),
])
def test_bad_input_is_a_clear_error_and_changes_nothing(call, error, match):
    td = _td()
    with pytest.raises(error, match=match):
        call(td)
    assert td["i"].tolist() == [3, 1, 2] and td["s"] == ["a", "b", "c"]


def test_roll_moves_rows_text_included():
    r = _td().roll(1, 0)
    assert _same(r["x"].tolist(), [INF, 1.0, NAN]) and r["i"].tolist() == [2, 3, 1]
    assert r["s"] == ["c", "a", "b"] and r["c"] == "k"  # tensordict empties the text rows ({})
    assert r["n", "y"].tolist() == [[5.0, 6.0], [1.0, -2.0], [3.0, 4.0]]
    assert _td().roll(-1)["n", "y"].tolist() == [[3.0, 4.0], [5.0, 6.0], [1.0, -2.0]]  # rows, not flattened leaves
    grid = TensorDict({"s": [["a", "b"], ["c", "d"]], "x": torch.arange(4).reshape(2, 2)}, [2, 2])
    assert grid.roll((1, 1), (0, 1))["s"] == [["d", "c"], ["b", "a"]]
    assert grid.roll(1, 1)["s"] == [["b", "a"], ["d", "c"]]
    assert grid.roll(1)["x"].tolist() == [[3, 0], [1, 2]]


def test_split_keys():
    a, b, rest = _td().split_keys(["x", "s"], ["i"])
    assert list(a.keys()) == ["x", "s"] and list(b.keys()) == ["i"] and list(rest.keys()) == ["c", "n"]
    nested, others = _td().split_keys([("n", "y")])
    # "n" held only ("n", "y"): left empty, it leaves the rest (tensordict's filter_empty_ there)
    assert nested["n", "y"].shape == (3, 2) and list(others.keys()) == ["x", "i", "s", "c"]
    empty, whole = _td().split_keys(["zz"], strict=False)
    assert list(empty.keys()) == [] and list(whole.keys()) == ["x", "i", "s", "c", "n"]
    td = _td()
    x, left = td.split_keys(["x"], inplace=True)
    assert left is td and "x" not in td.keys() and x["x"].shape == (3,)


def test_element_wise_tests_keep_text_leaves():
    td = _td()
    assert td.isfinite()["x"].tolist() == [True, False, False] and td.isnan()["x"].tolist() == [False, True, False]
    assert td.isposinf()["x"].tolist() == [False, False, True] and td.isneginf()["x"].tolist() == [False] * 3
    assert td.isreal()["i"].tolist() == [True] * 3 and td.isnan()["s"] == ["a", "b", "c"]
    assert td.clamp(0, 2)["i"].tolist() == [2, 1, 2] and td.clamp_min(2)["i"].tolist() == [3, 2, 2]
    assert td.clamp_max(2)["n", "y"][0].tolist() == [1.0, -2.0]


def test_max_min_amax_amin():
    td = _td().select("i", "n")
    assert td.max()["i"].item() == 3 and td.max()["n", "y"].item() == 6.0 and td.max().batch_size == ()
    m = td.max(dim=0)
    assert m.values["i"].item() == 3 and m.indices["i"].item() == 0 and m.values["n", "y"].tolist() == [5.0, 6.0]
    assert m.indices["n", "y"].tolist() == [2, 2]
    assert td.max(dim=0, return_indices=False)["n", "y"].tolist() == [5.0, 6.0]
    assert td.max(dim=0, keepdim=True).values.batch_size == (1,)
    assert td.max(reduce=True).item() == 6.0 and td.min(reduce=True).item() == -2.0
    assert td.min(dim=0).values["n", "y"].tolist() == [1.0, -2.0]
    assert td.amax()["i"].item() == 3 and td.amax(dim=0)["n", "y"].tolist() == [5.0, 6.0]
    assert td.amin(reduce=True).item() == -2.0


def test_reductions_over_batch_dims_leave_text_columns_out():
    td = _td()
    for r in (td.max(dim=0, return_indices=False), td.amin(dim=0), td.sum(dim=0, keepdim=True), td.exclude("i").mean(0)):
        assert "s" not in r.keys() and r["c"] == "k"  # a constant is one value whatever the batch
    assert td.sum(dim=0, keepdim=True)["i"].tolist() == [6]


def test_text_helpers():
    td = _td()
    assert sorted(map(str, td.filter_non_tensor_data().keys(True))) == ["('n', 'y')", "i", "n", "x"]
    assert [(k, v.tolist()) for k, v in td.non_tensor_items()] == [("s", ["a", "b", "c"]), ("c", ["k", "k", "k"])]
    assert [k for k, _ in td.non_tensor_items(include_nested=True)] == ["s", "c"]
    assert td.sorted_keys == ["c", "i", "n", "s", "x"]
