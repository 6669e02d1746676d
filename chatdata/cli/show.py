"""``chatdata show DS INDEX``: one conversation as the model sees it, with the tokens the
assistant mask trains on highlighted (green on a terminal, ``[[...]]`` otherwise)."""
from __future__ import annotations

from .common import CLIError, color_enabled, load_history, load_tokenizer, load_tools, resolve_template, say

HELP = "print one conversation as the model sees it, with trained (assistant-mask) tokens highlighted"
EXAMPLE = """examples:
  chatdata show ds/ 0
  chatdata show ds/ -1 --tokenizer path/to/tokenizer --template chatml_format

trained tokens are green on a terminal; elsewhere (pipes, files) they are wrapped in [[ ]]."""
GREEN, RESET = "\x1b[1;32m", "\x1b[0m"


def add_parser(sub):
    import argparse

    p = sub.add_parser("show", help=HELP, description=HELP + ".", epilog=EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ds", help="a dataset folder (made by chatdata import)")
    p.add_argument("index", type=int, help="conversation index (negative counts from the end)")
    p.add_argument("--tokenizer", metavar="PATH", help="a local tokenizer folder (default: the packaged Qwen2.5 one)")
    p.add_argument("--template", metavar="NAME", help="a bundled template name or a .jinja file (default: the tokenizer's)")
    p.add_argument("--tools", metavar="FILE.json", help="JSON list of tool schemas passed to the template")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="highlight with ANSI colour (auto: on a terminal) or with [[ ]] markers")
    p.set_defaults(func=run)
    return p


def masked_segments(text: str, offsets, mask):
    """``[(substring, trained)]`` covering ``text``: a character is trained if a masked token covers it."""
    flags = bytearray(len(text))
    for (s, e), m in zip(offsets, mask):
        if m:
            flags[s:e] = b"\x01" * (e - s)
    segs, i = [], 0
    while i < len(text):
        j = i
        while j < len(text) and flags[j] == flags[i]:
            j += 1
        segs.append((text[i:j], bool(flags[i])))
        i = j
    return segs


def render_one(chat, tokenizer, template, tools=None):
    """(text, token ids, assistant mask, token offsets) for one conversation."""
    from ..templates import TemplateError, char_masks_to_token_masks, render_chats_with_spans

    try:
        texts, spans = render_chats_with_spans([chat], template, tools=tools, tokenizer=tokenizer,
                                               add_generation_prompt=False)
    except TemplateError as err:
        raise CLIError(str(err)) from None
    enc = tokenizer._tokenizer.encode(texts[0], add_special_tokens=False)
    import torch

    offsets = torch.tensor(enc.offsets, dtype=torch.int64).reshape(-1, 2)
    mask = char_masks_to_token_masks([len(texts[0])], spans, [offsets])[0]
    return texts[0], enc.ids, mask.tolist(), offsets.tolist()


def format_segments(segs, color: bool) -> str:
    if color:
        return "".join(f"{GREEN}{s}{RESET}" if t else s for s, t in segs)
    return "".join(f"[[{s}]]" if t else s for s, t in segs)


def run(args) -> int:
    import sys

    h = load_history(args.ds)
    n = len(h)
    if not -n <= args.index < n:
        raise CLIError(f"index {args.index} is out of range: {args.ds} holds {n} conversations")
    tok = load_tokenizer(args.tokenizer)
    template = resolve_template(args.template, tok)
    tools = load_tools(args.tools)
    chat = h[args.index % n].to_chats()
    text, ids, mask, offsets = render_one(chat, tok, template, tools)
    color = args.color == "always" or (args.color == "auto" and color_enabled(sys.stdout))
    trained = sum(mask)
    legend = f"{GREEN}green{RESET}" if color else "[[ ]]"
    say(f"conversation {args.index % n} of {n}: {len(chat)} messages, {len(ids)} tokens, "
        f"{trained} trained (assistant mask, shown {legend})")
    say("-" * 72)
    say(format_segments(masked_segments(text, offsets, mask), color))
    say("-" * 72)
    return 0
