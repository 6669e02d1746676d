"""Issue 17 / 15 through the command line: corrupt data named, bad lines skipped in file order,
lone surrogates refused, long names, symlinked outputs, links and orphans."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from cli_helpers import run_cli, write_jsonl

GOOD = [{"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]} for i in range(4)]


def _import(tmp_path, records, out="ds", *extra):
    src = write_jsonl(tmp_path / "in.jsonl", records)
    return run_cli("import", src, tmp_path / out, *extra)


def _history_ds(path: Path) -> Path:
    from chatdata import History

    History.from_chats([r["messages"] for r in GOOD]).memmap(path)
    return path


def test_corrupt_offsets_and_inner_links_are_named(tmp_path):
    ds = _history_ds(tmp_path / "ds")
    off = ds / "_storage" / "_offsets.memmap"
    off.write_bytes(torch.tensor([0, 2, 1, 6, 8], dtype=torch.int64).numpy().tobytes())
    res = run_cli("export", ds, tmp_path / "out.jsonl")
    assert res.returncode == 1 and str(off) in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "out.jsonl").exists()
    ds2 = _history_ds(tmp_path / "ds2")
    target = ds2 / "_storage" / "_offsets.memmap"
    shutil.move(str(target), str(tmp_path / "elsewhere"))
    target.symlink_to(tmp_path / "elsewhere")
    res = run_cli("info", ds2)
    assert res.returncode == 1 and str(target) in res.stderr and "link" in res.stderr


def test_bad_lines_deep_json_and_lone_surrogates(tmp_path):
    deep = '{"messages": [{"role": "user", "content": "x", "d": ' + "[" * 100_000 + "]" * 100_000 + "}]}"
    surrogate = '{"messages": [{"role": "user", "content": "ok"}, {"role": "assistant", "content": "x\\ud800y"}]}'
    records = [GOOD[0], {"messages": [{"role": "user"}]}, deep, "not json", surrogate, GOOD[1]]
    res = _import(tmp_path, records)
    assert res.returncode == 0, res.stderr
    assert "line 3: invalid JSON (nested too deeply)" in res.stderr
    assert "RecursionError" not in res.stderr + res.stdout
    assert "line 5: message 1: 'content' holds a lone surrogate" in res.stderr
    # line 2 is found bad only when its chunk is built, after lines 3 and 4: still reported first
    assert "first: in.jsonl:line 2: message 0: a 'user' message needs 'content'" in res.stdout
    res = run_cli("export", tmp_path / "ds", tmp_path / "out.jsonl")
    assert res.returncode == 0, res.stderr
    assert [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()] == [GOOD[0], GOOD[1]]


def test_long_output_name_after_a_dead_writer(tmp_path):
    from chatdata.td.storage.tempdirs import WriterTemp

    name = "d" * 250
    _history_ds(tmp_path / name)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - a writer that dies mid-save, leaving its temp folder
        WriterTemp(tmp_path / name).__enter__()
        os._exit(0)
    os.waitpid(pid, 0)
    assert len(os.listdir(tmp_path)) == 2
    res = _import(tmp_path, GOOD[:3], name, "--overwrite")
    assert res.returncode == 0, res.stderr
    assert sorted(os.listdir(tmp_path)) == sorted(["in.jsonl", name])  # the orphan is gone
    from chatdata import History

    assert History.load_memmap(tmp_path / name).to_chats() == [r["messages"] for r in GOOD[:3]]


def test_import_through_a_symlinked_output(tmp_path):
    _history_ds(tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    res = _import(tmp_path, GOOD[:2], "link", "--overwrite")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "link").is_symlink()
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl", "link", "real"]
    from chatdata import History

    assert History.load_memmap(tmp_path / "real").to_chats() == [r["messages"] for r in GOOD[:2]]
