"""chatdata import: telling JSON Lines from one JSON document, driven through the CLI."""
import gzip
import json
import subprocess
import sys

import pytest
from chatdata import History

from cli_helpers import run_cli

CONV = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
GOOD = json.dumps({"messages": CONV})


def _write(path, text: str, gz: bool):
    if gz:
        path = path.with_name(path.name + ".gz")
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _compact(items) -> str:
    """One item per line, commas at the line ends (a common hand-written style)."""
    return "[\n" + ",\n".join(json.dumps(x) for x in items) + "\n]\n"


# name -> (text, conversations imported, bad lines reported)
SHAPES = {
    # JSON Lines
    "bad_first_two.jsonl": ('{"messages": [{"role": "user", "content": "bro\n{oops\n' + f"{GOOD}\n{GOOD}\n", 2, 2),
    "bad_first_two_then_one.jsonl": ("{oops\n[nope\n" + GOOD + "\n", 1, 2),
    "bad_lines_between.jsonl": ("{oops\n" + GOOD + "\n{oops\n" + GOOD + "\n", 2, 2),
    "bad_first_line.jsonl": ("{oops\n" + GOOD + "\n", 1, 1),
    "one_line.jsonl": (GOOD + "\n", 1, 0),
    "one_line_bare.jsonl": (json.dumps(CONV) + "\n", 1, 0),
    "bare_lines.jsonl": (json.dumps(CONV) + "\n" + json.dumps(CONV) + "\n", 2, 0),
    "blank_lines_around.jsonl": ("\n\n" + GOOD + "\n\n  \n" + GOOD + "\n\n", 2, 0),
    "long_bad_start.jsonl": ("{oops\n" * 62 + (GOOD + "\n") * 3, 3, 62),  # the sniff reads 64 lines
    # one JSON document
    "pretty_list.json": (json.dumps([{"messages": CONV}] * 2, indent=2), 2, 0),
    "compact_list.json": (_compact([{"messages": CONV}] * 3), 3, 0),
    "compact_one_item.json": (_compact([{"messages": CONV}]), 1, 0),
    "leading_commas.json": ("[ " + "\n, ".join([GOOD] * 3) + "\n]\n", 3, 0),
    "nested_one_message_per_line.json": ("[\n" + ",\n".join(_compact(CONV) for _ in range(2)) + "]\n", 2, 0),
    "pretty_object.json": (json.dumps({"messages": CONV}, indent=2), 1, 0),
    "pretty_sharegpt_object.json": (json.dumps({"conversations": [{"from": "human", "value": "a"},
                                                                  {"from": "gpt", "value": "b"}]}, indent=2), 1, 0),
    "pretty_bare_conversation.json": (json.dumps(CONV, indent=2), 1, 0),
    "compact_bare_conversation.json": (_compact(CONV), 1, 0),
    "one_line_list.json": (json.dumps([CONV, CONV]), 2, 0),
    "one_line_list_of_records.json": (json.dumps([{"messages": CONV}] * 2), 2, 0),
    # a UTF-8 byte order mark (json.loads reads it in bytes)
    "bom_pretty_list.json": ("\ufeff" + json.dumps([{"messages": CONV}] * 2, indent=2), 2, 0),
    "bom_lines.jsonl": ("\ufeff" + f"{GOOD}\n{GOOD}\n", 2, 0),
}


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
@pytest.mark.parametrize("name", SHAPES)
def test_json_lines_or_one_document(tmp_path, name, gz):
    text, n, bad = SHAPES[name]
    src = _write(tmp_path / name, text, gz)
    res = run_cli("import", src, tmp_path / "ds")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    assert f"imported {n} conversation" in res.stdout
    if bad:
        assert f"skipped {bad} bad line" in res.stdout and f"{src.name}:line 1: invalid JSON" in res.stderr
    else:
        assert res.stderr == "" and "skipped" not in res.stdout
    assert History.load_memmap(tmp_path / "ds").to_chats() == [CONV] * n


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_json_lines_with_bad_first_lines_strict_names_line_1(tmp_path, gz):
    src = _write(tmp_path / "in.jsonl", SHAPES["bad_first_two.jsonl"][0], gz)
    res = run_cli("import", src, tmp_path / "ds", "--strict")
    assert res.returncode == 1 and len(res.stderr.strip().splitlines()) == 1
    assert f"{src.name}:line 1: invalid JSON" in res.stderr and "--strict: nothing written" in res.stderr
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("text", ["", "\n", "\n  \n\t\n"], ids=["empty", "newline", "blank_lines"])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_empty_or_blank_source_holds_no_conversation(tmp_path, text, gz):
    src = _write(tmp_path / "in.jsonl", text, gz)
    res = run_cli("import", src, tmp_path / "ds")
    assert res.returncode == 1 and "holds no conversation" in res.stderr and "Traceback" not in res.stderr
    assert run_cli("import", src, tmp_path / "ds", "--allow-empty").returncode == 0
    assert History.load_memmap(tmp_path / "ds").to_chats() == []


@pytest.mark.parametrize("text, what", [
    ('[\n  {"messages": []\n', "not valid JSON"),  # cut short
    ('[\n  {"messages": ' + json.dumps(CONV) + "},\n  {oops}\n]\n", "not valid JSON"),
    ("{oops\n[nope\n", "not valid JSON"),  # two bad lines and nothing else: no way to tell
    ("{oops\n" * 64 + GOOD + "\n", "not valid JSON"),  # past the sniffed lines: taken for a document
])
def test_a_broken_document_is_one_line(tmp_path, text, what):
    src = tmp_path / "doc.json"
    src.write_text(text)
    res = run_cli("import", src, tmp_path / "ds")
    assert res.returncode == 1 and what in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "ds").exists()


def test_a_document_that_is_one_conversation_is_not_split_unless_the_format_says(tmp_path):
    src = tmp_path / "conv.json"
    src.write_text(json.dumps(CONV, indent=2))
    assert run_cli("import", src, tmp_path / "bare", "--format", "bare").returncode == 0
    assert History.load_memmap(tmp_path / "bare").to_chats() == [CONV]
    res = run_cli("import", src, tmp_path / "oa", "--format", "openai")  # items are not {"messages"}: bad
    assert res.returncode == 1 and "conv.json:item 0: expected {\"messages\": [...]}" in res.stderr


def test_sniffing_reads_a_bounded_head_of_json_lines(tmp_path, monkeypatch):
    """JSON Lines stays streamed: telling it from a document reads a few lines, not the file."""
    from chatdata.cli import import_

    src = tmp_path / "big.jsonl"
    src.write_text("{oops\n" * 3 + (GOOD + "\n") * 5000)
    read = []

    class Counting:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def __iter__(self):
            for line in self.f:
                read.append(len(line))
                yield line

    real_open = import_._open
    monkeypatch.setattr(import_, "_open", lambda p: Counting(real_open(p)))
    assert import_._whole_json(src) is False
    assert len(read) <= 64


def test_piped_json_lines_with_bad_first_lines_and_a_piped_document(tmp_path):
    for text, n in ((SHAPES["bad_first_two.jsonl"][0], 2), (json.dumps(CONV, indent=2), 1)):
        out = tmp_path / f"ds{n}"
        res = subprocess.run([sys.executable, "-m", "chatdata", "import", "/dev/stdin", str(out)],
                             input=gzip.compress(text.encode()), capture_output=True, timeout=300)
        assert res.returncode == 0, res.stderr.decode()
        assert History.load_memmap(out).to_chats() == [CONV] * n
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds1", "ds2"]  # no spooled copy left
