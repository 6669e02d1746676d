"""``chatdata templates check TEMPLATE_OR_TOKENIZER``: what a model learns from a chat template;
``chatdata templates list``: the bundled template names.

Renders a probe chat of each kind (plain, tool-calling, reasoning) and prints the text with the
trained spans marked (highlighted on a terminal, between « and » otherwise), after the facts the
mask engine learned about the template. The report's sections come from
``chatdata.templates.report.check_template``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .common import CLIError, check_output, color_enabled, load_tokenizer, load_tools, read_template_file, say
from .templates_matrix import add_arguments as add_matrix_arguments, run_all
from .train_flags import add_selection_flags, selection_from_args

HELP = ("inspect chat templates: `templates check` shows what a model learns (the trained spans), "
        "`templates list` names the bundled ones")
EXAMPLE = """examples:
  chatdata templates check qwen                       # a bundled template
  chatdata templates check path/to/chat_template.jinja --tokenizer path/to/tokenizer
  chatdata templates check path/to/tokenizer          # the tokenizer's own template
  chatdata templates check qwen --no-eot --no-reasoning
  chatdata templates check qwen --train-on assistant,tool --loss-weight tool=0.2
  chatdata templates check path/to/tokenizer --html report.html   # token chips, one self-contained page
  chatdata templates check --all                      # every test template -> docs/templates.md
  chatdata templates list                             # the bundled template names"""


def add_parser(sub):
    import argparse

    p = sub.add_parser("templates", help=HELP, description=HELP + ".", epilog=EXAMPLE,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    c = actions.add_parser("check", help="print probe chats rendered with the trained spans marked",
                           description="Print, for a probe chat of each kind, the rendered text with the "
                           "trained spans marked.", epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("target", metavar="TEMPLATE_OR_TOKENIZER", nargs="?",
                   help="a bundled template name, a .jinja file, or a tokenizer folder (its own template)")
    c.add_argument("--tokenizer", metavar="PATH", help="tokenizer folder for the special tokens (bos/eos) the template uses")
    c.add_argument("--tools", metavar="FILE.json", help="JSON list of tool schemas (default: a probe tool)")
    c.add_argument("--no-reasoning", action="store_true", help="mask_reasoning=False: do not train reasoning")
    c.add_argument("--no-eot", action="store_true", help="mask_eot=False: do not train the end of turns")
    c.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="highlight trained spans")
    add_matrix_arguments(c)  # --all: the whole template matrix (chatdata/cli/templates_matrix.py)
    c.add_argument("--html", metavar="FILE", help="write the report as a self-contained HTML page of token chips "
                   "(coloured by role and loss weight; tokens of --tokenizer, default the packaged Qwen2.5 one)")
    c.add_argument("--overwrite", action="store_true", help="with --html: replace FILE if it exists")
    add_selection_flags(c)
    c.set_defaults(func=run)
    ls = actions.add_parser("list", help="print the bundled template names (for --template NAME)",
                            description="Print the bundled template names, one a line: what --template NAME "
                            "(tokenize, show), templates check NAME and serve --chat-template-name take.",
                            epilog="examples:\n  chatdata templates list\n  chatdata tokenize ds/ tokens/ --template llama3   # "
                            "one of the names", formatter_class=argparse.RawDescriptionHelpFormatter)
    ls.set_defaults(func=run_list)
    return p


def run_list(args) -> int:
    from ..templates import list_chat_templates

    sys.stdout.write("".join(f"{name}\n" for name in list_chat_templates()))
    return 0


# what the probe chats' marker words stand for (chatdata/templates/probes.py), printed with the report
PROBE_WORDS = ("probe words: Wqans (content), Wqrsn (reasoning) and Wqarg (tool-call arguments) are the "
               "assistant's; Wqsys, Wqusr and Wqtool are system, user and tool text")


def _template_and_tokenizer(target, tokenizer_path):
    from ..templates import get_chat_template, list_chat_templates, resolve_chat_template
    from ..templates.registry import unknown_name_hint

    tok = load_tokenizer(tokenizer_path) if tokenizer_path else None
    if not target.strip():
        raise CLIError("the template is empty: give a template name, a .jinja file or a tokenizer folder")
    p = Path(target)
    if p.is_dir():
        if not (p / "tokenizer.json").is_file() and not (p / "tokenizer_config.json").is_file():
            raise CLIError(f"{target} is a folder but not a tokenizer folder (no tokenizer.json or "
                           "tokenizer_config.json); give a template name, a .jinja file or a tokenizer folder")
        tok = load_tokenizer(target)
        from ..templates.registry import template_name_for_model

        if not getattr(tok, "chat_template", None) and template_name_for_model(tok) is None:
            raise CLIError(f"{target}: the tokenizer has no chat template; check a bundled one by name "
                           f"({', '.join(list_chat_templates())}) or a .jinja file, with --tokenizer {target}")
        try:
            return resolve_chat_template(tok), tok
        except ValueError as err:
            raise CLIError(f"{target}: {err}") from None
    if target.endswith(".jinja") or os.sep in target or (target not in list_chat_templates() and p.is_file()):
        if not p.is_file():
            raise CLIError(f"{target}: no such file or tokenizer folder")
        return read_template_file(target, "template"), tok
    if target not in list_chat_templates():
        raise CLIError(f"{target}: not a template name, .jinja file or tokenizer folder; {unknown_name_hint(target)}")
    return get_chat_template(target), tok


def run(args):
    from ..rollout import rollout_section
    from ..templates import TemplateError
    from ..templates.report import check_template, mark_spans

    if args.all and args.html:
        raise CLIError("--html writes the page of one template; --all writes the matrix to --out "
                       "(drop --html, or give one template instead of --all)", code=2)
    if args.overwrite and not args.html:
        raise CLIError("--overwrite replaces the page of --html FILE; " + (
            "--all rewrites --out in place (drop --overwrite)" if args.all
            else "without --html nothing is written (add --html FILE, or drop --overwrite)"), code=2)
    if args.all:
        return run_all(args)
    if args.target is None:
        raise CLIError("give a template name, a .jinja file or a tokenizer folder, or --all")
    selection = selection_from_args(args)
    if args.html:
        check_output(args.html, args.overwrite, kind="file", make_parents=False,
                     inputs=[args.target, args.tokenizer, args.tools])
    template, tok = _template_and_tokenizer(args.target, args.tokenizer)
    tools = load_tools(args.tools)
    try:
        sections = check_template(template, tokenizer=tok, tools=tools, mask_reasoning=not args.no_reasoning,
                                  mask_eot=not args.no_eot, selection=selection)
        sections += rollout_section(template, tokenizer=tok, tools=tools)  # per-template facts of chatdata.rollout
    except TemplateError as err:
        raise CLIError(f"{args.target}: {err}") from None
    if args.html:
        from ..view import report_sections, write_html

        view = report_sections(sections, tok if tok is not None else load_tokenizer(None))
        write_html(args.html, f"chatdata templates check {args.target}", view,
                   f"what a model trained on this template's renderings learns: probe chats, token by token; "
                   f"{PROBE_WORDS}")
        say(f"wrote {args.html}: {len(view)} sections, {sum(len(v.chips) for v in view):,} tokens")
        return 0
    color = args.color == "always" or (args.color == "auto" and color_enabled(sys.stdout))
    start, end = ("\x1b[30;42m", "\x1b[0m") if color else ("«", "»")
    out = []
    for sec in sections:
        out.append(f"== {sec.title} ==")
        out += sec.lines
        if sec.text is not None:
            out.append(mark_spans(sec.text, sec.spans, start, end))
        out.append("")
    out.append("(trained text is between « and »; " if not color else "(trained text is highlighted; ")
    out[-1] += PROBE_WORDS + ")"
    sys.stdout.write("\n".join(out) + "\n")
    return 0
