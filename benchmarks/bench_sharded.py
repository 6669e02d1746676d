"""Benchmark the lazy History over a sharded dataset (``chatdata.open_dataset("corpus/")``).

Same seeded synthetic conversations, written once as one plain dataset and once as S shards.
Each row times the sharded read against a reference measured in the same run, the two sides
alternated, best of R:

* ``open``: open_dataset of the sharded folder vs load_memmap of the plain one;
* ``ds[i]``: one conversation (maps one shard) vs the plain dataset's ``h[i]``;
* ``ds[a:b]`` across every shard: the column stitch (bytes + shifted offsets) vs the concatenation
  it replaced (``History.extend`` piece by piece, which reads every string), and vs ``.to_chats()``;
* ``ds[ids]``: random conversations from every shard vs ``h[ids]`` on the plain dataset.

Run from the repository root: ``python benchmarks/bench_sharded.py [--n 20000] [--shards 10] [--repeat 5]``
(``--n 2000 --shards 4 --repeat 3`` for a quick run).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.synthetic import make_conversations  # noqa: E402

import torch  # noqa: E402

import chatdata  # noqa: E402
from chatdata import History  # noqa: E402


def _extend_chain(ds, a, b):
    """The cross-shard concatenation before the lazy History: History.extend, piece by piece."""
    pieces, i = [], a
    while i < b:
        k, j = ds._locate(i)
        take = min(b - i, ds._starts[k + 1] - i)
        pieces.append(ds.shard(k)[j:j + take])
        i += take
    out = pieces[0]
    for p in pieces[1:]:
        out = out.extend(p, inplace=False)
    return out


def best_pair(f, g, repeat):
    """Best time of ``f`` and of ``g``, calls alternated, and the min-max of the per-pair ratios."""
    tf, tg, ratios = [], [], []
    for _ in range(repeat):
        t0 = time.perf_counter(); f(); t1 = time.perf_counter(); g(); t2 = time.perf_counter()
        tf.append(t1 - t0); tg.append(t2 - t1); ratios.append((t1 - t0) / max(t2 - t1, 1e-9))
    return min(tf), min(tg), min(ratios), max(ratios)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--shards", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    chats = make_conversations(args.n, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        History.from_chats(chats).memmap(f"{tmp}/plain")
        w = chatdata.open_dataset(f"{tmp}/corpus", mode="a")
        step = -(-args.n // args.shards)
        for a in range(0, args.n, step):
            w.append(History.from_chats(chats[a:a + step]))
        plain, ds = chatdata.load_memmap(f"{tmp}/plain"), chatdata.open_dataset(f"{tmp}/corpus")
        a, b = step // 2, args.n - step // 2  # touches every shard
        assert ds[a:b].to_chats() == chats[a:b] == _extend_chain(ds, a, b).to_chats()
        ids = torch.randint(0, args.n, (min(args.n, 2000),), generator=torch.Generator().manual_seed(0))
        assert ds[ids].to_chats() == plain[ids].to_chats()
        one = list(range(0, args.n, max(1, args.n // 200)))
        rows = [
            ("open: open_dataset(sharded) / load_memmap(plain)",
             lambda: chatdata.open_dataset(f"{tmp}/corpus"), lambda: chatdata.load_memmap(f"{tmp}/plain")),
            (f"ds[i] x{len(one)} / plain h[i]", lambda: [ds[i] for i in one], lambda: [plain[i] for i in one]),
            (f"ds[a:b] ({b - a} convs, {args.shards} shards): stitch / extend chain",
             lambda: ds[a:b], lambda: _extend_chain(ds, a, b)),
            ("ds[a:b] stitch / to_chats of it", lambda: ds[a:b], lambda: ds[a:b].to_chats()),
            (f"ds[ids] ({ids.numel()} random) / plain h[ids]", lambda: ds[ids], lambda: plain[ids]),
        ]
        print(f"{args.n:,} conversations, {args.shards} shards; best of {args.repeat}, sides alternated")
        print(f"{'row':<62} {'sharded ms':>10} {'ref ms':>9} {'ratio':>7}  pairs (min-max)")
        for name, f, g in rows:
            tf, tg, lo, hi = best_pair(f, g, args.repeat)
            print(f"{name:<62} {tf * 1e3:>10.2f} {tg * 1e3:>9.2f} {tf / max(tg, 1e-9):>7.2f}  {lo:.2f}-{hi:.2f}")


if __name__ == "__main__":
    main()
