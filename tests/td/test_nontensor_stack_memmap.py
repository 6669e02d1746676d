"""A NonTensorStack memory-mapped on its own (`stack.memmap_(path)`, `_type: "stack"`): it loads
back as a stack, and in-place writes into it save its folder again atomically."""
from __future__ import annotations

import json
import os
import signal

import pytest
import torch

from chatdata.td import NonTensorData, NonTensorStack, TensorDict, load_memmap
from chatdata.td.storage.verify import verify
from chatdata.td.storage.writethrough import DetachedWriteWarning


def _stack():
    return torch.stack([torch.stack([NonTensorData(0), NonTensorData(1)])] * 3)


def test_a_stack_saves_and_loads_as_a_stack(tmp_path):
    s = NonTensorStack.from_list([["a", "é"], ["c", None]])
    path = tmp_path / "s"
    out = s.memmap(path)
    meta = json.loads((path / "meta.json").read_text())
    assert meta["_type"] == "stack" and meta["batch_size"] == [2, 2] and meta["values"]["kind"] == "strings"
    assert sorted(meta["checksums"]) == ["_values.bytes.memmap", "_values.offsets.memmap"]
    back = load_memmap(path, verify=True)
    assert isinstance(back, NonTensorStack) and back.tolist() == s.tolist() == out.tolist()
    assert back.is_memmap() and back.is_locked and verify(path).ok
    assert TensorDict.load_memmap(path).tolist() == s.tolist()


def test_in_place_updates_save_the_folder_again(tmp_path):
    path = tmp_path / "s"
    data = _stack().clone()
    data.memmap_(path)
    assert data.is_memmap() and data[0, 0]._is_memmaped_from_above()
    with pytest.raises(RuntimeError, match="locked"):
        data.update(_stack())
    data.update(torch.stack([torch.stack([NonTensorData(2), NonTensorData(3)])] * 3), inplace=True)
    assert load_memmap(path).tolist() == data.tolist() == [[2, 3]] * 3
    data.update_(NonTensorData(7))
    assert load_memmap(path).tolist() == [[7, 7]] * 3
    data[0, 0] = NonTensorData(99)
    data.update_at_("x", (2, 1))
    assert load_memmap(path, verify=True).tolist() == [[99, 7], [7, 7], [7, "x"]]
    assert sorted(p.name for p in path.parent.iterdir()) == ["s"]  # no temporary folder left


def test_parts_of_a_mapped_stack_refuse_updates(tmp_path):
    path = tmp_path / "s"
    data = _stack().memmap(path)
    for part in (lambda: data[0, 0].update(NonTensorData(1), inplace=True),
                 lambda: data[0].update(NonTensorData(1), inplace=True),
                 lambda: data[1:].update_("y")):
        with pytest.raises(RuntimeError, match=r"write into the memory-mapped stack itself \(stack\[index\] = value"):
            part()
    assert data.tolist() == load_memmap(path).tolist() == [[0, 1]] * 3


def test_one_value_cannot_take_a_stack():
    with pytest.raises(ValueError, match="maybe_to_stack"):
        NonTensorData(1).update(_stack(), inplace=True)
    out = NonTensorData(1, batch_size=[3, 2]).maybe_to_stack().update(_stack(), inplace=True)
    assert out.tolist() == [[0, 1]] * 3


def test_a_refused_value_leaves_memory_and_disk_as_they_were(tmp_path):
    path = tmp_path / "s"
    data = NonTensorStack("a", "b").memmap(path)
    raw = (path / "_values.bytes.memmap").read_bytes()
    with pytest.raises(TypeError, match="cannot save the stack: non-tensor value #1 of type set is not JSON"):
        data[1] = {1, 2}
    assert data.tolist() == ["a", "b"] and load_memmap(path).tolist() == ["a", "b"]
    assert (path / "_values.bytes.memmap").read_bytes() == raw


def test_a_stack_detached_by_another_save_writes_nothing(tmp_path):
    path = tmp_path / "s"
    mine = NonTensorStack("a", "b").memmap(path)
    NonTensorStack("theirs").memmap(path)
    with pytest.warns(DetachedWriteWarning, match="the stack was loaded from"):
        mine[0] = "z"
    assert mine.tolist() == ["z", "b"] and load_memmap(path).tolist() == ["theirs"]


def test_durable_stack_updates(tmp_path):
    path = tmp_path / "s"
    data = NonTensorStack("a").memmap(path, durable=True)
    data[0] = "b"
    assert load_memmap(path, verify=True).tolist() == ["b"]


def test_sigkilled_stack_updates_leave_a_whole_folder(tmp_path):
    path = tmp_path / "s"
    n = 20_000
    NonTensorStack.from_list(["A"] * n).memmap(path)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child: rewrite the column forever
        try:
            torch.set_num_threads(1)
            s = load_memmap(path)
            tag = "B"
            while True:
                s[...] = tag * 3
                os.write(wfd, b".")
                tag = "A" if tag == "B" else "B"
        finally:
            os._exit(1)
    os.close(wfd)
    try:
        assert os.read(rfd, 1) == b"."
        for _ in range(10):  # readers during the rewrites see one whole column
            vals = set(load_memmap(path).tolist())
            assert len(vals) == 1 and vals <= {"A", "BBB", "AAA"}
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(rfd)
    assert len(set(load_memmap(path, verify=True).tolist())) == 1
    NonTensorStack("after").memmap(path)  # a kill's temporary folder never blocks the next save
    assert verify(path).ok and load_memmap(path).tolist() == ["after"]


def test_a_lone_surrogate_written_into_a_stack_is_refused_at_save(tmp_path):
    """Every saved string file is valid UTF-8: values set in memory are checked as a fresh column's are."""
    from chatdata.td import NonTensorStack, load_memmap

    with pytest.raises(ValueError, match=r"item 0 holds a lone surrogate"):
        TensorDict({"s": NonTensorStack("\udc00", "b")}, [2]).memmap(tmp_path / "a")
    s = NonTensorStack("a", "b", "c").memmap_(tmp_path / "s")
    with pytest.raises(ValueError, match="item 0 holds a lone surrogate"):
        s[0] = "\udc00"
    assert load_memmap(tmp_path / "s").tolist() == ["a", "b", "c"] and s.tolist() == ["a", "b", "c"]
