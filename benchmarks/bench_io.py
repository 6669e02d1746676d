"""Benchmark of chatdata.io against its peers and floors (all measured in this run).

(a) ``to_arrow()`` of a memory-mapped History (loaded beforehand, and loaded in the step) for
    10,000 synthetic conversations and 10,000 packaged sample chats (with tool calls), typed and
    ``json="text"``; and 100,000 synthetic ones: O(columns), not O(conversations).
    What is parsed from a packed JSON column (tool calls) is kept per column (chatdata.io.arrow_memo):
    the loaded-beforehand rows time later calls; the loaded-in-the-step row includes the parse.
    Peer: ``datasets.Dataset.from_list`` on the same 10,000 chats. Targets (issue 24): to_arrow of a
    loaded 10k History <= 0.2 ms and >= 100x faster than from_list.
(b) Parquet import of 100,000 conversations (``chatdata.io.tables.import_tables``: read, convert,
    write the memmapped dataset) vs ``pyarrow.parquet.read_table`` of the same file alone.
    Target: ratio <= 1.5.
(c) Ray tokenize (``chatdata.ray.tokenize`` of M conversations with the packaged Qwen2.5
    tokenizer) on a local cluster of 1 CPU, then of 2 CPUs: the speed-up (this machine has 2
    cores, shared). Cluster start-up is not timed.

Sides alternate, best of ``--repeat``. Usage::

    python benchmarks/bench_io.py [--n 100000] [--n-tokenize 2000] [--repeat 3] [--no-ray]
"""
from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.synthetic import make_conversations  # noqa: E402


def timed(fn):
    gc.collect()
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def interleaved(fns: dict, repeat: int) -> dict:
    """Best time of every function, run in turn ``repeat`` times (a shared machine drifts)."""
    best = {k: float("inf") for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            best[k] = min(best[k], timed(fn)[0])
    return best


def row(name, t, ref=None, ref_name=""):
    ratio = f"{ref / t:8.1f}x faster than {ref_name}" if ref else ""
    print(f"  {name:<52s} {t * 1e3:11.3f} ms  {ratio}")


def bench_to_arrow(chats, tmp: Path, repeat: int):
    """(a): per set (the synthetic chats; the packaged sample chats, with tool calls, tiled to 10k),
    a memory-mapped History -> Arrow, loaded beforehand and loaded in the step, typed and as JSON
    text, against datasets.Dataset.from_list of the same 10k chats; sides alternated."""
    import datasets

    import chatdata
    from chatdata.data import load_sample_chats

    print("(a) memmapped History -> Arrow (zero-copy) vs datasets.Dataset.from_list, sides alternated")
    sample = load_sample_chats()
    base = min(10_000, len(chats))  # 10k, or every chat of a smaller --n (a smoke run)
    peer = f"from_list({base // 1000}k)" if base % 1000 == 0 else f"from_list({base})"
    sets = {"synthetic": chats[:base], "sample": (sample * (base // len(sample) + 1))[:base]}
    sizes = sorted({base, len(chats)})
    for n in sizes:
        chatdata.History.from_chats(chats[:n]).memmap(tmp / f"mm{n}")
    chatdata.History.from_chats(sets["sample"]).memmap(tmp / "sample")
    folders = {"synthetic": tmp / f"mm{base}", "sample": tmp / "sample"}

    def inner_best(fn, k=5):  # a ~ms step: one scheduler hiccup on a shared machine would dominate
        # one collection before the k calls, none between them (as timeit does): a gc.collect()
        # right before a 0.1 ms step walks every live object and leaves the CPU caches cold,
        # which tripled the step's time without telling anything about to_arrow
        gc.collect()
        gc.disable()
        try:
            best = float("inf")
            for _ in range(k):
                t = time.perf_counter()
                fn()
                best = min(best, time.perf_counter() - t)
            return best
        finally:
            gc.enable()

    def first_best(folder, k=5):  # the first to_arrow() of a History just loaded (nothing memoised yet)
        gc.collect()  # once before the k rounds, none between them (see inner_best)
        gc.disable()
        try:
            best = float("inf")
            for _ in range(k):
                h = chatdata.load_memmap(folder)
                t = time.perf_counter()
                h.to_arrow()
                best = min(best, time.perf_counter() - t)
            return best
        finally:
            gc.enable()

    def checks_floor(folder):  # what a first to_arrow() cannot skip without trusting the files: map each
        # message column's offsets file and check it never decreases (a decreasing offset handed to Arrow
        # zero-copy reads outside the mapping and kills the process), and validate each typed copy in full
        # (load_memmap checked the conversations' offsets already)
        import numpy as np
        import pyarrow as pa

        for f in sorted(folder.rglob("_values/*.offsets.memmap")):
            a = np.memmap(f, dtype=np.int64, mode="r")
            bool((a[1:] < a[:-1]).any())
        for f in sorted(folder.rglob("*.typed.arrow")):
            pa.ipc.open_file(pa.py_buffer(np.memmap(f, dtype=np.uint8, mode="r"))).get_batch(0).validate(full=True)

    for name, chats10k in sets.items():
        folder = folders[name]
        loaded = chatdata.load_memmap(folder)
        loaded.to_arrow(), loaded.to_arrow(json="text")  # warm-up (pyarrow.json / compute kernels)
        fns = {
            "to_arrow": lambda: inner_best(lambda: loaded.to_arrow(), 20),
            "to_arrow_text": lambda: inner_best(lambda: loaded.to_arrow(json="text"), 20),
            "first": lambda: first_best(folder),
            "floor": lambda: inner_best(lambda: checks_floor(folder)),
            "load_to_arrow": lambda: inner_best(lambda: chatdata.load_memmap(folder).to_arrow()),
        }
        if name == "synthetic":
            for n in sizes[1:]:
                fns[f"load_{n}"] = lambda n=n: inner_best(lambda: chatdata.load_memmap(tmp / f"mm{n}").to_arrow())
        fns["from_list"] = lambda: timed(lambda: datasets.Dataset.from_list([{"messages": c} for c in chats10k]))[0]
        runs = {k: [] for k in fns}
        for _ in range(repeat):
            for k, fn in fns.items():
                runs[k].append(fn())
        best = {k: min(v) for k, v in runs.items()}
        spread = {k: sorted(f / t for f, t in zip(runs["from_list"], v)) for k, v in runs.items()}

        def show(label, key, target=""):
            sp = spread[key]
            row(label, best[key], best["from_list"], peer)
            print(f"  {'':<52s} per round {sp[0]:.0f}-{sp[-1]:.0f}x {target}")

        print(f"  [{name} set, {base:,} conversations]")
        show("to_arrow() of a loaded History (typed)", "to_arrow", "(target: <= 0.2 ms, >= 100x)")
        show("to_arrow(json='text') of a loaded History", "to_arrow_text")
        show("first to_arrow() after load_memmap (typed)", "first", "(target: <= 0.2 ms, >= 100x)")
        print(f"  {'':<52s} = {best['first'] / best['floor']:.2f}x the floor of its safety checks alone "
              f"({best['floor'] * 1e3:.3f} ms: map and check each column's offsets, validate each typed copy)")
        show("load_memmap(path).to_arrow()", "load_to_arrow")
        for n in sizes[1:]:
            if f"load_{n}" in best:
                row(f"load_memmap(path).to_arrow(), {n:,} conversations", best[f"load_{n}"], best["from_list"],
                    peer)
                print(f"  O(1) check: {n:,} / {base:,} conversations time ratio = "
                      f"{best[f'load_{n}'] / best['load_to_arrow']:.2f}")
        row(f"datasets.Dataset.from_list, {base:,} conversations", best["from_list"])
        for label, k in (("to_arrow", "to_arrow"), ("first to_arrow after load", "first")):
            r = best["from_list"] / best[k]
            print(f"  TARGET {label} <= 0.2 ms and >= 100x from_list: "
                  f"{'PASS' if best[k] <= 2e-4 and r >= 100 else 'FAIL'} ({best[k] * 1e3:.3f} ms, {r:.0f}x)")


def bench_parquet_import(chats, tmp: Path, repeat: int):
    import pyarrow.parquet as pq

    import chatdata
    from chatdata.io.tables import import_tables

    print(f"(b) Parquet import of {len(chats):,} conversations vs pyarrow.parquet.read_table alone")
    src = tmp / "chats.parquet"
    pq.write_table(chatdata.History.from_chats(chats).to_arrow(), src)
    out = tmp / "imported"

    def do_import():
        shutil.rmtree(out, ignore_errors=True)
        return import_tables(src, out, chunk_size=8192)

    def stream_read():  # the streaming floor: the same record batches, nothing done with them
        for _ in pq.ParquetFile(src).iter_batches(batch_size=8192, columns=["messages"]):
            pass

    best = interleaved({"read_table": lambda: pq.read_table(src), "stream": stream_read, "import": do_import},
                       repeat)
    stats = do_import()
    assert stats.conversations == len(chats)
    row("pyarrow.parquet.read_table", best["read_table"])
    row("pyarrow ParquetFile.iter_batches (streaming read only)", best["stream"])
    row("chatdata import_tables (read + convert + write)", best["import"])
    print(f"  ratio import / streaming read = {best['import'] / best['stream']:.2f}")
    ratio = best["import"] / best["read_table"]
    print(f"  ratio import / read_table = {ratio:.2f}  (file {src.stat().st_size / 1e6:.0f} MB, "
          f"dataset {sum(f.stat().st_size for f in out.rglob('*') if f.is_file()) / 1e6:.0f} MB)  "
          f"TARGET <= 1.5: {'PASS' if ratio <= 1.5 else 'FAIL'}")


def bench_ray(chats, tmp: Path, repeat: int):
    import logging

    import ray

    import chatdata
    import chatdata.ray as cray

    for name in ("ray", "ray.data"):
        logging.getLogger(name).setLevel(logging.WARNING)

    print(f"(c) Ray tokenize of {len(chats):,} conversations (packaged Qwen2.5 tokenizer, batches of 128)")
    corpus = tmp / "corpus"
    ds = chatdata.open_dataset(corpus, mode="a")
    step = max(1, len(chats) // 8)
    for a in range(0, len(chats), step):
        ds.append(chatdata.History.from_chats(chats[a:a + step]))
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    times = {}
    for cpus in (1, 2):
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        try:
            run = lambda: cray.tokenize(cray.read(corpus), batch_size=128).materialize()  # noqa: E731
            run()  # warm-up: workers start, load the tokenizer
            times[cpus] = min(timed(run)[0] for _ in range(repeat))
        finally:
            ray.shutdown()
        row(f"{cpus} CPU(s)", times[cpus])
    print(f"  speed-up 1 -> 2 CPUs: {times[1] / times[2]:.2f}x  "
          f"({len(chats) / times[2]:,.0f} conversations/s on 2 CPUs)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000, help="conversations for (a) and (b)")
    ap.add_argument("--n-tokenize", type=int, default=2_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-ray", action="store_true")
    ap.add_argument("--parts", default="abc", help="which parts to run (default: abc)")
    ap.add_argument("--tmp", default=None)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench_io_", dir=args.tmp))
    try:
        t, chats = timed(lambda: make_conversations(args.n, seed=0))
        print(f"{args.n:,} synthetic conversations ({sum(map(len, chats)):,} messages) made in {t:.1f} s")
        if "a" in args.parts:
            bench_to_arrow(chats, tmp, args.repeat)
        if "b" in args.parts:
            bench_parquet_import(chats, tmp, args.repeat)
        if "c" in args.parts and not args.no_ray:
            bench_ray(chats[:args.n_tokenize], tmp, max(1, args.repeat - 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
