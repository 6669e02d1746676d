"""``chatdata import`` with every hygiene step at once, in real processes with different hash
seeds: the dataset it writes is the in-process result (tool problems dropped, then contaminated
rows, then near duplicates, as ``Screen`` orders them), and the dataset and the report files are
the same byte for byte from run to run."""
import copy
import hashlib
import json
import os
import subprocess
import sys

import numpy as np

from chatdata import History, hygiene, load_memmap
from chatdata.data import load_sample_chats, sample_tools


def _rows():
    chats = load_sample_chats()  # several languages, tool calls
    rows = [copy.deepcopy(c) for c in chats]
    for k in range(0, len(rows), 9):  # near copies: one word added at the end of the last message
        c = copy.deepcopy(rows[k])
        if isinstance(c[-1].get("content"), str):
            c[-1]["content"] += " ok"
        rows.append(c)
    for k, c in enumerate(rows):
        for m in c:
            if m.get("tool_calls") and k % 5 == 0:
                m["tool_calls"][0]["function"]["arguments"] = "{oops"
                break
    return rows


def _files(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_import_matches_in_process_and_is_the_same_every_run(tmp_path):
    rows = _rows()
    item = " ".join(" ".join(m["content"] for m in rows[4] if isinstance(m.get("content"), str)).split()[:30])
    (tmp_path / "bench.jsonl").write_text(json.dumps({"question": item}) + "\n")
    (tmp_path / "chats.jsonl").write_text("".join(json.dumps({"messages": r}) + "\n" for r in rows))
    (tmp_path / "tools.json").write_text(json.dumps(sample_tools()))
    h = History.from_chats(rows)
    bad = {p["conversation"] for p in hygiene.check_tool_calls(h, sample_tools())}
    rest = np.array([i for i in range(len(rows)) if i not in bad])
    h1 = hygiene.decode_arguments(h[rest.tolist()])
    flagged = set(hygiene.decontaminate(h1, [item]).tolist())
    rest2 = np.array([j for j in range(len(rest)) if j not in flagged])
    kept = rest[rest2[hygiene.dedup(h1[rest2.tolist()], "near")]]
    assert bad and flagged and len(kept) < len(rest2)
    runs = []
    for seed in ("0", "12345"):
        out = tmp_path / f"ds{seed}"
        res = subprocess.run([sys.executable, "-m", "chatdata", "import", str(tmp_path / "chats.jsonl"), str(out),
                              "--check-tools", "--tools", str(tmp_path / "tools.json"), "--skip-bad", "--dedup", "near",
                              "--decontaminate", str(tmp_path / "bench.jsonl"), "--chunk-size", "50"],
                             capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONHASHSEED": seed})
        assert res.returncode == 0, res.stderr
        assert f"near duplicates dropped: {len(rest2) - len(kept)}" in res.stdout
        assert f"contaminated by bench.jsonl: {len(flagged)}, dropped" in res.stdout
        got = load_memmap(out).to_chats()
        assert got == hygiene.decode_arguments(History.from_chats([rows[i] for i in kept])).to_chats()
        runs.append((_files(out), _files(tmp_path / f"ds{seed}.hygiene")))
    assert runs[0] == runs[1]
    problems = (tmp_path / "ds0.hygiene" / "problems.jsonl").read_text().splitlines()
    assert {json.loads(p)["where"] for p in problems} == {f"chats.jsonl:line {i + 1}" for i in bad}
