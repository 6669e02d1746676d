"""Tensorclass annotations as casting targets: string annotations, unions, ``tensor_only``
field forms, deleting a field, comparisons and ``load_memmap`` class identity."""
from __future__ import annotations

from collections import UserDict
from typing import Optional

import pytest
import torch

from chatdata import NonTensorData, TensorClass, TensorDict, tensorclass
from chatdata.td.storage.memmap import MemoryMappedTensor


@tensorclass(autocast=True)
class Leaf:
    t: torch.Tensor
    s: str


@tensorclass(autocast=True)
class Tree:
    t: torch.Tensor
    child: Leaf  # a module-level class, written as a string (future annotations)
    again: "Tree" = None  # the class itself, quoted twice
    maybe: Optional[Leaf] = None
    either: Leaf | None = None


def test_string_annotations_resolve_to_module_classes_and_to_the_class_itself():
    tree = Tree(t=0, child={"t": 1, "s": 2}, again={"t": 3, "child": {"t": 4, "s": "x"}})
    assert isinstance(tree.child, Leaf) and tree.child.s == "2"
    assert isinstance(tree.again, Tree) and isinstance(tree.again.child, Leaf)
    assert tree.again.again is None  # fields missing from the mapping read None


def test_autocast_leaves_union_annotations_alone():
    tree = Tree(t=0, child={"t": 1, "s": "a"}, maybe={"t": 1}, either={"t": 2})
    assert tree.maybe == {"t": 1} and tree.either == {"t": 2}


def test_a_class_defined_in_a_function_can_name_itself_and_globals():
    @tensorclass(autocast=True)
    class Local:
        me: Local
        leaf: Leaf
        x: torch.Tensor = None

    obj = Local(me={"leaf": {"t": 0, "s": "in"}}, leaf={"t": 1, "s": "out"})
    assert isinstance(obj.me, Local) and isinstance(obj.me.leaf, Leaf) and obj.me.leaf.s == "in"


class OnlyTensors(TensorClass["tensor_only"]):
    a: torch.IntTensor
    b: torch.Tensor | None = None
    td: Optional[TensorDict[str, torch.Tensor]] = None
    meta: NonTensorData = None


def test_tensor_only_accepts_tensor_types_generics_and_non_tensor_wrappers():
    obj = OnlyTensors(a=1, td=UserDict({"n": UserDict({"v": torch.ones(())})}), meta=UserDict({"k": "v"}))
    assert isinstance(obj.a, torch.Tensor)
    assert isinstance(obj.td, TensorDict) and isinstance(obj.td["n"], TensorDict) and obj.td["n", "v"] == 1
    assert isinstance(obj.meta, NonTensorData) and obj.meta.data["k"] == "v"


def test_tensor_only_keeps_a_tensordict_and_its_lock():
    locked = TensorDict({"v": torch.ones(())}).lock_()
    obj = OnlyTensors(a=1, td=UserDict({"inner": locked}))
    assert obj.td["inner"] is locked and obj.td["inner"].is_locked


def test_tensor_only_refuses_other_annotations_and_cast_options():
    with pytest.raises(TypeError, match="tensor_only requires types to be Tensor"):
        class Bad(TensorClass["tensor_only"]):
            a: torch.Tensor | str
    with pytest.raises(TypeError, match="tensor_only"):
        @tensorclass(tensor_only=True, nocast=True)
        class Bad2:
            a: torch.Tensor
    with pytest.raises(TypeError, match="tensor_only"):
        @tensorclass(tensor_only=True, autocast=True)
        class Bad3:
            a: torch.Tensor


def test_deleting_a_field_makes_it_absent_until_set_again():
    obj = OnlyTensors(a=1, b=2)
    del obj.b
    assert not hasattr(obj, "b")
    with pytest.raises(AttributeError, match="deleted"):
        obj.b
    obj.b = 3
    assert obj.b == 3
    with pytest.raises(AttributeError):
        del obj.td  # never set: nothing to delete


def test_nocast_keeps_python_values_even_in_tensor_fields():
    @tensorclass(nocast=True)
    class Raw:
        n: torch.Tensor
        flag: bool

    r = Raw(n=3, flag=True)
    assert r.n == 3 and isinstance(r.n, int) and r.flag is True


def test_comparison_with_a_number_leaves_strings_out_and_compares_them_with_strings():
    @tensorclass
    class Named:
        x: torch.Tensor
        name: str

    a = Named(x=torch.zeros(2), name="a", batch_size=[2])
    assert (a == 0).all() and (a == 0).name is None
    assert not (a == Named(x=torch.zeros(2), name="b", batch_size=[2])).all()
    assert (a == a.clone()).all()


def test_memmap_like_gives_zeroed_files_and_keeps_strings(tmp_path):
    @tensorclass
    class Rec:
        x: torch.Tensor
        z: str
        y: "Rec" = None

    r = Rec(torch.randn(3, 4), "foo", Rec(torch.randn(3, 4, 5), "bar", batch_size=[3, 4, 5]), batch_size=[3, 4])
    like = r.memmap_like(tmp_path)
    assert isinstance(like.x, MemoryMappedTensor) and isinstance(like.y.x, MemoryMappedTensor)
    assert (like == 0).all() and like.z == "foo" and like.y.z == "bar"


def test_load_memmap_returns_the_saved_class_whichever_class_loads(tmp_path):
    @tensorclass
    class Saved:
        x: torch.Tensor
        label: str

    @tensorclass
    class Other:
        y: torch.Tensor

    Saved(x=torch.arange(3), label="s", batch_size=[3]).memmap(tmp_path)
    loaded = Other.load_memmap(tmp_path)
    assert type(loaded) is Saved and loaded.label == "s" and loaded.x.tolist() == [0, 1, 2]
