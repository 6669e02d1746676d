"""TensorClass given input it cannot take: a clear error, and nothing changed."""
from __future__ import annotations

import pytest
import torch

from chatdata.td import TensorDict, tensorclass
from chatdata.td.tensorclass import register_tensorclass, registered_classes, registered_tensorclass


@tensorclass
class Sample:
    x: torch.Tensor
    label: str


def test_from_tensordict_refuses_what_is_not_a_tensordict():
    # a dict was wrapped as the storage: the object broke at its first use with
    # "AttributeError: 'dict' object has no attribute '_get_raw'"
    for bad in ({"x": torch.zeros(2)}, [torch.zeros(2)], torch.zeros(2)):
        with pytest.raises(TypeError, match=r"Sample.from_tensordict needs a TensorDict .*Sample.from_dict"):
            Sample.from_tensordict(bad)
    s = Sample.from_dict({"x": torch.zeros(2), "label": "a"}, batch_size=[2])  # what the message points to
    assert s.label == "a" and s.x.shape == (2,)
    assert Sample.from_tensordict(TensorDict(x=torch.ones(2), batch_size=[2])).x.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("name, error", [(5, TypeError), (None, TypeError), (("a", "b"), TypeError), ("", ValueError)])
def test_register_tensorclass_needs_a_class_name(name, error):
    # a non-str name was stored and never matched a saved class name: a silent no-op
    before = registered_classes()
    with pytest.raises(error, match="register_tensorclass needs"):
        register_tensorclass(name, Sample)
    assert registered_classes() == before
    register_tensorclass("otherlib.BadInputSample", Sample)
    assert registered_tensorclass("otherlib.BadInputSample") is Sample
