"""In-place updates of a memory-mapped NonTensorData are written through to its folder's
meta.json, atomically (chatdata/td/storage/writethrough.py): a reader sees the old value or the new one,
verify passes, bad values change nothing, a replaced folder is never edited."""
from __future__ import annotations

import json
import os
import signal
import shutil

import pytest
import torch

from chatdata.td import NonTensorData, TensorDict, load_memmap
from chatdata.td.storage.fsops import FormatError
from chatdata.td.storage.verify import verify
from chatdata.td.storage.writethrough import DetachedWriteWarning


def _saved(path, **values):
    td = TensorDict({"x": torch.arange(4.0), **{k: NonTensorData(v) for k, v in values.items()},
                     "sub": TensorDict({"note": NonTensorData("n0")}, [])}, [])
    return td.memmap(path)


def _meta(path):
    return json.loads((path / "meta.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("how", ["update_", "update-inplace", "set_", "td.update_", "data-attr", "td.update-inplace"])
def test_every_in_place_update_reaches_the_folder(tmp_path, how):
    path = tmp_path / "ds"
    td = _saved(path, tag="v0")
    new = {"k": [1, "two", None], "é": 3.5}
    if how == "update_":
        td.get("tag").update_(NonTensorData(new))
    elif how == "update-inplace":
        td.get("tag").update(NonTensorData(new), inplace=True)
    elif how == "set_":
        td.set_("tag", new)
    elif how == "td.update_":
        td.update_({"tag": NonTensorData(new)})
    elif how == "td.update-inplace":
        td.update({"tag": new}, inplace=True)
    else:
        td.get("tag").data = new
    assert td["tag"] == new
    assert load_memmap(path)["tag"] == new
    assert load_memmap(path, verify=True)["tag"] == new
    assert verify(path).ok


def test_checksums_and_other_fields_are_kept(tmp_path):
    path = tmp_path / "ds"
    td = _saved(path, tag="v0", other=[1, 2])
    before = _meta(path)
    td.get("tag").update_("v1")
    after = _meta(path)
    assert after["checksums"] == before["checksums"] and after["checksums"]
    before["entries"]["tag"]["value"] = "v1"
    assert after == before  # only that value changed
    assert list(after) == list(before)  # checksums still written last
    assert verify(path).ok


def test_nested_entry_writes_its_own_sub_folder(tmp_path):
    path = tmp_path / "ds"
    td = _saved(path, tag="v0")
    td.get(("sub", "note")).update_("n1")
    assert _meta(path / "sub")["entries"]["note"]["value"] == "n1"
    assert _meta(path)["entries"]["tag"]["value"] == "v0"
    assert load_memmap(path)["sub", "note"] == "n1"
    assert load_memmap(path / "sub")["note"] == "n1"  # the sub-folder loads on its own
    assert verify(path).ok


def test_loaded_folders_write_through_too(tmp_path):
    path = tmp_path / "ds"
    _saved(path, tag="v0")
    td = load_memmap(path)
    td.get("tag").update_("v9")
    assert load_memmap(path)["tag"] == "v9"


def test_durable_saves_update_durably(tmp_path):
    path = tmp_path / "ds"
    td = TensorDict({"tag": NonTensorData("a")}, []).memmap(path, durable=True)
    td.get("tag").update_("b")
    assert load_memmap(path, verify=True)["tag"] == "b"


def test_not_in_place_update_of_a_locked_value_is_refused(tmp_path):
    path = tmp_path / "ds"
    td = _saved(path, tag="v0")
    with pytest.raises(RuntimeError, match="locked"):
        td.get("tag").update(NonTensorData("v1"))
    assert td["tag"] == "v0" and load_memmap(path)["tag"] == "v0"


@pytest.mark.parametrize("bad, err, match", [
    ({1, 2}, TypeError, "not JSON-serialisable"),
    (object(), TypeError, "never pickles"),
    ("bad \ud800 text", ValueError, "lone surrogate"),
])
def test_a_value_the_format_cannot_hold_changes_nothing(tmp_path, bad, err, match):
    path = tmp_path / "ds"
    td = _saved(path, tag="v0")
    raw = (path / "meta.json").read_bytes()
    with pytest.raises(err, match=match) as info:
        td.get("tag").update_(bad)
    assert "'tag'" in str(info.value)  # names the entry
    assert td["tag"] == "v0"  # memory unchanged
    assert (path / "meta.json").read_bytes() == raw  # disk unchanged
    assert sorted(p.name for p in path.iterdir()) == ["meta.json", "sub", "x.memmap"]


def test_a_folder_replaced_by_another_save_is_never_edited(tmp_path):
    path = tmp_path / "ds"
    old = _saved(path, tag="old")
    TensorDict({"tag": NonTensorData("theirs")}, []).memmap(path)  # another save takes the path
    with pytest.warns(DetachedWriteWarning, match="update stays in memory only"):
        old.get("tag").update_("mine")
    assert old["tag"] == "mine"  # in memory, as its mapped tensors keep working
    assert load_memmap(path)["tag"] == "theirs"
    assert verify(path).ok


def test_a_deleted_folder_detaches_the_object(tmp_path):
    path = tmp_path / "ds"
    td = _saved(path, tag="v0")
    shutil.rmtree(path)
    with pytest.warns(DetachedWriteWarning, match=str(path)):
        td.get("tag").update_("v1")
    assert td["tag"] == "v1" and not path.exists()


def test_an_entry_that_is_no_longer_a_value_is_an_error(tmp_path):
    path = tmp_path / "ds"
    td = _saved(path, tag="v0")
    meta = _meta(path)
    meta["entries"]["tag"] = {"kind": "collection", "dir": "sub"}
    with open(path / "meta.json", "r+", encoding="utf-8") as f:  # same folder, edited by hand
        f.truncate(0)
        json.dump(meta, f)
    with pytest.raises(FormatError, match="no longer a 'value' entry"):
        td.get("tag").update_("v1")
    assert td["tag"] == "v0"


def test_updates_of_two_entries_by_two_processes_are_both_kept(tmp_path):
    """Writers of one folder take turns (flock): no read-modify-write loses another's update."""
    path = tmp_path / "ds"
    _saved(path, a=0, b=0)
    n = 40
    pids = []
    for key in ("a", "b"):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                torch.set_num_threads(1)
                td = load_memmap(path)
                for i in range(1, n + 1):
                    td.get(key).update_(i)
            finally:
                os._exit(0)
        pids.append(pid)
    for pid in pids:
        assert os.waitpid(pid, 0)[1] == 0
    td = load_memmap(path, verify=True)
    assert (td["a"], td["b"]) == (n, n)


def _big(tag: str) -> dict:
    return {"tag": tag, "body": tag * 200_000}  # ~200 KB of meta.json: writes take a while


def test_sigkilled_updates_leave_the_old_or_the_new_value_and_a_folder_that_verifies(tmp_path):
    path = tmp_path / "ds"
    TensorDict({"x": torch.arange(3), "v": NonTensorData(_big("A"))}, []).memmap(path)
    seen = set()
    for round_ in range(3):
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child: update forever, A and B in turn
            try:
                torch.set_num_threads(1)
                td = load_memmap(path)
                tag = "B"
                while True:
                    td.get("v").update_(_big(tag))
                    os.write(wfd, tag.encode())
                    tag = "A" if tag == "B" else "B"
            finally:
                os._exit(1)
        os.close(wfd)
        try:
            assert os.read(rfd, 1) in (b"A", b"B")  # at least one update done
            for _ in range(20):  # a reader during the writes: always one whole value
                v = load_memmap(path)["v"]
                assert v in (_big("A"), _big("B"))
        finally:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(rfd)
        v = load_memmap(path, verify=True)["v"]
        assert v in (_big("A"), _big("B"))
        seen.add(v["tag"])
        assert verify(path).ok
        assert {p.name for p in path.iterdir()} - {"meta.json", "x.memmap"} <= {
            p.name for p in path.iterdir() if p.name.startswith(".meta.json.tmp-")}
    # whatever a kill left, the next update cleans it, and a save over the folder is accepted
    td = load_memmap(path)
    td.get("v").update_("final")
    assert sorted(p.name for p in path.iterdir()) == ["meta.json", "x.memmap"]
    assert load_memmap(path, verify=True)["v"] == "final"


def test_a_leftover_temp_file_is_ignored_accepted_and_cleaned(tmp_path):
    """What a writer killed between writing the temporary file and the rename leaves."""
    path = tmp_path / "ds"
    td = _saved(path, tag="v0")
    (path / ".meta.json.tmp-0123456789ab").write_bytes(b'{"torn": ')
    assert load_memmap(path, verify=True)["tag"] == "v0"
    report = verify(path)
    assert report.ok and len(report.leftovers) == 1
    assert ".meta.json.tmp-0123456789ab (temporary file of an interrupted in-place value update" in report.leftovers[0]
    td.get("tag").update_("v1")
    assert not (path / ".meta.json.tmp-0123456789ab").exists()
    (path / ".meta.json.tmp-0123456789ab").write_bytes(b"{")
    TensorDict({"tag": NonTensorData("again")}, []).memmap(path)  # a save replaces the folder
    assert load_memmap(path)["tag"] == "again"


@pytest.mark.parametrize("key", ["..", "a/../../x", "", "meta.json", "_type", "😀"])
def test_keys_that_look_like_paths_update_their_own_entry_only(tmp_path, key):
    path = tmp_path / "ds"
    td = TensorDict({key: NonTensorData("v0"), "sub": TensorDict({key: NonTensorData("s0")}, [])}, []).memmap(path)
    td.get(key).update_("v1")
    td.get(("sub", key)).update_("s1")
    back = load_memmap(path, verify=True)
    assert back[key] == "v1" and back["sub", key] == "s1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # nothing written beside the folder
    assert {p.name for p in path.iterdir()} == {"meta.json", "sub"}


def test_chatdata_verify_lists_an_interrupted_update_without_failing(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    path = tmp_path / "ds"
    _saved(path, tag="v0")
    (path / "sub" / ".meta.json.tmp-0123456789ab").write_bytes(b"{")
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    res = subprocess.run([sys.executable, "-m", "chatdata", "verify", str(path)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"leftover: {path / 'sub' / '.meta.json.tmp-0123456789ab'} (temporary file of an interrupted" in res.stdout


def test_updates_racing_another_process_saving_over_the_folder_never_fail(tmp_path):
    """An update either lands in the folder it loaded or stays in memory with a warning."""
    import warnings

    path = tmp_path / "ds"
    TensorDict({"tag": NonTensorData(-1)}, []).memmap(path)
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child: save over the folder forever
        try:
            torch.set_num_threads(1)
            i = 0
            while True:
                TensorDict({"tag": NonTensorData(f"save {i}")}, []).memmap(path)
                os.write(wfd, b".")
                i += 1
        finally:
            os._exit(1)
    os.close(wfd)
    try:
        assert os.read(rfd, 1) == b"."
        for i in range(60):
            try:
                td = load_memmap(path)
            except FileNotFoundError:  # pragma: no cover - the folder mid-swap on a system without renameat2
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DetachedWriteWarning)
                td.get("tag").update_(i)
            assert td["tag"] == i
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(rfd)
    assert verify(path).ok


def test_a_relative_load_path_keeps_writing_to_its_folder_after_chdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    TensorDict({"a": NonTensorData("orig")}, []).memmap("ds")
    td = load_memmap("ds")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    td.get("a").update_(NonTensorData("new"))
    assert load_memmap(tmp_path / "ds")["a"] == "new"


def test_the_new_meta_json_keeps_the_old_permissions(tmp_path):
    td = TensorDict({"a": NonTensorData("orig")}, []).memmap(tmp_path / "ds")
    os.chmod(tmp_path / "ds" / "meta.json", 0o600)
    td.get("a").update_(NonTensorData("new"))
    assert (os.stat(tmp_path / "ds" / "meta.json").st_mode & 0o777) == 0o600
    assert load_memmap(tmp_path / "ds")["a"] == "new"


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_meta_json_that_is_not_a_file_is_a_clear_error(tmp_path, kind):
    td = TensorDict({"a": NonTensorData("orig")}, []).memmap(tmp_path / "ds")
    meta = tmp_path / "ds" / "meta.json"
    meta.unlink()
    meta.mkdir() if kind == "folder" else os.mkfifo(meta)
    with pytest.raises(FormatError, match="is not a regular file"):
        td.get("a").update_(NonTensorData("new"))  # never blocks on a FIFO


def test_a_read_only_folder_keeps_the_update_in_memory_with_a_warning(tmp_path):
    """As writes into its memory-mapped tensors do (copy-on-write): no raw PermissionError."""
    import warnings

    TensorDict({"a": NonTensorData("orig"), "x": torch.zeros(2)}, []).memmap(tmp_path / "ds")
    modes = {}
    p = tmp_path  # let an unprivileged user reach the folder; make the folder and its files read-only
    while p != p.parent and os.stat(p).st_uid == os.geteuid():
        modes[p] = os.stat(p).st_mode
        os.chmod(p, modes[p] | 0o005)
        p = p.parent
    for f in [tmp_path / "ds", *(tmp_path / "ds").iterdir()]:
        modes[f] = os.stat(f).st_mode
        os.chmod(f, 0o555 if f.is_dir() else 0o444)
    try:
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child: a user for whom the folder is read-only
            code = 3
            try:
                if os.geteuid() == 0:
                    os.setgid(65534)
                    os.setuid(65534)
                td = load_memmap(tmp_path / "ds")
                with warnings.catch_warnings(record=True) as seen:
                    warnings.simplefilter("always")
                    td.get("a").update_(NonTensorData("new"))
                ok = td["a"] == "new" and any(issubclass(w.category, DetachedWriteWarning)
                                              and "cannot be written" in str(w.message) for w in seen)
                code = 0 if ok else 2
            except BaseException as err:
                os.write(wfd, repr(err).encode()[:500])
            finally:
                os._exit(code)
        os.close(wfd)
        _, status = os.waitpid(pid, 0)
        msg = os.read(rfd, 1000).decode()
        os.close(rfd)
    finally:
        for path, mode in modes.items():
            os.chmod(path, mode)
    assert os.WEXITSTATUS(status) == 0, msg
    assert load_memmap(tmp_path / "ds")["a"] == "orig"
