#!/usr/bin/env python
"""Tokens + assistant masks on tool-calling / reasoning and on multimodal chats, against the bare
batch encode (issues 10 and 23).

    python benchmarks/bench_masks.py [--n 1000] [--repeat 5] [--set all|agentic|multimodal] [--template PATH]

The chats come from ``make_conversations(n, seed=0)`` turned agentic: assistant turns carry
``reasoning_content``, inline ``<think>`` blocks, or tool calls (a turn with only a tool call,
then the tool's reply, then an answer). They are rendered with Qwen3's template (which renders
reasoning, tool calls and ``tools=``) and the Qwen2.5 tokenizer. The ``multimodal`` set makes the
same chats multimodal: user contents become lists of parts with an image (every other one also a
video), assistant answers lists of text parts, one in five holding an image too (its placeholder
is cut out of the masks), rendered with Qwen3-VL's template (tools and images). In one run, the
sides alternated, best of ``--repeat``:

- floor: ``tokenizer(texts, add_special_tokens=False)`` on the already rendered strings;
  (the three sides run in turn in every round; each side's best round is reported)
- ours: ``History.apply_chat_template(tokenize=True, return_assistant_tokens_mask=True)``
  (render + spans of every turn + encode + masks; target <= 1.15x the floor);
- also ours with ``mask_reasoning=False, mask_eot=False`` (content-only masks).
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_chat_template import best, qwen_tokenizer  # noqa: E402
from benchmarks.synthetic import make_conversations  # noqa: E402

TOOLS = [{"type": "function", "function": {
    "name": "search", "description": "Search the web.",
    "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]


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


SETS = {"agentic": ("Qwen-Qwen3-0.6B.jinja", agentic), "multimodal": ("Qwen-Qwen3-VL.jinja", lambda c: multimodal(agentic(c)))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tokenizer", default=None)
    ap.add_argument("--set", choices=["all", *SETS], default="all", help="which chats (default: both sets)")
    ap.add_argument("--template", default=None, help="template file (default: Qwen3's, Qwen3-VL's for multimodal)")
    args = ap.parse_args()
    tok = qwen_tokenizer(args.tokenizer)
    for name in (SETS if args.set == "all" else [args.set]):
        run(name, args, tok)
        print()


def run(set_name, args, tok):
    from chatdata import History
    from chatdata.templates import render_chats

    default, make = SETS[set_name]
    path = Path(args.template or ROOT / "tests" / "data" / "templates" / default)
    template = path.read_text(encoding="utf-8")
    chats = make(make_conversations(args.n, seed=0))
    history = History.from_chats(chats)
    texts = render_chats(chats, template, tools=TOOLS, tokenizer=tok)
    kw = dict(tokenizer=tok, chat_template=template, tools=TOOLS, add_generation_prompt=False, tokenize=True,
              return_dict=True, return_assistant_tokens_mask=True)

    sides = {
        "encode": lambda: tok(texts, add_special_tokens=False),
        "defaults": lambda: history.apply_chat_template(**kw),
        "content_only": lambda: history.apply_chat_template(mask_reasoning=False, mask_eot=False, **kw),
    }
    times = {name: [] for name in sides}
    counts = {}
    for _ in range(args.repeat):  # the three sides alternated in every round, best of the rounds
        for name, fn in sides.items():
            gc.collect()
            t0 = time.perf_counter()
            out = fn()
            times[name].append(time.perf_counter() - t0)
            if name == "encode":
                counts[name] = sum(len(x) for x in out["input_ids"])
            else:
                counts[name] = (out.values["input_ids"].numel(), int(out.values["assistant_masks"].sum()))
            del out
    t_enc, t_ours, t_plain = (min(times[n]) for n in sides)
    n_tokens = counts["encode"]
    assert counts["defaults"][0] == n_tokens, "token counts differ from the bare encode"
    t_render, _ = best(lambda: render_chats(chats, template, tools=TOOLS, tokenizer=tok), args.repeat)
    trained, trained2 = counts["defaults"][1], counts["content_only"][1]
    rows = [
        ("bare tokenizer(texts) batch encode", t_enc, t_enc, f"{n_tokens:,} tokens"),
        ("apply_chat_template(tokens + masks), defaults", t_ours, t_enc, f"target <= 1.15x; {trained:,} trained"),
        ("  ... mask_reasoning=False, mask_eot=False", t_plain, t_enc, f"{trained2:,} trained"),
        ("render_chats alone (for scale)", t_render, t_enc, ""),
    ]
    n_msgs = sum(len(c) for c in chats)
    n_calls = sum(1 for c in chats for m in c if m.get("tool_calls"))
    n_parts = sum(1 for c in chats for m in c if isinstance(m.get("content"), list) for p in m["content"]
                  if p.get("type") != "text")
    print(f"[{set_name}] {args.n} chats, {n_msgs:,} messages ({n_calls:,} tool-call turns, {n_parts:,} media parts), "
          f"template {path.name}, best of {args.repeat}, the sides alternated")
    print(f"{'step':<52} {'seconds':>9} {'ratio':>7}  note")
    for name, t, base, note in rows:
        print(f"{name:<52} {t:>9.3f} {t / base:>6.2f}x  {note}")


if __name__ == "__main__":
    main()
