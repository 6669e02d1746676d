"""What a newcomer walking the README typed that a command took and then did wrong: outputs named
with a trailing '/', a plot over a data file, export names that announce another format, the
packaged tokenizer folder, the `templates list` that serve's help points to, and HTML pages only
their writer could read."""
from __future__ import annotations

import os
import stat

import pytest
from cli_helpers import run_cli, write_jsonl

from chatdata.templates import list_chat_templates

CHATS = [[{"role": "user", "content": f"question {i}?"}, {"role": "assistant", "content": f"answer {i}."}]
         for i in range(4)]


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    """A small dataset and its token set, and the JSON Lines they came from."""
    root = tmp_path_factory.mktemp("walk")
    src = write_jsonl(root / "chats.jsonl", [{"messages": c} for c in CHATS])
    assert run_cli("import", src, root / "ds").returncode == 0
    assert run_cli("tokenize", root / "ds", root / "tokens").returncode == 0
    return root / "ds", root / "tokens", src


@pytest.mark.parametrize("which", [0, 1])
def test_plot_refuses_a_name_that_is_not_an_image_and_leaves_it_whole(tmp_path, sets, which):
    data = tmp_path / "chats.jsonl"
    data.write_bytes(sets[2].read_bytes())
    for target in (data, f"{tmp_path}/plots/"):
        res = run_cli("info", sets[which], "--plot", target)
        assert res.returncode == 1 and ".png, .svg, .pdf" in res.stderr, res.stderr
    assert data.read_bytes() == sets[2].read_bytes()   # before: a PNG written over the user's data
    assert not (tmp_path / "plots").exists()            # before: a file named "plots"


@pytest.mark.parametrize("which", [0, 1])
def test_plot_is_written_in_the_format_its_name_says(tmp_path, sets, which):
    pytest.importorskip("matplotlib")
    svg = tmp_path / "lengths.svg"
    assert run_cli("info", sets[which], "--plot", svg).returncode == 0
    assert b"<svg" in svg.read_bytes()[:400]  # before: PNG bytes in a .svg for a dataset


def test_a_file_output_named_with_a_trailing_slash_is_refused(tmp_path, sets):
    ds, tokens, _ = sets
    for args in (("export", ds, f"{tmp_path}/out/", "--format", "jsonl"),
                 ("show", tokens, "0", "--html", f"{tmp_path}/out/")):
        res = run_cli(*args)
        assert res.returncode == 1 and "ends with '/'" in res.stderr, res.stderr
    assert list(tmp_path.iterdir()) == []  # before: a file named "out"


def test_html_pages_are_readable_by_others_as_the_umask_says(tmp_path, sets):
    old = os.umask(0o022)
    try:
        assert run_cli("show", sets[1], "0", "--html", tmp_path / "view.html").returncode == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "view.html").stat().st_mode) == 0o644  # before: 0600
    assert [p.name for p in tmp_path.iterdir()] == ["view.html"]


@pytest.mark.parametrize("name, said", [("chats.csv", "this kind of file"), ("chats.json", "one JSON document"),
                                        ("chats.json.gz", "one JSON document")])
def test_export_refuses_a_name_of_another_format(tmp_path, sets, name, said):
    res = run_cli("export", sets[0], tmp_path / name)
    assert res.returncode == 1 and said in res.stderr and "--format" in res.stderr, res.stderr
    assert list(tmp_path.iterdir()) == []  # before: JSON Lines under a .csv / .json name


def test_export_format_flag_keeps_the_name_and_jsonl_names_export(tmp_path, sets):
    assert run_cli("export", sets[0], tmp_path / "chats.json", "--format", "jsonl").returncode == 0
    assert (tmp_path / "chats.json").read_bytes() == sets[2].read_bytes()
    assert run_cli("export", sets[0], tmp_path / "chats.ndjson").returncode == 0
    assert (tmp_path / "chats.ndjson").read_bytes() == sets[2].read_bytes()


def test_an_output_inside_the_input_is_said_before_the_format(sets):
    res = run_cli("export", sets[0], sets[0] / "meta.json", "--overwrite")
    assert res.returncode == 1 and "inside the input" in res.stderr


def test_templates_list_prints_the_names_serve_help_points_to():
    res = run_cli("templates", "list")
    assert res.returncode == 0 and res.stdout.split() == list_chat_templates()
    assert "chatdata templates list" in run_cli("serve", "--help").stdout


def test_the_packaged_tokenizer_folder_is_a_tokenizer(tmp_path, sets):
    from chatdata import load_memmap
    from chatdata.data import DATA_DIR

    res = run_cli("tokenize", sets[0], tmp_path / "tok", "--tokenizer", DATA_DIR / "qwen2.5-tokenizer")
    assert res.returncode == 0, res.stderr  # before: "decompress it first: gunzip -k" inside the package
    a, b = load_memmap(tmp_path / "tok"), load_memmap(sets[1])  # sets[1]: the default, the same tokenizer
    assert [a[i]["input_ids"].tolist() for i in range(4)] == [b[i]["input_ids"].tolist() for i in range(4)]


def test_import_dash_reads_standard_input_as_export_dash_writes_it(tmp_path, sets):
    import subprocess
    import sys

    from cli_helpers import ROOT

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CHATDATA_DEBUG", None)
    res = subprocess.run([sys.executable, "-m", "chatdata", "import", "-", str(tmp_path / "ds")],
                         input=sets[2].read_bytes(), capture_output=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr  # before: "-: no such file"
    assert run_cli("export", tmp_path / "ds", tmp_path / "back.jsonl").returncode == 0
    assert (tmp_path / "back.jsonl").read_bytes() == sets[2].read_bytes()


def test_a_sharegpt_parquet_says_how_to_import_it(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    turns = [[{"from": "human", "value": "q?"}, {"from": "gpt", "value": "a."}]]
    pq.write_table(pa.table({"conversations": turns}), tmp_path / "sg.parquet")
    for extra in ((), ("--column", "conversations")):
        res = run_cli("import", tmp_path / "sg.parquet", tmp_path / "ds", *extra)
        assert res.returncode == 1 and "ShareGPT turns (from/value)" in res.stderr, res.stderr
        assert "| chatdata import - OUT" in res.stderr  # before: only "--column", or "no 'role' field"
    assert not (tmp_path / "ds").exists()


def test_a_greedy_option_before_the_positionals_is_named(tmp_path, sets):
    res = run_cli("import", "--decontaminate", sets[2], sets[2], tmp_path / "ds")
    assert res.returncode == 2 and "--decontaminate takes every word after it" in res.stderr, res.stderr
    plain = run_cli("import", sets[2])
    assert plain.returncode == 2 and "takes every word" not in plain.stderr


@pytest.mark.parametrize("flags, said", [
    (("--train-on", "assistant,usr"), "--train-on: train_on names the role 'usr', which no message has; the chats have 'user'"),
    (("--loss-weight", "Assistant=0.5"), "--loss-weight: loss_weights names the role 'Assistant'"),
    (("--train-on", "robot"), "--train-on: no message of"),
])
def test_a_role_that_would_train_nothing_is_refused(tmp_path, sets, flags, said):
    res = run_cli("tokenize", sets[0], tmp_path / "tok", *flags)
    assert res.returncode == 2 and said in res.stderr and "roles" in res.stderr, res.stderr
    assert not (tmp_path / "tok").exists()  # before: a token set with 0.0% of it trained, exit 0


def test_a_role_the_dataset_lacks_with_no_near_match_passes(tmp_path, sets):
    # one recipe for many datasets: a tool weight on chats without tools is not a typo
    res = run_cli("tokenize", sets[0], tmp_path / "tok", "--train-on", "assistant,robot", "--loss-weight", "robot=0.2")
    assert res.returncode == 0, res.stderr


def test_roles_the_dataset_has_are_taken(tmp_path, sets):
    res = run_cli("tokenize", sets[0], tmp_path / "tok", "--train-on", "assistant,user", "--loss-weight", "user=0.5")
    assert res.returncode == 0 and "trained by the mask: assistant,user; weights user=0.5" in res.stdout, res.stderr


def test_templates_check_says_what_its_probe_words_are(tmp_path):
    res = run_cli("templates", "check", "qwen", "--color", "never")
    assert res.returncode == 0 and "«Wqans one.<|im_end|>»" in res.stdout
    assert "probe words: Wqans (content)" in res.stdout.splitlines()[-1]  # before: 'Wq...' unexplained


@pytest.mark.parametrize("where", ["file", "the dataset", "inside it"])
def test_a_report_dir_that_cannot_hold_the_reports_is_refused_before_any_work(tmp_path, sets, where):
    out = tmp_path / "ds"
    folder = {"file": sets[2], "the dataset": out, "inside it": out / "reports"}[where]
    res = run_cli("import", sets[2], out, "--dedup", "exact", "--report-dir", folder)
    assert res.returncode == 1 and "--report-dir" in res.stderr, res.stderr
    assert not out.exists()  # before: the import ran, then '[Errno 17] File exists', or reports inside the dataset


def test_the_weight_legend_is_drawn_in_the_colour_of_the_role_that_carries_the_weight():
    import re

    from chatdata.data import load_sample_chats, load_sample_tokenizer
    from chatdata.view import chat_section, html_page
    from chatdata.view.html import ROLE_COLORS

    chat = next(c for c in load_sample_chats() if any(m["role"] == "tool" for m in c))
    page = html_page("t", [chat_section(chat, load_sample_tokenizer(), train_on=["assistant", "tool"],
                                        loss_weights={"tool": 0.2})])
    keys = dict((w, rgb) for rgb, w in re.findall(r'background:rgba\((\d+,\d+,\d+),[\d.]+\)">weight ([\d.]+)<', page))
    assert keys == {"0.2": ",".join(map(str, ROLE_COLORS["tool"])),  # before: the assistant's green for 0.2 too
                    "1": ",".join(map(str, ROLE_COLORS["assistant"]))}


def test_a_folder_without_a_dataset_is_named_once_with_how_to_make_one(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    res = run_cli("info", tmp_path / "mine")
    assert res.returncode == 1 and "is not a chatdata dataset (no meta.json: it holds other files)" in res.stderr
    assert "chatdata import SRC" in res.stderr and res.stderr.count("meta.json") == 1  # before: said three times
