"""tensordict semantics that ported code relies on (what issue 11's peer suites taught us):
get vs [] on non-tensor entries, LinkedList, lock context managers, everyday methods,
NonTensorData state and tensorclass options."""
from __future__ import annotations

import pytest
import torch

from chatdata import NonTensorData, NonTensorStack, TensorDict, tensorclass
from chatdata.td.nontensor import LinkedList


def test_get_returns_entries_and_getitem_values():
    td = TensorDict({"s": "one", "l": ["a", "b", "c"], "x": torch.arange(3)}, [3])
    assert isinstance(td.get("s"), NonTensorData) and td["s"] == "one"
    assert isinstance(td.get("l"), NonTensorStack) and td["l"] == ["a", "b", "c"]
    assert td.get("missing") is None and td.get("missing", 5) == 5
    with pytest.raises(KeyError, match="missing"):
        td["missing"]
    assert td.get_non_tensor("l") == ["a", "b", "c"]
    assert td.set_non_tensor("n", 3).get("n").data == 3 and td["n"] == 3  # never a tensor


def test_linked_list_writes_through_and_is_lazy(tmp_path):
    td = TensorDict({"l": ["a", "b", "c"]}, [3])
    ll = td["l"]
    assert isinstance(ll, LinkedList) and repr(ll) == "LinkedList(['a', 'b', 'c'])"
    ll[0] = "z"
    ll[1:] = ["y", "x"]
    assert td.get("l").tolist() == ["z", "y", "x"] and ll[-1] == "x" and len(ll) == 3
    ll.append("w")  # resizing detaches it
    assert ll._td() is None and ll == ["z", "y", "x", "w"] and td["l"] == ["z", "y", "x"]
    big = TensorDict({"s": [f"v{i}" for i in range(1000)]}, [1000]).memmap(tmp_path / "big")
    assert big["s"][999] == "v999"
    assert big.get("s")._pool._list is None  # one value read: no column of Python strings built


def test_lock_methods_are_context_managers():
    td = TensorDict({"a": torch.zeros(2)}, [2]).lock_()
    with td.unlock_():
        td["b"] = torch.ones(2)
    assert td.is_locked
    with pytest.raises(RuntimeError, match="locked"):
        td["c"] = torch.ones(2)
    free = TensorDict({}, [])
    with free.lock_():
        assert free.is_locked
    assert not free.is_locked


def test_everyday_methods():
    td = TensorDict({"a": torch.ones(2, 3), "n": {"b": torch.arange(2)}}, [2])
    assert td.setdefault("c", torch.zeros(2)).tolist() == [0, 0]
    assert td.setdefault("c", torch.ones(2)).tolist() == [0, 0]
    assert ((td + 1)["a"] == 2).all() and ((2 * td)["n", "b"] == torch.tensor([0, 2])).all()
    assert ((td - torch.ones(2, 3).sum())["a"] == -5).all()
    assert td.float()["n", "b"].dtype == torch.float32 and td.detach()["a"].shape == (2, 3)
    z = td.new_zeros(5)
    assert z.batch_size == (5,) and z["a"].shape == (5, 3) and (z["a"] == 0).all()
    assert td.to_tensordict()["a"].data_ptr() != td["a"].data_ptr()
    assert td[torch.tensor(1)]["n", "b"] == 1  # a 0-d index tensor, as a DataLoader hands out
    r = repr(TensorDict({"b": 1, "a": 2}, []))
    assert r.index("a:") < r.index("b:")  # keys sorted


def test_new_key_by_index_is_allocated():
    data = TensorDict({}, [1, 4])
    data[0, 0] = TensorDict({"a": 1, "b": "first"}, [])
    assert data["a"].tolist() == [[1, 0, 0, 0]] and data["b"] == "first"
    data[0, 1] = TensorDict({"a": 2, "b": "second"}, [])
    assert data.get("b").tolist() == [["first", "second", "first", "first"]]


def test_non_tensor_data_state_and_update():
    td = TensorDict({"v": NonTensorData("a")}, [])
    td.share_memory_()
    v = td.get("v")
    assert v._is_shared and v.is_locked and "data" not in v.__dict__
    with pytest.raises(RuntimeError, match="locked"):
        v.update(NonTensorData("b"))
    v.update(NonTensorData("b"), inplace=True)
    assert td["v"] == "b"
    v.update_("c")
    assert td["v"] == "c"
    fn = NonTensorData(lambda x: x + 1)
    assert fn(1) == 2  # a stored callable can be called
    out = TensorDict({"a": 0}).apply(lambda x, f: f(x), TensorDict({"a": lambda x: x - 1}))
    assert out["a"] == -1


def test_non_tensor_shape_ops():
    s = NonTensorStack(NonTensorData("a", batch_size=(2,)), NonTensorData("b", batch_size=(2,)), stack_dim=1)
    assert s.repeat_interleave(2, dim=1)[0].tolist() == ["a", "a", "b", "b"]
    other = NonTensorStack.from_list(["x", "y"])
    assert NonTensorStack.from_list(["p", "q"]).where(torch.tensor([True, False]), other).tolist() == ["p", "y"]
    e = NonTensorData(0, batch_size=(1,)).expand(2, 3)
    assert isinstance(e, NonTensorStack) and e.tolist() == [[0, 0, 0], [0, 0, 0]]


def test_tensorclass_casting_options():
    @tensorclass
    class Default:
        a: int

    @tensorclass(nocast=True)
    class NoCast:
        a: int

    @tensorclass(autocast=True)
    class Auto:
        i: int
        s: str
        t: torch.Tensor

    assert isinstance(Default(1).a, torch.Tensor) and isinstance(NoCast(1).a, int)
    x = Auto(i=torch.ones(()), s=1, t=2)
    assert x.i == 1 and isinstance(x.i, int) and x.s == "1" and isinstance(x.t, torch.Tensor)
    with pytest.raises(TypeError, match="Tensor"):
        x.t = "text"


def test_tensorclass_dict_field_and_shadow():
    @tensorclass
    class Node:
        x: torch.Tensor
        child: "Node" = None

    n = Node(x=torch.zeros(3), child={"x": torch.ones(3)}, batch_size=[3])
    assert isinstance(n.child, Node) and n.child.batch_size == (3,)
    assert isinstance(n._tensordict, TensorDict) and n._tensordict["child", "x"].sum() == 3
    with pytest.raises(AttributeError, match="shadow"):
        @tensorclass
        class Bad:
            device: str

    @tensorclass(shadow=True)
    class Shadow:
        device: str

    assert Shadow(device="gpu-ish").device == "gpu-ish"


def test_tensorclass_update_select_and_frozen():
    @tensorclass
    class TC:
        a: torch.Tensor
        b: torch.Tensor

    tc = TC(a=torch.zeros(3), b=torch.zeros(3), batch_size=[3])
    assert tc.update(a=torch.ones(3)) is tc and (tc.a == 1).all()
    tc.update_(b=torch.full((3,), 2.0))
    assert (tc.b == 2).all() and tc.update() is tc
    assert type(tc.select("a", as_tensordict=True)) is TensorDict
    assert tc.select("a").b is None
    with pytest.raises(TypeError, match="unhashable"):
        hash(tc)

    @tensorclass(frozen=True)
    class Frozen:
        y: torch.Tensor

    f = Frozen(y=torch.zeros(1))
    assert f.is_locked and {f: 0}[f] == 0
    with pytest.raises(AttributeError, match="frozen"):
        f.y = torch.ones(1)
