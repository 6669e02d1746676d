"""Tensorclass methods and class rules adopted from tensordict (chatdata.td.tensorclass.methods and
the field rules of chatdata.td.tensorclass.base)."""
from __future__ import annotations

import weakref
from typing import Any, ClassVar

import pytest
import torch
from hypothesis import given, settings, strategies as st

from chatdata import TensorClass, TensorDict, tensorclass
from chatdata.td import lazy_legacy


@tensorclass
class Item:
    x: torch.Tensor
    name: str
    child: "Item" = None


def item(bs=(1, 4)):
    inner = Item(x=torch.ones(*bs, 5), name="inner", batch_size=list(bs))
    return Item(x=torch.ones(*bs, 5), name="outer", child=inner, batch_size=list(bs))


def test_replace_makes_a_copy_with_fields_replaced():
    data = item()
    repl = data.clone().zero_()
    repl.name = "new"
    repl.child.name = "new inner"
    out = data.replace(repl)
    assert type(out) is Item and type(out.child) is Item
    assert (out.name, out.child.name) == ("new", "new inner")
    assert (data.name, data.child.name) == ("outer", "inner")  # untouched
    assert (out.x == 0).all() and (data.x == 1).all()
    assert data.replace(name="kw").name == "kw" and data.replace({"name": "d"}).name == "d"
    with pytest.raises(TypeError, match="at most one positional"):
        data.replace({}, {})
    with pytest.raises(AttributeError, match="Cannot set the attribute 'nope'"):
        data.replace(nope=1)


def test_get_and_get_at_defaults_and_bad_keys():
    @tensorclass
    class Data:
        td: TensorDict
        a: torch.Tensor

    data = Data(td=TensorDict(), a=torch.zeros(()))
    assert data.get("b") is None and data.get("b", "else") == "else"
    assert data.get(("td", "missing"), "else") == "else"
    assert data.get("batch_size") == torch.Size([])
    with pytest.raises(KeyError, match="Only NestedKeys are supported. Got key"):
        data.get(("td", str))
    wide = data.expand(10)
    assert wide.get_at("a", 0) is not None
    assert wide.get_at("b", 0) is None and wide.get_at(("td", "missing"), 0, "else") == "else"


def test_class_constructors_return_the_subclass():
    class MC(TensorClass):
        foo: Any
        bar: Any

    class Child(MC):
        pass

    out = MC.from_list([{"foo": 1, "bar": 2}, {"foo": 3, "bar": 4}])
    assert type(out) is MC and out.foo.tolist() == [1, 3] and out.batch_size == (2,)
    assert type(Child.from_list([{"foo": 1, "bar": 2}])) is Child
    keyed = MC.fromkeys(["foo", "bar"], 0)
    assert type(keyed) is MC and keyed.bar.item() == 0
    mc = MC(foo=torch.zeros(3), bar=torch.ones(3), batch_size=[3])
    for name in ("stack", "cat", "lazy_stack", "maybe_dense_stack"):
        assert type(getattr(MC, name)([mc, mc])) is MC
    assert MC.cat([mc, mc]).batch_size == (6,) and MC.stack([mc, mc], 1).batch_size == (3, 2)
    with pytest.raises(TypeError, match="needs MC instances"):
        MC.stack([mc, TensorDict(foo=torch.zeros(3), bar=torch.ones(3), batch_size=[3])])
    with pytest.raises(ValueError, match="non-empty"):
        MC.from_list([])


def test_shape_ops_as_context_managers_write_back():
    @tensorclass
    class Grid:
        X: torch.Tensor
        z: str

    data = Grid(X=torch.ones(3, 4, 5), z="text", batch_size=[3, 4])
    with data.view(-1) as flat:
        assert isinstance(flat, Grid) and flat.batch_size == (12,)
        flat.X *= 0
    assert (data.X == 0).all()
    empty = Grid(X=None, z="text", batch_size=[3, 4])
    with empty.view(-1) as flat:
        flat.X = torch.arange(60.0).reshape(12, 5)
    assert torch.equal(empty.X, torch.arange(60.0).reshape(3, 4, 5))
    with empty.permute(1, 0) as p:
        assert p.batch_size == (4, 3)
        p.X = p.X + 1
    assert torch.equal(empty.X, torch.arange(60.0).reshape(3, 4, 5) + 1)
    with empty.transpose(0, 1) as t:
        t.X = torch.zeros(4, 3, 5)
    assert (empty.X == 0).all() and empty.z == "text"


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=3))
def test_view_write_back_round_trip(shape):
    @tensorclass
    class T:
        a: torch.Tensor

    t = T(a=torch.arange(float(torch.Size(shape).numel())).reshape(*shape, 1), batch_size=shape)
    expected = t.a * 2
    with t.reshape(-1) as flat:
        flat.a = flat.a * 2
    assert torch.equal(t.a, expected) and t.batch_size == tuple(shape)


def test_fields_rules():
    @tensorclass
    class WithClassVar:
        a: torch.Tensor
        b: ClassVar[str] = "constant"
        c: torch.Tensor

    assert WithClassVar.__expected_keys__ == {"a", "c"}
    w = WithClassVar(torch.ones(2), torch.zeros(2), batch_size=[2])
    assert w.b == "constant" and w.c.shape == (2,)
    with pytest.raises(TypeError, match="takes 3 positional arguments but 5 were given"):
        WithClassVar(torch.ones(2), "constant", torch.zeros(2), 42)
    with pytest.raises(TypeError, match=r"missing 2 required positional arguments: 'a' and 'c'"):
        WithClassVar(batch_size=[2])
    with pytest.raises(AttributeError, match="Attribute name reshape can't be used with @tensorclass"):
        @tensorclass
        class Bad:
            x: torch.Tensor
            reshape: torch.Tensor

    @tensorclass(shadow=True)
    class Shadowing:
        reshape: torch.Tensor

    assert Shadowing(reshape=torch.ones(())).reshape.item() == 1.0


def test_private_fields_hold_values():
    @tensorclass
    class Y:
        _z: weakref.ref

        @property
        def z(self):
            return self._z()

    obj = torch.ones(())
    y0, y1 = Y(weakref.ref(obj), batch_size=[1]), Y(weakref.ref(obj), batch_size=[1])
    assert "_z" in Y.__expected_keys__ and y0.z is obj
    assert torch.cat([y0, y1]).z is obj and torch.stack([y0, y1]).z is obj


def test_device_cannot_be_assigned():
    n = item()
    with pytest.raises(RuntimeError, match="device cannot be set using tensorclass.device = device"):
        n.device = torch.device("cpu")


def test_post_init_runs_on_from_tensordict():
    @tensorclass
    class Positive:
        X: torch.Tensor

        def __post_init__(self):
            if not (self.X > 0).all():
                raise ValueError("X must be positive")

    Positive._from_tensordict(TensorDict(X=torch.ones(2), batch_size=[2]))
    with pytest.raises(ValueError, match="positive"):
        Positive._from_tensordict(TensorDict(X=-torch.ones(2), batch_size=[2]))


def test_setitem_needs_the_same_fields():
    @tensorclass
    class A:
        x: torch.Tensor
        y: torch.Tensor

    @tensorclass
    class B:
        y: torch.Tensor
        x: torch.Tensor

    @tensorclass
    class C:
        x: torch.Tensor
        z: torch.Tensor

    a = A(x=torch.zeros(3, 2), y=torch.zeros(3, 2), batch_size=[3, 2])
    a[:2] = B(x=torch.ones(3, 2), y=torch.ones(3, 2), batch_size=[3, 2])[:2]
    assert a.x[:2].eq(1).all() and a.x[2].eq(0).all()
    with pytest.raises(ValueError, match="same-class or compatible class .* assignment"):
        a[:2] = C(x=torch.ones(3, 2), z=torch.ones(3, 2), batch_size=[3, 2])[:2]


def test_shadow_repr_shows_fields_then_shape():
    @tensorclass(shadow=True)
    class S:
        batch_size: Any
        device: Any

    text = repr(S(batch_size=0, device=0))
    assert "batch_size=Tensor(" in text and "device=Tensor(" in text and "shape=torch.Size([])" in text
    assert "\n    device=None" not in text and "\n    batch_size=torch.Size" not in text


def test_to_inplace_and_dtype():
    td = TensorDict(a=torch.ones(2), b={"c": torch.zeros(2)}, batch_size=[2])
    assert td.dtype == torch.float32
    assert td.to(torch.float64, inplace=True) is td and td.dtype == torch.float64
    assert td.to("cpu", inplace=True) is td and td.device == torch.device("cpu")
    td["i"] = torch.arange(2)
    assert td.dtype is None  # mixed
    n = item()
    assert n.to("cpu", inplace=True) is n


def test_lazy_legacy_is_off():
    assert lazy_legacy() is False
    n = item()
    assert isinstance(n.permute(1, 0)._tensordict, TensorDict)
