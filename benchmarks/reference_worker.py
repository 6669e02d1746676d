#!/usr/bin/env python
"""A torchrl 0.14.1 worker the benchmarks drive round by round, so that chatdata and the peer
are timed alternately in the same run (runs only in the reference venv, see reference_env.md).

It reads one JSON request per line on stdin and answers one JSON line on stdout:

    {"op": "from_chats", "set": "sample" | "synthetic", "n": 1000}  ->  {"seconds": 2.13}
    {"op": "quit"}

The sets are the ones chatdata's benchmarks use: ``sample`` is the packaged sample chats
(``chatdata/data/sample_chats.jsonl.gz``, read as plain JSON) tiled to ``n``; ``synthetic`` is
``benchmarks/synthetic.py``'s ``make_conversations(n, seed=0)``. Used by
:class:`benchmarks._reference.ReferenceWorker`.
"""
from __future__ import annotations

import gc
import gzip
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def chats_of(name: str, n: int) -> list:
    if name == "sample":
        with gzip.open(ROOT / "chatdata" / "data" / "sample_chats.jsonl.gz", "rt", encoding="utf-8") as f:
            base = [json.loads(line)["messages"] for line in f]
        return (base * (n // len(base) + 1))[:n]
    sys.path.insert(0, str(ROOT))
    from benchmarks.synthetic import make_conversations

    return make_conversations(n, seed=0)


def main() -> None:
    from torchrl.data.llm import History

    cache: dict = {}
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "quit":
            break
        key = (req["set"], req["n"])
        if key not in cache:
            cache[key] = chats_of(*key)
        chats = cache[key]
        gc.collect()
        t0 = time.perf_counter()
        History.from_chats(chats)
        print(json.dumps({"seconds": time.perf_counter() - t0}), flush=True)


if __name__ == "__main__":
    main()
