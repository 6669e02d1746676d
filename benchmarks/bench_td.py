"""Time building, indexing and stacking TensorDicts with 1 and 1,000,000 string entries.

Run: ``python benchmarks/bench_td.py [--repeats N]``. Prints a table of best/median milliseconds
per call. A fast operation is looped until one repeat lasts at least 20 ms (as ``timeit`` does),
so a 10 µs index is not read off one noisy call. No assertions: this is for reading, not for CI.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from chatdata import TensorDict  # noqa: E402

N = 1_000_000


def bench(fn, repeats: int, min_seconds: float = 0.02):
    """Best and median milliseconds per call; each repeat loops ``fn`` for at least ``min_seconds``."""
    t0 = time.perf_counter()
    fn()  # warm-up, and a first guess of the time per call
    once = max(time.perf_counter() - t0, 1e-7)
    loops = max(1, int(min_seconds / once))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(loops):
            fn()
        times.append((time.perf_counter() - t0) * 1000 / loops)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    random.seed(0)

    strings = [f"message number {i}" for i in range(N)]
    one = TensorDict({"x": torch.zeros(()), "text": "hello"}, [])
    big = TensorDict({"x": torch.arange(N), "text": strings}, [N])
    big2 = TensorDict({"x": torch.arange(N), "text": strings}, [N])
    fancy = torch.randint(0, N, (1000,))
    mask = torch.rand(N) < 0.5
    smalls = [TensorDict({"x": torch.tensor(i), "text": f"s{i}"}, []) for i in range(1000)]

    cases = [
        ("build: 1 string entry", lambda: TensorDict({"x": torch.zeros(()), "text": "hello"}, [])),
        ("build: 1M strings from a list", lambda: TensorDict({"x": torch.arange(N), "text": strings}, [N])),
        ("index 1-string td: [None]", lambda: one[None]),
        ("index 1M: int", lambda: big[123_456]),
        ("index 1M: slice [1000:500000]", lambda: big[1000:500_000]),
        ("index 1M: fancy (1000 random)", lambda: big[fancy]),
        ("index 1M: bool mask (~50%)", lambda: big[mask]),
        ("stack 1000 small tds (1 str each)", lambda: torch.stack(smalls)),
        ("stack two 1M-string tds", lambda: torch.stack([big, big2])),
        ("cat two 1M-string tds", lambda: torch.cat([big, big2])),
        ("tolist of 1M strings", lambda: big["text"].tolist()),
        ("reshape 1M -> (1000, 1000)", lambda: big.reshape(1000, 1000)),
        ("permute (1000, 1000)", lambda: big.reshape(1000, 1000).permute(1, 0)),
        ("fancy index of a permuted 1M", lambda: big.reshape(1000, 1000).permute(1, 0)[fancy % 1000]),
        ("pack 1M strings (bytes+offsets)", lambda: big.get("text").packed()),
    ]
    name_w = max(len(n) for n, _ in cases)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, repeats={args.repeats}")
    print(f"{'operation':<{name_w}}  {'best ms':>10}  {'median ms':>10}")
    print(f"{'-' * name_w}  {'-' * 10}  {'-' * 10}")
    for name, fn in cases:
        best, med = bench(fn, args.repeats)
        print(f"{name:<{name_w}}  {best:>10.3f}  {med:>10.3f}")


if __name__ == "__main__":
    main()
