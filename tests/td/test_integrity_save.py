"""Issue 17 (saves never destroy what is not theirs) and issue 15 (saves clean up after dead
writers): foreign files, symlinked targets, long names, orphaned temp folders, lone surrogates."""
from __future__ import annotations

import os
import random
import shutil
import signal
import time
from pathlib import Path

import pytest
import torch

from chatdata import History, NonTensorData, TensorDict, load_memmap
from chatdata.td.storage import find_dead_temps
from chatdata.td.storage.fsops import find_orphans
from chatdata.td.storage.tempdirs import WriterTemp, temp_name

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "tensordict_fixtures"


# -- item 5: a foreign file survives, or the error names it ----------------------------------------
def test_foreign_file_in_target_is_refused_and_kept(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    (d / "important.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="important.txt") as err:
        TensorDict({"a": torch.zeros(2)}, [2]).memmap(d)
    assert str(d) in str(err.value)
    assert (d / "important.txt").read_text() == "keep me"


def test_foreign_file_inside_a_dataset_is_refused_and_kept(tmp_path):
    d = tmp_path / "d"
    TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2)}}, [2]).memmap(d)
    (d / "n" / "notes.md").write_text("mine")
    with pytest.raises(FileExistsError, match="notes.md"):
        TensorDict({"a": torch.ones(2)}, [2]).memmap(d)
    assert (d / "n" / "notes.md").read_text() == "mine"
    assert load_memmap(d)["a"].tolist() == [0, 0]


def test_overwrite_empty_folder_own_dataset_and_tensordict_dataset(tmp_path):
    (tmp_path / "empty").mkdir()
    TensorDict({"a": torch.zeros(2)}, [2]).memmap(tmp_path / "empty")
    TensorDict({"a": torch.ones(2)}, [2]).memmap(tmp_path / "empty")  # our own dataset
    assert load_memmap(tmp_path / "empty")["a"].tolist() == [1, 1]
    td_folder = tmp_path / "td"
    shutil.copytree(FIXTURES / "b_nested" / "data" if (FIXTURES / "b_nested" / "data").exists() else FIXTURES / "b_nested", td_folder)
    TensorDict({"a": torch.ones(2)}, [2]).memmap(td_folder)  # tensordict's own files only
    assert sorted(os.listdir(td_folder)) == ["a.memmap", "meta.json"]


# -- item 6: a symlinked target folder is written through, atomically ------------------------------
def test_symlinked_target_is_written_through(tmp_path):
    real, link = tmp_path / "store" / "real", tmp_path / "link"
    TensorDict({"a": torch.zeros(2)}, [2]).memmap(real)
    link.symlink_to(real)
    out = TensorDict({"a": torch.ones(3)}, [3]).memmap(link)
    assert out["a"].tolist() == [1, 1, 1]
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert load_memmap(real)["a"].tolist() == [1, 1, 1]
    assert sorted(os.listdir(tmp_path)) == ["link", "store"]  # no .link.tmp-* left behind
    assert sorted(os.listdir(real.parent)) == ["real"]


def test_dangling_symlink_target_is_created(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "later")
    History.from_chats([[{"role": "user", "content": "x"}]]).memmap(link)
    assert link.is_symlink() and (tmp_path / "later" / "meta.json").is_file()
    assert History.load_memmap(link).to_chats() == [[{"role": "user", "content": "x"}]]


# -- item 11: a 250-character target name --------------------------------------------------------
def test_long_target_name(tmp_path):
    path = tmp_path / ("n" * 250)
    chats = [[{"role": "user", "content": "long"}]]
    History.from_chats(chats).memmap(path)
    History.from_chats(chats).memmap(path)  # and over it
    assert History.load_memmap(path).to_chats() == chats
    assert os.listdir(tmp_path) == [path.name]


# -- issue 15: orphans of killed saves are removed by the next save; live writers are not touched --
N = 32


def _big(v: int) -> TensorDict:
    return TensorDict({f"t{i}": torch.full((N, 8192), float(v)) for i in range(6)}, [N])  # 6 MiB


def _saver(path: Path, wfd: int) -> None:  # child: save forever
    try:
        torch.set_num_threads(1)
        data = {1: _big(1), 2: _big(2)}
        os.write(wfd, b"r")
        v = 1
        while True:
            v = 3 - v
            data[v].memmap(path)
            os.write(wfd, b"s")
    finally:
        os._exit(1)


def test_sigkilled_saves_leave_orphans_the_next_save_removes(tmp_path):
    data = tmp_path / "data"
    _big(1).memmap(data)
    rng = random.Random(7)
    left = 0
    for attempt in range(40):  # at least 4 kills, and more until one lands inside a save (a loaded
        if attempt >= 4 and left:  # machine may be slow to enter the next save)
            break
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.close(rfd)
            _saver(data, wfd)
        os.close(wfd)
        try:
            assert os.read(rfd, 1) == b"r"
            assert os.read(rfd, 1) == b"s"  # one save done: the child is now inside the next one
            time.sleep(rng.uniform(0.0, 0.05))
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(rfd)
        orphans = find_orphans(data)
        leftovers = {p for p in tmp_path.iterdir() if p.name != "data"}
        for p in leftovers - set(orphans):
            # killed in the microseconds between creating its folder and writing its lock: no
            # lock info yet, so it counts as an orphan only once older than the grace period
            lock = p / "writer.lock"
            assert not lock.exists() or lock.stat().st_size == 0, p
            old = time.time() - 3600
            for q in [p, *p.rglob("*")]:  # untouched: the folder and what is in it
                os.utime(q, (old, old))
        orphans = find_orphans(data)
        assert set(orphans) == leftovers  # every leftover is an orphan
        assert len(orphans) <= 1  # each save removed the orphans of the kills before it
        left += len(orphans)
    assert left, "no kill landed inside a save: the test proved nothing"
    # a live concurrent writer (another open lock) holds its temporary folder
    rfd, wfd = os.pipe()  # child -> parent
    go_r, go_w = os.pipe()  # parent -> child
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            with WriterTemp(data) as live:
                (live.data / "meta.json").write_text("{}")
                os.write(wfd, live.path.name.encode())
                os.read(go_r, 1)  # until the parent says so
        finally:
            os._exit(0)
    wfd, _ = go_w, os.close(wfd)
    live_name = os.read(rfd, 4096).decode()
    try:
        assert (tmp_path / live_name) not in find_orphans(data)
        _big(2).memmap(data)  # one clean save
        assert sorted(os.listdir(tmp_path)) == sorted(["data", live_name])
        assert (tmp_path / live_name / "data" / "meta.json").read_text() == "{}"
    finally:
        os.write(wfd, b"x")
        os.waitpid(pid, 0)
    assert os.listdir(tmp_path) == ["data"]  # only the target remains beside it, whole
    assert bool((load_memmap(data)["t5"] == 2).all())


def test_orphans_of_another_target_are_left_alone(tmp_path):
    with pytest.raises(ZeroDivisionError):
        with WriterTemp(tmp_path / "other"):
            1 / 0
    # a dead writer of "other" whose folder survived (as after a SIGKILL) is not "mine"'s orphan
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        tmp = WriterTemp(tmp_path / "other").__enter__()
        os.write(wfd, tmp.path.name.encode())
        os._exit(0)  # dies holding it: the folder stays, its lock is released
    name = os.read(rfd, 4096).decode()
    os.waitpid(pid, 0)
    assert find_orphans(tmp_path / "mine") == []
    assert find_orphans(tmp_path / "other") == [tmp_path / name]
    TensorDict({"a": torch.zeros(1)}, [1]).memmap(tmp_path / "mine")
    assert (tmp_path / name).exists()


# -- item 10 (td side): lone surrogates in keys and values are refused with the key named ----------
@pytest.mark.parametrize("td,named", [
    (lambda: TensorDict({"a\ud800": torch.zeros(1)}, [1]), "key"),
    (lambda: TensorDict({"v": NonTensorData("x\ud800")}, []), "'v'"),
    (lambda: TensorDict({"s": ["ok", "x\ud800"]}, [2]), "item 1"),
])
def test_lone_surrogates_refused_at_save(tmp_path, td, named):
    with pytest.raises(ValueError, match="surrogate") as err:
        td().memmap(tmp_path / "x")
    assert type(err.value) is ValueError and named in str(err.value)  # not a raw UnicodeEncodeError
    assert not (tmp_path / "x").exists() and os.listdir(tmp_path) == []


def test_a_lockless_folder_counts_only_when_nothing_in_it_was_touched(tmp_path):
    """Before: find_orphans judged a folder without lock info by the folder's own mtime, which a
    writer that has no lock (an older chatdata) does not change while it writes into a file, so
    its live folder was an orphan after a minute (and would be removed); find_dead_temps looked
    inside. Both now follow one rule: untouched means nothing in the folder was modified."""
    old = time.time() - 3600
    folder = tmp_path / temp_name("ds")
    folder.mkdir()
    (folder / "part.bin").write_bytes(b"being written")  # recent: a writer is at work
    os.utime(folder, (old, old))
    assert find_orphans(tmp_path / "ds") == [] and find_dead_temps(tmp_path) == []
    os.utime(folder / "part.bin", (old, old))
    assert find_orphans(tmp_path / "ds") == [folder] and find_dead_temps(tmp_path) == [folder]
    legacy = tmp_path / ".ds.tmp-0123456789ab"  # an old version's folder: the data itself
    legacy.mkdir()
    (legacy / "meta.json").write_text("{}")
    os.utime(legacy, (old, old))
    assert legacy not in find_orphans(tmp_path / "ds") and legacy not in find_dead_temps(tmp_path)
    os.utime(legacy / "meta.json", (old, old))
    assert legacy in find_orphans(tmp_path / "ds") and legacy in find_dead_temps(tmp_path)
    assert find_orphans(tmp_path / "other") == []
