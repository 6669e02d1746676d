"""Decontamination against a small benchmark file made here (JSON Lines and Parquet): every
planted overlap is found, a clean set gives none; the CLI drops or flags and writes the report."""
import json

import numpy as np
import pytest

from chatdata import History, load_memmap
from chatdata.cli import main
from chatdata.hygiene import ContaminationIndex, decontaminate, load_prompts
from hygiene_data import random_texts


@pytest.fixture(scope="module")
def bench():
    rng = np.random.default_rng(7)
    prompts = random_texts(rng, 40, lo=14, hi=40)
    prompts[5] = " ".join(prompts[5].split()[:9])  # 9 words: matched whole
    prompts[6] = " ".join(prompts[6].split()[:4])  # 4 words: too short, left out
    chats = random_texts(rng, 3_000, lo=20, hi=60)
    n = 1_000
    convs = [[{"role": "user", "content": chats[3 * i]}, {"role": "assistant", "content": chats[3 * i + 1]}]
             for i in range(n)]
    planted = {}
    for i, p in zip(range(3, n, 37), [k for k in range(40) if k != 6] * 3):
        words = prompts[p].split()
        k = min(13, len(words))
        start = int(rng.integers(0, len(words) - k + 1))
        # 13 consecutive prompt words (or the whole short prompt) inside a message, recased and punctuated
        piece = " ".join(words[start:start + k]).upper().replace(" ", ", ", 1)
        m = int(rng.integers(0, 2))
        text = convs[i][m]["content"].split()
        at = int(rng.integers(0, len(text)))
        convs[i][m]["content"] = " ".join(text[:at] + [piece] + text[at:])
        planted[i] = p
    near_miss = 500  # 12 words of a prompt: below the n-gram, not contamination
    convs[near_miss][0]["content"] += " " + " ".join(prompts[0].split()[:12])
    assert near_miss not in planted
    return prompts, History.from_chats(convs), convs, planted


def test_every_planted_overlap_is_found_and_nothing_else(bench):
    prompts, h, _, planted = bench
    assert decontaminate(h, prompts).tolist() == sorted(planted)
    index = ContaminationIndex({"a": prompts[:20], "b": prompts[20:]}, 13)
    assert index.skipped == {"a": 1, "b": 0}
    hits = index.scan(h)
    assert {(c, b, p) for c, b, p in hits} == {(c, int(p >= 20), p - 20 * (p >= 20)) for c, p in planted.items()}


def test_a_clean_set_gives_none(bench):
    prompts, _, _, _ = bench
    rng = np.random.default_rng(99)
    clean = History.from_chats([[{"role": "user", "content": t}] for t in random_texts(rng, 2_000, lo=20, hi=80)])
    assert decontaminate(clean, prompts).tolist() == []


def test_cli_drops_or_flags_with_a_report(bench, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq

    prompts, _, convs, planted = bench
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(json.dumps({"messages": c}) + "\n" for c in convs), encoding="utf-8")
    (tmp_path / "gsm.jsonl").write_text("".join(json.dumps({"q": p, "answer": "42"}) + "\n" for p in prompts[:20]))
    pq.write_table(pa.table({"q": prompts[20:]}), tmp_path / "mmlu.parquet")
    args = ["import", str(src), str(tmp_path / "ds"), "--decontaminate", str(tmp_path / "gsm.jsonl"),
            str(tmp_path / "mmlu.parquet"), "--decontaminate-column", "q"]
    assert main(args) == 0
    out = capsys.readouterr().out
    first = sum(1 for p in planted.values() if p < 20)
    assert f"contaminated by gsm.jsonl: {first}, dropped (1 prompts shorter than the n-gram left out)" in out
    assert f"contaminated by mmlu.parquet: {len(planted) - first}, dropped" in out
    assert load_memmap(tmp_path / "ds").batch_size[0] == len(convs) - len(planted)
    report = json.loads((tmp_path / "ds.hygiene" / "contamination.json").read_text())
    wheres = {e["where"] for r in report.values() for e in r["examples"]}
    assert wheres <= {f"chats.jsonl:line {i + 1}" for i in planted} and len(wheres) == min(len(planted), 40)
    listed = [json.loads(x) for x in (tmp_path / "ds.hygiene" / "contaminated.jsonl").read_text().splitlines()]
    assert sorted(r["where"] for r in listed) == sorted(f"chats.jsonl:line {i + 1}" for i in planted)  # all, not 20
    assert all(r["dropped"] for r in listed)
    assert main([*args, "--flag-contaminated", "--overwrite"]) == 0
    assert f"contaminated by mmlu.parquet: {len(planted) - first}, kept (flagged only)" in capsys.readouterr().out
    assert load_memmap(tmp_path / "ds").batch_size[0] == len(convs)
    assert main([*args[:4], str(tmp_path / "gsm.jsonl"), "--overwrite"]) == 1  # no default column there
    assert "--decontaminate-column" in capsys.readouterr().err


def test_load_prompts_reads_columns_and_refuses_bad_files(tmp_path):
    (tmp_path / "p.jsonl").write_text('{"messages": [{"role": "user", "content": "a b"}]}\n{"messages": []}\n')
    assert load_prompts(tmp_path / "p.jsonl") == ["a b"]
    (tmp_path / "bad.jsonl").write_text('{"prompt": "x"}\n{oops\n')
    with pytest.raises(ValueError, match="bad.jsonl:line 2"):
        load_prompts(tmp_path / "bad.jsonl")
    with pytest.raises(ValueError, match="no column 'nope'"):
        load_prompts(tmp_path / "p.jsonl", "nope")
    with pytest.raises(ValueError, match="no such benchmark file"):
        load_prompts(tmp_path / "missing.jsonl")
