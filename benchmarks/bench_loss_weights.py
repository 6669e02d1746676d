#!/usr/bin/env python
"""What choosing the trained turns and their weights costs (issue 23), in one run.

    python benchmarks/bench_loss_weights.py [--chats 300] [--repeat 5]

On the packaged sample chats (system prompts, tool calls; with their tool schemas) and the packaged
Qwen2.5 tokenizer, ``History.apply_chat_template(tokenize=True, ...)`` with:

- the default assistant mask (the baseline, 1.00x);
- ``loss_weights={"tool": 0.2, "user": 0.1}``: placing tool and user contents (one more render per
  chat) and a loss_weights column (one mask pass per distinct weight);
- ``last_turn_only=True``: owners of the assistant spans (the engine's turn placement once more);
- ``loss_weights=<per-turn callable>``: both;

and the floor: the fast tokenizer's batch encode of the same rendered texts, nothing else. Sides
alternate, best of ``--repeat``; ratios are to the default mask, measured in the same run.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from chatdata import History  # noqa: E402
from chatdata.data import load_sample_chats, load_sample_tokenizer, sample_tools  # noqa: E402
from chatdata.templates import render_chats  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chats", type=int, default=300, help="sample chats to tokenize (default 300, all of them)")
    ap.add_argument("--repeat", type=int, default=5, help="rounds, best kept (default 5)")
    args = ap.parse_args(argv)
    tok = load_sample_tokenizer()
    chats = load_sample_chats()[: args.chats]
    h = History.from_chats(chats)
    tools = sample_tools()
    base = dict(tokenizer=tok, tools=tools, add_generation_prompt=False, tokenize=True, return_dict=True)
    texts = render_chats(chats, tok.chat_template, tools=tools, tokenizer=tok)
    backend = tok._tokenizer

    def per_turn(chat, k):
        return 0.5 ** (len(chat) - 1 - k)

    sides = {
        "default assistant mask": lambda: h.apply_chat_template(return_assistant_tokens_mask=True, **base),
        "loss_weights tool=0.2, user=0.1": lambda: h.apply_chat_template(loss_weights={"tool": 0.2, "user": 0.1}, **base),
        "last_turn_only": lambda: h.apply_chat_template(last_turn_only=True, **base),
        "per-turn callable + tool role": lambda: h.apply_chat_template(train_on=["assistant", "tool"],
                                                                       loss_weights=per_turn, **base),
        "floor: batch encode only": lambda: backend.encode_batch(texts, add_special_tokens=False),
    }
    times = {name: [] for name in sides}
    for _ in range(args.repeat):
        for name, fn in sides.items():  # alternate the sides every round
            gc.collect()
            t = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t)
    n_tokens = sum(len(e) for e in backend.encode_batch(texts, add_special_tokens=False))
    ref = min(times["default assistant mask"])
    print(f"{len(chats)} chats, {n_tokens:,} tokens, best of {args.repeat} (spread = worst / best)")
    print(f"| {'side':<34} | {'best ms':>9} | {'spread':>6} | {'vs default':>10} |")
    print(f"|{'-' * 36}|{'-' * 11}|{'-' * 8}|{'-' * 12}|")
    for name, ts in times.items():
        b = min(ts)
        print(f"| {name:<34} | {1000 * b:9.1f} | {max(ts) / b:6.2f} | {b / ref:9.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
