#!/usr/bin/env python
"""Rollout (issue 13): a multi-turn RL loop, token in and token out, against its floor and its peer.

    python benchmarks/bench_rollout.py [--turns 100] [--words 60] [--repeat 5]

One conversation (a system prompt and a user question) with the packaged Qwen2.5 tokenizer and
its template; each turn the policy "generates" an answer of ``--words`` words (given as ids,
EOT included) and the environment replies with a user message of ``--words`` words. In one run,
the sides alternating, best of ``--repeat`` per turn:

- **ours**: one turn = ``ro.prompt_ids()`` + ``ro.add_response([ids])`` + ``ro.add_messages([[user]])``
  (decode + parse of the response, fixed-base render, encode of the template's new text);
- **floor**: the encode of the turn's new text alone (the rendered response + the user turn +
  the generation prompt), with the tokenizer's Rust backend ``encode`` (the fastest encode);
- **peer**: the usual loop that re-tokenizes the chat each turn: decode the response, append
  the messages, ``tokenizer.apply_chat_template(chat, add_generation_prompt=True)``;
- **peer (fast)**: the same loop at its fastest: render with ``apply_chat_template(tokenize=False)``
  and encode the whole text with the Rust backend.

Targets: a turn <= 2x the floor; the whole loop >= 10x faster than the peer. The table shows
how both ratios grow with the number of turns. A last line runs our loop on one active row of a
64-row rollout whose other rows have finished (``rows=[0]``): finished rows must cost nothing.
"""
from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from chatdata.data import load_sample_tokenizer  # noqa: E402
from chatdata.rollout import Rollout  # noqa: E402

VOCAB = ("the weather in Zürich is sunny today and the train leaves at nine from platform four while "
         "prices rose by three percent café naïve 東京 데이터 quickly model answer tool result order "
         "package flight hotel meeting budget report").split()


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n)) + "."


def make_turns(tok, turns: int, n_words: int, seed: int = 0):
    rng = random.Random(seed)
    start = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": words(rng, n_words)}]
    answers = [words(rng, n_words) for _ in range(turns)]
    responses = [torch.tensor(tok.encode(a + "<|im_end|>", add_special_tokens=False)) for a in answers]
    users = [{"role": "user", "content": words(rng, n_words)} for _ in range(turns)]
    return start, answers, responses, users


def run_ours(tok, start, responses, users, finished=0):
    """The loop on row 0; ``finished`` more rows took one turn and then stopped."""
    ro = Rollout([start] * (1 + finished), tokenizer=tok)
    rows = None
    if finished:
        ro.add_response([responses[0]] * (1 + finished))
        rows = [0]
    times = []
    clock = time.perf_counter
    for resp, user in zip(responses, users):
        t0 = clock()
        ro.prompt_ids(rows=rows)
        ro.add_response([resp], rows=rows)
        ro.add_messages([[user]], rows=rows)
        times.append(clock() - t0)
    return times, ro


def run_peer(tok, start, responses, users, fast=False):
    chat = list(start)
    times = []
    clock = time.perf_counter
    backend = tok.backend_tokenizer
    for resp, user in zip(responses, users):
        t0 = clock()
        text = tok.decode(resp, skip_special_tokens=False)
        chat.append({"role": "assistant", "content": text.removesuffix("<|im_end|>")})
        chat.append(user)
        if fast:
            backend.encode(tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False),
                           add_special_tokens=False)
        else:
            tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
        times.append(clock() - t0)
    return times


def run_floor(backend, new_texts):
    times = []
    clock = time.perf_counter
    for text in new_texts:
        t0 = clock()
        backend.encode(text, add_special_tokens=False)
        times.append(clock() - t0)
    return times


def new_texts_of(tok, start, answers, users):
    """The rendered text each turn adds: the response, what follows its EOT, the user turn and
    the next generation prompt."""
    chat, texts = list(start), []
    prev = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    for a, u in zip(answers, users):
        chat += [{"role": "assistant", "content": a}, u]
        cur = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        assert cur.startswith(prev)
        texts.append(cur[len(prev):])
        prev = cur
    return texts


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=100)
    ap.add_argument("--words", type=int, default=60)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args(argv)
    tok = load_sample_tokenizer()
    start, answers, responses, users = make_turns(tok, args.turns, args.words)
    texts = new_texts_of(tok, start, answers, users)
    _, ro = run_ours(tok, start, responses, users)  # warm-up (template facts, jinja compile) + checks
    assert ro.drift() == [None], "the benchmark conversation drifted"
    full = tok.apply_chat_template(ro.history.to_chats()[0], add_generation_prompt=True, tokenize=True)["input_ids"]
    assert ro.prompt_ids()[0].tolist() == full, "kept ids differ from the full tokenization"
    run_peer(tok, start, responses[:3], users[:3])
    best = {"ours": None, "floor": None, "peer": None, "fast": None, "finished": None}
    for _ in range(args.repeat):  # alternate the sides; keep the best time of each turn
        for side in best:
            gc.collect()
            if side == "ours":
                t = run_ours(tok, start, responses, users)[0]
            elif side == "finished":
                t = run_ours(tok, start, responses, users, finished=63)[0]
            elif side == "floor":
                t = run_floor(tok.backend_tokenizer, texts)
            else:
                t = run_peer(tok, start, responses, users, fast=side == "fast")
            best[side] = t if best[side] is None else [min(a, b) for a, b in zip(best[side], t)]
    ours, floor, peer, fast = best["ours"], best["floor"], best["peer"], best["fast"]
    print(f"bench_rollout: 1 conversation, {args.turns} turns, {args.words} words per message, Qwen2.5 tokenizer, "
          f"best of {args.repeat}, sides alternated; torch {torch.__version__}")
    print(f"{'turns':>5} | {'ours/turn us':>12} | {'floor us':>8} | {'turn/floor':>10} | {'peer/turn us':>12} | "
          f"{'loop: peer/ours':>15} | {'fast peer/turn us':>17} | {'loop: fast/ours':>15}")
    marks = sorted({m for m in (10, 25, 50, 75, 100, args.turns) if m <= args.turns})
    for n in marks:
        lo = max(0, n - 5)  # the turn cost around turn n: mean of turns n-4..n
        o, f, p, q = (sum(x[lo:n]) / (n - lo) for x in (ours, floor, peer, fast))
        loop, loop_fast = sum(peer[:n]) / sum(ours[:n]), sum(fast[:n]) / sum(ours[:n])
        print(f"{n:>5} | {o * 1e6:>12.1f} | {f * 1e6:>8.1f} | {o / f:>9.2f}x | {p * 1e6:>12.1f} | {loop:>14.1f}x | "
              f"{q * 1e6:>17.1f} | {loop_fast:>14.1f}x")
    total = sum(ours) / sum(floor)
    print(f"all {args.turns} turns: ours/floor {total:.2f}x (target <= 2x); peer/ours {sum(peer) / sum(ours):.1f}x "
          f"(target >= 10x); fast peer/ours {sum(fast) / sum(ours):.1f}x")
    print(f"finished rows cost nothing: the same loop on 1 active row of 64 (63 finished) takes "
          f"{sum(best['finished']) / sum(ours):.2f}x the time of a 1-row rollout")


if __name__ == "__main__":
    main()
