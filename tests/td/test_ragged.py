"""Ragged stacks: torch.stack of TensorDicts whose first dim differs."""
from __future__ import annotations

import pickle
import re
import warnings

import pytest
import torch

from chatdata import RaggedTensorDict, TensorDict


def items():
    a = TensorDict({"x": torch.zeros(2), "s": ["p", "q"]}, [2])
    b = TensorDict({"x": torch.ones(3), "s": ["u", "v", "w"]}, [3])
    c = TensorDict({"x": torch.full((1,), 2.0), "s": ["z"]}, [1])
    return [a, b, c]


def ragged():
    return torch.stack(items())


def test_batch_size_shows_minus_one():
    r = ragged()
    assert isinstance(r, RaggedTensorDict)
    assert r.batch_size == torch.Size([3, -1])
    assert len(r) == 3 and r.lengths.tolist() == [2, 3, 1]
    assert "batch_size=torch.Size([3, -1])" in repr(r)


def test_indexing_returns_the_original_items():
    src = items()
    r = torch.stack(src)
    for i, item in enumerate(src):
        got = r[i]
        assert got.batch_size == item.batch_size
        assert (got == item).all()
        assert got["s"].tolist() == item["s"].tolist()
    assert r[-1]["s"].tolist() == ["z"]
    assert [t["s"].tolist() for t in r] == [["p", "q"], ["u", "v", "w"], ["z"]]
    assert [t.batch_size[0] for t in r.unbind(0)] == [2, 3, 1]


def test_column_index_and_reordering():
    r = ragged()
    assert r[:, 0]["s"].tolist() == ["p", "u", "z"]
    assert r[:, 0]["x"].tolist() == [0.0, 1.0, 2.0]
    assert r[:, -1]["s"].tolist() == ["q", "w", "z"]
    rev = r[[1, 0]]
    assert rev.batch_size == torch.Size([2, -1])
    assert rev[0]["s"].tolist() == ["u", "v", "w"] and rev[1]["s"].tolist() == ["p", "q"]
    assert r[1:][0]["s"].tolist() == ["u", "v", "w"]
    assert r[torch.tensor([True, False, True])][1]["s"].tolist() == ["z"]
    assert r[torch.tensor([2, 0])][0]["x"].tolist() == [2.0]
    assert r[...].batch_size == r.batch_size


def test_entries():
    r = ragged()
    assert r.get("s").tolist() == [["p", "q"], ["u", "v", "w"], ["z"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = r.get("x")
    assert nt.is_nested
    assert [t.tolist() for t in nt.unbind()] == [[0.0, 0.0], [1.0, 1.0, 1.0], [2.0]]
    assert set(r.keys()) == {"x", "s"}
    with pytest.raises(KeyError):
        r.get("zz")
    assert r.get("zz", None) is None


def test_equal_length_items_give_a_dense_view():
    """Items of one length read as a dense (n, length, ...) tensor that shares the values' memory,
    so boolean-mask indexing works (torch has none for nested tensors)."""
    values = TensorDict({"x": torch.arange(6.0).reshape(6, 1), "m": torch.tensor([0, 1, 1, 0, 0, 1])}, [6])
    r = RaggedTensorDict(values, torch.tensor([0, 3, 6]))
    x = r.get("x")
    assert not x.is_nested and x.shape == (2, 3, 1)
    assert x.data_ptr() == values["x"].data_ptr()
    assert r["m"].tolist() == [[0, 1, 1], [0, 0, 1]]
    assert r["x"][r["m"].bool()].flatten().tolist() == [1.0, 2.0, 5.0]
    x[1, 0, 0] = 42.0  # a view: writes reach the stack
    assert r[1]["x"][0].item() == 42.0


def test_unequal_or_empty_items_stay_nested():
    values = TensorDict({"x": torch.arange(3)}, [3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert RaggedTensorDict(values, torch.tensor([0, 1, 3])).get("x").is_nested
        assert RaggedTensorDict(values, torch.tensor([0, 0, 3])).get("x").is_nested


def test_set_from_nested_lists():
    r = ragged()
    r.set("t", [["1", "2"], ["3", "4", "5"], ["6"]])
    assert r[1]["t"].tolist() == ["3", "4", "5"]
    with pytest.raises(ValueError, match="lengths"):
        r.set("bad", [["1"], ["2"], ["3"]])


def test_whole_collection_ops():
    r = ragged()
    assert (r == r.clone()).all()
    c = r.clone()
    c[1]["x"].fill_(9)
    assert r[1]["x"].tolist() == [1.0, 1.0, 1.0]
    doubled = r.apply(lambda t: t * 2)
    assert doubled[1]["x"].tolist() == [2.0, 2.0, 2.0]
    back = pickle.loads(pickle.dumps(r))
    assert back.batch_size == r.batch_size and back[1]["s"].tolist() == ["u", "v", "w"]
    both = torch.cat([r, r])
    assert both.batch_size == torch.Size([6, -1]) and both[4]["s"].tolist() == ["u", "v", "w"]
    r.lock_()
    assert r.is_locked
    r.unlock_()


def test_errors():
    r = ragged()
    with pytest.raises(IndexError, match="out of range"):
        r[5]
    with pytest.raises(IndexError, match="out of range"):
        r[:, 2]  # the third item has one element
    with pytest.raises(RuntimeError, match="ragged"):
        r.reshape(-1)
    with pytest.raises(ValueError, match="dim 0"):
        r.unbind(1)
    with pytest.raises(ValueError):
        torch.stack([r, r])


def test_memmap_like_keeps_the_items_boundaries_and_zeroes_the_values(tmp_path):
    """memmap_like allocates the values without copying them; the offsets are the stack's shape,
    so they are written (a zero-filled offsets file used to make the folder unloadable)."""
    from chatdata import load_memmap

    r = RaggedTensorDict(TensorDict({"x": torch.arange(5.0)}, [5]), torch.tensor([0, 2, 5]))
    like = r.memmap_like(tmp_path / "r")
    assert like.offsets.tolist() == [0, 2, 5] and like.values["x"].tolist() == [0.0] * 5
    back = load_memmap(tmp_path / "r")
    assert [len(item["x"]) for item in back] == [2, 3]


def test_to_dict_gives_each_entry_as_get_does(tmp_path):
    """A tokenized batch (and the token set loaded back) turns into plain dicts as a TensorDict does."""
    import chatdata
    from chatdata import NonTensorStack

    values = TensorDict({"ids": torch.arange(5), "text": NonTensorStack(*"abcde"),
                         "sub": TensorDict({"w": torch.ones(5)}, [5])}, [5])
    r = RaggedTensorDict(values, torch.tensor([0, 2, 2, 5]))
    for got in (r.to_dict(), (r.memmap(tmp_path / "r"), chatdata.load_memmap(tmp_path / "r"))[1].to_dict()):
        assert sorted(got) == ["ids", "sub", "text"]
        assert [t.tolist() for t in got["ids"].unbind()] == [[0, 1], [], [2, 3, 4]]
        assert got["text"] == [["a", "b"], [], ["c", "d", "e"]]
        assert [t.tolist() for t in got["sub"]["w"].unbind()] == [[1.0, 1.0], [], [1.0, 1.0, 1.0]]
    same = RaggedTensorDict(TensorDict({"ids": torch.arange(4)}, [4]), torch.tensor([0, 2, 4])).to_dict()
    assert same["ids"].tolist() == [[0, 1], [2, 3]]  # equal lengths: a dense tensor, as get gives


@pytest.mark.parametrize("offsets, err, what", [
    ([0, 3, 1, 4], ValueError, "offsets must not decrease: offset 2 is 1, after 3"),  # was accepted
    ([0, 1.5, 4], TypeError, "offsets must be integers, got dtype torch.float32"),   # was cut to [0, 1, 4]
    (torch.tensor([0.0, 4.0]), TypeError, "must be integers"),
    ([], ValueError, "1-D int64 tensor starting at 0"),
])
def test_ragged_offsets_that_are_not_item_bounds_are_refused(offsets, err, what):
    with pytest.raises(err, match=re.escape(what)):
        RaggedTensorDict(TensorDict({"x": torch.arange(4)}, [4]), offsets)


def test_ragged_values_need_a_batch_dim_and_int32_offsets_are_widened():
    with pytest.raises(ValueError, match="values must be batched along their first dim"):
        RaggedTensorDict(TensorDict({}, []), [0])  # was "tuple index out of range"
    r = RaggedTensorDict(TensorDict({"x": torch.arange(4)}, [4]), torch.tensor([0, 2, 4], dtype=torch.int32))
    assert r.offsets.dtype == torch.int64 and r[1]["x"].tolist() == [2, 3]
    assert r[1:][0]["x"].tolist() == [2, 3] and r[[1, 0]].offsets.tolist() == [0, 2, 4]  # derived stacks
