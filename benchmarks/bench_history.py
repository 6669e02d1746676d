"""Benchmark History: ``from_chats`` (target <= 100 ms for 10,000 conversations), ``h[i]``,
``h[i, j]``, ``to_chats``, and a batch ``append``, on the shared seeded synthetic set.

Run from the repository root: ``python benchmarks/bench_history.py [n_conversations] [--threads N]``

``--reference`` then times ``History.from_chats`` against torchrl 0.14.1's on the same chats (the
packaged sample chats tiled to 1,000 and 10,000, and the synthetic set), the two sides alternated
round by round in one run: torchrl runs in the reference venv (``benchmarks/reference_worker.py``;
``--reference-python PATH``, ``$CHATDATA_REFERENCE_PYTHON`` or ``.refvenv``). Target (issue 24):
>= 100x torchrl at 1k and 10k, with every integrity check on.
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
from benchmarks._reference import add_reference_argument, start_worker  # noqa: E402


def vs_torchrl(reference_python, sizes, rounds: int) -> None:
    """from_chats against torchrl's, alternated round by round; best of each side and the spread."""
    import gc

    from chatdata.data import load_sample_chats

    worker = start_worker(reference_python)
    if worker is None:
        return
    base = load_sample_chats()
    try:
        print(f"\nfrom_chats vs torchrl 0.14.1 (reference venv), {rounds} rounds, sides alternated")
        print(f"{'set':<10} {'n':>6}  {'chatdata':>10}  {'torchrl':>10}  {'ratio':>8}  per round (min-max)")
        for name in ("sample", "synthetic"):
            for n in sizes:
                chats = (base * (n // len(base) + 1))[:n] if name == "sample" else make_conversations(n, seed=0)
                ours, theirs = [], []
                for _ in range(rounds):
                    gc.collect()
                    t0 = time.perf_counter()
                    History.from_chats(chats)
                    ours.append(time.perf_counter() - t0)
                    theirs.append(worker.ask(op="from_chats", set=name, n=n))
                per = sorted(b / a for a, b in zip(ours, theirs))
                print(f"{name:<10} {n:>6}  {min(ours) * 1e3:>7.2f} ms  {min(theirs):>8.3f} s  {min(theirs) / min(ours):>7.0f}x"
                      f"  {per[0]:.0f}-{per[-1]:.0f}x   (target >= 100x)")
    finally:
        worker.close()


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
    parser.add_argument("--reference", action="store_true", help="also from_chats vs torchrl, alternated")
    parser.add_argument("--reference-sizes", default="1000,10000", help="conversation counts for --reference")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds for --reference")
    add_reference_argument(parser)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    main(args.n)
    if args.reference:
        vs_torchrl(args.reference_python, [int(x) for x in args.reference_sizes.split(",")], args.rounds)
