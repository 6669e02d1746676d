"""NonTensor: example data out, any non-tensor value of a fitting shape in."""
import pickle

import numpy as np
import pytest
import torch

from chatdata.specs import NonTensor, Unbounded
from chatdata.td import NonTensorData, NonTensorStack, RaggedTensorDict, TensorDict


def test_defaults_and_repr():
    spec = NonTensor()
    assert spec.shape == torch.Size([1]) and spec.device is None and spec.dtype is None
    assert spec.example_data is None and spec.space is None and spec.domain is None
    assert repr(NonTensor(shape=(-1,), example_data="foo")) == (
        "NonTensor(\n    shape=torch.Size([-1]),\n    space=None,\n    device=None,\n    dtype=None,\n"
        "    domain=None,\n    example_data=foo)"
    )
    assert "device=cpu" in repr(NonTensor(device="cpu"))


def test_zero_one_rand_give_example_data():
    spec = NonTensor(shape=(-1,), example_data="foo")
    assert repr(spec.zero()) == "NonTensorData(data=foo, batch_size=torch.Size([1]), device=None)"
    for make in (spec.zero, spec.one, spec.rand, spec.zeros, spec.ones, spec.sample):
        out = make()
        assert isinstance(out, NonTensorData) and out.data == "foo" and out.batch_size == torch.Size([1])
    lead = spec.zero((2, 3))
    assert lead.batch_size == torch.Size([2, 3, 1]) and lead.data == "foo"
    assert NonTensor(shape=(), example_data=1).zero().batch_size == torch.Size([])
    assert NonTensor(shape=(2, -1), device="cpu").rand().device == torch.device("cpu")


def test_mutable_example_data_is_copied():
    spec = NonTensor(shape=(), example_data={"name": "tool"})
    z = spec.zero()
    z.data["name"] = "changed"
    assert spec.example_data == {"name": "tool"}


def test_is_in_accepts_non_tensor_values_of_fitting_shape():
    spec = NonTensor(shape=(-1,), example_data="foo")
    assert spec.is_in(spec.zero())
    assert spec.is_in(NonTensorData("x", batch_size=[5]))
    assert spec.is_in(NonTensorStack.from_list(["a", "b", "c"]))
    assert spec.is_in(NonTensorStack.from_list([["a", "b"], ["c", "d"]]))  # leading batch dim
    assert spec.is_in(["a", "b"])
    assert spec.is_in("a single value")  # one value fits any batch
    assert spec.is_in(NonTensorData("x"))
    ragged = RaggedTensorDict(NonTensorStack.from_list(["a", "b", "c"]), torch.tensor([0, 1, 3]))
    assert spec.is_in(ragged)
    assert NonTensor(shape=(2, -1)).is_in(ragged)


@pytest.mark.parametrize(
    "spec, value, reason",
    [
        (NonTensor(shape=(3,)), NonTensorData("x", batch_size=[2]), "does not fit"),
        (NonTensor(shape=(3,)), NonTensorStack.from_list(["a", "b"]), "does not fit"),
        (NonTensor(shape=(2, 3)), ["a", "b", "c"], "needs at least 2"),
        (NonTensor(shape=(-1,)), torch.zeros(3), "got a torch.Tensor"),
        (NonTensor(shape=(-1,)), TensorDict(a=torch.zeros(3), batch_size=[3]), "got a TensorDict"),
        (NonTensor(shape=(3,)), RaggedTensorDict(NonTensorStack.from_list(["a", "b", "c"]), torch.tensor([0, 1, 3])), "any length"),
        (NonTensor(shape=(2,), device="cpu"), NonTensorData("x", batch_size=[2], device="meta"), "device meta"),
    ],
)
def test_is_in_refuses_with_a_reason(spec, value, reason):
    assert not spec.is_in(value)
    with pytest.raises(ValueError, match=reason):
        spec.assert_is_in(value)


def test_is_in_never_changes_the_spec():
    spec = NonTensor(shape=(-1,), example_data="foo")
    for v in (NonTensorData("x", batch_size=[4, 2]), ["a"] * 9, torch.zeros(2), "s"):
        spec.is_in(v)
    assert spec.shape == torch.Size([-1]) and spec.example_data == "foo"
    assert spec == NonTensor(shape=(-1,), example_data="foo")


def test_shape_operations():
    spec = NonTensor(shape=(2, -1), example_data="x")
    assert spec.expand(3, 2, 4).shape == torch.Size([3, 2, 4])
    assert spec.expand(3, 2, -1).example_data == "x"
    with pytest.raises(ValueError, match="cannot expand"):
        spec.expand(3, 4)
    assert spec.unsqueeze(0).shape == torch.Size([1, 2, -1])
    assert spec.unsqueeze(-1).shape == torch.Size([2, -1, 1])
    assert spec.unsqueeze(0).squeeze(0) == spec
    assert spec.squeeze() == spec  # -1 is not a dim of length 1
    assert NonTensor(shape=(1, 3, 1)).squeeze().shape == torch.Size([3])
    assert NonTensor(shape=(1, 3, 1)).squeeze(-1).shape == torch.Size([1, 3])
    assert spec[0].shape == torch.Size([-1])
    assert spec[:, 0].shape == torch.Size([2])
    assert spec[1:, 2:].shape == torch.Size([1, -1])
    assert spec[..., None].shape == torch.Size([2, -1, 1])
    assert NonTensor(shape=(4,))[[0, 2]].shape == torch.Size([2])
    with pytest.raises(IndexError):
        spec[2]
    with pytest.raises(IndexError):
        spec.squeeze(3)


def test_clone_to_eq():
    spec = NonTensor(shape=(2,), example_data=["a"])
    c = spec.clone()
    assert c == spec and c.example_data is not spec.example_data
    moved = spec.to("cpu")
    assert moved.device == torch.device("cpu") and moved != spec
    assert spec.to(torch.float64) == spec
    assert NonTensor(example_data="a") != NonTensor(example_data="b")
    assert NonTensor(shape=(2,)) != NonTensor(shape=(3,))
    assert NonTensor() != Unbounded()
    # tensors and arrays compare whole: was "not equal" always, so a spec with an example tensor differed from its clone
    assert NonTensor(example_data=torch.zeros(2)) == NonTensor(example_data=torch.zeros(2))
    assert NonTensor(example_data=np.zeros(2)) == NonTensor(example_data=np.zeros(2)).clone()
    assert NonTensor(example_data=torch.zeros(2)) != NonTensor(example_data=torch.ones(2))
    assert NonTensor(example_data=torch.zeros(2)) != NonTensor(example_data=torch.zeros(3))
    assert NonTensor(example_data=torch.zeros(2)) != NonTensor(example_data=np.zeros(2))
    assert NonTensor(example_data=torch.zeros(2)) != NonTensor(example_data=torch.zeros(2, dtype=torch.int64))
    assert pickle.loads(pickle.dumps(spec)) == spec


def test_bad_arguments():
    with pytest.raises(TypeError, match="unexpected"):
        NonTensor(colour="red")
    with pytest.raises(TypeError, match="dtype"):
        NonTensor(dtype="str")
    with pytest.raises(ValueError, match="any length"):
        NonTensor(shape=(-3,))
    NonTensor(batched=True, feature_dims=1)  # torchrl options are accepted
