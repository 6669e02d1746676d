"""``chatdata show DS [INDEX]``: one conversation as the model sees it, with the trained tokens
highlighted (green on a terminal, ``[[...]]`` otherwise), or with ``--html FILE`` as a page of
token chips coloured by role and loss weight (:mod:`chatdata.view`).

``DS`` is a dataset (rendered with the tokenizer's template, the trained turns chosen by the
what-is-trained flags, as ``chatdata tokenize`` would) or a token set made by ``chatdata tokenize``
(its ids decoded with ``--tokenizer``, its mask and loss weights as stored)."""
from __future__ import annotations

from .common import CLIError, color_enabled, load_history, load_tokenizer, load_tools, resolve_template, say
from .train_flags import add_selection_flags, selection_from_args

HELP = "print one conversation as the model sees it, with trained tokens highlighted (or an HTML page: --html)"
EXAMPLE = """examples:
  chatdata show ds/ 0
  chatdata show ds/ -1 --tokenizer path/to/tokenizer --template chatml_format
  chatdata show ds/ 3 --train-on assistant,tool --loss-weight tool=0.2 --html chat.html
  chatdata show tokens/ 0 --html tokens.html      # a token set from `chatdata tokenize`

trained tokens are green on a terminal; elsewhere (pipes, files) they are wrapped in [[ ]].
the HTML page is one self-contained file: tokens as chips, trained ones coloured by role (opacity:
loss weight); hover a chip for its token id and weight."""
GREEN, RESET = "\x1b[1;32m", "\x1b[0m"


def add_parser(sub):
    import argparse

    p = sub.add_parser("show", help=HELP, description=HELP + ".", epilog=EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("ds", help="a dataset folder (chatdata import) or a token set (chatdata tokenize)")
    p.add_argument("index", type=int, nargs="?", default=0,
                   help="conversation index (negative counts from the end; default 0)")
    p.add_argument("--tokenizer", metavar="PATH", help="a local tokenizer folder (default: the packaged Qwen2.5 one)")
    p.add_argument("--template", metavar="NAME", help="a bundled template name or a .jinja file (default: the tokenizer's)")
    p.add_argument("--tools", metavar="FILE.json", help="JSON list of tool schemas passed to the template")
    p.add_argument("--no-reasoning", action="store_true", help="do not train the reasoning the template renders")
    p.add_argument("--no-eot", action="store_true", help="do not train the end of each turn")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="highlight with ANSI colour (auto: on a terminal) or with [[ ]] markers")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML page of token chips to FILE")
    p.add_argument("--overwrite", action="store_true", help="with --html: replace FILE if it exists")
    add_selection_flags(p)
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
    """(text, token ids, assistant mask, token offsets) for one conversation (the demo's view)."""
    from ..templates import TemplateError, char_masks_to_token_masks, render_chats_with_spans

    try:
        texts, spans = render_chats_with_spans([chat], template, tools=tools, tokenizer=tokenizer,
                                               add_generation_prompt=False)
    except TemplateError as err:
        raise CLIError(str(err)) from None
    from ..templates.backend import unpadded

    enc = unpadded(tokenizer._tokenizer).encode(texts[0], add_special_tokens=False)  # no padding left on by a caller
    import torch

    offsets = torch.tensor(enc.offsets, dtype=torch.int64).reshape(-1, 2)
    mask = char_masks_to_token_masks([len(texts[0])], spans, [offsets])[0]
    return texts[0], enc.ids, mask.tolist(), offsets.tolist()


def format_segments(segs, color: bool) -> str:
    if color:
        return "".join(f"{GREEN}{s}{RESET}" if t else s for s, t in segs)
    return "".join(f"[[{s}]]" if t else s for s, t in segs)


def _chip_segments(chips):
    """``[(text, trained)]`` from token chips, neighbours of the same kind merged."""
    segs = []
    for c in chips:
        trained = c.weight > 0
        if segs and segs[-1][1] == trained:
            segs[-1] = (segs[-1][0] + c.text, trained)
        else:
            segs.append((c.text, trained))
    return segs


def _token_set_section(args, tok):
    from ..io.sharded import is_sharded, open_dataset
    from ..td import FormatError
    from ..train import ConcatTokenDataset, TokenDataset
    from ..view import token_row_section

    try:
        ds = ConcatTokenDataset(open_dataset(args.ds)) if is_sharded(args.ds) else TokenDataset(args.ds)
    except (ValueError, TypeError, FileNotFoundError, FormatError) as err:
        raise CLIError(str(err)) from None
    n = len(ds)
    if not -n <= args.index < n:
        raise CLIError(f"index {args.index} is out of range: {args.ds} holds {n} sequences")
    row = ds[args.index % n]
    sec = token_row_section(row["input_ids"], row["assistant_masks"], row.get("loss_weights"), tok,
                            title=f"sequence {args.index % n} of {n}")
    return sec, f"{args.ds}: a token set" + (" with loss weights" if "loss_weights" in row else "")


def _history_section(args, h, tok, selection):
    from ..templates import TemplateError
    from ..view import chat_section

    n = len(h)
    if not -n <= args.index < n:
        raise CLIError(f"index {args.index} is out of range: {args.ds} holds {n} conversations")
    template = resolve_template(args.template, tok)
    chat = h[args.index % n].to_chats()
    try:
        sec = chat_section(chat, tok, template=template, tools=load_tools(args.tools),
                           title=f"conversation {args.index % n} of {n}", train_on=selection.train_on,
                           last_turn_only=selection.last_turn_only, loss_weights=selection.loss_weights,
                           mask_reasoning=not args.no_reasoning, mask_eot=not args.no_eot)
    except TemplateError as err:
        raise CLIError(str(err)) from None
    return sec, f"{args.ds}: rendered with {args.template or 'the tokenizer’s template'}"


def run(args) -> int:
    import sys

    from .common import check_output
    from .info_tokens import is_token_set

    if args.overwrite and not args.html:
        raise CLIError("--overwrite replaces the page of --html FILE; without --html nothing is written "
                       "(add --html FILE, or drop --overwrite)", code=2)
    selection = selection_from_args(args)
    tokens = is_token_set(args.ds)
    if tokens and (not selection.is_default or args.no_reasoning or args.no_eot or args.template or args.tools):
        raise CLIError(f"{args.ds} is a token set: its trained tokens are fixed; the what-is-trained flags, "
                       "--template and --tools apply to datasets", code=2)
    if args.html:
        check_output(args.html, args.overwrite, kind="file", make_parents=False,
                     inputs=[args.ds, args.tokenizer, args.template, args.tools])
    h = None if tokens else load_history(args.ds)  # a wrong path is said before the tokenizer loads (seconds)
    tok = load_tokenizer(args.tokenizer)
    sec, subtitle = _token_set_section(args, tok) if tokens else _history_section(args, h, tok, selection)
    if args.html:
        from ..view import write_html

        write_html(args.html, f"chatdata show {args.ds} {args.index}", [sec], subtitle)
        say(f"wrote {args.html}: {sec.title}, {sec.lines[0]}")
        return 0
    color = args.color == "always" or (args.color == "auto" and color_enabled(sys.stdout))
    legend = f"{GREEN}green{RESET}" if color else "[[ ]]"
    say(f"{sec.title}: {'; '.join(sec.lines)} (trained shown {legend})")
    say("-" * 72)
    say(format_segments(_chip_segments(sec.chips), color))
    say("-" * 72)
    return 0
