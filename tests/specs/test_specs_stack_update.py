"""``torch.stack`` of specs and ``Composite.update``, two torchrl operations that were missing:
``torch.stack([spec, spec])`` failed inside torch ("expected Tensor as element 0 ... but got
UnboundedContinuous"), ``spec.update(...)`` was an AttributeError."""
from __future__ import annotations

import pytest
import torch

from chatdata import History
from chatdata.specs import Binary, Bounded, Categorical, Composite, NonTensor, Unbounded


def _spec():
    return Composite(obs=Unbounded((2, 3)), act=Categorical(4, shape=(2,)),
                     nested=Composite(r=Bounded(0.0, 1.0, shape=(2, 1)), shape=(2,)), shape=(2,))


@pytest.mark.parametrize("spec", [Unbounded((2, 3)), Bounded(-1.0, 1.0, shape=(2,)), Categorical(4, shape=(-1,)),
                                  Binary(3), NonTensor(shape=(2,), example_data="x"), _spec()])
@pytest.mark.parametrize("dim", [0, -1])
def test_stacking_equal_specs_adds_a_dim(spec, dim):
    out = torch.stack([spec, spec.clone(), spec.clone()], dim)
    want = list(spec.shape)
    want.insert(dim % (spec.ndim + 1), 3)
    assert type(out) is type(spec) and list(out.shape) == want
    assert out.is_in(out.rand()) and out.is_in(torch.stack([spec.zero()] * 3, dim))


def test_stacking_bounded_specs_stacks_their_bounds():
    out = torch.stack([Bounded(0.0, 1.0, shape=(2,)), Bounded(0.0, 2.0, shape=(2,))])
    assert out.high.tolist() == [[1.0, 1.0], [2.0, 2.0]]
    assert out.is_in(torch.tensor([[0.5, 0.5], [1.5, 1.5]])) and not out.is_in(torch.tensor([[1.5, 1.5], [0.5, 0.5]]))
    nested = torch.stack([Composite(a=Bounded(0.0, 1.0, shape=(2,)), shape=(2,)),
                          Composite(a=Bounded(0.0, 3.0, shape=(2,)), shape=(2,))], 1)
    assert nested.shape == (2, 2) and nested["a"].high.tolist() == [[1.0, 3.0], [1.0, 3.0]]


def test_stacking_categoricals_stacks_their_masks():
    masked = Categorical(3, shape=(2,), mask=torch.tensor([True, False, True]))
    out = torch.stack([masked, Categorical(3, shape=(2,))])
    assert out.mask.shape == (2, 2, 3) and set(out.rand((200,))[:, 0].unique().tolist()) == {0, 2}
    assert out.is_in(torch.tensor([[0, 2], [1, 1]])) and not out.is_in(torch.tensor([[1, 1], [1, 1]]))


def test_stacking_keeps_data_cls():
    spec = History.default_spec()
    assert isinstance(torch.stack([spec, spec.clone()]).rand(), History)


@pytest.mark.parametrize("specs, match", [
    ([Unbounded((2,)), Unbounded((3,))], r"shape torch.Size\(\[2\]\) and torch.Size\(\[3\]\)"),
    ([Unbounded((2,)), Bounded(0.0, 1.0, shape=(2,))], "a UnboundedContinuous and a BoundedContinuous"),
    ([Unbounded((2,)), Unbounded((2,), dtype=torch.float64)], "dtype"),
    ([Categorical(3), Categorical(4)], r"differ in n \(3 and 4\)"),
    ([NonTensor(example_data="a"), NonTensor(example_data="b")], "differ in example_data"),
    ([Composite(a=Unbounded((2,)), shape=(2,)), Composite(b=Unbounded((2,)), shape=(2,))], "keys differ"),
    ([Unbounded((2,)), torch.zeros(2)], "a UnboundedContinuous and a Tensor"),
])
def test_specs_that_do_not_stack_say_why(specs, match):
    with pytest.raises(ValueError, match=match):
        torch.stack(specs)


def test_other_torch_functions_name_torch_stack():
    with pytest.raises(TypeError, match="cat does not take specs"):
        torch.cat([Unbounded((2,)), Unbounded((2,))])
    with pytest.raises(IndexError, match="out of range"):
        torch.stack([Unbounded((2,))] * 2, dim=3)


def test_update_sets_entries_and_merges_sub_composites():
    spec = _spec()
    nested = spec["nested"]
    spec.update(Composite(nested=Composite(q=Unbounded((2,)), shape=(2,)), extra=Unbounded((2, 5)), shape=(2,)))
    assert list(spec.keys(True)) == ["obs", "act", "nested", ("nested", "r"), ("nested", "q"), "extra"]
    assert spec["nested"] is nested  # updated in place, not replaced
    spec.update({"obs": Bounded(0.0, 1.0, shape=(2, 3)), ("deep", "x"): Unbounded((2,))})
    assert type(spec["obs"]).__name__ == "BoundedContinuous" and ("deep", "x") in spec.keys(True)
    assert spec.update({}) is spec


@pytest.mark.parametrize("bad, err", [
    ({"e1": Unbounded((2,)), "extra": Unbounded((3,))}, ValueError),
    ({"e1": Unbounded((2,)), "nested": {"z": Unbounded((3,))}}, ValueError),
    ({"e1": Unbounded((2,)), ("obs", "x"): Unbounded((2,))}, KeyError),
    ({"e1": Unbounded((2,)), "shape": Unbounded((2,))}, ValueError),
    ({"e1": Unbounded((2,)), "x": None}, TypeError),
    (7, TypeError),
])
def test_a_refused_update_leaves_the_spec_as_it_was(bad, err):
    # torchrl sets the entries before the bad one; here it is all or nothing
    spec = _spec()
    with pytest.raises(err):
        spec.update(bad)
    assert spec == _spec()
