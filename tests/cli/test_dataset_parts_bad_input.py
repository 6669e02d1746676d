"""Paths into a dataset's inside, and ``chatdata demo --out`` over a folder it does not own.

Before: ``chatdata show ds/_storage`` said "holds a LoadedRagged" (an internal class name), and a
token set's ``_values`` "a TensorDict"; ``chatdata import SRC ds/_storage --overwrite`` replaced the
storage of the dataset ``ds`` with another dataset, breaking ``ds``; ``chatdata demo --out ds
--overwrite`` wrote its chats/, tokens/ and lengths.png into the dataset ``ds``; and ``chatdata demo
--out demo --overwrite --index 999`` replaced the earlier demo's files, then failed on the index.
"""
from __future__ import annotations

import pytest
from cli_helpers import run_cli, write_jsonl

from chatdata import History

CHATS = [[{"role": "user", "content": f"question {i}?"}, {"role": "assistant", "content": f"answer {i}."}]
         for i in range(3)]


def tree(path):
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def one_error_line(res, *needles):
    assert res.returncode == 1, res.stdout
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("parts")
    src = write_jsonl(root / "chats.jsonl", [{"messages": c} for c in CHATS])
    assert run_cli("import", src, root / "ds").returncode == 0
    assert run_cli("tokenize", root / "ds", root / "tokens").returncode == 0
    return root


@pytest.mark.parametrize("cmd", [("show", "{p}", "0"), ("info", "{p}"), ("export", "{p}", "{root}/out.jsonl"),
                                 ("tokenize", "{p}", "{root}/t2"), ("verify", "{p}")], ids=lambda c: c[0])
@pytest.mark.parametrize("part, owner", [("ds/_storage", "ds"), ("ds/_storage/_values", "ds"), ("ds/meta.json", "ds"),
                                         ("ds/_storage/_offsets.memmap", "ds"), ("tokens/_values", "tokens")])
def test_a_part_of_a_dataset_names_the_dataset_to_pass(sets, cmd, part, owner):
    args = [a.format(p=sets / part, root=sets) for a in cmd]
    one_error_line(run_cli(*args), f"{sets / part} is part of the dataset {sets / owner}", f"pass {sets / owner}")
    assert not (sets / "out.jsonl").exists() and not (sets / "t2").exists()


@pytest.mark.parametrize("cmd", [("pack", "{p}", "--max-tokens", "64"), ("info", "{p}")], ids=lambda c: c[0])
def test_a_part_of_a_token_set_names_the_token_set(sets, cmd):
    args = [a.format(p=sets / "tokens" / "_values") for a in cmd]
    one_error_line(run_cli(*args), "is part of the dataset", f"pass {sets / 'tokens'}")


def test_a_missing_path_inside_a_dataset_names_the_dataset(sets):
    one_error_line(run_cli("show", sets / "ds" / "_storage" / "content", "0"),
                   "no such dataset; it would lie inside the dataset", f"pass {sets / 'ds'}")


def test_the_dataset_itself_and_a_dataset_beside_another_still_work(sets, tmp_path):
    assert run_cli("show", sets / "ds", "0").returncode == 0
    assert run_cli("info", sets / "tokens").returncode == 0
    # a dataset kept in a plain folder that is no dataset: its own
    History.from_chats(CHATS).memmap(tmp_path / "all" / "one")
    assert run_cli("show", tmp_path / "all" / "one", "0").returncode == 0
    one_error_line(run_cli("show", tmp_path / "all", "0"), "a folder holding datasets", str(tmp_path / "all" / "one"))


@pytest.mark.parametrize("out", ["ds/_storage", "ds/_storage/new", "ds/new", "tokens/_values"])
def test_an_output_inside_a_dataset_is_refused_and_the_dataset_kept(sets, tmp_path, out):
    before = tree(sets)
    res = run_cli("import", sets / "chats.jsonl", sets / out, "--overwrite")
    one_error_line(res, "is inside the dataset", "choose a path outside it")
    assert tree(sets) == before
    assert History.load_memmap(sets / "ds").to_chats() == CHATS


def test_demo_refuses_an_out_folder_it_does_not_own_even_with_overwrite(sets, tmp_path):
    before = tree(sets)
    one_error_line(run_cli("demo", "--out", sets / "ds", "--overwrite"), "holds a chatdata dataset",
                   "give a new or empty folder")
    one_error_line(run_cli("demo", "--out", sets / "ds" / "_storage", "--overwrite"), "is inside the dataset")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    one_error_line(run_cli("demo", "--out", mine, "--overwrite"), "holds other files (notes.txt)")
    assert tree(sets) == before and (mine / "notes.txt").read_text() == "keep me"


def test_demo_checks_index_before_replacing_an_earlier_demo(tmp_path):
    demo = tmp_path / "demo"
    (demo / "chats").mkdir(parents=True)
    (demo / "chats" / "meta.json").write_text("{}")  # stands for an earlier demo's files
    (demo / "lengths.png").write_bytes(b"png")
    before = tree(demo)
    one_error_line(run_cli("demo", "--out", demo, "--overwrite", "--index", "999"), "--index 999 is out of range (0..299)")
    one_error_line(run_cli("demo", "--out", demo), "holds an earlier demo's files; pass --overwrite")
    assert tree(demo) == before
