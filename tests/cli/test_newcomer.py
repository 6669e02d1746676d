"""What a newcomer hit (issue 16): sizes with null content, one bad conversation in tokenize,
empty input, the same overwrite rule everywhere, temporary folders, singular forms."""
import json
import os
import subprocess
import sys

import pytest

from chatdata import History, load_memmap
from cli_helpers import ROOT, run_cli, write_jsonl

MISTRAL_TEMPLATE = ROOT / "tests" / "data" / "tokenizers" / "mistral-nemo-instruct-2407" / "chat_template.jinja"


def _user(text):
    return {"role": "user", "content": text}


def _assistant(text):
    return {"role": "assistant", "content": text}


def test_info_counts_text_bytes_with_null_content(tmp_path):
    chat = [_user("weather?"),
            {"role": "assistant", "content": None,
             "tool_calls": [{"type": "function", "function": {"name": "w", "arguments": "{}"}}]},
            {"role": "tool", "content": "ok", "tool_call_id": "1"}]
    ds = tmp_path / "ds"
    assert run_cli("import", write_jsonl(tmp_path / "c.jsonl", [{"messages": chat}]), ds).returncode == 0
    res = run_cli("info", ds, "--json")
    assert res.returncode == 0, res.stderr
    stats = json.loads(res.stdout)
    assert stats["content_bytes"] == len("weather?") + len("ok")  # not JSON text: no quotes, null is 0
    assert stats["content_bytes_per_message"]["min"] == 0
    text = run_cli("info", ds).stdout
    assert "1 in 1 message (1 conversation)" in text


@pytest.fixture(scope="module")
def ds_with_a_bad_conversation(tmp_path_factory):
    """Five chats; the Mistral template rejects chat 2 (two user turns in a row)."""
    tmp = tmp_path_factory.mktemp("bad")
    chats = [[_user(f"q{i}"), _assistant(f"a{i}")] for i in range(5)]
    chats[2] = [_user("first"), _user("second"), _assistant("a")]
    ds = tmp / "ds"
    assert run_cli("import", write_jsonl(tmp / "c.jsonl", chats), ds).returncode == 0
    return ds


def test_tokenize_names_the_bad_conversation(tmp_path, ds_with_a_bad_conversation):
    out = tmp_path / "tok"
    res = run_cli("tokenize", ds_with_a_bad_conversation, out, "--template", MISTRAL_TEMPLATE, "--batch-size", "4")
    assert res.returncode == 1
    line = res.stderr.strip()
    assert line.count("\n") == 0 and "conversation 2:" in line and "alternate" in line and "--skip-bad" in line
    assert not out.exists()


def test_tokenize_skip_bad_keeps_the_rest(tmp_path, ds_with_a_bad_conversation):
    out = tmp_path / "tok"
    res = run_cli("tokenize", ds_with_a_bad_conversation, out, "--template", MISTRAL_TEMPLATE, "--batch-size", "4",
                  "--skip-bad")
    assert res.returncode == 0, res.stderr
    assert "tokenized 4 conversations" in res.stdout
    assert "conversation 2: " in res.stderr and "skipped 1 conversation the template rejects: 2" in res.stderr
    assert load_memmap(out).batch_size[0] == 4
    strict = run_cli("tokenize", ds_with_a_bad_conversation, tmp_path / "tok2", "--template", MISTRAL_TEMPLATE,
                     "--skip-bad", "--strict")
    assert strict.returncode == 1 and "--strict" in strict.stderr
    assert load_memmap(tmp_path / "tok2").batch_size[0] == 4  # written all the same
    assert run_cli("tokenize", ds_with_a_bad_conversation, tmp_path / "tok3", "--strict").returncode == 2


def test_empty_input_is_an_error_in_every_subcommand(tmp_path):
    src = tmp_path / "empty.jsonl"
    src.write_text("")
    res = run_cli("import", src, tmp_path / "ds")
    assert res.returncode == 1 and "no conversation" in res.stderr and "--allow-empty" in res.stderr
    assert run_cli("import", src, tmp_path / "ds", "--allow-empty").returncode == 0
    for cmd, out in (("tokenize", tmp_path / "tok"), ("export", tmp_path / "out.jsonl")):
        res = run_cli(cmd, tmp_path / "ds", out)
        assert res.returncode == 1 and "holds no conversation" in res.stderr and "--allow-empty" in res.stderr, cmd
        assert not out.exists()
        assert run_cli(cmd, tmp_path / "ds", out, "--allow-empty").returncode == 0, cmd
    assert (tmp_path / "out.jsonl").read_text() == ""
    assert load_memmap(tmp_path / "tok").batch_size[0] == 0


def test_every_subcommand_refuses_to_overwrite_without_the_flag(tmp_path):
    src = write_jsonl(tmp_path / "c.jsonl", [[_user("hi"), _assistant("hello")]])
    ds, tok, out = tmp_path / "ds", tmp_path / "tok", tmp_path / "out.jsonl"
    for args in (("import", src, ds), ("tokenize", ds, tok), ("export", ds, out)):
        assert run_cli(*args).returncode == 0, args
        again = run_cli(*args)
        assert again.returncode == 1 and "--overwrite" in again.stderr, args
        assert run_cli(*args, "--overwrite").returncode == 0, args
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    for args in (("import", src, foreign), ("tokenize", ds, foreign)):
        res = run_cli(*args, "--overwrite")
        assert res.returncode == 1 and "not a chatdata dataset" in res.stderr
    assert (foreign / "notes.txt").read_text() == "mine"


def test_singular_forms(tmp_path):
    src = write_jsonl(tmp_path / "c.jsonl", [[_user("hi")], "not json"])
    res = run_cli("import", src, tmp_path / "ds")
    assert "imported 1 conversation (1 message)" in res.stdout and "skipped 1 bad line;" in res.stdout


def _run_python(code, tmpdir):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmpdir))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_memmap_without_prefix_cleans_up(tmp_path):
    code = """
import gc, os, tempfile, torch
from chatdata import TensorDict, History
td = TensorDict({"a": torch.arange(4)}, [4]).memmap()
folder = os.path.dirname(td["a"].filename)
a = td["a"]
del td; gc.collect()
assert not os.path.exists(folder) and int(a.sum()) == 6   # gone with its owner; the mapped data lives on
kept = History.from_chats([[{"role": "user", "content": "hi"}]]).memmap()
t = TensorDict({"b": torch.ones(2)}, [2]); t.memmap_()
assert len(os.listdir(tempfile.gettempdir())) == 2             # alive: still there
print(kept[0].content, float(t["b"].sum()))
"""
    res = _run_python(code, tmp_path)
    assert res.returncode == 0, res.stderr
    assert list(tmp_path.iterdir()) == []  # the rest went at exit


def test_demo_without_out_leaves_nothing(tmp_path):
    res = run_cli("demo", env={"TMPDIR": str(tmp_path)}, process=True)  # what is left at exit
    assert res.returncode == 0, res.stderr
    assert "temporary folder" in res.stdout and "--out" in res.stdout
    assert list(tmp_path.iterdir()) == []


def test_tokenize_mask_options(tmp_path):
    chat = [_user("hi"), {"role": "assistant", "content": "<think>because</think>hello"}]
    ds = tmp_path / "ds"
    assert run_cli("import", write_jsonl(tmp_path / "c.jsonl", [chat]), ds).returncode == 0
    trained = {}
    for flags in ((), ("--no-eot",), ("--no-eot", "--no-reasoning")):
        out = tmp_path / ("tok" + "".join(flags))
        res = run_cli("tokenize", ds, out, *flags)
        assert res.returncode == 0, res.stderr
        trained[flags] = int(load_memmap(out)[0]["assistant_masks"].sum())
    assert trained[()] > trained[("--no-eot",)] > 0
    assert trained[("--no-eot",)] >= trained[("--no-eot", "--no-reasoning")] > 0
