"""Indexing and shape operations of TensorDict, and that string entries follow every one of them.

Semantics (as found, and as tensordict/torch have them):
- basic indexing (int, slice, Ellipsis, None) returns views: a write into the result is seen by
  the source, for tensors *and* for string stacks (they share the index tensor);
- fancy indexing (lists, long tensors, bool masks) copies: a write into the result never
  reaches the source, for tensors and strings alike;
- expand is a view (stride 0, same data pointer), never a copy.
"""
from __future__ import annotations

import pytest
import torch

from chatdata import NonTensorData, NonTensorStack, TensorDict


def grid():
    """A 2x3 TensorDict with a tensor, a string stack, a constant string and a nested entry."""
    return TensorDict(
        {
            "x": torch.arange(6).reshape(2, 3),
            "f": torch.arange(6.0).reshape(2, 3, 1).expand(2, 3, 2).clone(),
            "l": [["a", "b", "c"], ["d", "e", "f"]],
            "s": "const",
            "n": {"y": torch.arange(6).reshape(2, 3) * 10, "m": [["A", "B", "C"], ["D", "E", "F"]]},
        },
        [2, 3],
    )


def strings_of(td, key="l"):
    v = td[key]
    return v.tolist() if hasattr(v, "tolist") else v


# every op, applied to the TensorDict and to a plain nested list / tensor of the same layout
OPS = {
    "int": lambda t: t[1],
    "neg_int": lambda t: t[-1],
    "slice": lambda t: t[:, 1:],
    "step_slice": lambda t: t[:, ::2],
    "ellipsis": lambda t: t[..., 1],
    "none": lambda t: t[None],
    "none_mid": lambda t: t[:, None],
    "list": lambda t: t[[1, 0, 1]],
    "long_tensor": lambda t: t[torch.tensor([1, 0])],
    "2d_long": lambda t: t[:, torch.tensor([2, 0])],
    "bool_mask_1d": lambda t: t[torch.tensor([False, True])],
    "bool_mask_2d": lambda t: t[torch.tensor([[True, False, True], [False, True, False]])],
    "pair_int": lambda t: t[1, 2],
    "flip": lambda t: t.flip(0),
    "flip_both": lambda t: t.flip((0, 1)),
    "permute": lambda t: t.permute(1, 0),
    "transpose": lambda t: t.transpose(0, 1),
    "reshape": lambda t: t.reshape(-1),
    "reshape_3_2": lambda t: t.reshape(3, 2),
    "view": lambda t: t.view(3, 2),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "unsqueeze_neg": lambda t: t.unsqueeze(-1),
    "squeeze": lambda t: t.unsqueeze(0).squeeze(0),
    "squeeze_all": lambda t: t.unsqueeze(0).unsqueeze(2).squeeze(),
    "flatten": lambda t: t.flatten(0, 1),
    "unflatten": lambda t: t.flatten(0, 1).unflatten(0, (3, 2)),
    "expand": lambda t: t.expand(4, 2, 3),
    "repeat": lambda t: t.repeat(2, 1),
    "split": lambda t: t.split([1, 2], dim=1)[1],
    "chunk": lambda t: t.chunk(2, dim=1)[1],
    "unbind": lambda t: t.unbind(1)[2],
    "torch_cat": lambda t: torch.cat([t, t.flip(1)], 1),
    "torch_stack": lambda t: torch.stack([t, t.flip(0)], 1),
    "torch_split": lambda t: torch.split(t, 1)[1],
    "torch_unbind": lambda t: torch.unbind(t, 0)[0],
}


def _ref(op, tensor):
    """Apply ``op`` to a plain tensor (torch.cat/stack need lists of tensors)."""
    return op(tensor)


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_keeps_strings_and_tensors_aligned(name):
    op = OPS[name]
    td = grid()
    out = op(td)
    ids = op(torch.arange(6).reshape(2, 3))  # positions of the original elements
    assert out.batch_size == ids.shape
    assert torch.equal(out["x"], ids)
    assert torch.equal(out["n", "y"], ids * 10)
    assert torch.equal(out["f"][..., 0], ids.float())
    letters, caps = "abcdef", "ABCDEF"
    want = [letters[i] for i in ids.reshape(-1).tolist()]
    got_l, got_m = strings_of(out), strings_of(out["n"], "m")
    if ids.ndim == 0:
        assert got_l == want[0] and got_m == caps[int(ids)]
    else:
        flat = NonTensorStack.from_list(got_l, batch_size=ids.shape).tolist()
        assert out.get("l").batch_size == ids.shape
        assert _flatten(flat) == want
        assert _flatten(got_m) == [caps[i] for i in ids.reshape(-1).tolist()]
    assert out["s"] == "const"


def _flatten(x):
    if isinstance(x, list):
        return [y for v in x for y in _flatten(v)]
    return [x]


# -- indexing errors -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "index",
    [5, -4, [0, 5], torch.tensor([7]), (0, 3), (slice(None), 9)],
    ids=["int", "neg", "list", "tensor", "pair", "slice_then_int"],
)
def test_out_of_range_is_index_error(index):
    td = TensorDict({"x": torch.zeros(3, 3), "l": [["a"] * 3] * 3}, [3, 3])
    with pytest.raises(IndexError):
        td[index]


def test_bad_indices():
    td = TensorDict({"x": torch.zeros(3)}, [3])
    with pytest.raises(IndexError, match="too many indices"):
        td[0, 0]
    with pytest.raises(IndexError, match="long or bool"):
        td[torch.tensor([0.5])]
    with pytest.raises(IndexError, match="unsupported index"):
        td[1.5]
    with pytest.raises(IndexError, match="single ellipsis"):
        td[..., ...]
    with pytest.raises(IndexError):
        td[torch.tensor([True, False])]  # mask of the wrong length


def test_index_by_range_and_empty_list():
    td = grid()
    assert td[range(1, 2)]["x"].tolist() == [[3, 4, 5]]
    empty = td[[]]
    assert empty.batch_size == torch.Size([0, 3]) and empty["l"].tolist() == []


def test_scalar_element_of_string_stack_is_its_value():
    td = grid()
    assert td[1, 2]["l"] == "f"
    assert isinstance(td[1, 2]._get_raw("l"), NonTensorData)


# -- views and copies -------------------------------------------------------------------------------
def test_basic_indexing_is_a_view():
    td = grid()
    v = td[1]
    v["x"][0] = 100
    v["l"][0] = "Z"
    assert td["x"][1, 0] == 100
    assert td["l"].tolist()[1][0] == "Z"
    s = td[:, 1:]
    s["x"].zero_()
    assert td["x"][:, 1:].sum() == 0


@pytest.mark.parametrize(
    "index",
    [[1, 0], torch.tensor([1]), torch.tensor([True, True])],
    ids=["list", "long", "mask"],
)
def test_fancy_indexing_copies(index):
    td = grid()
    before_x, before_l = td["x"].clone(), td["l"].tolist()
    f = td[index]
    f["x"].fill_(-1)
    f.get("l")[0, 0] = "Q"
    f.get(("n", "m"))[0, 0] = "Q"
    f[0] = f[0].apply(lambda t: t * 0)
    assert torch.equal(td["x"], before_x)
    assert td["l"].tolist() == before_l
    assert td["n", "m"].tolist() == [["A", "B", "C"], ["D", "E", "F"]]


def test_expand_is_a_view():
    td = TensorDict({"a": torch.arange(3.0), "l": ["x", "y", "z"]}, [3])
    e = td.expand(1000, 3)
    assert e.batch_size == torch.Size([1000, 3])
    assert e["a"].data_ptr() == td["a"].data_ptr()
    assert e["a"].stride() == (0, 1)
    assert e.get("l")[999].tolist() == ["x", "y", "z"]
    single = TensorDict({"x": torch.zeros(3)}, []).expand(1_000_000)
    assert single["x"].stride()[0] == 0
    with pytest.raises(RuntimeError):
        td.expand(4)
    with pytest.raises(ValueError, match="dims"):
        TensorDict({"a": torch.zeros(2, 2)}, [2, 2]).expand(4)


# -- setitem by index -----------------------------------------------------------------------------
def test_setitem_by_index():
    td = grid()
    td[0] = td[1].clone()
    assert td["x"][0].tolist() == [3, 4, 5] and td["l"].tolist()[0] == ["d", "e", "f"]
    td[:, 0] = TensorDict({"x": torch.tensor([7, 7]), "f": torch.zeros(2, 2), "l": ["p", "q"], "s": "const",
                           "n": {"y": torch.zeros(2, dtype=torch.long), "m": ["P", "Q"]}}, [2])
    assert td["x"][:, 0].tolist() == [7, 7] and [r[0] for r in td["l"].tolist()] == ["p", "q"]
    td[torch.tensor([True, False])] = td[[1]]
    assert td["l"].tolist()[0] == td["l"].tolist()[1]


def test_setitem_dict_and_scalar():
    td = TensorDict({"x": torch.zeros(3), "y": torch.zeros(3)}, [3])
    td[1] = {"x": 1.0, "y": 2.0}
    assert td["x"].tolist() == [0.0, 1.0, 0.0] and td["y"].tolist() == [0.0, 2.0, 0.0]
    td[0:2] = 5
    assert td["x"].tolist() == [5.0, 5.0, 0.0]


def test_setitem_changes_a_constant_string_into_a_stack():
    td = TensorDict({"s": "same", "x": torch.zeros(3)}, [3])
    td[1] = TensorDict({"s": "other", "x": 1.0}, [])
    assert td["s"].tolist() == ["same", "other", "same"]


def test_setitem_errors():
    td = TensorDict({"x": torch.zeros(3)}, [3])
    with pytest.raises(IndexError):
        td[10] = TensorDict({"x": 1.0}, [])
    td[0] = TensorDict({"zz": 1.0}, [])  # a new key is allocated (zeros), then written
    assert td["zz"].tolist() == [1.0, 0.0, 0.0]
    td.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        td[0] = TensorDict({"yy": 1.0}, [])


# -- shape-op errors ---------------------------------------------------------------------------------
def test_shape_op_errors():
    td = grid()
    with pytest.raises(RuntimeError):
        td.reshape(4)
    with pytest.raises(ValueError, match="permutation"):
        td.permute(0, 0)
    with pytest.raises((ValueError, IndexError)):
        TensorDict({"x": torch.zeros(3)}, [3]).permute(1)
    with pytest.raises(IndexError, match="out of range"):
        td.unbind(2)
    with pytest.raises(IndexError, match="out of range"):
        td.transpose(0, 5)
    with pytest.raises(ValueError, match="sum"):
        td.split([1, 1], 1)
    with pytest.raises(ValueError, match="positive"):
        td.split(0)


def test_squeeze_non_one_dim_is_noop():
    td = grid()
    assert td.squeeze(0) is td


def test_unbind_split_chunk_shapes():
    td = grid()
    assert [t.batch_size for t in td.unbind(0)] == [torch.Size([3])] * 2
    assert [t.batch_size for t in td.split(2, 1)] == [torch.Size([2, 2]), torch.Size([2, 1])]
    assert [t.batch_size for t in td.chunk(3, 1)] == [torch.Size([2, 1])] * 3
    assert [t.batch_size for t in torch.chunk(td, 2, 1)] == [torch.Size([2, 2]), torch.Size([2, 1])]


# -- stack / cat --------------------------------------------------------------------------------------
def test_stack_and_cat():
    a = TensorDict({"x": torch.zeros(2), "l": ["a", "b"], "s": "same"}, [2])
    b = TensorDict({"x": torch.ones(2), "l": ["c", "d"], "s": "same"}, [2])
    st = torch.stack([a, b], 0)
    assert st.batch_size == torch.Size([2, 2]) and st["l"].tolist() == [["a", "b"], ["c", "d"]]
    assert st["s"] == "same"
    st1 = torch.stack([a, b], 1)
    assert st1["l"].tolist() == [["a", "c"], ["b", "d"]]
    c = torch.cat([a, b])
    assert c.batch_size == torch.Size([4]) and c["l"].tolist() == ["a", "b", "c", "d"]
    assert torch.cat([a, b], dim=-1)["x"].tolist() == [0.0, 0.0, 1.0, 1.0]
    # a stack shares no state with its items
    st.get("l")[0, 0] = "Z"
    assert a["l"].tolist() == ["a", "b"]


def test_stack_strings_that_differ_per_item():
    st = torch.stack([TensorDict(s="a"), TensorDict(s="b")])
    assert st["s"].tolist() == ["a", "b"]
    cat = torch.cat([TensorDict(s="a", batch_size=[2]), TensorDict(s="b", batch_size=[1])])
    assert cat["s"].tolist() == ["a", "a", "b"]


def test_stack_many_small_with_strings():
    items = [TensorDict({"i": torch.tensor(i), "t": f"s{i}"}, []) for i in range(50)]
    st = torch.stack(items)
    assert st["t"].tolist() == [f"s{i}" for i in range(50)]
    assert st[[49, 3]]["t"].tolist() == ["s49", "s3"]
    assert [u["t"] for u in st.unbind(0)][:3] == ["s0", "s1", "s2"]


def test_stack_cat_errors():
    a = TensorDict({"x": torch.zeros(3)}, [3])
    with pytest.raises(KeyError, match="different keys"):
        torch.stack([a, TensorDict({"y": torch.zeros(3)}, [3])])
    with pytest.raises(ValueError, match="concatenate"):
        torch.cat([a, TensorDict({"x": torch.zeros(2, 2)}, [2, 2])])
    with pytest.raises(ValueError, match="empty batch size"):
        torch.cat([TensorDict(), TensorDict()])
    with pytest.raises(ValueError, match="dim 1"):
        torch.stack([a, TensorDict({"x": torch.zeros(4)}, [4])], 1)
    with pytest.raises(IndexError, match="out of range"):
        torch.stack([a, a], 3)
    with pytest.raises(ValueError, match="shapes differ"):
        torch.stack([TensorDict({"x": torch.zeros(3)}, []), TensorDict({"x": torch.zeros(4)}, [])])
    with pytest.raises(TypeError):
        torch.stack([a, torch.zeros(3)])


def test_round_trips():
    td = grid()
    assert (torch.stack(td.unbind(0)) == td).all()
    assert (torch.stack(td.unbind(1), 1) == td).all()
    assert (torch.cat(td.split(1, 1), 1) == td).all()
    assert (torch.cat(td.chunk(2, 0)) == td).all()
    assert (td.flatten(0, 1).unflatten(0, (2, 3)) == td).all()
    assert (td.permute(1, 0).permute(1, 0) == td).all()
    assert (td.flip(1).flip(1) == td).all()
