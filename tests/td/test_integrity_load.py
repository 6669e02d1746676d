"""Issue 17 (loads never return wrong data) and issue 15 (links refused): loading a corrupt or
concurrently replaced folder gives the data of one save, whole, or a FormatError naming the file."""
from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
import torch

from chatdata import FormatError, History, TensorDict, load_memmap

A, B, C, D = ({"role": "user", "content": t} for t in "abcd")


def _saved_history(tmp_path) -> Path:
    path = tmp_path / "h"
    History.from_chats([[A], [B, C], [D]]).memmap(path)
    return path


def _write_i64(path: Path, values) -> None:
    path.write_bytes(torch.tensor(values, dtype=torch.int64).numpy().tobytes())


def _edit(path: Path, fn) -> None:
    meta = json.loads(path.read_text())
    fn(meta)
    path.write_text(json.dumps(meta))


# -- item 1: conversation offsets ---------------------------------------------------------------
@pytest.mark.parametrize("offsets", [(0, 1, 10**15, 4), (0, 3, 1, 4), (0, 2, 1, 4), (0, -1, 3, 4)])
def test_corrupt_conversation_offsets_name_the_file(tmp_path, offsets):
    path = _saved_history(tmp_path)
    off_file = path / "_storage" / "_offsets.memmap"
    _write_i64(off_file, offsets)
    with pytest.raises(FormatError, match=str(off_file)):
        History.load_memmap(path).to_chats()  # checked at load or, at the latest, on the first read
    with pytest.raises(FormatError, match=str(off_file)):
        History.load_memmap(path)[1].content  # noqa: B018 - any read, not only to_chats


def test_offsets_of_another_length_name_a_file(tmp_path):
    path = _saved_history(tmp_path)
    _write_i64(path / "_storage" / "_offsets.memmap", (0, 3, 10, 3, 10))
    with pytest.raises(FormatError, match="_offsets.memmap"):
        History.load_memmap(path).to_chats()
    _edit(path / "_storage" / "meta.json", lambda m: m["offsets"].update(shape=[5]))
    with pytest.raises(FormatError, match=str(path / "_storage")):
        History.load_memmap(path).to_chats()


def test_intact_history_loads_and_offsets_check_is_lazy_but_once(tmp_path):
    path = _saved_history(tmp_path)
    h = History.load_memmap(path)
    assert h.to_chats() == [[A], [B, C], [D]]
    assert h[1].to_chats() == [B, C]
    import pickle

    assert pickle.loads(pickle.dumps(h)).to_chats() == [[A], [B, C], [D]]


# -- item 2: no torn reads while another process overwrites the folder ---------------------------
N_CONV = 40


def _dataset(tag: str):
    role = {"A": "user", "B": "tool"}[tag]  # same byte sizes, different bytes
    return [[{"role": role, "content": f"{tag}{i:04d}" * (1 + i % 5)}, {"role": role, "content": tag * 30}]
            for i in range(N_CONV)]


def _fork_writer(path: Path, tags: str):
    """A child that saves the datasets ``tags`` (in turn) to ``path`` until killed; it
    writes one byte per save to the pipe, b'!' when its own memmap() returned other data."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.close(rfd)
            torch.set_num_threads(1)
            data = {t: (History.from_chats(_dataset(t)), _dataset(t)) for t in tags}
            os.write(wfd, b"r")
            while True:
                for t in tags:
                    out = data[t][0].memmap(path)
                    os.write(wfd, b"s" if out.to_chats() == data[t][1] else b"!")
        finally:
            os._exit(1)
    os.close(wfd)
    assert os.read(rfd, 1) == b"r"
    return pid, rfd


def _stop(pid: int, rfd: int) -> bytes:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.set_blocking(rfd, False)
    out = b""
    try:
        while chunk := os.read(rfd, 1 << 16):
            out += chunk
    except BlockingIOError:
        pass
    os.close(rfd)
    return out


def test_concurrent_overwrite_loads_one_save_whole(tmp_path):
    path = tmp_path / "ds"
    History.from_chats(_dataset("A")).memmap(path)
    want = {"A": _dataset("A"), "B": _dataset("B")}
    pid, rfd = _fork_writer(path, "AB")
    seen, loads = set(), 0
    try:
        deadline = time.monotonic() + 3.0  # a bound on the test's length, not an assertion
        while time.monotonic() < deadline or loads < 20:
            chats = History.load_memmap(path).to_chats()
            tag = "A" if chats == want["A"] else "B" if chats == want["B"] else None
            assert tag is not None, f"load {loads} mixes two saves: {chats[:1]}"
            seen.add(tag)
            loads += 1
    finally:
        saves = _stop(pid, rfd)
    assert b"!" not in saves
    assert saves.count(b"s") >= 2, "the writer never finished two saves: the test proved nothing"


# -- item 7: two writers, each memmap() returns its own save --------------------------------------
def test_two_writers_each_get_their_own_save(tmp_path):
    path = tmp_path / "ds"
    writers = [_fork_writer(path, "A"), _fork_writer(path, "B")]
    try:
        time.sleep(2.0)  # let them race (a bound on the test's length)
    finally:
        results = [_stop(pid, rfd) for pid, rfd in writers]
    for out in results:
        assert b"!" not in out, "a writer's memmap() returned another writer's data"
        assert out.count(b"s") >= 1
    chats = History.load_memmap(path).to_chats()
    assert chats in (_dataset("A"), _dataset("B"))


# -- item 8: deep JSON, a value-kind conversation stack, no 'format' ----------------------------
def test_deeply_nested_meta_json_is_a_format_error(tmp_path):
    path = _saved_history(tmp_path)
    meta = path / "_storage" / "_values" / "meta.json"
    meta.write_text('{"format": "chatdata", "version": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(FormatError, match=str(meta)):
        History.load_memmap(path)


def test_value_kind_conversation_stack_is_a_format_error(tmp_path):
    path = _saved_history(tmp_path)
    meta = path / "_storage" / "meta.json"
    _edit(meta, lambda m: m.update(values={"kind": "value", "value": [1, 2]}))
    with pytest.raises(FormatError, match=str(meta)):
        History.load_memmap(path)


def test_meta_without_format_names_the_file(tmp_path):
    path = _saved_history(tmp_path)
    meta = path / "_storage" / "_values" / "meta.json"
    _edit(meta, lambda m: m.pop("format"))
    with pytest.raises(FormatError, match=str(meta)):
        History.load_memmap(path)


# -- item 12: corrupt batch_size and version values -----------------------------------------------
@pytest.mark.parametrize("where,field,value", [
    ("meta.json", "batch_size", "x"), ("meta.json", "batch_size", [99, -1]),
    ("_storage/meta.json", "batch_size", "x"), ("_storage/meta.json", "batch_size", [99, -1]),
    ("_storage/meta.json", "batch_size", [3, -1, 1]), ("meta.json", "version", True),
    ("_storage/_values/meta.json", "version", True), ("_storage/meta.json", "version", 0),
])
def test_corrupt_batch_size_and_version(tmp_path, where, field, value):
    path = _saved_history(tmp_path)
    _edit(path / where, lambda m: m.update({field: value}))
    with pytest.raises(FormatError, match=str(path / where)):
        History.load_memmap(path)


# -- issue 15: a link anywhere inside a dataset is refused ----------------------------------------
@pytest.mark.parametrize("inside", ["a.memmap", "s.bytes.memmap", "n/c.memmap", "n", "meta.json"])
def test_symlink_inside_dataset_is_refused(tmp_path, inside):
    root = tmp_path / "x"
    TensorDict({"a": torch.arange(3.0), "s": ["a", "b", "c"], "n": {"c": torch.ones(3)}}, [3]).memmap(root)
    target = root / inside
    elsewhere = tmp_path / "elsewhere"
    shutil.move(str(target), str(elsewhere))
    target.symlink_to(elsewhere)
    with pytest.raises(FormatError, match=str(target)) as err:
        load_memmap(root)
    assert "link" in str(err.value)


def test_symlinked_dataset_folder_itself_loads(tmp_path):
    root = tmp_path / "x"
    TensorDict({"a": torch.arange(3.0)}, [3]).memmap(root)
    (tmp_path / "link").symlink_to(root)
    assert load_memmap(tmp_path / "link")["a"].tolist() == [0, 1, 2]


# -- string offsets handed to Arrow without a copy -----------------------------------------------
TOOL_CHATS = [[A, {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}],
              [B, C]]


@pytest.mark.parametrize("column", ["content", "role", "tool_calls"])
@pytest.mark.parametrize("damage", ["huge", "decreasing", "negative"])
def test_corrupt_string_offsets_are_a_format_error_before_arrow_reads_them(tmp_path, column, damage):
    """A zero-copy Arrow array over a decreasing or out-of-range offset reads outside the mapped
    file (a bus error killed the process); the column's offsets are checked whole first."""
    pytest.importorskip("pyarrow")
    path = tmp_path / "h"
    History.from_chats(TOOL_CHATS).memmap(path)
    off_file = path / "_storage" / "_values" / f"{column}.offsets.memmap"
    off = torch.frombuffer(bytearray(off_file.read_bytes()), dtype=torch.int64)
    off[2] = {"huge": 10**12, "decreasing": 0, "negative": -5}[damage]  # first and last stay right
    _write_i64(off_file, off.tolist())
    h = History.load_memmap(path)  # loading checks first and last only: O(1)
    for json_mode in ("typed", "text"):
        with pytest.raises(FormatError, match=rf"{off_file}: corrupt offsets"):
            h.to_arrow(json=json_mode)
    with pytest.raises(FormatError, match=str(off_file)):
        h.message_column(column).to_arrow()
    assert History.load_memmap(path).message_column(column)[0] == {"role": "user", "content": "a"}.get(
        column)  # a value whose own range is whole still reads


def test_packed_columns_from_a_caller_are_checked_before_arrow_sees_them():
    from chatdata import NonTensorStack

    stack = NonTensorStack.from_packed(torch.tensor(list(b"abc"), dtype=torch.uint8), torch.tensor([0, 2, 1, 3]))
    with pytest.raises(ValueError, match="corrupt offsets: offset 2 is 1, after 2"):
        stack.packed_column()
    assert stack[2:].to_arrow().to_pylist() == ["bc"]  # a range checks its own offsets (1, 3): whole
    with pytest.raises(ValueError, match=r"values 0:1 span bytes 0:7, the data holds 3"):
        NonTensorStack.from_packed(torch.tensor(list(b"abc"), dtype=torch.uint8),
                                   torch.tensor([0, 7, 1, 3]))[:1].to_arrow()
    good = NonTensorStack.from_packed(torch.tensor(list(b"abc"), dtype=torch.uint8), torch.tensor([0, 1, 1, 3]))
    assert good.to_arrow().to_pylist() == ["a", "", "bc"]


@pytest.mark.parametrize("bad", [-5, 100, 2**31, 2**62])
@pytest.mark.parametrize("pick", ["step", "list", "save", "arrow"])
def test_a_pick_of_values_over_corrupt_offsets_is_a_format_error_not_other_bytes(tmp_path, bad, pick):
    """Picking values out of order gathers their byte ranges at once: a negative offset used to
    wrap round and hand back other values' bytes (saved again, they passed verify), a huge one
    to allocate gigabytes or raise a bare torch error."""
    path = tmp_path / "h"
    History.from_chats([[{"role": "user", "content": c}] for c in ["aa", "bb", "cc", "dd"]]).memmap(path)
    off_file = path / "_storage" / "_values" / "content.offsets.memmap"
    _write_i64(off_file, [0, 2, bad, 6, 8])
    h = History.load_memmap(path)
    read = {"step": lambda: h[::2].content, "list": lambda: h[[1, 2]].to_chats(),
            "save": lambda: h[::2].memmap(tmp_path / "copy", copy_existing=True), "arrow": lambda: h[[0, 2]].to_arrow()}[pick]
    with pytest.raises(FormatError, match=rf"{off_file}: corrupt offsets: value \d spans bytes"):
        read()
    assert not (tmp_path / "copy").exists()


@pytest.mark.parametrize("shape", [[0, 2**64], [2**40, 2**40], [2**63]])
def test_a_shape_no_file_can_hold_is_a_format_error_for_load_and_verify(tmp_path, shape):
    """[0, 2**64] holds no item, yet torch and numpy cannot count it: verify raised OverflowError."""
    from chatdata.td.storage import verify

    path = tmp_path / "td"
    TensorDict({"x": torch.zeros(0, 3)}, [0]).memmap(path)
    _edit(path / "meta.json", lambda m: m["entries"]["x"].update(shape=shape))
    with pytest.raises(FormatError, match="counts more items than a file can hold"):
        load_memmap(path)
    report = verify(path)
    assert not report.ok and "counts more items than a file can hold" in report.problems[0].message
