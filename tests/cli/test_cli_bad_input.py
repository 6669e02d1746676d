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


# -- a flag that would do nothing is said, not ignored ---------------------------------------------
@pytest.mark.parametrize("args, needles", [
    (("show", "{ds}", "0", "--overwrite"), ("--overwrite", "--html FILE", "nothing is written")),
    (("show", "{tokens}", "0", "--overwrite"), ("--overwrite", "--html FILE", "nothing is written")),
    (("templates", "check", "qwen", "--overwrite"), ("--overwrite", "--html FILE", "nothing is written")),
    (("templates", "check", "--all", "--overwrite", "--out", "{work}/m.md"), ("--overwrite", "--html", "--out")),
    (("templates", "check", "--all", "--html", "{work}/v.html", "--out", "{work}/m.md"), ("--html", "--all", "--out")),
])
def test_overwrite_or_html_that_would_do_nothing_is_a_usage_error(work, args, needles):
    """--overwrite replaces the --html page; without --html (or with --all, which writes --out) it was
    silently ignored, and --all ignored --html. Nothing is printed or written then."""
    before = tree(work)
    argv = [a.format(ds=work / "ds", tokens=work / "tokens", work=work) for a in args]
    res = run_cli(*argv)
    one_error_line(res, *needles)
    assert res.returncode == 2 and res.stdout == ""
    assert tree(work) == before


def test_overwrite_with_html_replaces_the_page(work):
    page = work / "view.html"
    page.write_text("old")
    assert run_cli("show", work / "ds", "0", "--html", page, "--overwrite").returncode == 0
    assert page.read_text().startswith("<!")
    page.write_text("old")
    assert run_cli("templates", "check", "qwen", "--html", page, "--overwrite").returncode == 0
    assert page.read_text().startswith("<!")


# -- a failed or interrupted command leaves nothing behind ---------------------------------------
@pytest.mark.parametrize("shards", [[], ["--shard-size", "2"]])
def test_a_failed_import_leaves_no_folder_and_the_retry_works(tmp_path, shards):
    (tmp_path / "bad.jsonl").write_text("not json\n")
    write_jsonl(tmp_path / "good.jsonl", [{"messages": c} for c in CHATS])
    out = tmp_path / "new" / "deeper" / "ds"
    one_error_line(run_cli("import", tmp_path / "bad.jsonl", out, *shards), "bad.jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "good.jsonl"]  # no OUT/shards/, no parents
    assert run_cli("import", tmp_path / "good.jsonl", out, *shards).returncode == 0


def _interrupt_when(pattern: str, folder: Path, *args):
    """Run ``chatdata ARGS`` in a new process, send it SIGINT (Ctrl-C) as soon as ``pattern`` (a
    temporary folder of its output) appears in ``folder``, and return what it printed."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("CHATDATA_DEBUG", None)
    proc = subprocess.Popen([sys.executable, "-m", "chatdata", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    while proc.poll() is None and not list(folder.glob(pattern)):
        time.sleep(0.005)
    assert proc.poll() is None, "the command ended before it wrote anything: give it more input"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, out, err


@pytest.fixture(scope="module")
def big_source(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    line = '{"messages": [{"role": "user", "content": "%s"}, {"role": "assistant", "content": "%s"}]}\n'
    with open(path, "w") as f:
        for i in range(200_000):
            f.write(line % (f"question number {i} " * 3, f"the answer to {i} " * 3))
    return path


@pytest.mark.parametrize("what", ["import", "import-sharded", "tokenize"])
def test_ctrl_c_leaves_nothing_and_exits_130_with_one_line(tmp_path, big_source, what):
    if what == "tokenize":
        ds = tmp_path / "in" / "ds"
        assert run_cli("import", big_source, ds, "-q").returncode == 0
        args, pattern = ("tokenize", ds, tmp_path / "out", "--batch-size", "64"), ".out.tmp-*"
    elif what == "import":
        args, pattern = ("import", big_source, tmp_path / "out", "--chunk-size", "500"), ".out.tmp-*"
    else:
        args, pattern = ("import", big_source, tmp_path / "out", "--chunk-size", "500", "--shard-size", "1000"), \
            "out/shards/.shard-*"
    code, out, err = _interrupt_when(pattern, tmp_path, *args)
    assert code == 130, (code, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [f"chatdata {what.split('-')[0]}: interrupted (nothing half-written was kept)"], err
    assert sorted(p.name for p in tmp_path.iterdir()) == (["in"] if what == "tokenize" else [])


# -- numbers -----------------------------------------------------------------------------------
def test_ngram_of_any_size_ends(tmp_path):
    """--ngram far above every text's length ended never (a loop of N steps even when no N-gram fits)
    or in an OverflowError; now a prompt shorter than N still counts as one whole gram."""
    prompt = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    write_jsonl(tmp_path / "bench.jsonl", [{"prompt": prompt}])
    write_jsonl(tmp_path / "chats.jsonl", [{"messages": [{"role": "user", "content": prompt}]},
                                           {"messages": [{"role": "user", "content": "something else"}]}])
    res = run_cli("import", tmp_path / "chats.jsonl", tmp_path / "ds", "--ngram", "1000000",
                  "--decontaminate", tmp_path / "bench.jsonl")
    assert res.returncode == 0, res.stderr
    assert len(History.load_memmap(tmp_path / "ds")) == 1
    for n in ("0", "1000001", str(10 ** 21)):
        one_error_line(run_cli("import", tmp_path / "chats.jsonl", tmp_path / "ds2", "--ngram", n,
                               "--decontaminate", tmp_path / "bench.jsonl"), "--ngram must be between 1 and")
    assert not (tmp_path / "ds2").exists()


# -- a token set where a History is expected, and the other way round ---------------------------
def test_a_token_set_where_a_dataset_is_expected(work):
    for args in (("export", "{t}", "{w}/x.parquet"), ("export", "{t}", "{w}/x.jsonl"), ("tokenize", "{t}", "{w}/t2")):
        res = run_cli(*[a.format(t=work / "tokens", w=work) for a in args])
        one_error_line(res, "is a token set (made by `chatdata tokenize`), not a History dataset")
    assert not (work / "x.parquet").exists() and not (work / "t2").exists()


def test_pack_reads_a_sharded_token_set_and_names_a_sharded_dataset(work):
    from chatdata.io import open_dataset
    from chatdata.td import load_memmap

    tokens = load_memmap(work / "tokens")
    sharded = open_dataset(work / "sharded_tokens", mode="a")
    sharded.append(tokens[0:1])
    sharded.append(tokens[1:4])
    flat = run_cli("pack", work / "tokens", "--max-tokens", "64", "--json")
    res = run_cli("pack", work / "sharded_tokens", "--max-tokens", "64", "--json")
    assert res.returncode == 0, res.stderr
    drop = lambda text: {k: v for k, v in __import__("json").loads(text).items() if k != "seconds"}  # noqa: E731
    assert drop(res.stdout) == drop(flat.stdout)
    assert run_cli("import", work / "chats.jsonl", work / "sharded_ds", "--shard-size", "2").returncode == 0
    one_error_line(run_cli("pack", work / "sharded_ds", "--max-tokens", "64"),
                   "is a sharded History dataset, not a token set", "chatdata tokenize")


def test_info_describes_an_empty_token_set(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    assert run_cli("import", tmp_path / "empty.jsonl", tmp_path / "ds", "--allow-empty").returncode == 0
    assert run_cli("tokenize", tmp_path / "ds", tmp_path / "tokens", "--allow-empty").returncode == 0
    res = run_cli("info", tmp_path / "tokens", "--json")
    assert res.returncode == 0, res.stderr
    assert '"sequences": 0' in res.stdout
    one_error_line(run_cli("pack", tmp_path / "tokens", "--max-tokens", "8"), "holds no sequences")


# -- templates and tokenizers ------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer_without_template(tmp_path_factory):
    import json

    from chatdata.data import sample_tokenizer_path

    src, out = sample_tokenizer_path(), tmp_path_factory.mktemp("tok") / "no-template"
    out.mkdir()
    shutil.copy(src / "tokenizer.json", out / "tokenizer.json")
    config = json.loads((src / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


@pytest.mark.parametrize("cmd", ["tokenize", "show", "templates"])
def test_a_tokenizer_without_a_chat_template_is_refused_not_replaced_by_chatml(work, tokenizer_without_template,
                                                                                  cmd):
    """It was rendered with chatml_format silently: tokens a model without that format never saw."""
    argv = {"tokenize": ("tokenize", work / "ds", work / "t", "--tokenizer", tokenizer_without_template),
            "show": ("show", work / "ds", "0", "--tokenizer", tokenizer_without_template),
            "templates": ("templates", "check", tokenizer_without_template)}[cmd]
    one_error_line(run_cli(*argv), "no chat template", "chatml_format")
    assert not (work / "t").exists()
    if cmd == "tokenize":  # naming a template is the way out
        assert run_cli(*argv, "--template", "chatml_format", "-q").returncode == 0


@pytest.mark.parametrize("text, message", [
    ("{% for m in messages %}{{ m.content }", "is not a valid Jinja template (line 1): unexpected '}'"),
    ("{{ messages | no_such_filter }}", "is not a valid Jinja template (line 1): No filter named 'no_such_filter'"),
    (b"\xff\xfe{{ x }}", "not a UTF-8 text file"),
    (None, "is a folder; give a .jinja file"),
])
@pytest.mark.parametrize("cmd", ["tokenize", "tokenize --skip-bad", "show"])
def test_a_broken_template_file_is_named_before_any_conversation(work, text, message, cmd):
    """A template that does not compile was blamed on 'conversation 0' with a hint to pass --skip-bad
    (which then rejected every conversation); a non-UTF-8 file gave a bare 'utf-8 codec' error."""
    tpl = work / "t.jinja"
    if text is None:
        tpl.mkdir()
    elif isinstance(text, bytes):
        tpl.write_bytes(text)
    else:
        tpl.write_text(text)
    words = cmd.split()
    argv = (words[0], work / "ds", work / "t" if words[0] == "tokenize" else "0", *words[1:], "--template", tpl)
    line = one_error_line(run_cli(*argv), f"--template {tpl}", message)
    assert "conversation" not in line and "--skip-bad" not in line
    assert not (work / "t").exists()


@pytest.mark.parametrize("args", [
    ("import", "{src}", "{w}/o", "--chunk-size", "{v}"),
    ("import", "{src}", "{w}/o", "--shard-size", "{v}"),
    ("tokenize", "{ds}", "{w}/o", "--max-length", "{v}"),
    ("tokenize", "{ds}", "{w}/o", "--batch-size", "{v}"),
    ("tokenize", "{ds}", "{w}/o", "--ray", "--shard-size", "{v}"),
    ("export", "{ds}", "{w}/o.jsonl", "--chunk-size", "{v}"),
    ("pack", "{tokens}", "--max-tokens", "{v}"),
])
@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf", "1e3", "x"])
def test_a_count_that_is_not_a_positive_integer_is_a_usage_error(work, args, value):
    argv = [a.format(src=work / "chats.jsonl", ds=work / "ds", tokens=work / "tokens", w=work, v=value) for a in args]
    res = run_cli(*argv)
    assert res.returncode == 2
    one_error_line(res, f"argument {args[-2]}:", "must be > 0" if value in ("0", "-3") else "is not an integer")
    assert not list(work.glob("o*"))


def test_tokenize_shard_size_without_ray_is_refused_not_ignored(work):
    one_error_line(run_cli("tokenize", work / "ds", work / "o", "--shard-size", "2"), "--shard-size goes with --ray")
    assert not (work / "o").exists()


# -- odd paths ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["with space", "ünïcødé ✓", "new\nline"])
def test_paths_with_spaces_unicode_and_line_breaks(work, name):
    """They work; an error naming one stays one line (the line break shown as \\n)."""
    assert run_cli("import", work / "chats.jsonl", work / name, "-q").returncode == 0
    assert run_cli("export", work / name, work / f"{name}.jsonl", "-q").returncode == 0
    assert (work / f"{name}.jsonl").read_text() == (work / "chats.jsonl").read_text()  # the same records back
    line = one_error_line(run_cli("info", work / f"missing {name}"), "no such dataset")
    assert ("missing new\\nline" in line) if "\n" in name else (f"missing {name}" in line)


@pytest.mark.parametrize("target, message", [
    ("", "the template is empty"),
    ("{w}", "is a folder but not a tokenizer folder"),   # was "--tokenizer ...", a flag the user never gave
])
def test_templates_check_odd_targets(work, target, message):
    one_error_line(run_cli("templates", "check", target.format(w=work)), message)


@pytest.mark.parametrize("out, message", [
    ("{tpl}", "is the input"), ("{tpl}/page.md", "inside the input"), ("/proc/page.md", "cannot write in /proc"),
])
def test_templates_check_all_says_a_bad_out_before_running_the_matrix(work, out, message):
    (work / "tpl").mkdir()
    (work / "tpl" / "a.jinja").write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    tokenizer = ROOT / "tests" / "data" / "tokenizers" / "qwen2.5-instruct"
    res = run_cli("templates", "check", "--all", "--templates-dir", work / "tpl", "--tokenizer-dir", tokenizer,
                  "--out", out.format(tpl=work / "tpl"))
    one_error_line(res, message)
    assert [p.name for p in (work / "tpl").iterdir()] == ["a.jinja"]


@pytest.mark.parametrize("data, message", [(b"", "holds no conversation"), (b"garbage\n", "not valid JSON")])
def test_a_piped_source_is_named_as_given_not_by_its_temporary_copy(tmp_path, data, message):
    res = subprocess.run([sys.executable, "-m", "chatdata", "import", "/dev/stdin", str(tmp_path / "ds")], input=data,
                         capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    res.stderr = res.stderr.decode()
    line = one_error_line(res, "/dev/stdin", message)
    assert ".stream-" not in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("cmd", ["tokenize", "show"])
def test_tools_that_is_a_folder(work, cmd):
    argv = ("tokenize", work / "ds", work / "t") if cmd == "tokenize" else ("show", work / "ds", "0")
    one_error_line(run_cli(*argv, "--tools", work / "ds"), f"--tools {work / 'ds'} is a folder")


@pytest.mark.parametrize("spec, message", [
    ("", "--dedup takes exact, near or near:THRESHOLD, got ''"),   # was: no dedup at all, silently
    ("near:1", "strictly between 0 and 1"), ("near:0", "strictly between 0 and 1"), ("near:nan", "strictly between"),
    ("near:inf", "strictly between"), ("near:x", "needs a number"),
])
def test_dedup_specs(work, spec, message):
    one_error_line(run_cli("import", work / "chats.jsonl", work / "o", "--dedup", spec), message)
    assert not (work / "o").exists()


@pytest.mark.parametrize("block, argv_tail, words", [
    (("pyarrow",), ["--decontaminate", "{tmp}/bench.parquet"],
     "--decontaminate {tmp}/bench.parquet: reading benchmark prompts from Parquet needs the 'pyarrow' package: "
     "pip install 'chatdata[arrow]'"),
    (("rensa",), ["--dedup", "near"], "pip install 'chatdata[hygiene]'"),
    (("jsonschema", "jsonschema_rs"), ["--check-tools", "--tools", "{tmp}/tools.json"], "pip install 'chatdata[hygiene]'"),
])
def test_a_missing_hygiene_extra_is_one_line_naming_it(tmp_path, monkeypatch, block, argv_tail, words):
    """Before: a Parquet benchmark file without pyarrow was an 'internal error: ImportError'."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from chatdata.data import sample_tools

    pq.write_table(pa.table({"prompt": ["one two three four five six seven eight nine ten eleven twelve thirteen"]}),
                   tmp_path / "bench.parquet")
    (tmp_path / "tools.json").write_text(json.dumps(sample_tools()), encoding="utf-8")
    chats = [[{"role": "user", "content": "weather?"},
              {"role": "assistant", "tool_calls": [{"type": "function", "function": {
                  "name": "get_weather", "arguments": {"city": "Paris"}}}]},
              {"role": "tool", "content": "sunny"}, {"role": "assistant", "content": "Sunny."}]] * 2
    src = write_jsonl(tmp_path / "chats.jsonl", [{"messages": c} for c in chats])
    for name in block:  # what a package that is not installed looks like to import
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)
    res = run_cli("import", src, tmp_path / "ds", *[a.format(tmp=tmp_path) for a in argv_tail])
    assert res.returncode == 1 and "internal error" not in res.stderr, res.stderr
    assert res.stderr.startswith("chatdata import: error: ") and words.format(tmp=tmp_path) in res.stderr, res.stderr
    assert len(res.stderr.splitlines()) == 1 and not (tmp_path / "ds").exists()


def test_a_folder_source_without_tables_says_what_to_do(tmp_path):
    """Before: 'DIR is a folder; give a .jsonl or .json file', also for a folder of JSON Lines files
    (which import together through standard input) and for a dataset chatdata already wrote."""
    jsonl = tmp_path / "parts"
    jsonl.mkdir()
    for k in range(2):
        write_jsonl(jsonl / f"part-{k}.jsonl", [{"messages": c} for c in CHATS[2 * k:2 * k + 2]])
    res = run_cli("import", jsonl, tmp_path / "out")
    said = f"{jsonl} is a folder, not a file; it holds JSON Lines files: import them together with cat {jsonl}/*.jsonl | chatdata import - OUT"
    assert res.returncode == 1 and res.stderr.strip() == f"chatdata import: error: {said}", res.stderr
    # the pipe it gives works
    pipe = subprocess.run(f"cat {jsonl}/*.jsonl", shell=True, capture_output=True, check=True).stdout
    done = subprocess.run([sys.executable, "-m", "chatdata", "import", "-", str(tmp_path / "out")], input=pipe,
                          capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0 and History.load_memmap(tmp_path / "out").to_chats() == CHATS
    res = run_cli("import", tmp_path / "out", tmp_path / "again")
    assert res.returncode == 1 and "is a chatdata dataset already" in res.stderr and "chatdata export" in res.stderr
    (tmp_path / "empty").mkdir()
    res = run_cli("import", tmp_path / "empty", tmp_path / "again")
    assert res.returncode == 1 and "is a folder without .parquet or Arrow files" in res.stderr
    assert not (tmp_path / "again").exists()


@pytest.mark.parametrize("record, fmt, shape", [
    ({"conversations": [{"from": "human", "value": "hi"}]}, "openai", "sharegpt"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "sharegpt", "openai"),
    ([{"role": "user", "content": "hi"}], "openai", "bare"),
])
def test_a_format_flag_that_is_not_the_datas_names_the_right_one(tmp_path, record, fmt, shape):
    src = write_jsonl(tmp_path / "chats.jsonl", [record])
    res = run_cli("import", src, tmp_path / "ds", "--format", fmt)
    assert res.returncode == 1 and f"(this record is {shape}: pass --format {shape}, or leave --format out)" in res.stderr
    assert not (tmp_path / "ds").exists()
