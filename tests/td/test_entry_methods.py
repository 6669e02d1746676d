"""from_list, replace, update_at_, copy_at_, get_item_shape and numpy on TensorDicts holding text columns,
constants and nested TensorDicts (checked against tensordict 0.14.3 on the same inputs), and their bad input."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from chatdata import TensorDict
from chatdata.td import NonTensorData, NonTensorStack


def _td():
    return TensorDict({"x": torch.arange(3.0), "s": ["a", "b", "c"], "c": "k", "n": {"y": torch.ones(3, 2)}}, [3])


ROWS = [{"x": torch.tensor(1.0), "s": "a", "n": {"y": torch.ones(2)}},
        {"x": torch.tensor(2.0), "s": "b", "n": {"y": torch.zeros(2)}}]


def test_from_list_stacks_rows():
    td = TensorDict.from_list(ROWS)
    assert td.batch_size == (2,) and td["x"].tolist() == [1.0, 2.0] and td["s"] == ["a", "b"]
    assert isinstance(td.get("s"), NonTensorStack) and td["n"].batch_size == (2,)
    assert td["n", "y"].tolist() == [[1.0, 1.0], [0.0, 0.0]]
    assert TensorDict.from_list(ROWS, auto_batch_size=True)["n"].batch_size == (2, 2)
    assert TensorDict.from_list([TensorDict(x=1), TensorDict(x=2)])["x"].tolist() == [1, 2]
    assert TensorDict.from_list([{"x": [1, 2]}, {"x": [3, 4]}])["x"].tolist() == [[1, 2], [3, 4]]
    assert TensorDict.from_list([{"s": None}, {"s": "b"}])["s"] == [None, "b"]


def test_from_list_equal_strings_are_a_constant():
    td = TensorDict.from_list([{"s": "a"}, {"s": "a"}])
    assert isinstance(td.get("s"), NonTensorData) and td["s"] == "a"  # tensordict: a stack ['a', 'a']


@pytest.mark.parametrize("rows,exc,words", [
    ([], ValueError, "empty"),
    ("ab", TypeError, "list of dicts"),
    ([1, 2], TypeError, "row 0 is a int"),
    ([[{"x": 1}], [{"x": 2}]], TypeError, "row 0 is a list"),
    ([{"x": 1, "s": "a"}, {"x": 2}], KeyError, "different keys"),
    ([{"x": torch.ones(2)}, {"x": torch.ones(3)}], RuntimeError, "shapes differ"),
])
def test_from_list_bad_rows(rows, exc, words):
    with pytest.raises(exc, match=words):
        TensorDict.from_list(rows)


def test_replace_is_a_shallow_copy_with_entries_swapped():
    td = _td()
    r = td.replace({("n", "y"): torch.zeros(3, 2), "s": ["p", "q", "r"]}, z=torch.ones(3))
    assert r["s"] == ["p", "q", "r"] and td["s"] == ["a", "b", "c"]
    assert r["n", "y"].sum() == 0 and td["n", "y"].sum() == 6 and r["z"].tolist() == [1.0] * 3
    assert r.get("x") is td.get("x") and "z" not in td.keys()
    with pytest.raises(RuntimeError, match="'x'"):
        td.replace(x=torch.zeros(4))
    with pytest.raises(TypeError, match="one dict"):
        td.replace(["x"])


def test_update_at_writes_tensors_and_text():
    td = _td()
    assert td.update_at_({"x": 9.0, "s": "z", ("n", "y"): torch.tensor([5.0, 5.0])}, 1) is td
    assert td["x"].tolist() == [0.0, 9.0, 2.0] and td["s"] == ["a", "z", "c"]
    assert td["n", "y"][1].tolist() == [5.0, 5.0] and td["n", "y"][0].tolist() == [1.0, 1.0]
    td.update_at_({"s": ["p", "q"], "n": {"y": torch.zeros(2)}}, slice(0, 2))
    assert td["s"] == ["p", "q", "c"] and td["n", "y"][:2].sum() == 0
    td.update_at_(TensorDict({"x": torch.tensor([7.0, 8.0])}, [2]), torch.tensor([True, False, True]))
    assert td["x"].tolist() == [7.0, 9.0, 8.0]


def test_update_at_clone_copies_the_values():
    td, v = _td(), torch.tensor(4.0)
    td.update_at_({"x": v}, 0, clone=True)
    assert td["x"][0] == 4.0


@pytest.mark.parametrize("value,index,exc,words", [
    ({"zz": 1.0, "x": 5.0}, 0, KeyError, "'zz'"),
    ({("n", "zz"): 1.0}, 0, KeyError, "existing entries only"),
    ({"x": torch.tensor([1.0, 2.0])}, 0, RuntimeError, "does not broadcast"),
    ({"x": 1.0}, 5, IndexError, "out of range"),
    ([("x", 1.0)], 0, TypeError, "dict or a TensorDict"),
])
def test_update_at_bad_input_writes_nothing(value, index, exc, words):
    td = _td()
    with pytest.raises(exc, match=words):
        td.update_at_(value, index)
    assert td["x"].tolist() == [0.0, 1.0, 2.0] and td["s"] == ["a", "b", "c"] and "zz" not in td.keys()


def test_copy_at_writes_text_columns_too():
    td = _td()
    src = TensorDict({"x": torch.tensor(9.0), "s": "z", "n": {"y": torch.tensor([4.0, 4.0])}}, [])
    assert td.copy_at_(src, 2) is td
    assert td["x"].tolist() == [0.0, 1.0, 9.0] and td["s"] == ["a", "b", "z"]  # tensordict leaves "c"
    assert td["n", "y"][2].tolist() == [4.0, 4.0]
    td.copy_at_(TensorDict({"x": torch.tensor([5.0, 6.0])}, [2]), slice(0, 2))
    assert td["x"].tolist() == [5.0, 6.0, 9.0]
    with pytest.raises(KeyError, match="'zz'"):
        td.copy_at_(TensorDict({"zz": torch.tensor(1.0)}, []), 0)
    with pytest.raises(TypeError, match="update_at_"):
        td.copy_at_({"x": 1.0}, 0)


def test_get_item_shape():
    td = _td()
    assert td.get_item_shape("x") == (3,) and td.get_item_shape(("n", "y")) == (3, 2)
    assert td.get_item_shape("s") == (3,) and td.get_item_shape("c") == (3,) and td.get_item_shape("n") == (3,)
    with pytest.raises(KeyError):
        td.get_item_shape("zz")


def test_numpy():
    out = _td().numpy()
    assert isinstance(out["x"], np.ndarray) and out["x"].tolist() == [0.0, 1.0, 2.0]
    assert out["s"] == ["a", "b", "c"] and out["c"] == "k"  # tensordict raises for the text column
    assert isinstance(out["n"], dict) and out["n"]["y"].shape == (3, 2)
    grad = TensorDict({"w": torch.ones(2, requires_grad=True)}, [2]).numpy()
    assert grad["w"].tolist() == [1.0, 1.0]
