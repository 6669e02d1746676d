"""``where``, ``empty(recurse=True)`` and reshapes of text columns, checked against what
tensordict 0.14.3 gives on the same inputs (the expected values below are its results, except
where docs/compat.md records a difference)."""
from __future__ import annotations

import pickle

import pytest
import torch

from chatdata.td import NonTensorStack, TensorDict

COND = torch.tensor([True, False, True])


def _a():
    return TensorDict({"x": torch.arange(3.0), "s": ["a", "b", "c"]}, [3])


def _b():
    return TensorDict({"x": -torch.arange(3.0), "y": torch.ones(3), "s": ["A", "B", "C"], "t": ["p", "q", "r"]}, [3])


def test_where_picks_text_leaves_element_by_element():
    # the text column kept self's values whatever the condition
    r = _a().where(COND, _b().select("x", "s"))
    assert r["s"] == ["a", "B", "c"] and r["x"].tolist() == [0.0, -1.0, 2.0]
    r2 = TensorDict({"s": [["a", "b"], ["c", "d"]]}, [2, 2]).where(
        torch.tensor([[True, False], [False, True]]), TensorDict({"s": [["A", "B"], ["C", "D"]]}, [2, 2]))
    assert r2["s"] == [["a", "B"], ["C", "d"]]


def test_where_condition_covers_the_leading_batch_dims():
    a = TensorDict({"s": [["a", "b"], ["c", "d"]], "x": torch.zeros(2, 2)}, [2, 2])
    b = TensorDict({"s": [["A", "B"], ["C", "D"]], "x": torch.ones(2, 2)}, [2, 2])
    r = a.where(torch.tensor([True, False]), b)  # whole rows, as tensordict (not torch's trailing broadcast)
    assert r["x"].tolist() == [[0.0, 0.0], [1.0, 1.0]] and r["s"] == [["a", "b"], ["C", "D"]]


def test_where_with_pad_keeps_the_keys_of_either_side():
    r = _a().where(COND, _b(), pad=0)
    assert list(r.keys()) == ["x", "s", "y", "t"]
    assert r["y"].tolist() == [0.0, 1.0, 0.0]
    assert r["t"] == ["p", "q", "r"]  # a number cannot fill text: other's column kept whole, as tensordict does
    r = _b().select("s", "t").where(COND, _a().select("s"), pad="-")
    assert r["t"] == ["p", "-", "r"] and r["s"] == ["A", "b", "C"]
    nested = TensorDict({"n": {"x": torch.zeros(3)}}, [3]).where(
        COND, TensorDict({"n": {"x": torch.ones(3), "z": torch.ones(3)}, "w": torch.ones(3, dtype=torch.bool)}, [3]), pad=5)
    assert nested["n", "z"].tolist() == [5.0, 1.0, 5.0] and nested["n", "x"].tolist() == [0.0, 1.0, 0.0]
    assert nested["w"].dtype == torch.bool and nested["w"].tolist() == [True, True, True]


def test_where_constants_and_values():
    a = TensorDict({"x": torch.arange(3.0), "c": "k1"}, [3])
    assert a.where(COND, TensorDict({"x": torch.zeros(3), "c": "k2"}, [3]))["c"] == ["k1", "k2", "k1"]
    assert a.where(COND, a.clone())["c"] == "k1"  # one value both sides: a constant still
    r = _a().where(COND, 0)  # a number: tensor leaves take it, text leaves are kept (tensordict)
    assert r["x"].tolist() == [0.0, 0.0, 2.0] and r["s"] == ["a", "b", "c"]
    assert _a().select("s").where(COND, "z")["s"] == ["a", "z", "c"]


def test_where_out_writes_in_place_and_adds_new_keys():
    out = TensorDict({"x": torch.full((3,), 7.0)}, [3])
    x = out["x"]
    res = _a().select("x").where(COND, _b().select("x", "y"), pad=0, out=out)
    assert res is out and out["x"] is x and x.tolist() == [0.0, -1.0, 2.0] and out["y"].tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize("call, error, match", [
    (lambda: _a().where(COND, _b()), KeyError, r"only the second has \['t', 'y'\]"),
    (lambda: _a().where(torch.tensor([1, 0, 1]), _a()), RuntimeError, "boolean"),
    (lambda: _a().select("s").where(torch.tensor([1, 0, 1]), "z"), RuntimeError, "boolean"),
    (lambda: _a().where(COND, _a()[:2]), RuntimeError, r"batch size \(2,\)"),
    (lambda: _a().where(COND, TensorDict({"x": torch.zeros(3), "s": torch.zeros(3)}, [3])), TypeError, "'s' is text"),
    (lambda: _a().where(COND, "z"), TypeError, "select"),
    (lambda: _a().where(COND, TensorDict({"x": torch.zeros(3), "s": {"k": torch.zeros(3)}}, [3]), pad=0), TypeError, "'s' is text"),
    (lambda: TensorDict({"n": {"k": torch.zeros(3)}}, [3]).where(COND, TensorDict({"n": torch.zeros(3)}, [3]), pad=0),
     TypeError, "'n' is a nested TensorDict"),
    (lambda: _b().where(COND, _a(), pad="-"), TypeError, "pad '-'"),
    (lambda: _a().where(torch.tensor([True, False]), _a()), RuntimeError, "size"),
])
def test_where_bad_input_is_a_clear_error(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_empty_recurse_keeps_text_leaves():
    td = TensorDict({"x": torch.zeros(3), "s": ["a", "b", "c"], "c": "k",
                     "n": {"u": ["x", "y", "z"], "v": torch.ones(3)}, "m": {"w": torch.ones(3, 2)}}, [3])
    e = td.empty(recurse=True)
    assert sorted(map(str, e.keys(True))) == ["('n', 'u')", "c", "m", "n", "s"]
    assert e["s"] == ["a", "b", "c"] and e["c"] == "k" and e.batch_size == td.batch_size
    assert list(td.empty().keys()) == []


def _column(n=6):
    return TensorDict({"s": NonTensorStack.from_list([chr(97 + i) for i in range(n)]), "x": torch.arange(n)}, [n])


@pytest.mark.parametrize("op", [lambda t: t.unsqueeze(0), lambda t: t.unsqueeze(-1), lambda t: t.reshape(2, 3),
                                lambda t: t.unsqueeze(0).squeeze(0), lambda t: t.reshape(3, 2).flatten()])
def test_reshapes_of_a_column_built_in_order_stay_lazy_and_share_writes(op):
    td = _column()
    v = op(td)
    # O(1): the index stays a range (no tensor of one id per row is built; private, no timing)
    assert v.get("s")._idx is None and td.get("s")._idx is None
    assert v["s"] == td.get("s").tolist() if v.batch_dims == 1 else v.get("s").tolist() == td.get("s").reshape(v.batch_size).tolist()
    td[2] = TensorDict({"s": "C", "x": torch.tensor(20)}, [])  # a write into the source: seen by the view
    assert v.get("s").reshape(-1).tolist()[2] == "C" and v["x"].reshape(-1)[2] == 20
    flat = v.reshape(-1)
    flat[4] = TensorDict({"s": "E", "x": torch.tensor(40)}, [])  # a write through the view: seen by the source
    assert td["s"][4] == "E" and td["x"][4] == 40


def test_a_reshaped_column_indexes_copies_and_pickles_like_a_tensor():
    td = _column()
    r = td.reshape(2, 3)
    r[1, 2] = TensorDict({"s": "F", "x": torch.tensor(5)}, [])
    assert td["s"] == ["a", "b", "c", "d", "e", "F"]
    assert r[1]["s"] == ["d", "e", "F"] and r[:, 0]["s"] == ["a", "d"]
    assert r.permute(1, 0)["s"] == [["a", "d"], ["b", "e"], ["c", "F"]]
    c = r.clone()
    c[0, 0] = TensorDict({"s": "Z", "x": torch.tensor(0)}, [])
    assert td["s"][0] == "a" and c["s"][0][0] == "Z"
    assert pickle.loads(pickle.dumps(r))["s"] == [["a", "b", "c"], ["d", "e", "F"]]
    assert torch.stack([r, r]).get("s").batch_size == torch.Size([2, 2, 3])
    assert td[:0].unsqueeze(0).get("s").batch_size == torch.Size([1, 0])


def test_where_pad_fills_a_one_sided_text_column_only_with_a_string():
    a = TensorDict({"x": torch.zeros(3)}, [3])
    b = TensorDict({"x": torch.ones(3), "s": ["A", "B", "C"]}, [3])
    cond = torch.tensor([True, False, True])
    r = a.where(cond, b, pad=0)  # no mixed str/int column: the side holding it is kept whole
    assert list(r["s"]) == ["A", "B", "C"] and r["x"].tolist() == [0.0, 1.0, 0.0]
    assert list(a.where(cond, b, pad="-")["s"]) == ["-", "B", "-"]
