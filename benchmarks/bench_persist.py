#!/usr/bin/env python
"""Memmap persistence benchmark (issue 3): conversation datasets and a 1 GiB tensor dict.

    python benchmarks/bench_persist.py [--n 10000] [--gib 1] [--quick] [--reference [--reference-python PATH]]

Conversation data: ``benchmarks/synthetic.py`` ``make_conversations(n, seed=0)`` (2-12
messages of 20-400 words), stored as a ragged stack of messages built column-wise:
``RaggedTensorDict(TensorDict({"role": NonTensorStack, "content": NonTensorStack}, [total]),
offsets)``, or ``chatdata.History.from_chats`` when chatdata exports it (``--columns`` forces
the plain columns).

``memmap`` is timed at ``--n`` conversations. ``load_memmap`` is timed at n, 10n and 100n:
the larger folders are made by tiling the n-conversation folder at the file level (the same
conversations repeated; at 100n the content byte file is allocated sparse, since 100x the
text would be ~10 GB of disk writes: loading never reads it, and reading a conversation from
it reads NUL text of the right lengths with exactly the same work).

Issue 15 rows: memmap(10k) with and without checksums (alternated, best of 5 each; target:
checksums add <= 10%), with ``durable=True`` (fsync; its cost), and ``verify`` of ~1 GiB of
conversations (the 10k folder tiled, checksums recomputed) and of the 1 GiB tensor folder
(target >= 1 GB/s).

Targets (issue 3): memmap(10k) <= 0.5 s; load_memmap <= 20 ms and flat in n; one
conversation read after loading <= 100 us; <= 20 files; 1 GiB memmap <= 1.5x a raw
sequential write of the same bytes measured in the same run; lazy load in milliseconds.

``--reference`` also runs ``benchmarks/reference_torchrl.py`` in the reference venv (``--reference-python``,
``$CHATDATA_REFERENCE_PYTHON`` or ``.refvenv``; see ``benchmarks/reference_env.md``) (tensordict
+ torchrl) when that venv exists and prints its table.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import chatdata  # noqa: E402
from benchmarks._reference import add_reference_argument, reference_python  # noqa: E402
from chatdata import NonTensorStack, RaggedTensorDict, TensorDict, load_memmap  # noqa: E402

ROWS: list[tuple] = []


def row(name, value, unit, target="", note=""):
    ROWS.append((name, value, unit, target, note))
    v = f"{value:.3f}" if isinstance(value, float) else str(value)
    print(f"  {name:50s} {v:>10s} {unit:4s} {target:>10s}  {note}", flush=True)


def timeit(fn, repeat=1):
    times, out = [], None
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return out, times


# -- data ------------------------------------------------------------------------------------
def conversations(n: int):
    try:
        from benchmarks.synthetic import make_conversations
    except ImportError:  # pragma: no cover - local fallback with the same shape of data
        def make_conversations(n, seed=0):
            rng = random.Random(seed)
            vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
                     for _ in range(2000)]
            out = []
            for _ in range(n):
                k = rng.randint(2, 12)
                roles = (["system"] if rng.random() < 0.5 else []) + ["user", "assistant"] * 6
                out.append([{"role": roles[j], "content": " ".join(rng.choices(vocab, k=rng.randint(20, 400)))}
                            for j in range(k)])
            return out
    return make_conversations(n, seed=0)


def build_dataset(convs, columns=False):
    if not columns and hasattr(chatdata, "History") and hasattr(chatdata.History, "from_chats"):
        return chatdata.History.from_chats(convs), "History.from_chats"
    roles = [m["role"] for c in convs for m in c]
    contents = [m["content"] for c in convs for m in c]
    lengths = torch.tensor([len(c) for c in convs], dtype=torch.int64)
    offsets = torch.zeros(len(convs) + 1, dtype=torch.int64)
    torch.cumsum(lengths, 0, out=offsets[1:])
    values = TensorDict({"role": NonTensorStack.from_list(roles), "content": NonTensorStack.from_list(contents)},
                        [len(roles)])
    return RaggedTensorDict(values, offsets), "RaggedTensorDict columns"


def count_files(path: Path) -> int:
    return sum(1 for _ in path.rglob("*"))


def _read_i64(p: Path) -> torch.Tensor:
    return torch.from_file(str(p), size=p.stat().st_size // 8, dtype=torch.int64).clone()


def _write(p: Path, t: torch.Tensor) -> None:
    with open(p, "wb") as f:
        f.write(memoryview(t.contiguous().numpy()).cast("B"))


def tile_folder(src: Path, dst: Path, k: int, sparse_over: int = 2**30) -> None:
    """Write the ragged folder ``src`` repeated ``k`` times at ``dst`` (format-level tiling).

    Every offsets file becomes the tiled, shifted offsets; byte columns are tiled, or (when
    they would exceed ``sparse_over`` bytes) allocated sparse at the right size.
    """
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    meta = json.loads((dst / "meta.json").read_text())
    if meta["_type"] == "tensorclass":  # e.g. History: the ragged stack is its storage
        meta["batch_size"][0] *= k
        (dst / "meta.json").write_text(json.dumps(meta))
        src, dst = src / meta["storage"], dst / meta["storage"]
        meta = json.loads((dst / "meta.json").read_text())

    def tile_offsets(off: torch.Tensor) -> torch.Tensor:
        n, total = off.numel() - 1, int(off[-1])
        body = off[:-1].repeat(k) + torch.arange(k).repeat_interleave(n) * total
        return torch.cat([body, torch.tensor([total * k])])

    _write(dst / meta["offsets"]["file"], tile_offsets(_read_i64(src / meta["offsets"]["file"])))
    meta["offsets"]["shape"][0] = (meta["offsets"]["shape"][0] - 1) * k + 1
    meta["batch_size"][0] *= k
    vdir = meta["values"]["dir"]
    vmeta = json.loads((dst / vdir / "meta.json").read_text())
    vmeta["batch_size"][0] *= k
    for e in vmeta["entries"].values():
        if e["kind"] == "tensor":  # per-message tensors: repeat the rows
            data = (src / vdir / e["file"]).read_bytes()
            (dst / vdir / e["file"]).write_bytes(data * k)
            e["shape"][0] *= k
            continue
        if e["kind"] == "value":  # one value for the whole batch
            e["batch_size"][0] *= k
            continue
        assert e["kind"] == "strings", e
        _write(dst / vdir / e["offsets"], tile_offsets(_read_i64(src / vdir / e["offsets"])))
        e["shape"][0] *= k
        nbytes = e["nbytes"] * k
        if nbytes > sparse_over:
            with open(dst / vdir / e["data"], "wb") as f:
                f.truncate(nbytes)
        else:
            data = (src / vdir / e["data"]).read_bytes()
            with open(dst / vdir / e["data"], "wb") as f:
                for _ in range(k):
                    f.write(data)
        e["nbytes"] = nbytes
    (dst / vdir / "meta.json").write_text(json.dumps(vmeta))
    (dst / "meta.json").write_text(json.dumps(meta))


def _as_list(v):
    return v.tolist() if hasattr(v, "tolist") else v


def read_one(r, i):
    item = r[i]
    return _as_list(item["content"]), _as_list(item["role"])


# -- benches ---------------------------------------------------------------------------------
def bench_conversations(n: int, work: Path, scales, columns=False):
    t0 = time.perf_counter()
    convs = conversations(n)
    data, how = build_dataset(convs, columns)
    n_msgs = sum(len(c) for c in convs)
    row(f"build dataset [{n}] ({how})", time.perf_counter() - t0, "s", "", f"{n_msgs} messages")

    path = work / f"conv_{n}"
    times = []
    for rep in range(3):
        p = work / f"conv_{n}_rep{rep}"
        _, dt = timeit(lambda: data.memmap(p))
        times.append(dt[0])
    shutil.move(str(work / f"conv_{n}_rep0"), str(path))
    nbytes = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    row(f"memmap [{n}] (best of 3)", min(times), "s", "<= 0.5",
        f"median {statistics.median(times):.3f} s, {nbytes / 2**20:.0f} MiB, "
        f"{nbytes / min(times) / 2**30:.2f} GiB/s")
    row(f"files + folders in the folder [{n}]", count_files(path), "", "<= 20")
    bench_checksums(data, work, n)
    del data
    gc.collect()
    bench_verify_conversations(path, work, nbytes)

    rng = random.Random(1)
    for k in scales:
        p = path if k == 1 else work / f"conv_{n * k}"
        if k != 1:
            t = time.perf_counter()
            tile_folder(path, p, k)
            note = f"(tiled x{k} in {time.perf_counter() - t:.1f} s)"
        else:
            note = ""
        loaded, dts = timeit(lambda: load_memmap(p), repeat=20)
        row(f"load_memmap [{n * k}] (median of 20)", statistics.median(dts) * 1e3, "ms", "<= 20",
            f"min {min(dts) * 1e3:.2f} ms {note}")
        i = n * k // 2
        t = time.perf_counter()
        first = read_one(loaded, i)
        dt_first = time.perf_counter() - t
        if k == 1:
            assert first[0] == [m["content"] for m in convs[i]], "read back differs"
        idx = [rng.randrange(n * k) for _ in range(1000)]
        t = time.perf_counter()
        for j in idx:
            read_one(loaded, j)
        dt = (time.perf_counter() - t) / len(idx)
        row(f"read one conversation [{n * k}] (mean of 1000)", dt * 1e6, "us", "<= 100",
            f"first read after load {dt_first * 1e6:.0f} us; r[i] + content/role .tolist()")
        if k == 1:
            _, dts = timeit(lambda: _as_list(loaded["content"]))
            row(f"read all contents [{n}]", dts[0], "s", "", f"{n_msgs} strings decoded")
            bench_load_read_all(p, n)
        del loaded
        gc.collect()


def _load_read_all(p: Path, n: int):
    """``load_memmap`` then every conversation read one by one (the path a data loader takes):
    what load-time validation (issue 17) must keep cheap."""
    loaded = load_memmap(p)
    for i in range(n):
        read_one(loaded, i)
    return loaded


def bench_load_read_all(p: Path, n: int, repeat: int = 7):
    walls, cpus = [], []
    for _ in range(repeat):
        gc.collect()
        t, c = time.perf_counter(), time.process_time()
        _load_read_all(p, n)
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    row(f"load_memmap + read every conversation [{n}] (best of {repeat})", min(walls), "s", "",
        f"median {statistics.median(walls):.3f} s; CPU time best {min(cpus):.3f} s (steadier on a busy "
        "machine); r[i] + content/role .tolist() for every i")


def bench_checksums(data, work: Path, n: int, repeat: int = 9):
    """memmap with checksums, without (switched off), and durable: interleaved (the order reversed
    every other round), best of ``repeat``."""
    from chatdata.td.storage import checksum

    times = {"with": [], "without": [], "durable": []}
    try:
        for rep in range(repeat):
            for mode in (list(times) if rep % 2 == 0 else list(times)[::-1]):  # alternate the order
                checksum.ENABLED = mode != "without"
                p = work / f"ck_{mode}"
                shutil.rmtree(p, ignore_errors=True)
                _, dt = timeit(lambda: data.memmap(p, durable=mode == "durable"))
                times[mode].append(dt[0])
    finally:
        checksum.ENABLED = True
    without, with_ = min(times["without"]), min(times["with"])
    row(f"memmap [{n}] without checksums (best of {repeat})", without, "s", "", "checksum.ENABLED = False")
    row(f"memmap [{n}] with checksums (best of {repeat})", with_, "s", "<= 1.10x",
        f"{with_ / without:.3f}x without (medians {statistics.median(times['with']) / statistics.median(times['without']):.3f}x)")
    nbytes = sum(f.stat().st_size for f in (work / "ck_with").rglob("*.memmap"))
    buf = os.urandom(nbytes)
    _, dts = timeit(lambda: checksum.checksum_bytes(buf), repeat=5)
    row(f"  xxh3_64 of the same {nbytes / 2**20:.0f} MiB in memory (best of 5)", min(dts), "s", "",
        f"the work checksums add: {min(dts) / without:.1%} of the save without them")
    del buf
    dur = min(times["durable"])
    row(f"memmap [{n}] durable=True (best of {repeat})", dur, "s", "",
        f"{dur / with_:.2f}x not durable, +{(dur - with_) * 1e3:.0f} ms of fsync")
    for mode in times:
        shutil.rmtree(work / f"ck_{mode}", ignore_errors=True)


def _rehash(root: Path) -> None:
    """Recompute the checksums recorded in every meta.json under ``root`` (after tiling)."""
    from chatdata.td.storage.checksum import checksum_file

    for meta_path in root.rglob("meta.json"):
        meta = json.loads(meta_path.read_text())
        if isinstance(meta.get("checksums"), dict):
            meta["checksums"] = {k: checksum_file(meta_path.parent / k) for k in meta["checksums"]}
            meta_path.write_text(json.dumps(meta))


def _verify_rows(path: Path, label: str, repeat: int = 3) -> None:
    from chatdata.td.storage.verify import verify

    times, report = [], None
    for _ in range(repeat):
        report, dt = timeit(lambda: verify(path))
        times.append(dt[0])
    assert report.ok and report.checksummed == report.files, report.problems
    best = min(times)
    row(f"verify [{label}] (best of {repeat})", best, "s", ">= 1 GB/s",
        f"{report.bytes / best / 1e9:.2f} GB/s over {report.bytes / 1e9:.2f} GB in {report.files} files (page cache warm)")
    _, dt = timeit(lambda: verify(path, checksums=False))
    row(f"verify --no-checksums [{label}]", dt[0], "s", "", f"{report.bytes / dt[0] / 1e9:.2f} GB/s")


def bench_verify_conversations(path: Path, work: Path, nbytes: int, target: int = 2**30):
    k = max(1, -(-target // nbytes))
    big = work / "verify_conv"
    tile_folder(path, big, k, sparse_over=2**62)
    _rehash(big)
    _verify_rows(big, f"conversations x{k}")
    shutil.rmtree(big, ignore_errors=True)


def bench_big(work: Path, gib: float):
    n_tensors = 16
    numel = int(gib * 2**30) // 4 // n_tensors
    g = torch.Generator().manual_seed(0)
    td = TensorDict({f"t{i:02d}": torch.rand(numel, generator=g) for i in range(n_tensors)}, batch_size=[])
    total = n_tensors * numel * 4
    label = f"{total / 2**30:.2f} GiB"

    def raw_write():
        raw = work / "raw"
        shutil.rmtree(raw, ignore_errors=True)
        raw.mkdir()
        for key, v in td.items():
            with open(raw / f"{key}.bin", "wb") as f:
                f.write(memoryview(v.numpy()).cast("B"))

    def mm(threads):
        def run():
            td.memmap(work / "big", num_threads=threads)
        return run

    results = {}
    # interleave so that page-cache / writeback state is shared fairly; best of 2 each
    for rep in range(2):
        for name, fn in [("raw", raw_write), ("mm0", mm(0)), ("mm2", mm(2)), ("mm4", mm(4))]:
            _, dt = timeit(fn)
            results.setdefault(name, []).append(dt[0])
            shutil.rmtree(work / "raw", ignore_errors=True)
            if name != "mm4" or rep == 0:
                shutil.rmtree(work / "big", ignore_errors=True)
    raw = min(results["raw"])
    row(f"raw sequential write [{label}] (best of 2)", raw, "s", "", f"{total / raw / 2**30:.2f} GiB/s")
    for t in (0, 2, 4):
        v = min(results[f"mm{t}"])
        row(f"memmap num_threads={t} [{label}] (best of 2)", v, "s", "<= 1.5x",
            f"{v / raw:.2f}x raw, {total / v / 2**30:.2f} GiB/s")
    loaded, dts = timeit(lambda: load_memmap(work / "big"), repeat=10)
    row(f"load_memmap [{label}] (median of 10)", statistics.median(dts) * 1e3, "ms", "lazy")
    assert torch.equal(loaded["t05"][:1000], td["t05"][:1000])
    _verify_rows(work / "big", f"tensors {label}")
    del loaded, td
    shutil.rmtree(work / "big", ignore_errors=True)


def run_reference(args):
    script = Path(__file__).resolve().parent / "reference_torchrl.py"
    py = reference_python(args.reference_python)
    if py is None:
        return
    cmd = [str(py), str(script), "--skip", "template", "small", "--n", str(args.n), "--gib", str(args.gib)]
    print("reference:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--scales", type=int, nargs="*", default=[1, 10, 100])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--quick", action="store_true", help="n=1000, scales 1 10, 1/16 GiB")
    ap.add_argument("--skip", nargs="*", default=[], choices=["conv", "big"])
    ap.add_argument("--reference", action="store_true", help="also time tensordict/torchrl in the reference venv")
    add_reference_argument(ap)
    ap.add_argument("--columns", action="store_true", help="plain RaggedTensorDict columns, not History")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    if args.quick:
        args.n, args.scales, args.gib = 1000, [1, 10], 1 / 16
    work = Path(tempfile.mkdtemp(prefix="bench_persist-", dir=args.workdir))
    print(f"chatdata {chatdata.__version__}, torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"cpus {os.cpu_count()}, workdir {work}")
    print(f"  {'benchmark':50s} {'value':>10s} {'unit':4s} {'target':>10s}  notes")
    try:
        if "conv" not in args.skip:
            bench_conversations(args.n, work, args.scales, args.columns)
        if "big" not in args.skip:
            bench_big(work, args.gib)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.reference:
        run_reference(args)


if __name__ == "__main__":
    main()
