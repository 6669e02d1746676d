"""Tensorclass state dicts: flat / nested / legacy layouts, round trips, and refused input."""
from __future__ import annotations

import collections
import io

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from chatdata import tensorclass


@tensorclass
class Node:
    x: torch.Tensor
    z: str
    y: "Node" = None


def _tree(seed: int = 0) -> Node:
    g = torch.Generator().manual_seed(seed)
    return Node(x=torch.randn(3, generator=g), z="root", y=Node(x=torch.randn(3, generator=g), z="leaf"))


def test_flat_layout_names_tensors_by_path_and_keeps_class_and_strings_in_metadata():
    sd = _tree().state_dict()
    assert list(sd) == ["x", "y.x"]
    assert sd._metadata[""]["_non_tensor"] == {"z": "root"}
    assert sd._metadata["y"]["_non_tensor"] == {"z": "leaf"}
    assert sd._metadata[""]["_type"].endswith("Node")
    assert sd._metadata[""]["batch_size"] == []


def test_flat_round_trip_restores_tensors_and_strings():
    tc, other = _tree(0), _tree(1)
    other.z, other.y.z = "changed", "changed too"
    other.load_state_dict(tc.state_dict())
    assert torch.equal(other.x, tc.x) and torch.equal(other.y.x, tc.y.x)
    assert (other.z, other.y.z) == ("root", "leaf")


def test_nested_layout_round_trip():
    tc, other = _tree(0), _tree(1)
    sd = tc.state_dict(flatten=False)
    assert set(sd) == {"x", "y"} and set(sd["y"]) == {"x"}
    other.load_state_dict(sd)
    assert torch.equal(other.y.x, tc.y.x) and other.y.z == "leaf"


def test_load_creates_a_missing_nested_tensorclass_of_the_annotated_class():
    tc = _tree()
    empty = Node(x=torch.zeros(3), z="")
    empty.load_state_dict(tc.state_dict())
    assert isinstance(empty.y, Node)
    assert torch.equal(empty.y.x, tc.y.x) and empty.y.z == "leaf"


def test_legacy_layout_loads():
    @tensorclass
    class Two:
        a: torch.Tensor
        b: torch.Tensor

    tc = Two(a=torch.zeros(2), b=torch.zeros(2))
    legacy = collections.OrderedDict(
        _tensordict=collections.OrderedDict(a=torch.ones(2), b=torch.full((2,), 2.0), __batch_size=torch.Size([]),
                                            __device=None),
        _non_tensordict={},
    )
    tc.load_state_dict(legacy)
    assert tc.a.tolist() == [1.0, 1.0] and tc.b.tolist() == [2.0, 2.0]


def test_batched_string_stack_round_trips():
    @tensorclass
    class Batch:
        x: torch.Tensor
        label: str

    b = Batch(x=torch.arange(3.0), label=["a", "b", "c"], batch_size=[3])
    other = Batch(x=torch.zeros(3), label=["", "", ""], batch_size=[3])
    other.load_state_dict(b.state_dict())
    assert other.label == ["a", "b", "c"] and other.x.tolist() == [0.0, 1.0, 2.0]


def test_state_dict_survives_torch_save_and_weights_only_load():
    tc = _tree()
    buf = io.BytesIO()
    torch.save(tc.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=True)  # no unpickling of arbitrary objects
    other = _tree(5)
    other.load_state_dict(sd)
    assert torch.equal(other.x, tc.x) and other.y.z == "leaf"


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=6), st.text(max_size=8),
       st.booleans())
def test_round_trip_property(values, text, flatten):
    tc = Node(x=torch.tensor(values), z=text, y=Node(x=torch.tensor(values) * 2, z=text[::-1]))
    other = Node(x=torch.zeros(len(values)), z="", y=Node(x=torch.zeros(len(values)), z=""))
    other.load_state_dict(tc.state_dict(flatten=flatten))
    assert torch.equal(other.x, tc.x) and torch.equal(other.y.x, tc.y.x)
    assert (other.z, other.y.z) == (text, text[::-1])


# -- refused input: clear errors, object unchanged ---------------------------------------------
def _snapshot(tc):
    return tc.x.clone(), tc.y.x.clone(), tc.z, tc.y.z


def _unchanged(tc, snap):
    x, yx, z, yz = snap
    return torch.equal(tc.x, x) and torch.equal(tc.y.x, yx) and (tc.z, tc.y.z) == (z, yz)


def test_unknown_tensor_key_is_refused_before_anything_changes():
    src, tc = _tree(0), _tree(1)
    sd = src.state_dict()
    sd["a"] = torch.zeros(1)
    snap = _snapshot(tc)
    with pytest.raises(KeyError, match="Key 'a' wasn't expected in the state-dict"):
        tc.load_state_dict(sd)
    assert _unchanged(tc, snap)


def test_unknown_non_tensor_key_is_refused():
    sd = _tree().state_dict()
    sd._metadata[""]["_non_tensor"]["a"] = "x"
    with pytest.raises(KeyError, match="Key 'a' wasn't expected"):
        _tree(1).load_state_dict(sd)


def test_unknown_key_in_a_nested_state_dict_names_its_path():
    sd = _tree().state_dict(flatten=False)
    sd["y"]["a"] = torch.zeros(1)
    with pytest.raises(KeyError, match="y.a"):
        _tree(1).load_state_dict(sd)


def test_shape_mismatch_is_refused_and_leaves_the_object_whole():
    src, tc = _tree(0), _tree(1)
    sd = src.state_dict()
    sd["y.x"] = torch.zeros(5)
    snap = _snapshot(tc)
    with pytest.raises(RuntimeError, match="y.x.*shape"):
        tc.load_state_dict(sd)
    assert _unchanged(tc, snap)


def test_missing_tensor_is_refused_when_strict_and_ignored_otherwise():
    src, tc = _tree(0), _tree(1)
    sd = src.state_dict()
    del sd["y.x"]
    with pytest.raises(KeyError, match="missing"):
        tc.load_state_dict(sd)
    old = tc.y.x.clone()
    tc.load_state_dict(sd, strict=False)
    assert torch.equal(tc.x, src.x) and torch.equal(tc.y.x, old)


def test_non_tensor_value_under_a_tensor_key_and_non_mapping_are_refused():
    sd = _tree().state_dict()
    sd["x"] = "not a tensor"
    with pytest.raises(TypeError, match="expected a tensor"):
        _tree(1).load_state_dict(sd)
    with pytest.raises(TypeError, match="mapping"):
        _tree(1).load_state_dict([1, 2])


def test_assign_replaces_tensors_of_another_shape():
    tc = _tree()
    tc.load_state_dict({"x": torch.zeros(7), "y.x": torch.zeros(7)}, assign=True)
    assert tc.x.shape == (7,) and tc.y.x.shape == (7,)


def _batched_tree():
    return Node(x=torch.zeros(2), z="root", y=Node(x=torch.zeros(2), z="leaf", batch_size=[2]), batch_size=[2])


def _sd_with(tensors, metadata):
    sd = _batched_tree().state_dict()
    sd.clear()
    sd.update(tensors)
    sd._metadata = metadata
    return sd


def _refused_and_unchanged(sd, exc, match, strict=True):
    tc = _batched_tree()
    snap = _snapshot(tc)
    with pytest.raises(exc, match=match):
        tc.load_state_dict(sd, strict=strict)
    assert _unchanged(tc, snap) and list(tc.batch_size) == [2] and list(tc.y.batch_size) == [2]


def test_bad_child_batch_size_is_refused_before_the_root_changes():
    sd = _sd_with({"x": torch.ones(2), "y.x": torch.ones(2)},
                  {"": {"batch_size": [2], "_non_tensor": {"z": "NEW"}}, "y": {"batch_size": [3]}})
    _refused_and_unchanged(sd, ValueError, "y.x")


@pytest.mark.parametrize("bs", ["ab", [-1], [1.5], [True]])
def test_malformed_batch_size_metadata_is_refused(bs):
    sd = _sd_with({"x": torch.ones(2), "y.x": torch.ones(2)}, {"y": {"batch_size": bs}})
    _refused_and_unchanged(sd, ValueError, "'y'.*batch_size must be a list of ints")


def test_child_batch_size_must_start_with_the_parents():
    sd = _sd_with({"x": torch.ones(2), "y.x": torch.ones(2)}, {"": {"batch_size": [2]}, "y": {"batch_size": []}})
    _refused_and_unchanged(sd, ValueError, "'y'.*does not start with its parent")


@pytest.mark.parametrize("strict", [True, False])
def test_non_tensor_entry_cannot_replace_a_tensor_field(strict):
    sd = _sd_with({"y.x": torch.ones(2)}, {"": {"_non_tensor": {"x": "oops", "z": "NEW"}}})
    _refused_and_unchanged(sd, RuntimeError, "non-tensor entry 'x' would replace Node.x, which is a tensor", strict)


def test_non_tensor_entry_cannot_replace_a_nested_tensorclass():
    sd = _sd_with({"x": torch.ones(2)}, {"": {"_non_tensor": {"y": "oops", "z": "NEW"}}})
    _refused_and_unchanged(sd, RuntimeError, "'y' would replace Node.y, which is a collection", strict=False)


def test_legacy_non_tensordict_must_be_a_mapping():
    legacy = {"_tensordict": {"x": torch.ones(2), "y": {"x": torch.ones(2)}}, "_non_tensordict": ["z"]}
    _refused_and_unchanged(legacy, TypeError, "'_non_tensordict' is a list, expected a mapping")


def test_non_tensor_metadata_must_be_a_mapping():
    sd = _sd_with({"x": torch.ones(2), "y.x": torch.ones(2)}, {"y": {"_non_tensor": ["z"]}})
    _refused_and_unchanged(sd, TypeError, "'_non_tensor' of 'y' is a list")
