#!/usr/bin/env python
"""Reference timings of tensordict 0.14.3 + torchrl 0.14.1 (the libraries chatdata replaces).

Runs only in the separate reference venv (see benchmarks/reference_env.md):

    .refvenv/bin/python benchmarks/reference_torchrl.py [--quick] [--json out.json] [--tokenizer PATH]

In any environment without tensordict/torchrl it prints a notice and exits 0, so it is
safe to call from scripts. Every workload is seeded (random.Random(0)) and is the same
one chatdata's own benchmarks should use for a like-for-like comparison:

* synthetic chats: N conversations of 2-12 messages, each message 20-400 words drawn
  from a fixed 512-word vocabulary (see `make_chats`);
* History.from_chats / history.memmap / History.load_memmap / read one conversation;
* a 1 GiB float32 TensorDict (16 tensors x 64 MiB) memmap vs a raw sequential write;
* History.apply_chat_template(tokenize=True, return_dict=True,
  return_assistant_tokens_mask=True, chat_template_name="qwen") vs a bare
  tokenizer(texts) batch encode of the rendered strings.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

try:
    import torch
    import tensordict
    from tensordict import TensorDict
    import torchrl
    from torchrl.data.llm import History
except ImportError as exc:  # pragma: no cover
    print(f"reference_torchrl.py: skipped, tensordict/torchrl not importable ({exc}).")
    print("Run it with the reference venv built as in benchmarks/reference_env.md: "
          ".refvenv/bin/python benchmarks/reference_torchrl.py")
    sys.exit(0)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reference import tokenizer_folder  # noqa: E402  (stdlib only: runs in the reference venv)

QWEN = None  # set from --tokenizer in main(): a folder, or the repository's Qwen2.5 copy unpacked


# ----------------------------------------------------------------------------- data
def make_vocab(n=512, seed=1234):
    """A fixed vocabulary: pronounceable ASCII words plus a few non-ASCII ones."""
    rng = random.Random(seed)
    cons, vows = "bcdfghjklmnprstvwz", "aeiou"
    words = set()
    while len(words) < n - 8:
        k = rng.randint(1, 4)
        words.add("".join(rng.choice(cons) + rng.choice(vows) for _ in range(k)))
    extra = ["café", "naïve", "über", "日本", "данные", "👋", "–", "ça"]
    return sorted(words) + extra


def make_chats(n, seed=0, vocab=None):
    """n conversations, 2-12 messages each, 20-400 words per message (seeded)."""
    vocab = vocab or make_vocab()
    rng = random.Random(seed)
    chats = []
    for _ in range(n):
        n_msgs = rng.randint(2, 12)
        roles = ["system"] if rng.random() < 0.3 else []
        while len(roles) < n_msgs:
            roles.append("user" if (len(roles) - (roles[:1] == ["system"])) % 2 == 0
                         else "assistant")
        chat = []
        for role in roles:
            k = rng.randint(20, 400)
            chat.append({"role": role, "content": " ".join(rng.choices(vocab, k=k))})
        chats.append(chat)
    return chats


# ----------------------------------------------------------------------------- helpers
ROWS = []


def row(name, n, seconds, note=""):
    ROWS.append({"name": name, "n": n, "seconds": seconds, "note": note})
    print(f"  {name:52s} {str(n):>8s} {seconds:10.4f} s  {note}", flush=True)


def timed(fn):
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def count_tree(path):
    files = dirs = nbytes = 0
    for _root, ds, fs in os.walk(path):
        dirs += len(ds)
        files += len(fs)
        for f in fs:
            nbytes += os.path.getsize(os.path.join(_root, f))
    return files, dirs, nbytes


def as_lists(x):
    if isinstance(x, str):
        return x
    if hasattr(x, "tolist"):
        return x.tolist()
    return [as_lists(y) for y in x]


def maxrss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ----------------------------------------------------------------------------- benches
def bench_history(chats, work: Path, label):
    n = len(chats)
    h, dt = timed(lambda: History.from_chats(chats))
    n_msgs = sum(len(c) for c in chats)
    row(f"History.from_chats [{label}]", n, dt, f"{n_msgs} messages, maxrss {maxrss_mib():.0f} MiB")

    path = work / f"history_{n}"
    shutil.rmtree(path, ignore_errors=True)
    _, dt = timed(lambda: h.memmap(path))
    files, dirs, nbytes = count_tree(path)
    row(f"history.memmap(path) [{label}]", n, dt,
        f"{files} files + {dirs} folders = {files + dirs} entries, {nbytes / 2**20:.1f} MiB")
    _, dt = timed(os.sync)
    row(f"  os.sync() after memmap [{label}]", n, dt)
    del h
    gc.collect()

    loaded, dt = timed(lambda: History.load_memmap(path))
    row(f"History.load_memmap(path) [{label}]", n, dt, f"batch_size {list(loaded.batch_size)}")

    i = n // 2
    conv, dt = timed(lambda: (as_lists(loaded[i].role), as_lists(loaded[i].content)))
    assert conv[1] == [m["content"] for m in chats[i]]
    row(f"read one conversation (first) [{label}]", 1, dt, "loaded[i].role/.content")
    rng = random.Random(1)
    idx = [rng.randrange(n) for _ in range(100)]
    _, dt = timed(lambda: [as_lists(loaded[j].content) for j in idx])
    row(f"read one conversation (mean of 100) [{label}]", 1, dt / 100)
    _, dt = timed(lambda: as_lists(loaded.content))
    row(f"read all contents after load [{label}]", n, dt, "loaded.content -> lists")
    del loaded
    gc.collect()
    return path


def bench_big_td(work: Path, gib: float):
    n_tensors = 16
    numel = int(gib * 2**30) // 4 // n_tensors
    g = torch.Generator().manual_seed(0)
    td = TensorDict({f"t{i:02d}": torch.rand(numel, generator=g) for i in range(n_tensors)},
                    batch_size=[])
    total = n_tensors * numel * 4
    label = f"{total / 2**30:.2f} GiB"

    raw = work / "raw_write"
    for attempt in range(2):  # first run warms the allocator/page cache paths
        shutil.rmtree(raw, ignore_errors=True)
        raw.mkdir(parents=True)

        def raw_write():
            for k, v in td.items():
                with open(raw / f"{k}.bin", "wb") as f:
                    f.write(memoryview(v.numpy()).cast("B"))
        _, dt = timed(raw_write)
        _, dts = timed(os.sync)
        row(f"raw sequential write ({label}, run {attempt + 1})", n_tensors, dt,
            f"{total / dt / 2**30:.2f} GiB/s; os.sync after: {dts:.2f} s")
    shutil.rmtree(raw, ignore_errors=True)

    mm = work / "td_memmap"
    for threads in (0, 2):
        shutil.rmtree(mm, ignore_errors=True)
        _, dt = timed(lambda: td.memmap(mm, num_threads=threads))
        _, dts = timed(os.sync)
        row(f"TensorDict.memmap ({label}, num_threads={threads})", n_tensors, dt,
            f"{total / dt / 2**30:.2f} GiB/s; os.sync after: {dts:.2f} s")
    loaded, dt = timed(lambda: TensorDict.load_memmap(mm))
    row(f"TensorDict.load_memmap ({label})", n_tensors, dt, "lazy: maps files")
    _, dt = timed(lambda: sum(float(v.sum()) for v in loaded.values()))
    row(f"  sum all values after load ({label})", n_tensors, dt, "reads every page")
    del loaded, td
    shutil.rmtree(mm, ignore_errors=True)


def bench_template(chats):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_folder(QWEN))
    n = len(chats)
    h = History.from_chats(chats)
    kw = dict(tokenizer=tok, chat_template_name="qwen")
    out, dt = timed(lambda: h.apply_chat_template(
        tokenize=True, return_dict=True, return_assistant_tokens_mask=True, **kw))
    parts = out.tensordicts if hasattr(out, "tensordicts") else [out]
    n_tok = sum(int(p["attention_mask"].sum()) for p in parts)
    n_asst = sum(int(p["assistant_masks"].sum()) for p in parts)
    row("History.apply_chat_template(tokenize, mask, 'qwen')", n, dt,
        f"{n_tok} tokens, {n_asst} assistant tokens, result {type(out).__name__} "
        f"(ragged, unpadded)")
    texts, dt = timed(lambda: h.apply_chat_template(tokenize=False, **kw))
    row("History.apply_chat_template(tokenize=False) render", n, dt,
        f"{sum(map(len, texts))} chars")
    enc, dt = timed(lambda: tok(texts))
    row("tokenizer(texts) batch encode of rendered", n, dt,
        f"{sum(map(len, enc['input_ids']))} tokens")
    enc, dt = timed(lambda: tok(texts, return_offsets_mapping=True))
    row("tokenizer(texts, return_offsets_mapping=True)", n, dt)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000, help="conversations, big run")
    ap.add_argument("--n-small", type=int, default=1_000)
    ap.add_argument("--n-template", type=int, default=1_000)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "chatdata_refbench")
    ap.add_argument("--quick", action="store_true", help="n=300, small=100, 0.0625 GiB")
    ap.add_argument("--skip", nargs="*", default=[],
                    choices=["small", "big", "td", "template"])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--tokenizer", default=None,
                    help="tokenizer folder (default: tests/data/tokenizers/qwen2.5-instruct, unpacked)")
    ap.add_argument("--shared-set", action="store_true",
                    help="use benchmarks/synthetic.py make_conversations (chatdata's benchmark set)")
    args = ap.parse_args()
    global QWEN
    QWEN = args.tokenizer
    if args.quick:
        args.n, args.n_small, args.n_template, args.gib = 300, 100, 100, 1 / 16

    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, tensordict "
          f"{tensordict.__version__}, torchrl {torchrl.__version__}, "
          f"threads {torch.get_num_threads()}, cpus {os.cpu_count()}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    vocab = make_vocab()
    if args.shared_set:  # the seeded set chatdata's own benchmarks use: same data, same run
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from benchmarks.synthetic import make_conversations

        def make_chats(n, vocab=None):  # noqa: F811 - deliberately replaces the local set
            return make_conversations(n, seed=0)
    else:
        make_chats = globals()["make_chats"]
    print(f"  {'benchmark':52s} {'n':>8s} {'time':>10s}    notes")
    if "small" not in args.skip:
        bench_history(make_chats(args.n_small, vocab=vocab), args.workdir, f"{args.n_small}")
    if "big" not in args.skip:
        bench_history(make_chats(args.n, vocab=vocab), args.workdir, f"{args.n}")
    if "td" not in args.skip:
        bench_big_td(args.workdir, args.gib)
    if "template" not in args.skip:
        bench_template(make_chats(args.n_template, vocab=vocab))
    if args.json:
        args.json.write_text(json.dumps(ROWS, indent=1))
    shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
