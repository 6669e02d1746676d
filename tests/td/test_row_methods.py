"""narrow, masked_select, tile, copy, popitem, clear, size, depth, tolist, dtype casts and the
nan/prod/std/var reductions: values as tensordict 0.14.3 gives them on the same inputs, with
text leaves moving with their rows."""
from __future__ import annotations

import math

import pytest
import torch

from chatdata.td import TensorDict


def _td():
    return TensorDict({"x": torch.tensor([1.0, float("nan"), 3.0]), "i": torch.tensor([3, 1, 2]), "s": ["a", "b", "c"],
                       "n": {"y": torch.ones(3, 2)}}, [3])


def test_rows_move_text_with_them():
    r = _td().narrow(0, 1, 2)
    assert r["i"].tolist() == [1, 2] and r["s"] == ["b", "c"] and r.batch_size == (2,)
    m = _td().masked_select(torch.tensor([True, False, True]))
    assert m["i"].tolist() == [3, 2] and m["s"] == ["a", "c"]
    t = _td().select("i", "s").tile(2)
    assert t["i"].tolist() == [3, 1, 2, 3, 1, 2] and t["s"] == ["a", "b", "c"] * 2
    grid = TensorDict({"s": [["a", "b"]], "x": torch.arange(2).reshape(1, 2)}, [1, 2]).tile(2, 2)
    assert grid["s"] == [["a", "b", "a", "b"]] * 2 and grid["x"].tolist() == [[0, 1, 0, 1]] * 2


@pytest.mark.parametrize("call, error, match", [
    (lambda td: td.narrow(1, 0, 1), IndexError, "out of range"),
    (lambda td: td.narrow(0, 2, 5), RuntimeError, "exceeds dimension size"),
    (lambda td: td.masked_select(torch.tensor([True, False])), RuntimeError, "leading batch dims"),
    (lambda td: td.masked_select(torch.tensor([1, 0, 1])), RuntimeError, "bool"),
    (lambda td: td.tile(2, 2), ValueError, "one per batch dim"),
    (lambda td: td.tile(-1), ValueError, "non-negative"),
    (lambda td: td.prod(dim=(0,)), TypeError, "one int"),
    (lambda td: TensorDict({}, [2]).popitem(), KeyError, "empty"),
])
def test_bad_input_is_a_clear_error(call, error, match):
    td = _td()
    with pytest.raises(error, match=match):
        call(td)
    assert td["s"] == ["a", "b", "c"] and list(td.keys()) == ["x", "i", "s", "n"]


def test_dict_side():
    td = _td()
    c = td.copy()
    assert c is not td and c.get("x") is td.get("x") and c.get("n") is not td.get("n")
    c["z"] = torch.zeros(3)
    assert "z" not in td.keys()
    assert td.popitem()[0] == "n" and list(td.keys()) == ["x", "i", "s"]
    assert td.clear() is td and list(td.keys()) == []
    assert _td().size() == (3,) and _td().size(-1) == 3 and _td().depth == 1 and TensorDict({"a": 1}).depth == 0
    rows = _td().select("i", "s", "n").tolist(convert_tensors=True)
    assert rows == [{"i": 3, "s": "a", "n": {"y": [1.0, 1.0]}}, {"i": 1, "s": "b", "n": {"y": [1.0, 1.0]}},
                    {"i": 2, "s": "c", "n": {"y": [1.0, 1.0]}}]
    assert isinstance(_td().tolist()[0]["x"], torch.Tensor)


def test_casts_keep_text():
    r = _td().select("i", "s").float32()
    assert r["i"].dtype == torch.float32 and r["s"] == ["a", "b", "c"]
    assert _td().int8()["i"].dtype == torch.int8 and _td().float64()["x"].dtype == torch.float64


def test_reductions():
    td = _td()
    assert td.select("x").nansum()["x"].item() == 4.0 and td.select("x").nanmean(reduce=True).item() == 2.0
    assert td.select("x", "s").nansum(dim=0)["x"].item() == 4.0 and "s" not in td.nansum(dim=0).keys()
    assert td.select("i").prod(dim=0)["i"].item() == 6 and td.select("i").prod()["i"].item() == 6
    f = td.select("i", "n").float()
    assert f.std(dim=0)["i"].item() == 1.0 and f.std(dim=0)["n", "y"].tolist() == [0.0, 0.0]
    assert math.isclose(f.std(dim=0, correction=0)["i"].item(), 0.8164966106414795)
    assert f.select("i").var(reduce=True).item() == 1.0
