#!/usr/bin/env python
"""Prefix-tree batches (issue 21): tokens, forward time, collate speed, per-turn rows, routed experts.

    python benchmarks/bench_trees.py [--group 8] [--prompt 2048] [--response 512] [--repeat 3] [--quick]

In one run, sides alternating, best of ``--repeat``:

1. **GRPO group** (G responses of R tokens to one P-token prompt, responses differing from their
   first token): tokens of the tree batch (``collate_prefix_tree``) against padding-free rows
   (``collate_padding_free``: G * (P + R)); the bound is (P + G*R) tree tokens.
2. **Forward** of a tiny random Qwen2 (float32, CPU, vocab 1024) over the tree batch (sdpa with
   the dense tree mask) against the padding-free compute: each row's own causal forward, which is
   what a varlen kernel does for a padding-free batch (on CPU, transformers would otherwise build
   a dense mask over all G*(P+R) tokens).
3. **collate_prefix_tree throughput** in input tokens per second (target >= 20M/s), for rows
   with ids only and with logprobs, advantages and int16 routed experts; ``--groups`` groups per
   batch.
4. **Per-turn rows** (``Rollout.tokens(per_turn=True)``) of a 20-turn rollout with the packaged
   Qwen2.5 tokenizer: tree tokens against the rows flattened and against the one conversation,
   on Qwen2.5's template (keeps the past) and on Qwen3's (drops earlier reasoning).
5. **Routed experts** (int16 ``(R, layers, top_k)``, ids < 128) of that rollout: bytes on disk
   after ``memmap`` against raw int16.
6. **Memory**: bytes of the dense ``(T, T)`` float32 mask against the flex_attention BlockMask.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from chatdata.train import (collate_padding_free, collate_prefix_tree, tree_attention_mask,  # noqa: E402
                            tree_block_mask, tree_model_inputs)

TEMPLATES = ROOT / "tests" / "data" / "templates"


def alternate(sides: dict, repeat: int) -> dict:
    """Best time of each side (name -> function), the sides run in turn, ``repeat`` rounds."""
    times = {k: float("inf") for k in sides}
    for _ in range(repeat):
        for k, fn in sides.items():
            gc.collect()
            start = time.perf_counter()
            fn()
            times[k] = min(times[k], time.perf_counter() - start)
    return times


def grpo_rows(G: int, P: int, R: int, seed: int = 0, vocab: int = 1024, side: bool = False, layers: int = 4, k: int = 8):
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, vocab, (P,), generator=g)
    rows = []
    for r in range(G):
        resp = torch.randint(0, vocab, (R,), generator=g)
        resp[0] = r % vocab
        ids = torch.cat([prompt, resp])
        row = {"input_ids": ids}
        if side:
            n = ids.numel()
            row["logprobs"] = -torch.rand(n, generator=g)
            row["advantages"] = torch.full((n,), float(r))
            row["routed_experts"] = torch.randint(0, 128, (n, layers, k), generator=g, dtype=torch.int16)
        rows.append(row)
    return rows


def tiny_model(vocab: int = 1024):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1 << 16, use_cache=False,
                      attn_implementation="sdpa")
    return Qwen2ForCausalLM(cfg).float().eval()


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def part_grpo(args) -> None:
    G, P, R = args.group, args.prompt, args.response
    rows = grpo_rows(G, P, R)
    tree = collate_prefix_tree(rows)
    flat = collate_padding_free(rows)
    T, F = tree["input_ids"].shape[1], flat["input_ids"].shape[1]
    print(f"\n## GRPO group: G={G}, P={P}, R={R}")
    print("| batch | tokens | vs tree |\n|---|---:|---:|")
    print(f"| tree (collate_prefix_tree) | {T:,} | 1.00x |")
    print(f"| padding-free (collate_padding_free) | {F:,} | {F / T:.2f}x |")
    print(f"| bound P + G*R | {P + G * R:,} | {(P + G * R) / T:.2f}x |")

    if not args.skip_model:
        model = tiny_model()
        inputs = tree_model_inputs(tree, model)

        def tree_fwd():
            with torch.no_grad():
                return model(**inputs).logits

        def rows_fwd():
            with torch.no_grad():
                return [model(input_ids=r["input_ids"][None]).logits for r in rows]

        tree_fwd(), rows_fwd()  # warm up
        t = alternate({"tree": tree_fwd, "flat": rows_fwd}, args.repeat)
        print(f"\nTiny Qwen2 forward (CPU, float32, sdpa), best of {args.repeat}, sides alternated:")
        print("| forward | time | vs tree |\n|---|---:|---:|")
        print(f"| tree batch, dense tree mask ({T:,} tokens) | {t['tree'] * 1e3:,.0f} ms | 1.00x |")
        print(f"| padding-free compute: each row causal ({F:,} tokens) | {t['flat'] * 1e3:,.0f} ms | "
              f"{t['flat'] / t['tree']:.2f}x |")
        del inputs, model

    dense = T * T * 4
    bm = tree_block_mask(tree)
    bm_bytes = sum(x.numel() * x.element_size() for x in (bm.kv_num_blocks, bm.kv_indices, bm.full_kv_num_blocks,
                                                          bm.full_kv_indices) if x is not None)
    bm_bytes += tree["subtree_end"].numel() * 8  # the mask_mod reads subtree_end
    built = alternate({"dense": lambda: tree_attention_mask(tree), "block": lambda: tree_block_mask(tree)}, args.repeat)
    t_dense, t_block = built["dense"], built["block"]
    print(f"\nMask memory at T={T:,}: dense float32 (1, 1, T, T) {mb(dense)} (built in {t_dense * 1e3:.0f} ms); "
          f"BlockMask (block 128) {bm_bytes / 1e3:,.1f} KB (built in {t_block * 1e3:.1f} ms), "
          f"{dense / bm_bytes:,.0f}x smaller")


def part_collate(args) -> None:
    G, P, R = args.group, args.prompt, args.response
    print(f"\n## collate_prefix_tree throughput ({args.groups} GRPO groups of G={G}, P={P}, R={R} per batch)")
    print("| rows | input tokens | time | input tokens/s | vs collate_padding_free |\n|---|---:|---:|---:|---:|")
    for side in (False, True):
        rows = [r for s in range(args.groups) for r in grpo_rows(G, P, R, seed=s, side=side)]
        n = sum(r["input_ids"].numel() for r in rows)
        t = alternate({"tree": lambda: collate_prefix_tree(rows), "flat": lambda: collate_padding_free(rows)},
                      args.repeat)
        label = "ids + logprobs, advantages, routed_experts int16 (4, 8)" if side else "ids only"
        print(f"| {label} | {n:,} | {t['tree'] * 1e3:,.1f} ms | {n / t['tree'] / 1e6:,.1f}M | "
              f"{t['tree'] / t['flat']:.2f}x the time |")


def rollout(template: str | None, turns: int, words: int, layers: int, k: int, seed: int = 0):
    from chatdata.data import load_sample_tokenizer
    from chatdata.rollout import Rollout

    tok = load_sample_tokenizer()
    kw = {}
    think = template is not None
    if think:
        tok.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
        kw["chat_template"] = (TEMPLATES / template).read_text(encoding="utf-8")
    g = torch.Generator().manual_seed(seed)
    ro = Rollout([[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Start."}]],
                 tokenizer=tok, **kw)
    text = " ".join(f"w{i}" for i in range(words))
    for t in range(turns):
        body = (f"<think>\nstep {t}: {text}\n</think>\n\n" if think else "") + f"answer {t}: {text}<|im_end|>"
        ids = torch.tensor(tok.encode(body, add_special_tokens=False))
        experts = torch.randint(0, 128, (ids.numel(), layers, k), generator=g, dtype=torch.int16)
        ro.add_response([ids], logprobs=[-torch.rand(ids.numel(), generator=g)], extras={"routed_experts": [experts]})
        if t + 1 < turns:
            ro.add_messages([[{"role": "user", "content": f"next {t}: {text}"}]])
    return ro


def part_per_turn(args) -> None:
    print(f"\n## Per-turn rows of a {args.turns}-turn rollout (responses and user turns of {args.words} words)")
    print("| template | drift | rows | flattened tokens | tree tokens | one conversation | flat / tree |"
          "\n|---|---|---:|---:|---:|---:|---:|")
    kept = None
    for name, template in (("Qwen2.5 (keeps the past)", None), ("Qwen3 (drops earlier <think>)", "Qwen-Qwen3-0.6B.jinja")):
        ro = rollout(template, args.turns, args.words, args.layers, args.top_k)
        kept = kept or ro
        td = ro.tokens(per_turn=True)
        rows = [td[i] for i in range(len(td))]
        flat = sum(int(r["input_ids"].numel()) for r in rows)
        T = collate_prefix_tree(rows)["input_ids"].shape[1]
        conv = int(ro.tokens().offsets[-1])
        print(f"| {name} | {ro.drift()[0]} | {len(rows)} | {flat:,} | {T:,} | {conv:,} | {flat / T:.2f}x |")
    experts_on_disk(kept, args)


def experts_on_disk(ro, args) -> None:
    td = ro.tokens()
    raw = int(td.offsets[-1]) * args.layers * args.top_k * 2
    with tempfile.TemporaryDirectory() as d:
        td.memmap(Path(d) / "t")
        files = [p for p in (Path(d) / "t").rglob("*") if p.is_file() and "routed_experts" in str(p)]
        disk = sum(p.stat().st_size for p in files)
    print(f"\nRouted experts (int16 (R, {args.layers}, {args.top_k}), ids < 128) of the whole rollout on disk: "
          f"{disk:,} bytes against raw int16 {raw:,} bytes ({disk / raw:.2f}x)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=2048)
    ap.add_argument("--response", type=int, default=512)
    ap.add_argument("--groups", type=int, default=16, help="GRPO groups per batch in the collate part")
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--words", type=int, default=40)
    ap.add_argument("--layers", type=int, default=24, help="routed-expert layers")
    ap.add_argument("--top-k", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-model", action="store_true", help="skip the tiny model's forwards")
    ap.add_argument("--quick", action="store_true", help="small sizes (P=256, R=64, 4 groups, 6 turns), 1 repeat")
    args = ap.parse_args(argv)
    if args.quick:
        args.prompt, args.response, args.groups, args.turns, args.repeat = 256, 64, 4, 6, 1
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    warnings.filterwarnings("ignore")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    part_grpo(args)
    part_collate(args)
    part_per_turn(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
