"""chatdata import / export, driven as a user would (subprocess)."""
import gzip
import json

import pytest

from chatdata import History
from chatdata.data import load_sample_chats

from cli_helpers import run_cli, write_jsonl


def test_import_sample_roundtrip_exact(tmp_path, sample_jsonl, sample_ds):
    h = History.load_memmap(sample_ds)
    assert h.to_chats() == load_sample_chats()
    out = tmp_path / "back.jsonl"
    res = run_cli("export", sample_ds, out)
    assert res.returncode == 0, res.stderr
    assert "exported 300 conversations" in res.stdout
    assert out.read_bytes() == sample_jsonl.read_bytes()  # byte for byte


def test_import_reports_summary_and_writes_files(tmp_path, sample_jsonl):
    out = tmp_path / "ds"
    res = run_cli("import", sample_jsonl, out)
    assert res.returncode == 0, res.stderr
    assert "imported 300 conversations (1,986 messages)" in res.stdout
    assert res.stderr == "", res.stderr  # no progress bar when stderr is not a terminal
    assert (out / "meta.json").is_file()
    assert (out / "_storage" / "_values" / "content.bytes.memmap").is_file()
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


def test_import_gz_and_same_files_as_memmap(tmp_path):
    from chatdata.data import sample_chats_path

    out = tmp_path / "ds"
    assert run_cli("import", sample_chats_path(), out).returncode == 0
    ref = tmp_path / "ref"
    History.from_chats(load_sample_chats()).memmap(ref)
    for f in sorted(ref.rglob("*")):
        if f.is_file():
            assert (out / f.relative_to(ref)).read_bytes() == f.read_bytes(), f


def test_streaming_in_several_chunks(tmp_path):
    chats = load_sample_chats()[:50]
    chats[7] = [{"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]}]
    chats[30] = [{"role": "user", "content": [{"type": "text", "text": "parts"}], "name": "bob"}]
    src = write_jsonl(tmp_path / "in.jsonl", [{"messages": c} for c in chats])
    out = tmp_path / "ds"
    res = run_cli("import", src, out, "--chunk-size", "7")
    assert res.returncode == 0, res.stderr
    assert History.load_memmap(out).to_chats() == chats
    back = tmp_path / "back.jsonl"
    assert run_cli("export", out, back, "--chunk-size", "3").returncode == 0
    assert [json.loads(x)["messages"] for x in back.read_text().splitlines()] == chats


def test_sharegpt_and_bare(tmp_path):
    recs = [
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "héllo"}]},
        {"system": "Be brief.", "conversations": [
            {"from": "human", "value": "weather?"},
            {"from": "function_call", "value": json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})},
            {"from": "observation", "value": "{\"t\": 20}"},
            {"from": "gpt", "value": "20 C"}]},
    ]
    src = write_jsonl(tmp_path / "sg.jsonl", recs)
    assert run_cli("import", src, tmp_path / "sg").returncode == 0
    chats = History.load_memmap(tmp_path / "sg").to_chats()
    assert chats[0] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "héllo"}]
    assert [m["role"] for m in chats[1]] == ["system", "user", "assistant", "tool", "assistant"]
    assert chats[1][2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": {"city": "Paris"}}

    bare = [[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}, {"role": "assistant", "content": "c"}]]
    src = write_jsonl(tmp_path / "bare.jsonl", bare)
    assert run_cli("import", src, tmp_path / "bare").returncode == 0
    assert History.load_memmap(tmp_path / "bare").to_chats() == bare
    # a JSON document (a list of records), pretty-printed over several lines
    doc = tmp_path / "doc.json"
    doc.write_text(json.dumps([{"messages": c} for c in bare], indent=2))
    assert run_cli("import", doc, tmp_path / "doc").returncode == 0
    assert History.load_memmap(tmp_path / "doc").to_chats() == bare
    one_line = tmp_path / "one.json"
    one_line.write_text(json.dumps(bare))
    assert run_cli("import", one_line, tmp_path / "one").returncode == 0
    assert History.load_memmap(tmp_path / "one").to_chats() == bare


BAD_LINES = [
    {"messages": [{"role": "user", "content": "ok 1"}]},
    '{"messages": [{"role": "user", "content": "broken"',
    {"messages": [{"role": "user", "content": "ok 2"}]},
    {"conversations": [{"from": "alien", "value": "?"}]},
    {"messages": [{"content": "no role"}]},
    {"something": "else"},
    {"messages": [{"role": "user", "content": "ok 3"}]},
]


def test_bad_lines_skipped_and_counted(tmp_path):
    src = write_jsonl(tmp_path / "bad.jsonl", BAD_LINES)
    out = tmp_path / "ds"
    res = run_cli("import", src, out, "--chunk-size", "2")
    assert res.returncode == 0, res.stderr
    err = res.stderr.splitlines()
    assert err[0].startswith("bad.jsonl:line 2: invalid JSON")
    assert any(l.startswith("bad.jsonl:line 4: turn 0: unknown ShareGPT speaker 'alien'") for l in err)
    assert any(l.startswith("bad.jsonl:line 5: message 0: message has no 'role'") for l in err)
    assert any(l.startswith("bad.jsonl:line 6: expected") for l in err)
    assert "Traceback" not in res.stderr
    assert "imported 3 conversations" in res.stdout and "skipped 4 bad lines" in res.stdout
    assert [c[0]["content"] for c in History.load_memmap(out).to_chats()] == ["ok 1", "ok 2", "ok 3"]


def test_strict_stops_at_first_bad_line(tmp_path):
    src = write_jsonl(tmp_path / "bad.jsonl", BAD_LINES)
    out = tmp_path / "ds"
    res = run_cli("import", src, out, "--strict")
    assert res.returncode == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "line 2: invalid JSON" in lines[0] and "Traceback" not in res.stderr
    assert not out.exists()
    assert not list(tmp_path.glob(".ds.tmp-*"))  # the temporary folder is removed


def test_strict_bad_message_in_later_chunk(tmp_path):
    recs = [{"messages": [{"role": "user", "content": str(i)}]} for i in range(10)]
    recs[8] = {"messages": [{"role": 3, "content": "x"}]}
    src = write_jsonl(tmp_path / "in.jsonl", recs)
    res = run_cli("import", src, tmp_path / "ds", "--strict", "--chunk-size", "3")
    assert res.returncode == 1 and "line 9: message 0: 'role' must be a str" in res.stderr
    assert not (tmp_path / "ds").exists()


def test_all_bad_is_an_error(tmp_path):
    src = write_jsonl(tmp_path / "bad.jsonl", ["nope", "{}"])
    res = run_cli("import", src, tmp_path / "ds")
    assert res.returncode == 1 and "no valid conversation" in res.stderr


def test_empty_file_is_an_error_unless_allowed(tmp_path):
    src = tmp_path / "empty.jsonl"
    src.write_text("\n")
    res = run_cli("import", src, tmp_path / "ds")
    assert res.returncode == 1 and "holds no conversation" in res.stderr and "--allow-empty" in res.stderr
    assert not (tmp_path / "ds").exists()
    assert run_cli("import", src, tmp_path / "ds", "--allow-empty").returncode == 0
    h = History.load_memmap(tmp_path / "ds")
    assert h.batch_size[0] == 0 and h.to_chats() == []


def test_import_errors_are_one_line(tmp_path, sample_ds):
    res = run_cli("import", tmp_path / "missing.jsonl", tmp_path / "ds")
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "no such file" in res.stderr
    src = write_jsonl(tmp_path / "in.jsonl", [[{"role": "user", "content": "x"}]])
    res = run_cli("import", src, sample_ds)
    assert res.returncode == 1 and "--overwrite" in res.stderr
    (tmp_path / "notds").mkdir()
    (tmp_path / "notds" / "precious.txt").write_text("keep me")
    res = run_cli("import", src, tmp_path / "notds", "--overwrite")
    assert res.returncode == 1 and "not a chatdata dataset" in res.stderr
    assert (tmp_path / "notds" / "precious.txt").read_text() == "keep me"
    res = run_cli("import", src, tmp_path / "x", "--chunk-size", "0")
    assert res.returncode == 2 and "must be > 0" in res.stderr


def test_overwrite_replaces_dataset(tmp_path):
    src = write_jsonl(tmp_path / "a.jsonl", [[{"role": "user", "content": "a"}]])
    assert run_cli("import", src, tmp_path / "ds").returncode == 0
    src2 = write_jsonl(tmp_path / "b.jsonl", [[{"role": "user", "content": "b"}]] * 2)
    assert run_cli("import", src2, tmp_path / "ds", "--overwrite").returncode == 0
    assert History.load_memmap(tmp_path / "ds").to_chats() == [[{"role": "user", "content": "b"}]] * 2


def test_export_gz_and_errors(tmp_path, sample_ds, sample_jsonl):
    out = tmp_path / "out.jsonl.gz"
    assert run_cli("export", sample_ds, out).returncode == 0
    assert gzip.open(out, "rb").read() == sample_jsonl.read_bytes()
    res = run_cli("export", tmp_path / "nope", tmp_path / "x.jsonl")
    assert res.returncode == 1 and "no such dataset" in res.stderr


def test_import_in_process_matches_input(tmp_path):
    """The function the command calls, on synthetic data in all three formats."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.synthetic import make_conversations, write_jsonl as synth_write
    from chatdata.cli.import_ import import_file

    convs = make_conversations(300, seed=1)
    for fmt in ("openai", "sharegpt", "bare"):
        src = tmp_path / f"{fmt}.jsonl"
        synth_write(src, convs, fmt=fmt)
        stats = import_file(src, tmp_path / fmt, chunk_size=64, progress=False)
        assert stats.conversations == 300 and stats.bad == 0
        assert History.load_memmap(tmp_path / fmt).to_chats() == convs


def test_json_document_shapes(tmp_path):
    from chatdata.cli.import_ import import_file

    conv = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    cases = {
        "pretty_object.json": json.dumps({"messages": conv}, indent=2),
        "pretty_list.json": json.dumps([{"messages": conv}, {"messages": conv}], indent=2),
        "one_line_list.json": json.dumps([conv, conv]),
        "bare_lines.jsonl": json.dumps(conv) + "\n" + json.dumps(conv) + "\n",
        "bad_first_line.jsonl": "{oops\n" + json.dumps({"messages": conv}) + "\n",
    }
    expect = {"pretty_object.json": 1, "pretty_list.json": 2, "one_line_list.json": 2, "bare_lines.jsonl": 2,
              "bad_first_line.jsonl": 1}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        stats = import_file(tmp_path / name, tmp_path / (name + ".ds"), progress=False, report=lambda m: None)
        assert stats.conversations == expect[name], name
        assert History.load_memmap(tmp_path / (name + ".ds")).to_chats() == [conv] * expect[name]
    bad = tmp_path / "broken.json"
    bad.write_text('[\n  {"messages": []\n')
    res = run_cli("import", bad, tmp_path / "broken")
    assert res.returncode == 1 and "not valid JSON" in res.stderr and len(res.stderr.splitlines()) == 1


@pytest.mark.parametrize("compressed", [False, True])
def test_import_from_a_pipe_reads_every_line(tmp_path, sample_jsonl, compressed):
    """A pipe (/dev/stdin, <(zcat x.gz)) was read twice, the format sniffed from its first
    lines, which the import then no longer had: 75 of 100,000 conversations were lost."""
    import subprocess
    import sys

    data = sample_jsonl.read_bytes() * 40
    out = tmp_path / "ds"
    res = subprocess.run([sys.executable, "-m", "chatdata", "import", "/dev/stdin", str(out)],
                         input=gzip.compress(data) if compressed else data, capture_output=True, timeout=300)
    assert res.returncode == 0, res.stderr.decode()
    want = [json.loads(line)["messages"] for line in data.splitlines() if line.strip()]
    assert History.load_memmap(out).to_chats() == want
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # the spooled copy is gone
    bad = subprocess.run([sys.executable, "-m", "chatdata", "import", "/dev/stdin", str(tmp_path / "b")],
                         input=b'{"messages": 5}\n' + data[:2000].rsplit(b"\n", 1)[0] + b"\n", capture_output=True,
                         timeout=300)
    assert bad.returncode == 0 and b"stdin:line 1: 'messages' must be a list" in bad.stderr


def test_a_damaged_gzip_source_is_one_line_naming_it(tmp_path, sample_jsonl):
    """A truncated .gz was an internal error (EOFError); a file that is not gzip said only
    "Not a gzipped file", without its name."""
    whole = gzip.compress(sample_jsonl.read_bytes() * 20)
    for name, raw, what in (("cut.jsonl.gz", whole[:len(whole) // 2], "Compressed file ended"),
                            ("plain.jsonl.gz", b"garbage", "Not a gzipped file")):
        (tmp_path / name).write_bytes(raw)
        res = run_cli("import", tmp_path / name, tmp_path / "out")
        assert res.returncode == 1 and "internal error" not in res.stderr
        assert f"{tmp_path / name}: cannot read it ({what}" in res.stderr and "nothing was written" in res.stderr
        assert not (tmp_path / "out").exists()


def test_sharegpt_speaker_that_is_not_a_string_is_one_bad_line(tmp_path):
    """A 'from' that is a list raised TypeError (unhashable) and ended the whole import."""
    src = tmp_path / "sg.jsonl"
    src.write_text('{"conversations": [{"from": ["x"], "value": "hi"}]}\n'
                   '{"conversations": [{"from": "function_call", "value": "' + "[" * 5000 + '"}, {"from": "human", "value": "ok"}]}\n')
    res = run_cli("import", src, tmp_path / "ds")
    assert res.returncode == 0, res.stderr
    assert "sg.jsonl:line 1: turn 0: 'from' must be a string (the speaker), got list" in res.stderr
    assert History.load_memmap(tmp_path / "ds").to_chats() == [
        [{"role": "assistant", "content": "[" * 5000}, {"role": "user", "content": "ok"}]]
