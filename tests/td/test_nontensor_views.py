"""An element of a NonTensorStack writes back into the stack (as a torch view does), bool indices
add a dim as None does, and contiguous() keeps non-tensor columns."""
from __future__ import annotations

import pytest
import torch

from chatdata.td import NonTensorData, NonTensorStack, TensorDict


def test_setting_an_element_writes_into_the_stack():
    s = NonTensorStack("a", "b", "c")
    s[1].data = "B"
    assert s.tolist() == ["a", "B", "c"]
    s[0][True] = NonTensorStack("A")
    assert s.tolist() == ["A", "B", "c"]
    s[2][...] = NonTensorData("C")
    assert s.tolist() == ["A", "B", "C"]
    s[2][False] = "never"  # an empty selection writes nothing
    assert s.tolist() == ["A", "B", "C"]


def test_elements_of_a_2d_and_a_sliced_stack_write_back():
    s = NonTensorStack.from_list([["a", "b"], ["c", "d"]])
    s[1, 0].data = {"x": 1}
    assert s.tolist() == [["a", "b"], [{"x": 1}, "d"]]
    row = s[0]  # a view of the first row
    row[1].data = "B"
    assert s.tolist() == [["a", "B"], [{"x": 1}, "d"]]


def test_set_on_an_indexed_tensordict_reaches_its_column():
    td = TensorDict({"s": ["a", "b"], "x": torch.zeros(2)}, [2])
    td[1].set_("s", "z")
    assert td["s"] == ["a", "z"]


def test_a_lone_non_tensor_data_cannot_be_set_in_parts():
    with pytest.raises(RuntimeError, match="maybe_to_stack"):
        NonTensorData("v", batch_size=[2])[0] = "w"


def test_several_different_values_cannot_go_into_one_element():
    s = NonTensorStack("a", "b")
    with pytest.raises(ValueError, match="2 different values into one element"):
        s[0][True] = NonTensorStack("x", "y")[None]
    assert s.tolist() == ["a", "b"]


@pytest.mark.parametrize("i", [None, True])
def test_bool_and_none_indices_add_a_dim_when_setting(i):
    s = NonTensorStack("0", "1")
    t = NonTensorStack(NonTensorStack("2", "3"), stack_dim=1)
    assert t.batch_size == (2, 1)
    s[:, i] = t
    assert s.tolist() == ["2", "3"]
    td = TensorDict({"x": torch.arange(2)}, [2])
    assert td[:, i].batch_size == (2, 1) and td[:, i]["x"].shape == (2, 1)


def test_contiguous_keeps_stacks_and_copies_only_when_needed():
    td = TensorDict({"q": ["a", "b", "c"], "x": torch.zeros(3, 2).t().t(), "n": {"y": torch.zeros(2, 3).t()}}, [3])
    c = td.contiguous(canonical=True)
    assert c is not td and c["n", "y"].is_contiguous()
    assert isinstance(c.get("q"), NonTensorStack) and c["q"] == ["a", "b", "c"]
    assert c.contiguous() is c
    s = NonTensorStack("a", "b")
    assert s.contiguous() is s and s.contiguous(canonical=True) is s


def test_to_lazystack_is_the_dense_tensordict_itself():
    td = TensorDict({"a": TensorDict({"b": ["x"]}, [1])}, [1])
    lazy = td.to_lazystack()
    assert lazy is td
    tdz = lazy.new_zeros((4,))
    lazy["a", "b"] = "new"
    tdz[torch.tensor([False, False, False, True])] = lazy
    assert tdz["a", "b"][-1] == "new"
    with pytest.raises(IndexError, match="dim 2 is out of range"):
        td.to_lazystack(2)
    with pytest.raises(RuntimeError, match="needs a batch dim"):
        TensorDict({}, []).to_lazystack()


def test_a_pickled_or_copied_element_is_a_value_of_its_own():
    import copy
    import pickle

    s = NonTensorStack.from_list(["x" * 100] * 10_000)
    e = s[5]
    raw = pickle.dumps(e)
    assert len(raw) < 1000  # the element, not the 1 MB column it came from
    for c in (pickle.loads(raw), copy.deepcopy(e), copy.copy(e)):
        c.data = "changed"
        assert c.data == "changed" and s[5].data == "x" * 100


def test_contiguous_of_a_tensorclass_makes_its_tensors_contiguous():
    from chatdata.td import tensorclass

    @tensorclass
    class Pair:
        a: torch.Tensor
        label: str

    p = Pair(a=torch.zeros(3, 2).t(), label="x", batch_size=[2])
    c = p.contiguous()
    assert type(c) is type(p) and c.a.is_contiguous() and c.label == "x"
    d = NonTensorData(1)
    assert d.contiguous() is d
