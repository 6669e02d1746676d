"""Tool-call checks on the packaged sample conversations (real tool calls and their tools' JSON
schemas) with every problem planted: each bad row is named by file and line (or Parquet row) with
its problem, and nothing else is; the import is refused, or the rows dropped with --skip-bad."""
import copy
import json

import pytest

from chatdata import History, load_memmap
from chatdata.cli import main
from chatdata.data import DATA_DIR, load_sample_chats, sample_tools
from chatdata.hygiene import check_tool_calls, decode_arguments

TOOLS_FILE = DATA_DIR / "sample_tools.json"


def _calls(conv):
    return [m for m in conv if m.get("tool_calls")]


def _good_rows():
    """Sample conversations with tool calls, in the shapes datasets use: OpenAI (dict arguments),
    string arguments, flat {name, arguments}, and ids with tool_call_id replies."""
    convs = [c for c in load_sample_chats() if _calls(c)]
    rows = []
    for k, conv in enumerate(convs):
        conv = copy.deepcopy(conv)
        style = k % 4
        n_call = 0
        for m in conv:
            for call in m.get("tool_calls") or []:
                if style == 1:
                    call["function"]["arguments"] = json.dumps(call["function"]["arguments"])
                elif style == 2:
                    fn = call.pop("function")
                    call.pop("type", None)
                    call.update(fn)
                elif style == 3:
                    call["id"] = f"call_{n_call}"
                    n_call += 1
        if style == 3:
            answered = 0
            for m in conv:
                if m["role"] == "tool":
                    m["tool_call_id"] = f"call_{answered}"
                    answered += 1
        rows.append({"messages": conv, "tools": sample_tools()})  # as tool-use datasets ship them
    return rows


def _call_of(row):
    call = _calls(row["messages"])[0]["tool_calls"][0]
    return call["function"] if "function" in call else call


def _plant(rows):
    """Plant each problem in its own row; returns {line number: problem}."""
    planted = {}

    def at(i, problem):
        planted[i + 1] = problem
        return rows[i]

    _call_of(at(3, "arguments_not_json"))["arguments"] = '{"city": "Tokyo", "unit": "cels'  # unterminated
    _call_of(at(7, "arguments_not_object"))["arguments"] = '["Tokyo"]'
    _call_of(at(11, "unknown_tool"))["name"] = "get_wether"
    row = at(15, "schema_mismatch")
    _call_of(row)["arguments"] = {}  # every sample tool requires an argument
    row = at(19, "orphan_tool_reply")
    row["messages"].insert(1, {"role": "tool", "content": "{}"})  # a reply before any call
    row = at(23, "orphan_tool_reply")
    row["messages"].insert(len(row["messages"]), {"role": "tool", "content": "late", "tool_call_id": "call_999"})
    call = _calls(at(27, "malformed_call")["messages"])[0]["tool_calls"][0]
    (call["function"] if "function" in call else call).pop("name")
    row = at(31, "unknown_tool")  # the row's own tools do not include what it calls
    row["tools"] = [t for t in sample_tools() if t["function"]["name"] != _call_of(row)["name"]]
    row = at(35, "bad_tool_schema")
    tools = copy.deepcopy(sample_tools())
    for t in tools:
        t["function"]["parameters"] = {"type": "objekt"}
    row["tools"] = tools
    return planted


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rows = _good_rows()
    planted = _plant(rows)
    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    # a string-typed tool_calls (prime-rl #3081): History refuses it as a bad line
    bad = copy.deepcopy(rows[0])
    bad["messages"][2]["tool_calls"] = json.dumps(bad["messages"][2]["tool_calls"])
    lines.append(json.dumps(bad))
    path = tmp_path_factory.mktemp("tools") / "tools.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, rows, planted, len(lines)


def _reported(err: str, name: str) -> dict:
    found = {}
    for line in err.splitlines():
        if line.startswith(f"{name}:line "):
            where, rest = line.split(": ", 1)
            found.setdefault(int(where.split()[-1]), []).append(rest)
    return found


def test_every_planted_problem_is_named_and_the_import_refused(data, tmp_path, capsys):
    path, rows, planted, n_lines = data
    out = tmp_path / "ds"
    assert main(["import", str(path), str(out), "--check-tools", "-q"]) == 1
    err = capsys.readouterr().err
    found = _reported(err, path.name)
    string_line = n_lines
    assert found.pop(string_line)[0].startswith("message 2: 'tool_calls' must be a list")
    assert {k: v[0].split(": ")[0] for k, v in found.items()} == planted  # each planted row, and nothing else
    assert "nothing written" in err and "--skip-bad" in err
    assert not out.exists()
    problems = [json.loads(x) for x in (tmp_path / "ds.hygiene" / "problems.jsonl").read_text().splitlines()]
    assert {p["where"]: p["problem"] for p in problems} == {f"{path.name}:line {k}": v for k, v in planted.items()}


def test_skip_bad_drops_them_and_counts_per_problem(data, tmp_path, capsys):
    path, rows, planted, n_lines = data
    out = tmp_path / "ds"
    assert main(["import", str(path), str(out), "--check-tools", "--skip-bad"]) == 0
    stdout = capsys.readouterr().out
    assert "tool-call problems: 10 (arguments_not_json: 1, arguments_not_object: 1, bad_tool_schema: 2, " \
           "malformed_call: 1, orphan_tool_reply: 2, schema_mismatch: 1, unknown_tool: 2)" in stdout
    h = load_memmap(out)
    assert h.batch_size[0] == n_lines - 1 - len(planted)
    # string arguments were decoded; the rest is as given
    for conv in h.to_chats():
        for m in conv:
            for call in m.get("tool_calls") or []:
                body = call["function"] if "function" in call else call
                assert isinstance(body["arguments"], dict)
    assert check_tool_calls(h, sample_tools()) == []


def test_parquet_rows_are_named_by_row(data, tmp_path, capsys):
    import pyarrow.parquet as pq

    path, rows, planted, _ = data
    h = History.from_chats([r["messages"] for r in rows])
    pq.write_table(h.to_arrow(), tmp_path / "tools.parquet")
    code = main(["import", str(tmp_path / "tools.parquet"), str(tmp_path / "ds"), "--check-tools", "--tools",
                 str(TOOLS_FILE), "-q"])
    assert code == 1
    err = capsys.readouterr().err
    named = {int(line.split(": ")[0].split()[-1]) for line in err.splitlines() if line.startswith("tools.parquet:row ")}
    # a Parquet file here has only the messages column: the --tools file applies to every row
    expected = {k - 1 for k, v in planted.items() if v not in ("bad_tool_schema",) and k != 32}
    assert named == expected
    assert not (tmp_path / "ds").exists()


def test_python_api_on_a_history(data):
    _, rows, planted, _ = data
    h = History.from_chats([r["messages"] for r in rows])
    per_row = [r["tools"] for r in rows]
    problems = check_tool_calls(h, per_row)
    assert {p["conversation"] + 1: p["problem"] for p in problems} == planted
    # the jsonschema backend (used when jsonschema-rs is not installed) finds the same
    slow = check_tool_calls(h, per_row, backend="py")
    assert [(p["conversation"], p["message"], p["problem"]) for p in slow] == \
        [(p["conversation"], p["message"], p["problem"]) for p in problems]
    assert all(set(p) == {"conversation", "message", "problem", "detail"} for p in problems)
    assert {p["conversation"] for p in check_tool_calls(h)} == \
        {k - 1 for k, v in planted.items() if v in ("arguments_not_json", "arguments_not_object",
                                                    "orphan_tool_reply", "malformed_call")}
    decoded = decode_arguments(h)
    assert decoded.batch_size == h.batch_size and decode_arguments(decoded) is decoded


def test_bad_flags_are_clear_errors(tmp_path, capsys):
    src = tmp_path / "a.jsonl"
    src.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n')
    assert main(["import", str(src), str(tmp_path / "o"), "--skip-bad"]) == 1
    assert "pass --check-tools too" in capsys.readouterr().err
    (tmp_path / "t.json").write_text("{not json")
    assert main(["import", str(src), str(tmp_path / "o"), "--check-tools", "--tools", str(tmp_path / "t.json")]) == 1
    assert "not a JSON list of tool specs" in capsys.readouterr().err
    assert main(["import", str(src), str(tmp_path / "o"), "--dedup", "near:2"]) == 1
    assert "between 0 and 1" in capsys.readouterr().err


def test_unreadable_row_tools_are_a_problem_of_that_row(tmp_path, capsys):
    call = {"role": "assistant", "content": "", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]}
    rows = [{"messages": [call], "tools": "{oops"}, {"messages": [call], "tools": [42]},
            {"messages": [call], "tools": json.dumps(sample_tools())}, {"messages": [call]}]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["import", str(src), str(tmp_path / "ds"), "--check-tools", "--skip-bad", "-q"]) == 0
    err = capsys.readouterr().err
    assert "rows.jsonl:line 1: bad_tool_schema" in err and "rows.jsonl:line 2: bad_tool_schema" in err
    assert "line 3" not in err and "line 4" not in err
    assert load_memmap(tmp_path / "ds").batch_size[0] == 2


def test_arguments_nested_too_deeply_and_tools_that_are_not_a_list_are_no_crash(tmp_path, capsys):
    """'[' * 100000 as arguments raised RecursionError and "tools": 5 a TypeError: both ended the
    import as an internal error."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    deep = {"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "[" * 100000}}]}], "tools": tools}
    not_list = {"messages": [{"role": "user", "content": "y"}], "tools": 5}
    good = {"messages": [{"role": "user", "content": "z"}], "tools": tools}
    src = tmp_path / "c.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in (deep, not_list, good)) + "\n")
    assert main(["import", str(src), str(tmp_path / "ds"), "--check-tools", "--skip-bad"]) == 0
    out = capsys.readouterr()
    assert "internal error" not in out.err
    assert "c.jsonl:line 1: arguments_not_json" in out.out + out.err and "nested too deeply" in out.out + out.err
    assert load_memmap(tmp_path / "ds").to_chats() == [not_list["messages"], good["messages"]]  # no call to check
