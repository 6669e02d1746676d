"""``from_dataclass``: dataclass types and instances become tensorclasses."""
from __future__ import annotations

import dataclasses
from collections import UserDict

import pytest
import torch

from chatdata import TensorDict, is_tensorclass
from chatdata.td import from_dataclass


@dataclasses.dataclass
class Step:
    reward: int
    obs: torch.Tensor
    note: str = "none"
    tags: dict = dataclasses.field(default_factory=dict)

    def doubled(self):
        return self.reward * 2

    @property
    def has_note(self):
        return self.note != "none"


def test_a_type_becomes_a_new_tensorclass_type_and_the_dataclass_is_untouched():
    Steps = from_dataclass(Step)
    assert is_tensorclass(Steps) and Steps is not Step
    assert Steps.__name__ == "Step"
    assert not is_tensorclass(Step) and Step(1, torch.zeros(1)).reward == 1  # dataclass still works
    s = Steps(reward=torch.arange(4), obs=torch.zeros(4, 2), batch_size=[4])
    assert s[1:].reward.tolist() == [1, 2, 3]
    assert s.note == "none" and s.tags == {}  # default and default_factory
    assert s.doubled().tolist() == [0, 2, 4, 6] and s.has_note is False  # methods and properties carried over
    assert from_dataclass(Steps) is Steps  # a tensorclass type is returned as it is


def test_cast_options():
    auto = from_dataclass(Step, autocast=True)(reward=1.0, obs=1, note=3)
    assert auto.reward == 1 and isinstance(auto.reward, int)
    assert isinstance(auto.obs, torch.Tensor) and auto.note == "3"
    raw = from_dataclass(Step, nocast=True)(reward=1, obs=1)
    assert isinstance(raw.reward, int) and isinstance(raw.obs, int)
    plain = from_dataclass(Step)(reward=1, obs=1)
    assert isinstance(plain.reward, torch.Tensor) and isinstance(plain.obs, torch.Tensor)
    frozen = from_dataclass(Step, frozen=True)(reward=1, obs=torch.zeros(1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        frozen.reward = 2


def test_an_instance_becomes_a_tensorclass_instance_sharing_the_tensors():
    obs = torch.zeros(3)
    s = from_dataclass(Step(reward=2, obs=obs, note="hi"))
    assert is_tensorclass(s) and type(s).__name__ == "Step"
    assert s.reward == 2 and s.note == "hi"
    assert s.obs is obs


def test_dest_cls_batch_size_and_auto_batch_size():
    Steps = from_dataclass(Step)
    s = from_dataclass(Step(reward=0, obs=torch.zeros(2, 3)), dest_cls=Steps, batch_size=[2])
    assert type(s) is Steps and s.batch_size == (2,)
    auto = from_dataclass(Step(reward=0, obs=torch.zeros(2, 3)), auto_batch_size=True)
    assert auto.batch_size == ()  # reward is a 0-d tensor: no dim shared by every tensor
    both = from_dataclass(dataclasses.make_dataclass("P", [("a", torch.Tensor), ("b", torch.Tensor)])(
        torch.zeros(2, 3), torch.ones(2, 3, 4)), auto_batch_size=True)
    assert both.batch_size == (2, 3)
    one = from_dataclass(dataclasses.make_dataclass("P", [("a", torch.Tensor)])(torch.zeros(2, 3)),
                         auto_batch_size=True, batch_dims=1)
    assert one.batch_size == (2,)


def test_nested_dataclass_instances_are_converted():
    @dataclasses.dataclass
    class Outer:
        inner: Step
        weight: float

    o = from_dataclass(Outer(inner=Step(reward=1, obs=torch.ones(1)), weight=0.5))
    assert is_tensorclass(o.inner) and o.inner.reward == 1


def test_tensordict_from_dataclass():
    td = TensorDict.from_dataclass(Step(reward=3, obs=torch.ones(2)))
    assert isinstance(td, TensorDict) and td["reward"] == 3 and td["note"] == "none"
    tc = TensorDict.from_dataclass(Step(reward=3, obs=torch.ones(2)), as_tensorclass=True)
    assert is_tensorclass(tc)


def test_tensor_only_keeps_tensordicts_and_converts_mappings():
    @dataclasses.dataclass
    class Holder:
        data: TensorDict

    locked = TensorDict({"t": torch.ones(())}).lock_()
    tc = from_dataclass(Holder(data=locked), tensor_only=True)
    assert tc.data is locked and tc.data.is_locked
    tc2 = from_dataclass(Holder, tensor_only=True)(data=UserDict({"t": torch.zeros(())}))
    assert isinstance(tc2.data, TensorDict) and tc2.data["t"] == 0


def test_bad_input_is_refused_with_clear_errors():
    with pytest.raises(TypeError, match="dataclass"):
        from_dataclass(int)
    with pytest.raises(TypeError, match="dataclass"):
        from_dataclass({"a": 1})
    with pytest.raises(TypeError, match="inplace"):
        from_dataclass(Step, inplace=True)
    with pytest.raises(TypeError, match="tensor_only"):
        from_dataclass(Step, tensor_only=True, autocast=True)
    with pytest.raises(TypeError, match="batch_size"):
        from_dataclass(Step(1, torch.zeros(1)), batch_size=[], auto_batch_size=True)
    with pytest.raises(TypeError, match="dest_cls"):
        from_dataclass(Step(1, torch.zeros(1)), dest_cls=dict)


def test_tensorclass_decorator_over_a_dataclass_uses_its_fields_and_methods():
    from chatdata import tensorclass

    @tensorclass
    @dataclasses.dataclass
    class Pair:
        x: torch.Tensor
        tags: dict = dataclasses.field(default_factory=dict)
        label: str = "a"

        def total(self):
            return self.x.sum()

    p = Pair(x=torch.ones(3), batch_size=[3])
    assert is_tensorclass(p) and p.batch_size == (3,)
    assert p.label == "a" and p.tags == {} and p.total() == 3
    assert p[1:].x.shape == (2,)


def test_instances_of_one_dataclass_convert_to_one_class_and_stack():
    a = from_dataclass(Step(reward=1, obs=torch.zeros(2)))
    b = from_dataclass(Step(reward=2, obs=torch.ones(2)))
    assert type(a) is type(b) is from_dataclass(Step)
    stacked = torch.stack([a, b])
    assert stacked.reward.tolist() == [1, 2] and stacked.obs.shape == (2, 2)
    # other options: another (cached) class; the cache does not keep a dropped dataclass alive
    assert from_dataclass(Step, autocast=True) is from_dataclass(Step, autocast=True) is not from_dataclass(Step)
    import gc
    import weakref

    P = dataclasses.make_dataclass("P", [("a", torch.Tensor)])
    from_dataclass(P(torch.zeros(1)))
    ref = weakref.ref(P)
    del P
    gc.collect()
    assert ref() is None
