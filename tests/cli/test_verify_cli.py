"""``chatdata verify`` and ``chatdata import --durable``, as a user runs them."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import run_cli, write_jsonl

from chatdata.cli import main

OLD = Path(__file__).resolve().parents[1] / "data" / "chatdata_v1_no_checksums"

CHATS = [{"messages": [{"role": "user", "content": f"question {i} — naïve?"},
                       {"role": "assistant", "content": f"answer number {i}"}]} for i in range(30)]


class _Result:
    def __init__(self, returncode, stdout):
        self.returncode, self.stdout = returncode, stdout


def _run(capsys, *args) -> _Result:
    """``chatdata ARGS`` in this process (a subprocess costs seconds of imports each)."""
    capsys.readouterr()
    code = main([str(a) for a in args])
    return _Result(code, capsys.readouterr().out)


def _import(tmp_path, capsys, *extra) -> Path:
    src = write_jsonl(tmp_path / "chats.jsonl", CHATS)
    out = tmp_path / "ds"
    res = _run(capsys, "import", src, out, *extra)
    assert res.returncode == 0
    return out


def test_verify_exit_status_and_named_files(tmp_path, capsys):
    ds = _import(tmp_path, capsys, "--durable")
    res = run_cli("verify", ds, process=True)  # once as a user runs it
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.startswith(f"ok: {ds}: 6 data files") and "6 checksums match" in res.stdout

    content = ds / "_storage" / "_values" / "content.bytes.memmap"
    data = content.read_bytes()
    content.write_bytes(data.replace(b"answer number 7", b"answer number 8", 1))  # same size, valid UTF-8
    res = _run(capsys, "verify", ds)
    assert res.returncode == 1
    assert f"bad: {content}: checksum mismatch" in res.stdout
    assert "FAILED" in res.stdout and "1 problem in 1 file" in res.stdout

    res = _run(capsys, "verify", ds, "--json")
    report = json.loads(res.stdout)
    assert res.returncode == 1 and not report["ok"]
    assert [p["path"] for p in report["problems"]] == [str(content)]

    # without checksums the change is invisible; invalid UTF-8 is not
    assert _run(capsys, "verify", ds, "--no-checksums").returncode == 0
    content.write_bytes(data.replace("ï".encode(), b"\xc3\x28", 1))
    res = _run(capsys, "verify", ds, "--no-checksums", "-q")
    assert res.returncode == 1 and f"bad: {content}: invalid UTF-8 at byte" in res.stdout


def test_verify_bad_paths(tmp_path, capsys):
    # a mistyped path or a file is an error, not "FAILED: 1 problem in 1 file" (nothing was checked)
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "nope")]) == 1
    out = capsys.readouterr()
    assert out.out == "" and out.err.strip() == (f"chatdata verify: error: {tmp_path / 'nope'}: no such folder "
                                                 "(give the folder a dataset was saved to)")
    (tmp_path / "file.txt").write_text("hi")
    assert main(["verify", str(tmp_path / "file.txt"), "--json"]) == 1
    assert "is a file, not a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as err:
        main(["verify"])  # no PATH: a usage error
    assert err.value.code == 2
    with pytest.raises(SystemExit) as err:
        main(["verify", "--help"])
    assert err.value.code == 0 and "examples:" in capsys.readouterr().out


def test_verify_an_older_folder_and_lists_leftovers(tmp_path, capsys):
    old = tmp_path / "history"
    shutil.copytree(OLD / "history", old)
    leftover = tmp_path / ".history.tmp-0123456789ab"
    shutil.copytree(old, leftover)  # what a save killed long ago leaves behind
    import os

    os.utime(leftover, (1_000_000_000, 1_000_000_000))
    for p in leftover.rglob("*"):
        os.utime(p, (1_000_000_000, 1_000_000_000))
    res = _run(capsys, "verify", old)
    assert res.returncode == 0, res.stdout
    assert "without checksums" in res.stdout
    assert f"leftover: {leftover}" in res.stdout


def test_import_durable_round_trips(tmp_path, capsys):
    ds = _import(tmp_path, capsys, "--durable")
    from chatdata import History

    h = History.load_memmap(ds, verify=True)
    assert h[29]["content"][1] == "answer number 29"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chats.jsonl", "ds"]


def test_import_sharded_durable_shards_verify(tmp_path, capsys):
    ds = _import(tmp_path, capsys, "--shard-size", "8", "--durable")
    manifest = json.loads((ds / "manifest.json").read_text())
    assert [s["items"] for s in manifest["shards"]] == [8, 8, 8, 6]
    for s in manifest["shards"]:
        res = _run(capsys, "verify", ds / s["path"])
        assert res.returncode == 0 and "6 checksums match" in res.stdout
