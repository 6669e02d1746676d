"""Atomic saves: a save killed with SIGKILL leaves the old folder or the new one, whole."""
from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
import torch

from chatdata import TensorDict, load_memmap
from chatdata.td.storage.fsops import atomic_replace

N = 64


def make(v: int) -> TensorDict:
    return TensorDict({
        **{f"t{i}": torch.full((N, 4096), float(v)) for i in range(6)},  # 6 x 1 MiB
        "s": [f"version {v} item {i} " * (v + i % 3) for i in range(N)],
        "nested": {"x": torch.full((N, 3), v, dtype=torch.int64), "tag": [f"v{v}"] * N},
    }, [N])


def _check_whole(path: Path) -> int:
    td = load_memmap(path)
    v = int(td["nested", "x"][0, 0])
    assert v in (1, 2)
    expected = make(v)
    assert (td == expected).all(), f"folder mixes versions (nested says {v})"
    assert td["s"].tolist() == expected["s"].tolist()
    assert td["nested", "tag"].tolist() == [f"v{v}"] * N
    return v


def _writer(path: Path, wfd: int) -> None:  # in the forked child: save forever
    try:
        torch.set_num_threads(1)
        versions = {1: make(1), 2: make(2)}
        v = 0
        os.write(wfd, b"r")
        while True:
            v = v % 2 + 1
            versions[v].memmap(path)
            os.write(wfd, b"s")
    finally:
        os._exit(1)


def test_sigkill_mid_save_leaves_old_or_new(tmp_path):
    data = tmp_path / "data"
    make(1).memmap(data)
    rng = random.Random(1234)
    seen, saves = set(), 0
    for _ in range(8):
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            _writer(data, wfd)
        os.close(wfd)
        try:
            assert os.read(rfd, 1) == b"r"
            time.sleep(rng.uniform(0.01, 0.3))
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        saves += len(os.read(rfd, 1 << 16))
        os.close(rfd)
        seen.add(_check_whole(data))
        # stray temp siblings may remain; they are hidden and never loaded as the data
        for p in tmp_path.iterdir():
            if p.name != "data":
                assert p.name.startswith(".data.") and (".tmp-" in p.name or ".old-" in p.name), p.name
    assert saves > 3, "the writer never completed a save: the kills proved nothing"
    assert seen <= {1, 2}
    # a normal save over the folder still works after all the kills
    TensorDict({"a": torch.ones(2)}, [2]).memmap(data)
    assert load_memmap(data)["a"].tolist() == [1, 1]


def test_failed_save_keeps_old_and_cleans_temp(tmp_path):
    TensorDict({"a": torch.zeros(3)}, [3]).memmap(tmp_path / "x")

    bad = TensorDict({"a": torch.ones(3), "z": ["ok", "ok", {1}]}, [3])
    with pytest.raises(TypeError):
        bad.memmap(tmp_path / "x")
    assert sorted(os.listdir(tmp_path)) == ["x"]
    assert load_memmap(tmp_path / "x")["a"].tolist() == [0, 0, 0]


def test_atomic_replace_swaps_and_refuses_files(tmp_path):
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "f").write_text("new")
    (tmp_path / "dest").mkdir()
    (tmp_path / "dest" / "f").write_text("old")
    atomic_replace(tmp_path / "new", tmp_path / "dest")
    assert (tmp_path / "dest" / "f").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["dest"]
    (tmp_path / "file").write_text("x")
    (tmp_path / "new2").mkdir()
    with pytest.raises(FileExistsError):
        atomic_replace(tmp_path / "new2", tmp_path / "file")


def test_save_over_memmapped_folder_keeps_old_maps_valid(tmp_path):
    old = TensorDict({"a": torch.arange(5.0), "s": ["a", "b", "c", "d", "e"]}, [5]).memmap(tmp_path / "x")
    s_old = old["s"]
    new = TensorDict({"a": torch.arange(5.0) * 10, "s": ["v", "w", "x", "y", "z"]}, [5]).memmap(tmp_path / "x")
    assert old["a"].tolist() == [0, 1, 2, 3, 4] and s_old.tolist() == ["a", "b", "c", "d", "e"]
    assert new["a"].tolist() == [0, 10, 20, 30, 40] and new["s"].tolist() == ["v", "w", "x", "y", "z"]
