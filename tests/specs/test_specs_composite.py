"""Composite: nested specs, TensorDict / tensorclass values, checks, shape operations."""
import pickle

import pytest
import torch

from _specs_standin import History
from chatdata.specs import Binary, Bounded, Categorical, Composite, NonTensor, Unbounded
from chatdata.td import NonTensorData, TensorDict


def make():
    return Composite(
        obs=Unbounded(shape=(2, 3)),
        text=NonTensor(shape=(2,), example_data="hi"),
        nested={"mask": Binary(shape=(2, 4)), "deep": {"n": Categorical(5, shape=(2,))}},
        shape=(2,),
    )


def test_construction_forms_agree():
    a = Composite({"x": Unbounded(shape=(3,)), ("n", "y"): Categorical(2, shape=(3,))}, shape=(3,))
    b = Composite(x=Unbounded(shape=(3,)), n=Composite(y=Categorical(2, shape=(3,)), shape=(3,)), shape=(3,))
    c = Composite(shape=(3,))
    c["x"] = Unbounded(shape=(3,))
    c["n", "y"] = Categorical(2, shape=(3,))
    assert a == b == c
    assert isinstance(a["n"], Composite) and a["n"].shape == torch.Size([3])


def test_keys_items_values_get_set_del():
    spec = make()
    assert list(spec.keys()) == ["obs", "text", "nested"]
    assert list(spec.keys(include_nested=True)) == [
        "obs", "text", "nested", ("nested", "mask"), ("nested", "deep"), ("nested", "deep", "n"),
    ]
    assert list(spec.keys(True, True)) == ["obs", "text", ("nested", "mask"), ("nested", "deep", "n")]
    assert ("nested", "deep", "n") in spec.keys(True) and ("nested", "mask") not in spec.keys()
    assert ("nested", "mask") in spec and "missing" not in spec
    assert [k for k, _ in spec.items()] == list(spec.keys()) and len(spec.values(True, True)) == 4
    assert spec["nested", "deep", "n"] == Categorical(5, shape=(2,))
    assert spec.get(("nested", ("deep", "n"))) is spec["nested"]["deep"]["n"]
    assert spec.get("nope", None) is None
    with pytest.raises(KeyError, match="not found"):
        spec["nope"]
    with pytest.raises(KeyError, match="not found"):
        spec["obs", "x"]
    spec.set("extra", Unbounded(shape=(2,)))
    assert "extra" in spec.keys()
    del spec["extra"]
    spec.del_(("nested", "deep", "n"))
    assert ("nested", "deep", "n") not in spec
    assert spec.pop("text") == NonTensor(shape=(2,), example_data="hi")
    assert spec.pop("text", None) is None
    with pytest.raises(KeyError):
        del spec["text"]
    assert len(spec) == 2 and list(spec) == ["obs", "nested"]


@pytest.mark.parametrize("bad", [3, "text", torch.zeros(2), None, [Unbounded()]])
def test_entries_must_be_specs(bad):
    with pytest.raises(TypeError, match="must be specs"):
        Composite(x=bad)
    spec = Composite()
    with pytest.raises(TypeError, match="must be specs"):
        spec["x"] = bad


@pytest.mark.parametrize("key", ["shape", "device", "dtype", ("a", "shape")])
def test_reserved_keys_are_refused(key):
    with pytest.raises(ValueError, match="reserved"):
        Composite({key: Unbounded()})
    with pytest.raises(ValueError, match="reserved"):
        Composite()[key] = Unbounded()


def test_bad_keys_and_arguments():
    with pytest.raises(TypeError, match="keys must be str"):
        Composite()[1] = Unbounded()
    with pytest.raises(TypeError, match="keys must be str"):
        Composite()[("a", 1)] = Unbounded()
    with pytest.raises(TypeError, match="dict of key"):
        Composite([Unbounded()])
    with pytest.raises(TypeError, match="data_cls"):
        Composite(data_cls=3)
    with pytest.raises(KeyError, match="not a Composite"):
        Composite(a=Unbounded(shape=()))["a", "b"] = Unbounded(shape=())


def test_entry_shapes_must_start_with_the_composite_shape():
    with pytest.raises(ValueError, match=r"does not start with the Composite's shape \(2,\)"):
        Composite(x=Unbounded(shape=(3,)), shape=(2,))
    with pytest.raises(ValueError, match="does not start"):
        Composite(x=NonTensor(shape=(5,)), shape=(-1,))
    Composite(x=NonTensor(shape=(-1, 5)), shape=(-1,))


def test_device_is_given_to_entries():
    spec = Composite(a=NonTensor(shape=()), b=Unbounded(shape=()), device="cpu")
    assert spec.device == torch.device("cpu") and spec["a"].device == torch.device("cpu")
    assert spec.zero().device == torch.device("cpu")


def test_zero_one_rand_are_tensordicts_in_the_spec():
    spec = make()
    for make_value in (spec.zero, spec.one, spec.rand, spec.zeros, spec.ones, spec.sample):
        td = make_value()
        assert isinstance(td, TensorDict) and td.batch_size == torch.Size([2])
        assert td["obs"].shape == torch.Size([2, 3]) and td["text"] == "hi"
        assert td["nested", "deep", "n"].shape == torch.Size([2])
        assert spec.is_in(td)
        big = make_value((4,))
        assert big.batch_size == torch.Size([4, 2]) and spec.is_in(big)
    assert spec.zero()["obs"].abs().sum() == 0 and spec.one()["obs"].min() == 1
    with pytest.raises(ValueError, match="-1 is not a length"):
        spec.zero((-1,))


def test_data_cls_values_and_type_check():
    spec = Composite(role=NonTensor(shape=(-1,), example_data="user"), content=NonTensor(shape=(-1,), example_data="hi"), shape=(-1,), data_cls=History)
    h = spec.rand((3,))
    assert type(h) is History and h.batch_size == torch.Size([3, 1]) and h.role == "user"
    assert spec.is_in(h)
    assert not spec.is_in(h.to_tensordict())
    with pytest.raises(ValueError, match="expected a History, got TensorDict"):
        spec.assert_is_in(h.to_tensordict())
    plain = Composite(role=NonTensor(shape=(-1,)), shape=(-1,))
    assert plain.is_in(h) and plain.is_in(h.to_tensordict())  # no data_cls: any collection


def test_is_in_reasons():
    spec = make()
    td = spec.rand()
    assert not spec.is_in({"obs": torch.zeros(2, 3)})
    with pytest.raises(ValueError, match="expected a TensorDict or a tensorclass, got dict"):
        spec.assert_is_in({"obs": torch.zeros(2, 3)})
    td3 = Composite(x=Unbounded(shape=(3,)), shape=(3,)).rand()
    with pytest.raises(ValueError, match="batch size"):
        spec.assert_is_in(td3)
    bad = td.clone()
    bad["nested", "deep", "n"] = torch.tensor([0, 9])
    with pytest.raises(ValueError, match=r"entry 'nested': entry 'deep': entry 'n': .*out of bounds"):
        spec.assert_is_in(bad)
    wrong_dtype = td.clone()
    wrong_dtype["obs"] = torch.zeros(2, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="entry 'obs': dtype torch.float64"):
        spec.assert_is_in(wrong_dtype)
    missing = td.exclude("text")
    with pytest.raises(ValueError, match="missing entry 'text'"):
        spec.assert_is_in(missing)
    wrong_kind = td.clone()
    wrong_kind["text"] = torch.zeros(2)
    assert not spec.is_in(wrong_kind)
    extra = td.clone()
    extra["more"] = torch.zeros(2)
    assert spec.is_in(extra)  # extra entries are fine
    assert Composite(empty=Composite(shape=(2,)), shape=(2,)).is_in(TensorDict(batch_size=[2]))


def test_minus_one_accepts_any_length():
    spec = Composite(ids=Bounded(0, 9, shape=(-1,), dtype=torch.int64), text=NonTensor(shape=(-1,)), shape=(-1,))
    td = TensorDict(ids=torch.arange(7), text=["x"] * 7, batch_size=[7])
    assert spec.is_in(td)
    td["ids"] = torch.arange(7) + 5
    assert not spec.is_in(td)
    assert spec.is_in(TensorDict(ids=torch.zeros(0, dtype=torch.long), batch_size=[0]).set("text", NonTensorData("a", batch_size=[0])))


def test_is_in_never_changes_the_spec():
    spec = make()
    before = spec.clone()
    for v in (spec.rand((3,)), TensorDict(batch_size=[5]), "x", {"obs": 1}):
        spec.is_in(v)
    assert spec == before


def test_expand_unsqueeze_squeeze_index():
    spec = make()
    big = spec.expand(4, 2)
    assert big.shape == torch.Size([4, 2])
    assert big["obs"].shape == torch.Size([4, 2, 3]) and big["nested", "mask"].shape == torch.Size([4, 2, 4])
    assert big["nested", "deep"].shape == torch.Size([4, 2])
    assert spec.is_in(big.rand()) and big.is_in(big.zero())
    assert spec.expand((4, 2)) == big
    with pytest.raises(ValueError, match="cannot expand"):
        spec.expand(3)
    u = spec.unsqueeze(0)
    assert u.shape == torch.Size([1, 2]) and u["obs"].shape == torch.Size([1, 2, 3])
    assert u.squeeze(0) == spec and u.squeeze() == spec and spec.squeeze() == spec
    first = spec[0]
    assert first.shape == torch.Size([]) and first["obs"].shape == torch.Size([3])
    assert first["nested", "mask"].shape == torch.Size([4])
    assert spec[1:]["obs"].shape == torch.Size([1, 3])
    assert spec[...]["obs"].shape == torch.Size([2, 3])
    with pytest.raises(IndexError, match="empty shape"):
        Composite(a=Unbounded(shape=()))[0]
    h = History.default_spec()
    assert h.expand(3, -1).shape == torch.Size([3, -1]) and h.expand(3, -1).data_cls is History
    assert h.expand(3, 5)["role"].shape == torch.Size([3, 5])


def test_clone_to_eq_pickle():
    spec = make()
    c = spec.clone()
    assert c == spec and c["obs"] is not spec["obs"]
    c["obs"] = Unbounded(shape=(2, 4))
    assert c != spec
    moved = spec.to("cpu")
    assert moved.device == torch.device("cpu") and moved != spec
    assert moved["text"].device == torch.device("cpu")
    doubles = spec.to(torch.float64)
    assert doubles["obs"].dtype == torch.float64 and doubles["text"] == spec["text"]
    assert spec.cpu() == moved
    assert History.default_spec() != Composite(role=NonTensor(shape=(-1,), example_data="foo"), content=NonTensor(shape=(-1,), example_data="foo"), shape=(-1,))
    assert spec != "spec"
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert Composite().is_empty() and Composite(a=Composite()).is_empty() and not spec.is_empty()
    assert Composite(a=Composite()).is_empty(recurse=True) and not Composite(a=Composite()).is_empty(recurse=False)
    assert Composite().is_empty(recurse=False)  # torchrl's argument: was a TypeError


def test_repr_nested_and_empty():
    spec = Composite(a=Composite(b=Categorical(3)), shape=())
    assert repr(spec) == (
        "Composite(\n"
        "    a: Composite(\n"
        "        b: Categorical(\n"
        "            shape=torch.Size([]),\n"
        "            space=CategoricalBox(n=3),\n"
        "            device=cpu,\n"
        "            dtype=torch.int64,\n"
        "            domain=discrete),\n"
        "        device=None,\n"
        "        shape=torch.Size([])),\n"
        "    device=None,\n"
        "    shape=torch.Size([]))"
    )
    assert repr(Composite()) == "Composite(\n    device=None,\n    shape=torch.Size([]))"
