"""Flags that did not do what ``chatdata CMD --help`` says.

* ``import --strict`` ("stop at the first bad line") named a later line: lines that are not JSON
  (or of another shape) were found while reading, a message that breaks the content rule only
  when its chunk was checked, so a bad line 7 was named before a bad line 6.
* ``show`` / ``templates check`` said ``--loss-weight`` and ``--message-weights`` write a
  ``loss_weights`` column (they write nothing: the weights are shown), and that "tokenize
  refuses" a misspelt role, in the help of commands that are not tokenize.
"""
from __future__ import annotations

import pytest
from cli_helpers import run_cli, write_jsonl

GOOD = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
NO_CONTENT = {"messages": [{"role": "user"}]}


@pytest.mark.parametrize("later", ["not json", '{"conversations": 3}', '["no", "messages"]'], ids=["json", "shape", "bare"])
def test_import_strict_names_the_first_bad_line(tmp_path, later):
    src = write_jsonl(tmp_path / "chats.jsonl", [GOOD, GOOD, NO_CONTENT, GOOD])
    with open(src, "a", encoding="utf-8") as f:
        f.write(later + "\n")
    res = run_cli("import", src, tmp_path / "ds", "--strict")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "chats.jsonl:line 3: message 0: a 'user' message needs 'content'" in res.stderr, res.stderr
    assert "(--strict: nothing written)" in res.stderr and not (tmp_path / "ds").exists()
    # without --strict the later line is reported too, and the first bad line is still line 3
    res = run_cli("import", src, tmp_path / "ds2")
    assert res.returncode == 0 and "first: chats.jsonl:line 3" in res.stdout + res.stderr, res.stdout + res.stderr


def test_import_strict_still_names_a_first_line_that_is_not_json(tmp_path):
    src = write_jsonl(tmp_path / "chats.jsonl", [GOOD, GOOD])
    with open(src, "a", encoding="utf-8") as f:
        f.write("nope\n")
    res = run_cli("import", src, tmp_path / "ds", "--strict")
    assert res.returncode == 1 and "chats.jsonl:line 3: invalid JSON" in res.stderr, res.stderr
    assert not (tmp_path / "ds").exists()


@pytest.mark.parametrize("cmd, writes", [(("tokenize",), True), (("show",), False), (("templates", "check"), False)])
def test_weight_flags_say_what_the_command_does_with_them(cmd, writes):
    text = " ".join(run_cli(*cmd, "--help").stdout.split())  # argparse wraps lines
    assert ("writes a float loss_weights column" in text) == writes
    assert ("shown as each trained token's weight" in text) == (not writes)
    assert "tokenize refuses" not in text
