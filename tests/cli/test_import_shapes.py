"""chatdata import: telling JSON Lines from one JSON document, and the record shapes (ShareGPT's
per-turn weights), driven through the CLI."""
import gzip
import json
import re
import subprocess
import sys

import pytest
import torch

from chatdata import History
from chatdata.td import load_memmap

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
    # past the sniffed lines: taken for a document, which does not parse, and the whole file reads
    # as JSON Lines (whole values on consecutive lines, or a whole value last)
    "longer_bad_start.jsonl": ("{oops\n" * 100 + (GOOD + "\n") * 3, 3, 100),
    "longer_bad_start_one_good.jsonl": ("[nope\n" * 64 + GOOD + "\n", 1, 64),
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
    ("{oops\n" * 100 + GOOD + "\n{oops\n", "not valid JSON"),  # past the sniffed lines, no two whole lines
    ("[\n" + ",\n".join([GOOD] * 70) + ",\n{oops}\n]\n", "not valid JSON"),  # broken past the sniff
])
def test_a_broken_document_is_one_line(tmp_path, text, what):
    src = tmp_path / "doc.json"
    src.write_text(text)
    res = run_cli("import", src, tmp_path / "ds")
    assert res.returncode == 1 and what in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_a_bare_list_of_sharegpt_turns_is_one_conversation(tmp_path, gz):
    turns = [{"from": "system", "value": "s"}, {"from": "human", "value": "a"},
             {"from": "gpt", "value": "b", "weight": 0}]
    want = [{"role": "system", "content": "s"}, {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b", "weight": 0}]
    for name, text, n in (("doc.json", json.dumps(turns, indent=2), 1),
                          ("lines.jsonl", (json.dumps(turns) + "\n") * 2, 2)):
        src = _write(tmp_path / name, text, gz)
        res = run_cli("import", src, tmp_path / name.split(".")[0])
        assert res.returncode == 0 and res.stderr == "", res.stderr
        assert History.load_memmap(tmp_path / name.split(".")[0]).to_chats() == [want] * n
    bad = _write(tmp_path / "bad.jsonl", json.dumps([{"from": "human", "value": "a"}, {"from": "alien", "value": "b"}])
                 + "\n" + json.dumps(turns) + "\n", gz)
    res = run_cli("import", bad, tmp_path / "bad")
    assert res.returncode == 0 and "line 1: turn 1: unknown ShareGPT speaker 'alien'" in res.stderr
    assert History.load_memmap(tmp_path / "bad").to_chats() == [want]


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


# -- ShareGPT: per-turn weights, tools ----------------------------------------------------------
WEIGHTED = [
    {"system": "Be brief.", "conversations": [
        {"from": "human", "value": "Zqq one?"},
        {"from": "gpt", "value": "Zqa one.", "weight": 0},
        {"from": "human", "value": "Zqq two?", "weight": 0.5},
        {"from": "gpt", "value": "Zqa two.", "weight": 1}]},
    {"conversations": [
        {"from": "human", "value": "weather?"},
        {"from": "function_call", "value": json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}}),
         "weight": 0},
        {"from": "observation", "value": "20 C"},
        {"from": "gpt", "value": "Warm.", "weight": None}]},
]


def test_sharegpt_weights_are_kept_and_train_what_they_say(tmp_path):
    src = tmp_path / "sg.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in WEIGHTED))
    ds = tmp_path / "ds"
    res = run_cli("import", src, ds)
    assert res.returncode == 0, res.stderr
    chats = History.load_memmap(ds).to_chats()
    assert [m.get("weight") for m in chats[0]] == [None, None, 0, 0.5, 1]  # the system prompt has none
    assert chats[0][2] == {"role": "assistant", "content": "Zqa one.", "weight": 0}
    assert chats[1][1]["weight"] == 0 and chats[1][1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert "weight" not in chats[1][3]  # null: no weight given
    # export gives them back, as OpenAI messages
    assert run_cli("export", ds, tmp_path / "back.jsonl").returncode == 0
    assert [json.loads(x)["messages"] for x in (tmp_path / "back.jsonl").read_text().splitlines()] == chats

    # tokenize --message-weights: the turn marked 0 is not trained, the user turn gets 0.5
    from chatdata.data import load_sample_tokenizer

    tok = load_sample_tokenizer()
    assert run_cli("tokenize", ds, tmp_path / "tokens", "--message-weights", "-q").returncode == 0
    got = load_memmap(tmp_path / "tokens")
    ids, weights = got[0]["input_ids"].long(), got[0]["loss_weights"]

    def text(w):
        return tok.decode(ids[weights == w].tolist())

    assert "Zqa one." not in text(1.0) + text(0.5) and "Zqa two." in text(1.0) and "Zqq two?" in text(0.5)
    ref = History.load_memmap(ds)[:1].apply_chat_template(tokenizer=tok, add_generation_prompt=False,
                                                         loss_weights=True)
    assert torch.equal(weights, ref[0]["loss_weights"])


@pytest.mark.parametrize("weight, shown", [
    ('"yes"', "'yes'"), ("-1", "-1"), ("true", "True"), ("NaN", "nan"), ("1e999", "inf"), ("[1]", "[1]"),
    ("1" + "0" * 400, "1000"),
])
def test_a_bad_sharegpt_weight_is_one_bad_line(tmp_path, weight, shown):
    src = tmp_path / "sg.jsonl"
    src.write_text('{"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a", '
                   f'"weight": {weight}}}]}}\n' + json.dumps(WEIGHTED[0]) + "\n")
    res = run_cli("import", src, tmp_path / "ds")
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    assert re.search(rf"sg\.jsonl:line 1: turn 1: 'weight' must be a (finite )?number >= 0, got {re.escape(shown)}",
                     res.stderr), res.stderr
    assert "imported 1 conversation" in res.stdout and "skipped 1 bad line" in res.stdout
    res = run_cli("import", src, tmp_path / "ds2", "--strict")
    assert res.returncode == 1 and "line 1: turn 1: 'weight' must be" in res.stderr


def test_openai_messages_keep_their_weight(tmp_path):
    chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "weight": 0}]
    src = tmp_path / "oa.jsonl"
    src.write_text(json.dumps({"messages": chat}) + "\n")
    assert run_cli("import", src, tmp_path / "ds").returncode == 0
    assert History.load_memmap(tmp_path / "ds").to_chats() == [chat]


@pytest.mark.parametrize("weight, shown", [('"1"', "'1'"), ("-1", "-1"), ("true", "True"), ("NaN", "nan")])
def test_a_bad_openai_weight_is_one_bad_line_at_import_not_at_tokenize(tmp_path, weight, shown):
    good = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "weight": 0.5}]}
    src = tmp_path / "oa.jsonl"
    src.write_text(json.dumps(good) + "\n" + '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", '
                   f'"content": "a", "weight": {weight}}}]}}\n' + json.dumps(good) + "\n")
    res = run_cli("import", src, tmp_path / "ds")
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert re.search(rf"oa\.jsonl:line 2: message 1: 'weight' must be a (finite )?number >= 0, got {re.escape(shown)}",
                     res.stderr), res.stderr
    assert "imported 2 conversations" in res.stdout and "skipped 1 bad line" in res.stdout
    assert History.load_memmap(tmp_path / "ds").to_chats() == [good["messages"]] * 2
    res = run_cli("import", src, tmp_path / "ds2", "--strict")
    assert res.returncode == 1 and "line 2: message 1: 'weight' must be" in res.stderr


def test_sharegpt_tools_string_is_what_check_tools_checks_against(tmp_path):
    """LLaMA-Factory's ShareGPT rows carry "tools" as a JSON string beside "conversations"."""
    tools = json.dumps([{"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}, "required": ["city"]}}])
    rec = {"tools": tools, "conversations": [
        {"from": "human", "value": "weather?"},
        {"from": "function_call", "value": json.dumps({"name": "get_time", "arguments": {}})},
        {"from": "observation", "value": "noon"}, {"from": "gpt", "value": "Noon."}]}
    src = tmp_path / "sg.jsonl"
    src.write_text(json.dumps(rec) + "\n")
    res = run_cli("import", src, tmp_path / "ds", "--check-tools")
    assert res.returncode == 1 and "get_time" in res.stderr and "sg.jsonl:line 1" in res.stderr, res.stderr
