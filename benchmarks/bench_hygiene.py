"""Benchmark of chatdata.hygiene against its floors.

(a) ``chatdata import`` of N sample conversations (default 100,000: the packaged sample
    conversations, each copy made distinct by a counter so deduplication drops nothing and hashes
    everything) with ``--check-tools``, ``--dedup exact``, and both, against the plain import.
    Target: each adds <= 15% (ratio <= 1.15).
(b) Near duplicates (``find_duplicates(h, "near")``: words, 5-gram shingles, rensa signatures, LSH
    bands, verification) in MB of text per second per core, against a plain datasketch loop over
    the same texts (``MinHash(num_perm=128).update_batch`` of the same shingles, then
    ``MinHashLSH(threshold=0.8).query`` + ``insert``), on ``--n-near`` conversations. The
    signature step alone is also timed with rensa and with datasketch: the reason rensa is used.
(c) Decontamination (``decontaminate(h, prompts)``, 13-grams, 1,000 prompts) in MB/s per core
    against a plain Python loop (a set of word 13-gram tuples, one lookup per n-gram) and against
    the plain datasketch loop of (b), as the brief asks, over the same texts.
(d) ``--quality``: near-duplicate recall and precision at the default threshold (0.8) on N
    generated conversations with planted exact (2%), near (5%), mid (1%, Jaccard ~0.5) and far
    (1%) copies (``tests/hygiene/hygiene_data.py``); the truth is the exact Jaccard of word
    5-grams of each planted copy with its source.

Every side runs in this process, alternated, best of ``--repeat``; ratios come with the spread of
the alternated pairs. Usage::

    python benchmarks/bench_hygiene.py                       # all, 100k conversations
    python benchmarks/bench_hygiene.py --quick               # 20k, 2 repeats: a minute or two
    python benchmarks/bench_hygiene.py --only quality --n 100000
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "hygiene"))

SPREAD: dict = {}


def interleaved(a, b, repeat, setup=None):
    ta, tb = [], []
    for _ in range(repeat):
        for fn, out in ((a, ta), (b, tb)):
            if setup is not None:
                setup()
            t = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t)
    SPREAD[b] = sorted(y / x for x, y in zip(ta, tb))
    return min(ta), min(tb)


def sample_file(path: Path, n: int) -> int:
    from chatdata.data import load_sample_chats

    chats = load_sample_chats()
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            conv = copy.deepcopy(chats[i % len(chats)])
            for m in conv:
                if m["role"] == "user":
                    m["content"] += f" (#{i})"
                    break
            f.write(json.dumps({"messages": conv}, ensure_ascii=False) + "\n")
    return path.stat().st_size


def bench_import(args, tmp, rows):
    from chatdata.cli.import_ import import_file
    from chatdata.data import sample_tools
    from chatdata.hygiene import Screen

    src = tmp / "sample.jsonl"
    t = time.perf_counter()
    size = sample_file(src, args.n)
    print(f"wrote {args.n:,} sample conversations ({size / 2**20:.0f} MB) in {time.perf_counter() - t:.1f} s",
          flush=True)
    tools = sample_tools()

    def run(screen_args):
        def go():
            screen = Screen(**screen_args) if screen_args is not None else None
            stats = import_file(src, tmp / "ds", overwrite=True, progress=False, screen=screen, report=lambda m: None)
            assert stats.conversations == args.n, stats.conversations
        return go

    clear = lambda: shutil.rmtree(tmp / "ds", ignore_errors=True)  # noqa: E731
    for label, sa in (("--check-tools", dict(check_tools=True, tools=tools)),
                      ("--dedup exact", dict(dedup="exact")),
                      ("--check-tools --dedup exact", dict(check_tools=True, tools=tools, dedup="exact"))):
        base, ours = run(None), run(sa)
        t_base, t_ours = interleaved(base, ours, args.repeat, setup=clear)
        rows.append((f"import {args.n:,} sample conv.", t_base, size, None, None, None))
        rows.append((f"  + {label}", t_ours, size, t_ours / t_base, 1.15, SPREAD[ours]))
    clear()


def _texts(contents, offsets):
    return ["\n".join(contents[a:b]) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]


def _shingles(text, n=5):
    words = re.findall(r"\w+", unicodedata.normalize("NFC", text).lower())
    if len(words) < n:
        return [" ".join(words).encode()]
    return [" ".join(words[i:i + n]).encode() for i in range(len(words) - n + 1)]


def datasketch_loop(texts, threshold=0.8):
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=128)
    dropped = 0
    for i, t in enumerate(texts):
        m = MinHash(num_perm=128)
        m.update_batch(_shingles(t))
        if lsh.query(m):
            dropped += 1
        else:
            lsh.insert(i, m)
    return dropped


def bench_near(args, rows):
    import numpy as np

    from chatdata import History
    from chatdata.hygiene import find_duplicates
    from chatdata.hygiene.near import signatures_from_words
    from chatdata.hygiene.words import word_hashes
    from hygiene_data import planted

    roles, contents, offsets, _ = planted(args.n_near, messages=(3, 5), words=(20, 60), seed=5)
    h = History.from_message_columns({"role": roles, "content": contents}, offsets)
    texts = _texts(contents, offsets)
    mb = sum(map(len, texts)) / 2**20
    k = max(200, args.n_near // 20)  # datasketch is slow: time it on a slice, report MB/s
    mb_k = sum(map(len, texts[:k])) / 2**20
    t_ds, t_ours = interleaved(lambda: datasketch_loop(texts[:k]), lambda: find_duplicates(h, "near"), args.repeat)
    rows.append((f"datasketch MinHash+LSH loop ({k:,} conv.)", t_ds, mb_k * 2**20, None, None, None))
    rows.append((f"chatdata near dedup ({args.n_near:,} conv.), speed-up", t_ours, mb * 2**20,
                 (mb / t_ours) / (mb_k / t_ds), None, None))
    # the signature step alone: rensa vs datasketch over the same shingle hashes
    h_w, off = word_hashes(texts[:k])
    from datasketch import MinHash

    def ds_sigs():
        for t in texts[:k]:
            MinHash(num_perm=128).update_batch(_shingles(t))

    t_ds2, t_rensa = interleaved(ds_sigs, lambda: signatures_from_words(h_w, off), args.repeat)
    rows.append((f"datasketch signatures ({k:,} conv.)", t_ds2, mb_k * 2**20, None, None, None))
    rows.append(("rensa signatures (same texts), speed-up", t_rensa, mb_k * 2**20, t_ds2 / t_rensa, None, None))
    return texts, mb


def python_decontam(texts, prompts, n=13):
    grams = set()
    for p in prompts:
        w = re.findall(r"\w+", unicodedata.normalize("NFC", p).lower())
        grams.update(tuple(w[i:i + n]) for i in range(len(w) - n + 1))
    hits = []
    for i, t in enumerate(texts):
        w = re.findall(r"\w+", unicodedata.normalize("NFC", t).lower())
        if any(tuple(w[j:j + n]) in grams for j in range(len(w) - n + 1)):
            hits.append(i)
    return hits


def bench_decontam(args, texts, mb, rows):
    import numpy as np

    from chatdata import History
    from chatdata.hygiene import ContaminationIndex, decontaminate
    from hygiene_data import random_texts

    prompts = random_texts(np.random.default_rng(11), 1_000, lo=20, hi=80)
    h = History.from_chats([[{"role": "user", "content": t}] for t in texts])
    index = ContaminationIndex({"bench": prompts}, 13)
    k = max(200, len(texts) // 4)
    mb_k = sum(map(len, texts[:k])) / 2**20
    t_py, t_ours = interleaved(lambda: python_decontam(texts[:k], prompts), lambda: decontaminate(h, index),
                               args.repeat)
    rows.append((f"plain Python 13-gram set loop ({k:,} conv.)", t_py, mb_k * 2**20, None, None, None))
    rows.append((f"chatdata decontaminate ({len(texts):,} conv.), speed-up", t_ours, mb * 2**20,
                 (mb / t_ours) / (mb_k / t_py), None, None))
    m = max(200, len(texts) // 20)
    mb_m = sum(map(len, texts[:m])) / 2**20
    t = time.perf_counter()
    datasketch_loop(texts[:m])
    t_ds = time.perf_counter() - t
    rows.append((f"  vs the datasketch loop ({m:,} conv.), speed-up", t_ours, mb * 2**20,
                 (mb / t_ours) / (mb_m / t_ds), None, None))


def bench_quality(args):
    import numpy as np

    from chatdata import History
    from chatdata.hygiene import find_duplicates
    from hygiene_data import jaccard, planted, shingles

    roles, contents, offsets, truth = planted(args.n, messages=(3, 5), words=(20, 60), seed=1)
    h = History.from_message_columns({"role": roles, "content": contents}, offsets)
    t = time.perf_counter()
    dup, _ = find_duplicates(h, "near", 0.8)
    sec = time.perf_counter() - t
    conv = lambda r: contents[offsets[r]:offsets[r + 1]]  # noqa: E731
    js = {}
    for kind in truth:
        for row, src in truth[kind].items():
            js[row] = jaccard(shingles(conv(row)), shingles(conv(src)))
    positives = {r for r, j in js.items() if j >= 0.8}
    dropped = set(np.flatnonzero(dup >= 0).tolist())
    tp = len(dropped & positives)
    print(f"\nnear-duplicate quality at threshold 0.8 on {args.n:,} conversations ({sec:.1f} s): "
          f"recall {tp / max(len(positives), 1):.4f}, precision {tp / max(len(dropped), 1):.4f} "
          f"({len(positives):,} planted copies with Jaccard >= 0.8, {len(dropped):,} dropped)")
    for lo, hi in ((0.0, 0.7), (0.7, 0.8), (0.8, 0.85), (0.85, 0.9), (0.9, 1.01)):
        sel = [r for r, j in js.items() if lo <= j < hi]
        if sel:
            print(f"  true Jaccard [{lo:.2f}, {min(hi, 1):.2f}): {len(sel):5,} planted, "
                  f"{sum(r in dropped for r in sel) / len(sel):.3f} dropped")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000, help="conversations for (a) and (d)")
    ap.add_argument("--n-near", type=int, default=20_000, help="conversations for (b) and (c)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="--n 20000 --n-near 5000 --repeat 2")
    ap.add_argument("--only", choices=("import", "near", "quality"), help="one part only (near includes (c))")
    ap.add_argument("--tmp", default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.n_near, args.repeat = 20_000, 5_000, 2
    tmp = Path(tempfile.mkdtemp(prefix="chatdata-bench-hygiene-", dir=args.tmp))
    rows = []
    try:
        if args.only in (None, "import"):
            bench_import(args, tmp, rows)
        if args.only in (None, "near"):
            texts, mb = bench_near(args, rows)
            bench_decontam(args, texts, mb, rows)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if rows:
        print(f"\n{'step':<58}{'seconds':>9}{'MB/s':>8}{'ratio':>9}{'target':>8}  pairs (min-max)")
        for name, sec, nbytes, ratio, target, spread in rows:
            mbs = f"{nbytes / 2**20 / sec:.1f}" if nbytes else ""
            r = f"{ratio:.2f}" if ratio else ""
            tg = f"<={target}" if target else ""
            sp = f"{spread[0]:.2f}-{spread[-1]:.2f}" if spread else ""
            print(f"{name:<58}{sec:>9.2f}{mbs:>8}{r:>9}{tg:>8}  {sp}")
        print("(MB/s: one process, so per core; ratio of a speed-up row: chatdata MB/s / floor MB/s)")
    if args.only in (None, "quality"):
        bench_quality(args)
    ok = all(t is None or r <= t for _, _, _, r, t, _ in rows)
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
