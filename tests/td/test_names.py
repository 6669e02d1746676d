"""names= on batch dims: chatdata does not name batch dims, so names given are refused with an error that
says so (before: dropped without a word, ``td.names`` read all None); None, or a list of None, passes."""
from __future__ import annotations

import pytest
import torch

from chatdata import TensorDict, tensorclass


@tensorclass
class Pair:
    foo: torch.Tensor


@tensorclass(shadow=True)
class Named:
    names: str


@pytest.mark.parametrize("make", [
    lambda names: TensorDict({"a": torch.zeros(1, 2)}, [1, 2], names=names),
    lambda names: Pair(foo=torch.zeros(1, 2), batch_size=[1, 2], names=names),
])
def test_names_are_refused_none_passes(make):
    with pytest.raises(ValueError, match="does not name batch dims"):
        make(["first", "second"])
    assert make(None).names == [None, None] and make([None, None]).names == [None, None]


def test_a_field_called_names_is_a_field():
    assert Named(names="x", batch_size=[]).names == "x"


def test_from_dict_checks_names_and_refuses_unknown_options():
    with pytest.raises(ValueError, match="does not name batch dims"):
        TensorDict.from_dict({"a": torch.zeros(2)}, batch_size=[2], names=["b"])
    with pytest.raises(TypeError, match="unexpected options \\['batchsize'\\]"):
        TensorDict.from_dict({"a": torch.zeros(2)}, batchsize=[2])
    with pytest.raises(ValueError, match="does not name batch dims"):
        Pair.from_dict({"foo": torch.zeros(2)}, batch_size=[2], names=["b"])
    assert TensorDict.from_dict({"a": torch.zeros(2)}, batch_size=[2], names=[None]).batch_size == (2,)
