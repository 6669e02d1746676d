"""``chatdata demo``: import, info, tokenize and show on the sample data shipped with chatdata.

Offline and quick: 300 packaged conversations (system prompts, multi-turn dialogue, tool calls,
non-ASCII text) and the packaged Qwen2.5 tokenizer. Each step prints the command line that
does the same thing, so the demo doubles as a tour of the command.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from .common import CLIError, load_history, load_tokenizer, resolve_template, say
from .progress import human_bytes, human_count

HELP = "run import, info, tokenize and show on the packaged sample data (offline, seconds)"
EXAMPLE = """examples:
  chatdata demo
  chatdata demo --out demo-output/      # keep the files (default: a temporary folder, removed at the end)
  chatdata demo --out demo-output/ --overwrite"""


def add_parser(sub):
    import argparse

    p = sub.add_parser("demo", help=HELP, description=HELP + ".", epilog=EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", metavar="DIR", help="where to write the files, kept afterwards (default: a temporary "
                   "folder, removed when the demo ends)")
    p.add_argument("--overwrite", action="store_true", help="replace the demo's files (chats/, tokens/, lengths.png) "
                   "in an existing --out DIR; a folder holding anything else is refused")
    p.add_argument("--index", type=int, default=None, help="conversation to show (default: one with a tool call)")
    p.set_defaults(func=run)
    return p


def _step(k: int, title: str, cmd: str) -> None:
    say("")
    say(f"== {k}/4 {title}")
    say(f"   $ {cmd}")


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


DEMO_FILES = ("chats", "tokens", "lengths.png")  # what the demo writes in --out DIR, and all it replaces


def _check_out(out: Path, overwrite: bool) -> None:
    """``--out DIR`` is a folder of the demo's own files: new, empty, or (with ``--overwrite``)
    holding only what an earlier demo wrote. A dataset or anyone's other files are refused, with
    or without ``--overwrite``: the demo would write its folders into them."""
    from .common import check_output
    from .paths import inside_dataset

    if out.exists() and not out.is_dir():
        raise CLIError(f"--out {out} is a file; give a folder for the demo's files")
    top = inside_dataset(out)
    if top is not None:
        raise CLIError(f"--out {out} is inside the dataset {top}; give a new or empty folder for the demo's files")
    if not out.is_dir():
        check_output(out, False)  # a folder to make: its parent must be writable
        return
    names = sorted(p.name for p in out.iterdir())
    other = [n for n in names if n not in DEMO_FILES]
    if other:
        what = "a chatdata dataset" if "meta.json" in other or "manifest.json" in other else \
            f"other files ({', '.join(other[:3])}{', ...' if len(other) > 3 else ''})"
        raise CLIError(f"--out {out} holds {what}; the demo writes {', '.join(DEMO_FILES)} into its --out folder and "
                       f"replaces only those: give a new or empty folder")
    if names and not overwrite:
        raise CLIError(f"--out {out} holds an earlier demo's files; pass --overwrite to replace them")


def run(args) -> int:
    t0 = time.perf_counter()
    if args.index is not None:  # checked before any file is written: a bad one changes nothing
        from ..data import load_sample_chats

        n = len(load_sample_chats())
        if not -n <= args.index < n:
            raise CLIError(f"--index {args.index} is out of range (0..{n - 1})")
    if args.out:
        out = Path(args.out)
        _check_out(out, args.overwrite)
        out.mkdir(parents=True, exist_ok=True)
        return _tour(args, out, t0, keep=True)
    with tempfile.TemporaryDirectory(prefix="chatdata-demo-") as tmp:
        return _tour(args, Path(tmp), t0, keep=False)


def _tour(args, out: Path, t0: float, keep: bool) -> int:
    from ..data import DATA_DIR, sample_chats_path, sample_tokenizer_path
    from .import_ import import_file
    from .info import PLOT_INSTALL, can_plot, dataset_stats, format_stats, plot
    from .show import format_segments, masked_segments, render_one
    from .common import color_enabled, load_tools
    from .tokenize import tokenize_dataset

    src = sample_chats_path()
    tools_path = DATA_DIR / "sample_tools.json"
    chats_dir, tokens_dir, png = out / "chats", out / "tokens", out / "lengths.png"
    say(f"chatdata demo: sample data shipped with the package, written to {out}")

    _step(1, "import the sample conversations (JSON Lines) into a memmapped History dataset",
          f"chatdata import {src} {chats_dir}")
    st = import_file(src, chats_dir, overwrite=True)
    say(f"   {human_count(st.conversations)} conversations, {human_count(st.messages)} messages, "
        f"{human_bytes(_size(chats_dir))} on disk, in {st.seconds:.2f} s")

    plotting = can_plot()  # matplotlib is an extra: the demo runs on the bare install, and says how to plot
    _step(2, "describe it (from the offsets, without decoding the strings)",
          f"chatdata info {chats_dir}" + (f" --plot {png}" if plotting else ""))
    h = load_history(chats_dir)
    stats = dataset_stats(h)
    if plotting:
        plot(stats, png)
    say("   " + format_stats(stats).replace("\n", "\n   "))
    say(f"   histograms: {png}" if plotting else
        f"   histograms: not drawn (matplotlib is not installed); {PLOT_INSTALL}, then `chatdata info ... --plot FILE.png`")

    tok_path = sample_tokenizer_path()
    _step(3, "apply the Qwen2.5 chat template + tokenizer, with assistant masks",
          f"chatdata tokenize {chats_dir} {tokens_dir} --tokenizer {tok_path} --tools {tools_path}")
    tok = load_tokenizer(tok_path)
    template = resolve_template(None, tok)
    tools = load_tools(tools_path)
    ts = tokenize_dataset(h, tokens_dir, tok, template, tools=tools, overwrite=True)
    say(f"   {human_count(ts.tokens)} tokens, {100 * ts.trained / max(ts.tokens, 1):.1f}% trained, "
        f"{human_count(ts.tokens / max(ts.seconds, 1e-9))} tokens/s; input_ids + assistant_masks in {tokens_dir}")

    index = args.index
    if index is None:  # a short conversation with a tool call shows every kind of message
        chats = h.to_chats()
        with_tools = [i for i, c in enumerate(chats) if any(m.get("tool_calls") for m in c)]
        index = min(with_tools or [0], key=lambda i: len(str(chats[i])))
    _step(4, "show one conversation as the model sees it; trained tokens highlighted",
          f"chatdata show {chats_dir} {index} --tools {tools_path}")
    text, ids, mask, offsets = render_one(h[index].to_chats(), tok, template, tools)
    import sys

    color = color_enabled(sys.stdout)
    mark = "\x1b[1;32mgreen\x1b[0m" if color else "[[ ]]"
    say(f"   conversation {index}: {len(ids)} tokens, {sum(mask)} trained (shown {mark})")
    say("-" * 72)
    say(format_segments(masked_segments(text, offsets, mask), color))
    say("-" * 72)

    say("")
    if keep:
        say(f"done in {time.perf_counter() - t0:.1f} s. Files in {out}:")
        say(f"   {chats_dir}/   History dataset  ->  History.load_memmap(\"{chats_dir}\")")
        say(f"   {tokens_dir}/   token ids + masks ->  chatdata.load_memmap(\"{tokens_dir}\")[i]")
        if plotting:
            say(f"   {png}   length histograms")
    else:
        say(f"done in {time.perf_counter() - t0:.1f} s. The files were written to a temporary folder, now removed; "
            "`chatdata demo --out demo/` keeps them.")
    say("next: chatdata --help, chatdata import YOUR.jsonl ds/, notebooks/quickstart.ipynb")
    return 0
