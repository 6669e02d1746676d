"""Benchmark History: ``from_chats`` (target <= 100 ms for 10,000 conversations), ``h[i]``,
``h[i, j]``, ``to_chats``, and a batch ``append``, on the shared seeded synthetic set.

Run from the repository root: ``python benchmarks/bench_history.py [n_conversations] [--threads N]``
"""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.synthetic import make_conversations  # noqa: E402

import torch  # noqa: E402

from chatdata.history import History  # noqa: E402


def timeit(fn, repeat: int = 7) -> tuple[float, float]:
    """(min, median) seconds per call over ``repeat`` calls (min is the least noisy on a busy machine)."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def main(n: int = 10_000) -> None:
    chats = make_conversations(n, seed=0)
    n_msgs = sum(map(len, chats))
    h = History.from_chats(chats)
    assert h.to_chats() == chats
    rows = []

    def add(name, fn, per=1, unit="ms", repeat=7, note=""):
        scale = {"ms": 1e3, "us": 1e6}[unit]
        lo, med = timeit(fn, repeat)
        rows.append((name, lo / per * scale, med / per * scale, unit, note))

    add(f"from_chats ({n} convs, {n_msgs} msgs)", lambda: History.from_chats(chats), note="target <= 100 ms")
    idx = list(range(0, n, max(1, n // 1000)))
    add("h[i] (one conversation)", lambda: [h[i] for i in idx], per=len(idx), unit="us")
    add("h[i].to_chats()", lambda: [h[i].to_chats() for i in idx], per=len(idx), unit="us")
    add("h[i, j] (one message)", lambda: [h[i, 1] for i in idx], per=len(idx), unit="us")
    add("h[:, 0] (first message of every conv)", lambda: h[:, 0])
    add(f"to_chats ({n} convs)", lambda: h.to_chats(), repeat=5)
    reply = History(role=["assistant"] * n, content=["ok"] * n, batch_size=(n,))
    add("append one message to every conv", lambda: h.append(reply, inplace=False), repeat=5)
    add(f"extend with {n // 10} convs (dim=0)", lambda: h.extend(h[: n // 10], inplace=False, dim=0), repeat=5)
    width = max(len(r[0]) for r in rows)
    print(f"torch threads: {torch.get_num_threads()}")
    print(f"{'operation':<{width}}  {'min':>9}  {'median':>9}  note")
    for name, lo, med, unit, note in rows:
        print(f"{name:<{width}}  {lo:>6.2f} {unit}  {med:>6.2f} {unit}  {note}")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=10_000, help="number of conversations")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    main(args.n)
