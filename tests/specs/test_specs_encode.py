"""``encode`` (torchrl's name): numbers, lists and numpy arrays into values of the spec. It
was missing (AttributeError). Unlike torchrl's, it checks the result and never reshapes,
truncates or wraps: torchrl's ``encode([1.5])`` on an int spec gives 1, ``[300]`` on int8 44."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from chatdata import History
from chatdata.specs import Bounded, Categorical, Composite, NonTensor, Unbounded


def test_leaf_specs_encode_numbers_lists_and_arrays():
    out = Unbounded((2, 3)).encode(np.zeros((2, 3)))
    assert out.dtype == torch.float32 and out.shape == (2, 3)
    assert Bounded(0, 10, shape=(2,), dtype=torch.int64).encode([1, 2]).tolist() == [1, 2]
    assert Categorical(3, shape=(2,)).encode(np.array([1.0, 2.0])).tolist() == [1, 2]  # whole floats are fine
    assert Unbounded((2,), dtype=torch.bool).encode([1, 0]).tolist() == [True, False]
    assert Unbounded((), dtype=torch.float64).encode(0.1).item() == 0.1


@pytest.mark.parametrize("spec, value, match", [
    (Bounded(0, 10, shape=(2,), dtype=torch.int64), [1.5, 2], "cannot encode 1.5 at index .0,. as torch.int64"),
    (Unbounded((2,), dtype=torch.int8), [300, 1], "it would become 44"),
    (Unbounded((2,), dtype=torch.bool), [2, 0], "it would become True"),
    (Categorical(3, shape=(2,)), [float("nan"), 1.0], "cannot encode nan"),
    (Unbounded((2,)), np.array([1e300, 1.0]), "it would become inf"),
    (Bounded(0.0, 1.0, shape=(2,)), [2.0, 0.0], "out of bounds"),
    (Unbounded((2, 3)), np.zeros(6), "needs at least 2"),  # never reshaped
    (Categorical(3, shape=(2,), mask=[True, False, True]), [1, 0], "masked category"),
])
def test_what_does_not_fit_is_refused(spec, value, match):
    with pytest.raises(ValueError, match=match):
        spec.encode(value)


def test_composite_encode_builds_a_tensordict_of_the_spec():
    spec = Composite(obs=Unbounded((2, 3)), act=Categorical(4, shape=(2,)), t=NonTensor(shape=(2,)),
                     nested=Composite(r=Bounded(0.0, 1.0, shape=(2, 1)), shape=(2,)), shape=(2,))
    td = spec.encode({"obs": np.zeros((2, 3)), "act": [0, 1], "nested": {"r": [[0.5], [0.5]]}, "t": ["a", "b"]})
    assert spec.is_in(td) and td.batch_size == (2,) and td["t"] == ["a", "b"]
    history = History.default_spec().encode({"role": ["user", "assistant"], "content": ["hi", "hello"]})
    assert isinstance(history, History) and history.role == ["user", "assistant"]
    ragged = Composite(a=Unbounded((-1, 2)), t=NonTensor(shape=(-1,)), shape=(-1,))
    td = ragged.encode({"a": np.zeros((5, 2)), "t": "same for all"})
    assert td.batch_size == (5,) and ragged.is_in(td)


@pytest.mark.parametrize("values, err, match", [
    ({"obs": np.zeros((2, 3))}, ValueError, "missing entry 'act'"),
    ({"zz": 1}, KeyError, "no entry 'zz'"),
    ({"obs": np.zeros((2, 3)), "act": [0, 9]}, ValueError, "out of bounds"),
    ({"nested": 5}, TypeError, "takes a dict"),
    ([1], TypeError, "takes a dict"),
])
def test_composite_encode_refusals_name_the_entry(values, err, match):
    spec = Composite(obs=Unbounded((2, 3)), act=Categorical(4, shape=(2,)),
                     nested=Composite(r=Unbounded((2,)), shape=(2,)), shape=(2,))
    with pytest.raises(err, match=match):
        spec.encode(values)
    ragged = Composite(a=Unbounded((-1, 2)), b=Unbounded((-1,)), shape=(-1,))
    with pytest.raises(ValueError, match="disagree on the length of dim 0"):
        ragged.encode({"a": np.zeros((5, 2)), "b": np.zeros(4)})
