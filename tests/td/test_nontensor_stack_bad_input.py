"""NonTensorStack given input it cannot take: a clear error, and nothing changed."""
from __future__ import annotations

import pytest
import torch

from chatdata import NonTensorStack, TensorDict, load_memmap
from chatdata.td.nontensor import BatchSizeError


def test_an_empty_stack_with_a_batch_size_holds_none_everywhere():
    # it built an index into an empty pool: repr, tolist and indexing raised IndexError later
    s = NonTensorStack(batch_size=[2, 3])
    assert s.batch_size == torch.Size([2, 3])
    assert s.tolist() == [[None] * 3] * 2
    assert s[1, 2].data is None and "NonTensorStack(" in repr(s)
    s[0, 1] = "x"
    assert s.tolist() == [[None, "x", None], [None] * 3]
    assert TensorDict({"a": NonTensorStack(batch_size=[2])}, [2])["a"].tolist() == [None, None]
    assert NonTensorStack().batch_size == torch.Size([0]) and NonTensorStack().tolist() == []


@pytest.mark.parametrize("index, value", [
    (slice(0, 2), ["x", "y", "z"]),           # 3 values into 2 elements
    (slice(None), ["x", "y"]),                 # 2 values into 3
    (torch.tensor([0, 2]), [["x", "y"]] * 2),  # an extra dim that is not 1
])
def test_a_stack_of_the_wrong_batch_size_is_refused_and_nothing_changes(index, value):
    # it raised torch's "The expanded size of the tensor (2) must match ..." after the pool took the values
    s = NonTensorStack.from_list(["a", "b", "c"])
    pool_size = len(s._pool)
    with pytest.raises(BatchSizeError, match=r"cannot write a NonTensorStack of batch size .* into the"):
        s[index] = NonTensorStack.from_list(value)
    assert s.tolist() == ["a", "b", "c"] and len(s._pool) == pool_size
    with pytest.raises(ValueError, match="batch size"):  # update() takes the same path
        s.update(NonTensorStack.from_list(["x", "y"]))
    assert s.tolist() == ["a", "b", "c"]


def test_stacks_that_broadcast_are_still_written():
    s = NonTensorStack.from_list([["a", "b"], ["c", "d"]])
    s[:] = NonTensorStack.from_list(["x", "y"])          # (2,) over each row
    assert s.tolist() == [["x", "y"], ["x", "y"]]
    s[0] = NonTensorStack.from_list([["p", "q"]])         # a leading 1 is dropped, as torch does
    assert s.tolist() == [["p", "q"], ["x", "y"]]
    s[torch.tensor([0, 1]), 1] = NonTensorStack.from_list(["z"])
    assert s.tolist() == [["p", "z"], ["x", "z"]]


def test_a_refused_write_leaves_a_memory_mapped_stack_and_its_folder_as_they_were(tmp_path):
    s = NonTensorStack("a", "b", "c").memmap_(tmp_path / "s")
    before = sorted((p.name, p.read_bytes()) for p in (tmp_path / "s").iterdir())
    with pytest.raises(BatchSizeError):
        s[0:2] = NonTensorStack.from_list(["x", "y", "z"])
    assert s.tolist() == ["a", "b", "c"]
    assert sorted((p.name, p.read_bytes()) for p in (tmp_path / "s").iterdir()) == before
    assert load_memmap(tmp_path / "s").tolist() == ["a", "b", "c"]


@pytest.mark.parametrize("condition, other, named", [
    (torch.tensor([True, False]), "z", "the condition"),
    (torch.ones(3, 1, dtype=torch.bool), "z", "the condition"),
    (torch.tensor([True, False, True]), NonTensorStack.from_list(["x", "y"]), "the other stack"),
])
def test_where_names_what_does_not_broadcast(condition, other, named):
    # it raised torch's "The expanded size of the tensor (3) must match the existing size (2) ..."
    s = NonTensorStack.from_list(["a", "b", "c"])
    with pytest.raises(BatchSizeError, match=f"where: {named} has shape .* does not broadcast to the stack's batch size"):
        s.where(condition, other)
    assert s.tolist() == ["a", "b", "c"]
    grid = NonTensorStack.from_list([["a", "b"], ["c", "d"]])  # what broadcasts still works
    assert grid.where(torch.tensor([True, False]), "z").tolist() == [["a", "z"], ["c", "z"]]


def test_a_slice_of_a_column_is_a_view_both_ways():
    # a column built or loaded in order keeps its index as a range; a slice of it was a range of
    # its own, so a write into the slice never reached the column (and the reverse), although
    # basic indexing is documented to give views, as it does once the index is a tensor
    s = NonTensorStack.from_list(["a", "b", "c", "d", "e"])
    tail, every_other = s[1:], s[1:4][::2]
    tail[0] = "B"
    assert s.tolist() == ["a", "B", "c", "d", "e"] and every_other.tolist() == ["B", "d"]
    s[3] = "D"
    assert tail.tolist() == ["B", "c", "D", "e"] and every_other.tolist() == ["B", "D"]
    every_other[1] = "d2"
    assert s.tolist() == ["a", "B", "c", "d2", "e"] and tail.tolist() == ["B", "c", "d2", "e"]
    assert s[4:1].tolist() == []


def test_an_in_place_set_on_a_sliced_tensordict_reaches_its_text_column():
    td = TensorDict({"x": torch.zeros(3), "s": ["a", "b", "c"]}, [3])
    sub = td[1:]
    sub["x"][0] = 5.0
    sub.set_("s", ["Y", "Z"])  # was silently lost, while the tensor beside it was written
    assert td["x"].tolist() == [0.0, 5.0, 0.0] and td["s"].tolist() == ["a", "Y", "Z"]


def test_a_loaded_column_and_its_slices_share_writes_and_copies_do_not(tmp_path):
    import copy
    import pickle

    NonTensorStack.from_list(["a", "b", "c"]).memmap_(tmp_path / "s")
    s = load_memmap(tmp_path / "s").clone()  # an in-memory copy of the loaded column (a range index)
    view = s[1:]
    twin, pickled = copy.deepcopy(view), pickle.loads(pickle.dumps(s))
    view[0] = "B"
    assert s.tolist() == ["a", "B", "c"]
    assert twin.tolist() == ["b", "c"] and pickled.tolist() == ["a", "b", "c"]
