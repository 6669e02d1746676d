"""Bad or edge-case input to the command line: every case ends in the right result, or in a one-line
``chatdata CMD: error: ...`` naming what is wrong, with nothing half-written and no input destroyed."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chatdata import History

from cli_helpers import ROOT, run_cli, write_jsonl

CHATS = [[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i}"}]
         for i in range(4)]
UNWRITABLE = Path("/proc")  # not writable even by root (the tests may run as root, which ignores permissions)


def one_error_line(res, *needles):
    """The run failed with exactly one stderr line that holds every needle, and no traceback."""
    assert res.returncode != 0, res.stdout
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def tree(path: Path) -> dict:
    """Every file under ``path`` with its bytes: what a failed command must leave as it was."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    path = tmp_path_factory.mktemp("made")
    write_jsonl(path / "chats.jsonl", [{"messages": c} for c in CHATS])
    History.from_chats(CHATS).memmap(path / "ds")
    assert run_cli("tokenize", path / "ds", path / "tokens", "-q").returncode == 0
    return path


@pytest.fixture
def work(tmp_path, made):
    """A source file, a dataset made from it and a token set made from that, in ``tmp_path``."""
    shutil.copytree(made, tmp_path, dirs_exist_ok=True)
    return tmp_path


# -- an output that is, holds or lies inside an input -------------------------------------------
@pytest.mark.parametrize("args, message", [
    (("tokenize", "{ds}", "{ds}", "--overwrite"), "is the input"),
    (("tokenize", "{ds}", "{link}", "--overwrite"), "is the input"),      # the same folder through a symlink
    (("tokenize", "{ds}", "{ds}/tokens"), "inside the input"),
    (("tokenize", "{ds}/inner", "{ds}", "--overwrite"), "holds the input"),
    (("import", "{ds}/chats.jsonl", "{ds}", "--overwrite"), "holds the input"),
    (("import", "{src}", "{src}/ds"), "inside the input"),
    (("export", "{ds}", "{ds}/meta.json", "--overwrite"), "inside the input"),
    (("export", "{ds}", "{ds}/chats.jsonl"), "inside the input"),
    (("export", "{ds}", "{ds}/chats.parquet"), "inside the input"),
    (("show", "{ds}", "0", "--html", "{ds}/view.html"), "inside the input"),
    (("show", "{tokens}", "0", "--html", "{tokens}/view.html"), "inside the input"),
    (("info", "{ds}", "--plot", "{ds}/lengths.png"), "inside the input"),
    (("info", "{tokens}", "--plot", "{tokens}/lengths.png"), "inside the input"),
    (("templates", "check", "{tpl}", "--html", "{tpl}", "--overwrite"), "is the input"),
])
def test_an_output_apart_from_the_inputs(work, args, message):
    ds = work / "ds"
    History.from_chats(CHATS[:2]).memmap(ds / "inner")  # a dataset inside the dataset folder
    shutil.copy(work / "chats.jsonl", ds / "chats.jsonl")
    (work / "link").symlink_to(ds)
    tpl = work / "t.jinja"
    tpl.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    before = {p: tree(p) for p in (ds, work / "tokens")}
    argv = [a.format(ds=ds, link=work / "link", src=work / "chats.jsonl", tokens=work / "tokens", tpl=tpl)
            for a in args]
    one_error_line(run_cli(*argv), message, "elsewhere")
    assert {p: tree(p) for p in before} == before  # the inputs are as they were
    assert tpl.read_text().startswith("{%")
    assert (work / "chats.jsonl").is_file()


def test_an_output_beside_its_input_is_fine(work):
    """Prefixes are not folders: ``ds2`` is not inside ``ds``."""
    assert run_cli("tokenize", work / "ds", work / "ds2", "-q").returncode == 0
    assert run_cli("export", work / "ds", work / "ds.jsonl", "-q").returncode == 0


# -- an output that cannot be written: said before any work, naming the path -------------------
@pytest.mark.parametrize("args", [
    ("import", "{src}", "{bad}/ds"),
    ("import", "{src}", "{bad}/ds", "--shard-size", "2"),
    ("tokenize", "{ds}", "{bad}/tokens"),
    ("export", "{ds}", "{bad}/chats.jsonl"),
    ("export", "{ds}", "{bad}/chats.parquet"),
    ("show", "{ds}", "0", "--html", "{bad}/view.html"),
    ("templates", "check", "qwen", "--html", "{bad}/view.html"),
    ("info", "{ds}", "--plot", "{bad}/lengths.png"),
    ("info", "{tokens}", "--plot", "{bad}/lengths.png"),
])
@pytest.mark.parametrize("bad", ["unwritable", "file"])
def test_an_unwritable_output_is_one_line_naming_it(work, args, bad):
    where = UNWRITABLE if bad == "unwritable" else work / "chats.jsonl"  # a file where a folder should be
    argv = [a.format(src=work / "chats.jsonl", ds=work / "ds", tokens=work / "tokens", bad=where) for a in args]
    line = one_error_line(run_cli(*argv))
    assert str(where) in line and ".tmp" not in line and "choose another path" in line or "inside the input" in line


def test_an_html_page_in_a_missing_folder_names_the_folder(work):
    one_error_line(run_cli("show", work / "ds", "0", "--html", work / "nowhere" / "view.html"),
                   "nowhere", "does not exist")
