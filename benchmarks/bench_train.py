#!/usr/bin/env python
"""Packing plans and padding-free loading (issue 12), against TRL and the floor, in one run.

    python benchmarks/bench_train.py [--n 200000] [--max-tokens 8192] [--repeat 5] [--skip-trl]

1. Packing ``--n`` log-normal lengths (mean ~600 tokens, sigma 1, clipped to [1, max_tokens])
   into ``--max-tokens`` bins: ``chatdata.train.pack`` (BFD and FFD) vs TRL's
   ``pack_dataset(strategy="bfd")`` on a ``datasets.Dataset`` holding the same lengths as
   int32 token lists, when trl is importable. Bins are compared with the lower bound
   ceil(total / max_tokens). TRL's time includes building the packed rows (it moves the
   tokens); ours is a plan (indices only): the tokens move later, in the loader (part 2).
   TRL packs each ``map`` batch of 1000 rows on its own, which is where its extra bins come from.
2. A padding-free DataLoader (TokenDataset + PackedBatchSampler + collate_padding_free,
   one process) over a memory-mapped token set of the same length distribution, vs the floor
   (slicing the flat memmapped ids into the same bins and widening them to int64, nothing
   else) and vs rows one by one + transformers' DataCollatorWithFlattening on the first batches.

Sides alternate, best of ``--repeat``.
"""
from __future__ import annotations

import argparse
import gc
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chatdata.td import RaggedTensorDict, TensorDict  # noqa: E402
from chatdata.train import PackedBatchSampler, TokenDataset, collate_padding_free, pack  # noqa: E402


def lognormal_lengths(n: int, max_tokens: int, mean: float = 600.0, sigma: float = 1.0, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.lognormal(math.log(mean) - sigma ** 2 / 2, sigma, n)
    return np.clip(np.rint(x), 1, max_tokens).astype(np.int64)


def best(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def trl_dataset(lengths: np.ndarray):
    import pyarrow as pa
    from datasets import Dataset, disable_progress_bars

    disable_progress_bars()

    offsets = np.zeros(lengths.size + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = pa.array(np.arange(int(offsets[-1]), dtype=np.int64).astype(np.int32) % 151_000)
    col = pa.LargeListArray.from_arrays(pa.array(offsets), values)
    return Dataset(pa.table({"input_ids": col}))


def part_packing(args) -> None:
    C = args.max_tokens
    lengths = lognormal_lengths(args.n, C)
    lt = torch.from_numpy(lengths)
    lb = math.ceil(int(lengths.sum()) / C)
    print(f"\n1. packing {args.n:,} log-normal lengths (mean {lengths.mean():.0f}, max {lengths.max()}) into "
          f"{C}-token bins; lower bound ceil({int(lengths.sum()):,} / {C}) = {lb:,} bins")
    try:
        from trl import pack_dataset
        have_trl = not args.skip_trl
    except ImportError:
        have_trl = False
    ds = trl_dataset(lengths) if have_trl else None
    res = {"ours bfd": [], "ours ffd": [], "trl bfd": []}
    plans = {}
    rounds = max(args.repeat, 1)
    for r in range(rounds):  # alternate the sides
        for name in ("ours bfd", "trl bfd", "ours ffd") if r % 2 == 0 else ("ours ffd", "trl bfd", "ours bfd"):
            if name == "trl bfd":
                if not have_trl or r >= args.trl_repeat:
                    continue
                t, out = best(lambda: pack_dataset(ds, C, strategy="bfd"), 1)
                plans[name] = len(out)
            else:
                t, out = best(lambda: pack(lt, C, strategy=name.split()[1]), 1)
                plans[name] = len(out)
            res[name].append(t)
    print(f"{'':<12}{'time (best)':>13}{'bins':>9}{'vs lower bound':>16}{'speed-up vs TRL':>17}")
    trl_t = min(res["trl bfd"]) if res["trl bfd"] else None
    for name in ("ours bfd", "ours ffd", "trl bfd"):
        if not res[name]:
            print(f"{name:<12}{'(trl not importable or --skip-trl)':>40}")
            continue
        t, bins = min(res[name]), plans[name]
        ratio = f"{trl_t / t:.1f}x" if trl_t else "-"
        print(f"{name:<12}{t * 1000:>10.1f} ms{bins:>9,}{100 * (bins / lb - 1):>+15.3f}%{ratio:>17}")
    print("   (TRL's time includes building the packed rows: it moves the tokens. Ours is the plan only;"
          " tokens move in the loader, part 2)")


def make_token_set(path: Path, lengths: np.ndarray) -> None:
    total = int(lengths.sum())
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 151_000, (total,), generator=g, dtype=torch.int32)
    masks = torch.rand(total, generator=g) < 0.4
    offsets = torch.zeros(lengths.size + 1, dtype=torch.int64)
    torch.cumsum(torch.from_numpy(lengths), 0, out=offsets[1:])
    RaggedTensorDict(TensorDict({"input_ids": ids, "assistant_masks": masks}, [total]), offsets).memmap(path)


def part_loader(args) -> None:
    lengths = lognormal_lengths(args.loader_n, args.max_tokens, seed=1)
    tmp = Path(tempfile.mkdtemp(prefix="chatdata-bench-train-"))
    try:
        make_token_set(tmp / "tokens", lengths)
        ds = TokenDataset(tmp / "tokens")
        sampler = PackedBatchSampler(ds.lengths, args.max_tokens, seed=0)
        total = ds.num_tokens
        print(f"\n2. padding-free DataLoader, one process: {len(ds):,} sequences, {total / 1e6:.1f}M tokens, "
              f"{len(sampler):,} bins of {args.max_tokens} (memory-mapped token set)")

        def ours():
            n = 0
            for b in torch.utils.data.DataLoader(ds, batch_sampler=sampler, collate_fn=collate_padding_free):
                n += b["input_ids"].shape[1]
            return n

        from chatdata.td import load_memmap

        flat = load_memmap(tmp / "tokens").values.get("input_ids")  # the same mapped column
        starts, ends = ds.offsets[:-1].numpy(), ds.offsets[1:].numpy()
        bins = list(sampler)

        def floor():
            n = 0
            for b in bins:
                x = torch.cat([flat[starts[i]:ends[i]] for i in b]).to(torch.int64)
                n += x.numel()
            return n

        from transformers import DataCollatorWithFlattening

        hf = DataCollatorWithFlattening(return_flash_attn_kwargs=True)
        few = bins[: args.hf_batches]

        def transformers_rows():
            n = 0
            for b in few:
                n += hf([ds[i] for i in b], return_tensors="pt")["input_ids"].shape[1]
            return n

        ours_t, floor_t, hf_t = [], [], []
        for r in range(max(args.repeat, 1)):
            order = (("ours", ours, ours_t), ("floor", floor, floor_t), ("hf", transformers_rows, hf_t))
            for _, fn, acc in (order if r % 2 == 0 else order[::-1]):
                t, n = best(fn, 1)
                acc.append((t, n))
        rate = lambda acc: max(n / t for t, n in acc)  # noqa: E731
        print(f"{'':<44}{'tokens/s (best)':>16}{'vs ours':>10}")
        print(f"{'ours: TokenDataset + collate_padding_free':<44}{rate(ours_t) / 1e6:>14.1f}M{1:>9.2f}x")
        print(f"{'floor: slice + int64 of the same bins':<44}{rate(floor_t) / 1e6:>14.1f}M"
              f"{rate(floor_t) / rate(ours_t):>9.2f}x")
        print(f"{'rows + DataCollatorWithFlattening (' + str(len(few)) + ' bins)':<44}{rate(hf_t) / 1e6:>14.1f}M"
              f"{rate(hf_t) / rate(ours_t):>9.2f}x")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--max-tokens", type=int, default=8192)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--trl-repeat", type=int, default=2, help="TRL runs (it is slow)")
    ap.add_argument("--loader-n", type=int, default=50_000, help="sequences in the loader's token set")
    ap.add_argument("--hf-batches", type=int, default=100)
    ap.add_argument("--skip-trl", action="store_true")
    ap.add_argument("--skip-loader", action="store_true")
    args = ap.parse_args(argv)
    print(f"torch {torch.__version__}, numpy {np.__version__}, {torch.get_num_threads()} threads")
    part_packing(args)
    if not args.skip_loader:
        part_loader(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
