#!/usr/bin/env python
"""History.apply_chat_template against its floors and against transformers (issue 4).

    python benchmarks/bench_chat_template.py [--n 1000] [--tokenizer PATH] [--repeat 3]

On ``make_conversations(n, seed=0)`` with the Qwen2.5 tokenizer, in one run:

- render: ``history.apply_chat_template(tokenize=False)`` vs the bare compiled jinja render of
  the same conversations (target <= 1.3x);
- tokens + assistant masks: ``apply_chat_template(tokenize=True, return_dict=True,
  return_assistant_tokens_mask=True)`` vs the bare batch encode of the same rendered strings
  (``tokenizer(texts, add_special_tokens=False)``; target <= 1.3x);
- transformers' own ``tokenizer.apply_chat_template`` on the same batch with masks, for
  comparison (its masks need ``{% generation %}`` blocks, which Qwen's template lacks: its
  masks come out empty, so it does less work than we do).

``--reference`` also runs torchrl 0.14.1's ``History.apply_chat_template`` on the same set, in
the reference venv (``--reference-python PATH``, ``$CHATDATA_REFERENCE_PYTHON`` or ``.refvenv`` at the
repository root, built as in ``benchmarks/reference_env.md``; never a dependency), via
``benchmarks/reference_torchrl.py --shared-set``, and prints its ratio.
"""
from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._reference import add_reference_argument, reference_python, tokenizer_folder  # noqa: E402
from benchmarks.synthetic import make_conversations  # noqa: E402


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        gc.collect()
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def paired(base, ours, repeat):
    """Best times of two workloads timed alternately (the machine's drift hits both alike)."""
    tb, to = [], []
    for _ in range(repeat):
        t, out_b = best(base, 1)
        tb.append(t)
        t, out_o = best(ours, 1)
        to.append(t)
    return min(tb), out_b, min(to), out_o


def qwen_tokenizer(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_folder(path))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the Qwen2.5 copy in tests/data)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--reference", action="store_true", help="also time torchrl in the reference venv")
    add_reference_argument(ap)
    args = ap.parse_args()

    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from chatdata import History

    tok = qwen_tokenizer(args.tokenizer)
    chats = make_conversations(args.n, seed=0)
    history = History.from_chats(chats)
    template = tok.chat_template
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    compiled = env.from_string(template)
    special = {"bos_token": tok.bos_token, "eos_token": tok.eos_token}

    def bare_render():
        return [compiled.render(messages=c, add_generation_prompt=True, **special) for c in chats]

    t_bare, texts, t_ours_r, ours_texts = paired(
        bare_render, lambda: history.apply_chat_template(tokenizer=tok, tokenize=False), args.repeat)
    assert ours_texts == texts, "rendering differs from the bare jinja render"

    tok_repeat = max(1, args.repeat - 1)
    t_enc, enc, t_ours_t, out = paired(
        lambda: tok(texts, add_special_tokens=False),
        lambda: history.apply_chat_template(tokenizer=tok, tokenize=True, return_dict=True,
                                            return_assistant_tokens_mask=True), tok_repeat)
    n_tokens = sum(len(x) for x in enc["input_ids"])
    assert out.values["input_ids"].numel() == n_tokens, "token counts differ from the bare encode"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_hf, _ = best(lambda: tok.apply_chat_template(chats, tokenize=True, return_dict=True,
                                                      return_assistant_tokens_mask=True), tok_repeat)

    rows = [
        ("bare compiled jinja render", t_bare, t_bare, ""),
        ("History.apply_chat_template(tokenize=False)", t_ours_r, t_bare, "target <= 1.3x"),
        ("bare tokenizer(texts) batch encode", t_enc, t_enc, f"{n_tokens:,} tokens"),
        ("History.apply_chat_template(tokens + assistant masks)", t_ours_t, t_enc, "target <= 1.3x"),
        ("transformers apply_chat_template(tokens + masks)", t_hf, t_enc, "masks empty: no {% generation %}"),
    ]
    ref = torchrl_reference(args) if args.reference else None
    if ref is not None:
        rows.append(("torchrl 0.14.1 History.apply_chat_template(tokens+masks)", ref, t_enc, "same set, run in the reference venv"))
    print(f"{args.n} conversations, {sum(len(c) for c in chats):,} messages, best of {args.repeat} (encode: {tok_repeat}), the two sides alternated")
    print(f"{'step':<56} {'seconds':>9} {'ratio':>7}  note")
    for name, t, base, note in rows:
        print(f"{name:<56} {t:>9.3f} {t / base:>6.2f}x  {note}")


def torchrl_reference(args):
    py = reference_python(args.reference_python)
    if py is None:
        return None
    out = Path(tempfile.mkdtemp()) / "ref.json"
    cmd = [str(py), str(ROOT / "benchmarks" / "reference_torchrl.py"), "--shared-set", "--skip", "small", "big", "td",
           "--n-template", str(args.n), "--json", str(out)]
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL)
    if not out.exists():
        print("reference: torchrl run failed; skipped")
        return None
    rows = json.loads(out.read_text())
    return next((r["seconds"] for r in rows if r["name"].startswith("History.apply_chat_template(tokenize, mask")), None)


if __name__ == "__main__":
    main()
