#!/usr/bin/env python
"""Which checksum for saved files (issue 15): every candidate installed here, over the same
1 GiB in memory, in 4 MiB pieces (as the writers and ``verify`` feed it), alternated, best of 3.

    python benchmarks/bench_checksum.py [--gib 1]      # from the repository root, in the project's venv

Candidates: zlib.crc32 (stdlib), crc32c (LGPL), google-crc32c (Apache; wants read-only bytes, so
it pays a copy of each piece), xxhash xxh64 / xxh3_64 / xxh3_128 (BSD). chatdata uses xxh3_64.
"""
from __future__ import annotations

import argparse
import time
import zlib

import numpy as np

STEP = 1 << 22


def _pieces(mv):
    return (mv[a:a + STEP] for a in range(0, len(mv), STEP))


def candidates(mv) -> dict:
    out = {"zlib.crc32 (stdlib)": lambda: _fold(lambda h, b: zlib.crc32(b, h), 0, mv)}
    try:
        import crc32c

        out["crc32c.crc32c"] = lambda: _fold(lambda h, b: crc32c.crc32c(b, h), 0, mv)
    except ImportError:
        pass
    try:
        import google_crc32c

        out["google_crc32c.extend (+ copy)"] = lambda: _fold(lambda h, b: google_crc32c.extend(h, bytes(b)), 0, mv)
    except ImportError:
        pass
    import xxhash

    for name in ("xxh64", "xxh3_64", "xxh3_128"):
        out[f"xxhash.{name}"] = (lambda ctor: lambda: _update(ctor(), mv))(getattr(xxhash, name))
    return out


def _fold(fn, h, mv):
    for piece in _pieces(mv):
        h = fn(h, piece)
    return h


def _update(h, mv):
    for piece in _pieces(mv):
        h.update(piece)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gib", type=float, default=1.0)
    args = ap.parse_args()
    buf = np.random.default_rng(0).integers(0, 256, size=int(args.gib * 2**30), dtype=np.uint8)
    mv = memoryview(buf)
    cands = candidates(mv)
    times = {k: [] for k in cands}
    for rep in range(3):
        for k in (list(cands) if rep % 2 == 0 else list(cands)[::-1]):
            t = time.perf_counter()
            cands[k]()
            times[k].append(time.perf_counter() - t)
    fastest = min(min(v) for v in times.values())
    print(f"  {'checksum':32s} {'best s':>8s} {'GiB/s':>7s} {'vs fastest':>10s}")
    for k, v in sorted(times.items(), key=lambda kv: min(kv[1])):
        print(f"  {k:32s} {min(v):8.3f} {args.gib / min(v):7.2f} {min(v) / fastest:9.2f}x")


if __name__ == "__main__":
    main()
