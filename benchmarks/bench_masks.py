#!/usr/bin/env python
"""Tokens + assistant masks against Hugging Face's own bare batch encode of the same texts (issues 10, 24).

    python benchmarks/bench_masks.py [--n 1000] [--repeat 3] [--sets sample,agentic,synthetic,multimodal]
                                     [--tokenizer qwen|mistral|PATH] [--template PATH]

Sets (each rendered once; the sides then timed on the same chats):

- ``sample``: the packaged sample chats (``chatdata.data``, tool calls, several languages), tiled
  to ``--n`` conversations, with their tools and the tokenizer's own template;
- ``agentic``: ``make_conversations(n, seed=0)`` turned agentic (assistant turns with
  ``reasoning_content``, inline ``<think>`` or a tool call, its reply and an answer), rendered
  with Qwen3's template (``--template``) and ``tools=``;
- ``synthetic``: ``make_conversations(n, seed=0)`` as they are (plain chats), the tokenizer's template;
- ``multimodal``: the agentic chats with contents as lists of parts (user turns hold an image, every
  other one a video; one assistant answer in five an image), Qwen3-VL's template (issue 23).

Sides, alternated in every round (``--repeat`` rounds), best round reported, and the spread of the
per-round ratios (min-max):

- floor: ``tokenizer(texts, add_special_tokens=False)`` on the already rendered strings (Hugging
  Face's batch encode, all cores);
- ours: ``History.apply_chat_template(tokenize=True, return_assistant_tokens_mask=True)``: render +
  spans of every turn + ids + masks (the splice engine when the tokenizer has a tiktoken twin);
- also ours with ``mask_reasoning=False, mask_eot=False`` (content-only masks).

Targets (issue 24): ours <= 0.5x the floor (2x faster) with identical ids (checked every run);
the tiktoken twin encodes >= 3M tokens/s on one thread (printed per set).
"""
from __future__ import annotations

import argparse
import gc
import gzip
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.synthetic import make_conversations  # noqa: E402

TOOLS = [{"type": "function", "function": {
    "name": "search", "description": "Search the web.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]
TOKENIZERS = {"qwen": "qwen2.5-instruct", "mistral": "mistral-nemo-instruct-2407"}


def agentic(chats):
    """Tool-calling + reasoning versions of plain chats (deterministic)."""
    out = []
    for i, chat in enumerate(chats):
        new, n = [], 0
        for m in chat:
            if m["role"] != "assistant":
                new.append(m)
                continue
            words = m["content"].split(" ")
            half = max(1, len(words) // 2)
            head, tail = " ".join(words[:half]), " ".join(words[half:]) or "done"
            kind = (i + n) % 3
            n += 1
            if kind == 0:
                new.append({"role": "assistant", "content": tail, "reasoning_content": head})
            elif kind == 1:
                new.append({"role": "assistant", "content": f"<think>\n{head}\n</think>\n\n{tail}"})
            else:
                cid = f"call{i}x{n}"
                new.append({"role": "assistant", "content": "", "reasoning_content": head[:200],
                            "tool_calls": [{"id": cid, "type": "function",
                                            "function": {"name": "search", "arguments": {"query": head[:80]}}}]})
                new.append({"role": "tool", "tool_call_id": cid, "content": " ".join(reversed(words))})
                new.append({"role": "assistant", "content": tail})
        out.append(new)
    return out


def multimodal(chats):
    """The agentic chats with content as lists of parts (deterministic)."""
    out = []
    for i, chat in enumerate(chats):
        new = []
        for j, m in enumerate(chat):
            m = dict(m)
            if m["role"] == "user":
                parts = [{"type": "image", "url": f"https://example.com/{i}-{j}.png"}]
                if (i + j) % 2:
                    parts.append({"type": "video", "url": f"https://example.com/{i}-{j}.mp4"})
                m["content"] = parts + [{"type": "text", "text": m["content"]}]
            elif m["role"] == "assistant" and m.get("content") and not m.get("tool_calls"):
                text = [{"type": "text", "text": m["content"]}]
                m["content"] = text if (i + j) % 5 else text + [{"type": "image", "url": f"https://example.com/a{i}.png"}]
            new.append(m)
        out.append(new)
    return out


def load_tokenizer(which: str):
    """A tokenizer by short name (a copy in tests/data, unpacked) or a folder path."""
    from transformers import AutoTokenizer

    if which not in TOKENIZERS:
        return AutoTokenizer.from_pretrained(which)
    src = ROOT / "tests" / "data" / "tokenizers" / TOKENIZERS[which]
    tmp = Path(tempfile.mkdtemp(prefix="bench-tok-"))
    for f in src.iterdir():
        if f.name.endswith(".gz"):
            with gzip.open(f) as fin, open(tmp / f.name[:-3], "wb") as fout:
                shutil.copyfileobj(fin, fout)
        else:
            shutil.copy(f, tmp / f.name)
    tok = AutoTokenizer.from_pretrained(str(tmp))
    if tok.chat_template is None and (tmp / "chat_template.jinja").exists():
        tok.chat_template = (tmp / "chat_template.jinja").read_text(encoding="utf-8")
    shutil.rmtree(tmp, ignore_errors=True)
    return tok


def make_set(name: str, n: int, tok, template_path: str):
    """(chats, template, tools) of one set."""
    if name == "sample":
        from chatdata.data import load_sample_chats, sample_tools

        base = load_sample_chats()
        return (base * (n // len(base) + 1))[:n], tok.chat_template, sample_tools()
    if name == "agentic":
        return agentic(make_conversations(n, seed=0)), Path(template_path).read_text(encoding="utf-8"), TOOLS
    if name == "synthetic":
        return make_conversations(n, seed=0), tok.chat_template, None
    if name == "multimodal":  # content as lists of parts (issue 23), Qwen3-VL's template: placeholders never trained
        vl = Path(__file__).resolve().parents[1] / "tests" / "data" / "templates" / "Qwen-Qwen3-VL.jinja"
        return multimodal(agentic(make_conversations(n, seed=0))), vl.read_text(encoding="utf-8"), TOOLS
    raise SystemExit(f"unknown set {name!r} (sample, agentic, synthetic, multimodal)")


def timed(fn):
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def run_set(name, tok, args):
    import numpy as np

    from chatdata import History
    from chatdata.templates import render_chats
    from chatdata.templates.tiktoken_bpe import tiktoken_bpe_for, why_not_tiktoken

    chats, template, tools = make_set(name, args.n, tok, args.template)
    history = History.from_chats(chats)
    texts = render_chats(chats, template, tools=tools, tokenizer=tok)
    kw = dict(tokenizer=tok, chat_template=template, tools=tools, add_generation_prompt=False, tokenize=True,
              return_dict=True, return_assistant_tokens_mask=True)
    sides = {
        "encode": lambda: tok(texts, add_special_tokens=False),
        "defaults": lambda: history.apply_chat_template(**kw),
        "content_only": lambda: history.apply_chat_template(mask_reasoning=False, mask_eot=False, **kw),
    }
    history.apply_chat_template(**kw)  # warm-up: the tiktoken twin, template facts, the once-per-template check
    times = {k: [] for k in sides}
    outs = {}
    for _ in range(args.repeat):  # the sides alternated in every round
        for k, fn in sides.items():
            t, out = timed(fn)
            times[k].append(t)
            outs[k] = out
    enc = outs["encode"]["input_ids"]
    n_tokens = sum(map(len, enc))
    flat = np.fromiter((i for row in enc for i in row), dtype=np.int64, count=n_tokens)
    assert np.array_equal(outs["defaults"].values["input_ids"].numpy(), flat), f"{name}: ids differ from the bare encode"
    trained = int(outs["defaults"].values["assistant_masks"].sum())
    trained2 = int(outs["content_only"].values["assistant_masks"].sum())
    ratios = {k: sorted(a / b for a, b in zip(times[k], times["encode"])) for k in ("defaults", "content_only")}
    t_enc, t_ours, t_plain = (min(times[k]) for k in sides)
    t_render, _ = timed(lambda: render_chats(chats, template, tools=tools, tokenizer=tok))
    bpe = tiktoken_bpe_for(tok)
    engine = "splice engine + tiktoken twin" if bpe is not None else f"full HF encode ({why_not_tiktoken(tok)})"
    n_msgs = sum(map(len, chats))
    print(f"\n[{name}] {len(chats)} chats, {n_msgs:,} messages, {n_tokens:,} tokens, template "
          f"{Path(args.template).name if name == 'agentic' else 'Qwen-Qwen3-VL.jinja' if name == 'multimodal' else 'the tokenizer’s'}; {engine}")
    print(f"  {'step':<50} {'seconds':>8} {'ratio':>7}  {'per round':>11}  note")

    def line(label, t, spread="", note=""):
        print(f"  {label:<50} {t:>8.3f} {t / t_enc:>6.2f}x  {spread:>11}  {note}")

    line("bare tokenizer(texts) batch encode (HF)", t_enc, "", f"{n_tokens / t_enc / 1e6:.2f}M tokens/s")
    line("apply_chat_template(tokens + masks), defaults", t_ours,
         f"{ratios['defaults'][0]:.2f}-{ratios['defaults'][-1]:.2f}",
         f"target <= 0.5x; {trained:,} trained; {t_enc / t_ours:.1f}x faster")
    line("  ... mask_reasoning=False, mask_eot=False", t_plain,
         f"{ratios['content_only'][0]:.2f}-{ratios['content_only'][-1]:.2f}", f"{trained2:,} trained")
    line("render_chats alone (for scale)", t_render)
    if bpe is not None:  # the twin's own speed, one thread, on the text it encodes: the segments between added tokens
        segs = [seg for t in texts for seg in bpe.special_re.split(t)[::2]]
        chunks = [segs[i::8] for i in range(8)]
        plain = bpe.plain
        twin_tokens = sum(len(bpe.encode_joined(c)) - (len(c) - 1) for c in chunks)  # less the separators
        runs = {"lookahead-free": ([], []), "full pattern": ([], [])}
        try:
            for _ in range(args.repeat):  # alternated: the shipped twin, then its full-pattern encode
                for key, (wall, cpu) in runs.items():
                    bpe.plain = plain if key == "lookahead-free" else None
                    gc.collect()  # outside both clocks: a full collection is not the encode's CPU time
                    c0, t0 = time.thread_time(), time.perf_counter()
                    for c in chunks:
                        bpe.encode_joined(c)
                    cpu.append(time.thread_time() - c0)
                    wall.append(time.perf_counter() - t0)
        finally:
            bpe.plain = plain
        for key, (wall, cpu) in runs.items():
            if key == "lookahead-free" and plain is None:
                continue
            print(f"  tiktoken twin alone ({key}), 1 thread: {twin_tokens / min(wall) / 1e6:.2f}M tokens/s of wall "
                  f"time, {twin_tokens / min(cpu) / 1e6:.2f}M tokens per CPU second (target >= 3M per core)")
        if plain is not None:
            per = sorted(b / a for a, b in zip(runs["lookahead-free"][1], runs["full pattern"][1]))
            print(f"  lookahead-free / full pattern: {min(runs['full pattern'][1]) / min(runs['lookahead-free'][1]):.2f}x "
                  f"the tokens per CPU second (rounds {per[0]:.2f}-{per[-1]:.2f}x)")
    return t_ours / t_enc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sets", default="sample,agentic,synthetic,multimodal")
    ap.add_argument("--tokenizer", default="qwen", help="qwen, mistral (copies in tests/data) or a folder")
    ap.add_argument("--template", default=str(ROOT / "tests" / "data" / "templates" / "Qwen-Qwen3-0.6B.jinja"),
                    help="the template of the agentic set")
    args = ap.parse_args()
    tok = load_tokenizer(args.tokenizer)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"tokens + masks vs the bare HF batch encode; tokenizer {args.tokenizer}; best of {args.repeat} rounds, "
          f"sides alternated; cores {os.cpu_count()}, load average {load}")
    for name in args.sets.split(","):
        run_set(name.strip(), tok, args)


if __name__ == "__main__":
    main()
