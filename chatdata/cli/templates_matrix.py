"""``chatdata templates check --all``: run the template matrix over a folder and write its page.

Every check of :mod:`chatdata.matrix` (rendering against transformers, masks of four probe kinds,
token-in, token-out role sets and failure modes, facts) runs on each ``*.jinja`` file of
``--templates-dir`` with each tokenizer folder, and the result is written to ``--out`` as
Markdown. The defaults are the repository's test data and ``docs/templates.md``, so in a
checkout the page is regenerated with one command.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from .common import CLIError, say

DEFAULT_TEMPLATES = "tests/data/templates"
DEFAULT_TOKENIZERS = "tests/data/tokenizers"
DEFAULT_OUT = "docs/templates.md"


def add_arguments(parser) -> None:
    """The ``--all`` options of ``chatdata templates check``."""
    parser.add_argument("--all", action="store_true",
                        help=f"check every template of --templates-dir with every tokenizer and write the matrix "
                             f"page (--out); default folders: {DEFAULT_TEMPLATES}, {DEFAULT_TOKENIZERS}/*")
    parser.add_argument("--templates-dir", metavar="DIR", default=DEFAULT_TEMPLATES,
                        help=f"folder of .jinja templates for --all (default {DEFAULT_TEMPLATES}, in a checkout)")
    parser.add_argument("--tokenizer-dir", metavar="DIR", action="append",
                        help="tokenizer folder for --all (repeat; gzipped files are fine); "
                             f"default: every folder of {DEFAULT_TOKENIZERS}")
    parser.add_argument("--out", metavar="FILE.md", default=DEFAULT_OUT, help=f"matrix page written by --all, replaced in place (default {DEFAULT_OUT})")


def run_all(args) -> int:
    from ..data import cache_root
    from ..matrix import check_corpus, load_templates, load_tokenizers, matrix_markdown
    from .common import check_output

    # the page is regenerated in place (no --overwrite), but a folder, an input or an unwritable
    # place is said now, not after the whole matrix has run
    check_output(args.out, True, kind="file", inputs=[args.templates_dir, *(args.tokenizer_dir or ())])
    folder = Path(args.templates_dir)
    templates = load_templates(folder) if folder.is_dir() else {}
    if not templates:
        raise CLIError(f"{folder}: no .jinja templates there (run from a checkout, or pass --templates-dir DIR)")
    dirs = args.tokenizer_dir or sorted(p for p in Path(DEFAULT_TOKENIZERS).glob("*") if p.is_dir())
    if not dirs:
        raise CLIError(f"no tokenizer folders in {DEFAULT_TOKENIZERS}; pass --tokenizer-dir DIR")
    try:
        cache = cache_root()
    except OSError:
        cache = Path(tempfile.mkdtemp())
    try:
        tokenizers = load_tokenizers(dirs, cache / "matrix-tokenizers")
    except (OSError, ValueError) as err:
        raise CLIError(str(err)) from None
    done = [0]

    def progress(name):
        done[0] += 1
        if sys.stderr.isatty():
            sys.stderr.write(f"\r[{done[0]}/{len(templates)}] {name[:60]:<60}")

    rows = check_corpus(templates, tokenizers, progress=progress)
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    page = matrix_markdown(rows, list(tokenizers))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    summary = page.split("## Summary", 1)[1].split("## Per template", 1)[0].strip().splitlines()[1:]
    say(f"{len(rows)} templates x {len(tokenizers)} tokenizers -> {out}")
    say("\n".join(summary))
    return 0
