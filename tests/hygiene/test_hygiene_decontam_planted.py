"""One benchmark item planted every way it reaches training data: copied, reformatted, split
over messages, inside a tool output, a tool call's arguments or the reasoning; and near misses
(a run one word short of the n-gram, one word changed in every run) that must not be flagged.
The rule is the usual one (13-gram overlap after case and punctuation are dropped, as in the
GPT-3 and lm-eval-harness decontamination)."""
import json

import pytest

from chatdata import History
from chatdata.cli import main
from chatdata.hygiene import decontaminate

ITEM = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
        "How many clips did Natalia sell altogether in April and May?")
WORDS = ITEM.split()


def user(t):
    return {"role": "user", "content": t}


def said(t):
    return {"role": "assistant", "content": t}


def calls(args):
    return {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": args}}]}


CAUGHT = {
    "copied": [user(ITEM)],
    "reformatted": [user("QUESTION:\n" + ITEM.upper().replace(" ", "  \n").replace(",", " ,") + "\n\nAnswer:")],
    "full-width letters, zero-width spaces": [user(ITEM.replace("Natalia", "Ｎａｔａｌｉａ").replace("clips", "cl\u200bips"))],
    "split over two messages": [user(" ".join(WORDS[:15])), user(" ".join(WORDS[15:]))],
    "split over three messages of 10 words": [user(" ".join(WORDS[:10])), said(" ".join(WORDS[10:20])),
                                              user(" ".join(WORDS[20:]))],
    "inside a tool output": [user("look it up"), calls({"q": "natalia"}), {"role": "tool", "content": "Result 1: " + ITEM}],
    "inside tool-call arguments (a JSON string)": [user("find this"), calls(json.dumps({"q": ITEM, "n": 3}))],
    "inside nested tool-call arguments": [user("find this"), calls({"filters": [{"text": ITEM}]})],
    "inside the reasoning": [user("hi"), {"role": "assistant", "content": "hello", "reasoning_content": "I recall: " + ITEM}],
}

MISSED = {
    "12 words in a row": [user(" ".join(WORDS[:12]))],
    "a word changed in every 12": [user(" ".join(w for i in range(0, len(WORDS), 12) for w in WORDS[i:i + 12] + ["zz"]))],
    "the words shuffled": [user(" ".join(WORDS[1::2] + WORDS[::2]))],
    "12 words, then an unrelated message": [user(" ".join(WORDS[:12])), said("sure, let me think about clips and sales")],
}


@pytest.mark.parametrize("how", sorted(CAUGHT))
def test_a_planted_item_is_caught(how):
    h = History.from_chats([[user("what is the weather like in Paris today?")], CAUGHT[how]])
    assert decontaminate(h, [ITEM]).tolist() == [1]


@pytest.mark.parametrize("how", sorted(MISSED))
def test_a_near_miss_is_not_flagged(how):
    assert decontaminate(History.from_chats([MISSED[how]]), [ITEM]).tolist() == []


def test_the_cli_catches_them_all_and_keeps_the_near_misses(tmp_path, capsys):
    rows = [*CAUGHT.values(), *MISSED.values()]
    (tmp_path / "chats.jsonl").write_text("".join(json.dumps({"messages": c}) + "\n" for c in rows))
    (tmp_path / "bench.jsonl").write_text(json.dumps({"question": ITEM}) + "\n")
    assert main(["import", str(tmp_path / "chats.jsonl"), str(tmp_path / "ds"),
                 "--decontaminate", str(tmp_path / "bench.jsonl")]) == 0
    assert f"contaminated by bench.jsonl: {len(CAUGHT)}" in capsys.readouterr().out
    report = json.loads((tmp_path / "ds.hygiene" / "contamination.json").read_text())
    assert sorted(e["where"] for e in report["bench.jsonl"]["examples"]) == \
        sorted(f"chats.jsonl:line {i + 1}" for i in range(len(CAUGHT)))


def test_a_report_folder_keeps_no_findings_of_an_earlier_run(tmp_path, capsys):
    """Before: a second import into the same report folder left the first run's problems.jsonl
    and contamination.json there, as if this run had found them."""
    rows = [CAUGHT["copied"], [user("hello"), {"role": "tool", "content": "a reply to no call"}], [user("hello")]]
    (tmp_path / "chats.jsonl").write_text("".join(json.dumps({"messages": c}) + "\n" for c in rows))
    (tmp_path / "bench.jsonl").write_text(json.dumps({"question": ITEM}) + "\n")
    src, out = str(tmp_path / "chats.jsonl"), str(tmp_path / "ds")
    assert main(["import", src, out, "--check-tools", "--skip-bad", "--decontaminate", str(tmp_path / "bench.jsonl")]) == 0
    reports = tmp_path / "ds.hygiene"
    assert sorted(p.name for p in reports.iterdir()) == ["contaminated.jsonl", "contamination.json", "problems.jsonl"]
    assert main(["import", src, out, "--dedup", "exact", "--overwrite", "-q"]) == 0
    assert sorted(p.name for p in reports.iterdir()) == ["clusters.jsonl"]
