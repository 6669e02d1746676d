"""The hygiene flags of ``chatdata import`` (``--check-tools``, ``--dedup``, ``--decontaminate``,
...): parsing them into a :class:`chatdata.hygiene.Screen`, naming the rows it finds, refusing or
dropping them, and the summary. The checks themselves live in :mod:`chatdata.hygiene`.

Example:
    >>> import argparse
    >>> p = argparse.ArgumentParser(); add_arguments(p)
    >>> build_screen(p.parse_args(["--dedup", "near:0.9"])).report.dedup_mode
    'near'
"""
from __future__ import annotations

import json
from pathlib import Path

from .common import CLIError, plural, say

__all__ = ["add_arguments", "build_screen", "ScreenedImport", "finish", "summary"]

MAX_REPORTED = 20
MAX_NGRAM = 1_000_000  # words; more would overflow the int64 sizes (and no prompt is that long)


def add_arguments(p) -> None:
    g = p.add_argument_group("hygiene (docs/hygiene.md)")
    g.add_argument("--check-tools", action="store_true",
                   help="check tool calls: arguments are JSON objects, names among the row's 'tools' (and --tools), "
                        "arguments match the tool's JSON schema, every tool reply answers a call; a row with a "
                        "problem is named by file and line and the import is refused, unless --skip-bad")
    g.add_argument("--tools", metavar="FILE", help="a JSON file of tool specs that every conversation may call")
    g.add_argument("--skip-bad", action="store_true", help="with --check-tools: drop the rows with problems instead "
                   "of refusing the import")
    g.add_argument("--dedup", metavar="exact|near[:T]",
                   help="drop duplicates, keeping the first: 'exact' (equal after whitespace and NFC normalization, invisible "
                        "format characters dropped) "
                        "or 'near' (MinHash-LSH over word 5-grams, estimated Jaccard >= T, default 0.8)")
    g.add_argument("--decontaminate", nargs="+", action="extend", metavar="FILE",
                   help="benchmark prompts (.jsonl/.json/.parquet): drop conversations sharing a word n-gram with one")
    g.add_argument("--decontaminate-column", metavar="NAME",
                   help="the prompt column of the benchmark files (default: prompt, question, problem, input, text "
                        "or messages, the first found)")
    g.add_argument("--ngram", type=int, default=13, metavar="N", help="n-gram length for --decontaminate (default 13)")
    g.add_argument("--flag-contaminated", action="store_true",
                   help="keep contaminated conversations; only report them")
    g.add_argument("--report-dir", metavar="DIR",
                   help="where the reports go (problems.jsonl, clusters.jsonl, contamination.json, contaminated.jsonl; "
                        "default OUT.hygiene/)")


def build_screen(args):
    """The Screen the flags ask for, or None when no hygiene flag is given."""
    from ..hygiene import ContaminationIndex, Screen, load_prompts, parse_dedup

    if args.skip_bad and not args.check_tools:
        raise CLIError("--skip-bad drops rows that --check-tools finds; pass --check-tools too")
    if args.tools and not args.check_tools:
        raise CLIError("--tools names the tools for --check-tools; pass --check-tools too")
    if (args.decontaminate_column or args.flag_contaminated) and not args.decontaminate:
        raise CLIError("--decontaminate-column and --flag-contaminated go with --decontaminate FILE...")
    if not 1 <= args.ngram <= MAX_NGRAM:
        raise CLIError(f"--ngram must be between 1 and {MAX_NGRAM:,} (words), got {args.ngram}")
    if not (args.check_tools or args.dedup is not None or args.decontaminate):  # --dedup '' is an error, not off
        return None
    if getattr(args, "out", None) is not None:
        check_report_dir(report_dir(args), args.out)
    tools = None
    if args.tools:
        try:
            tools = json.loads(Path(args.tools).read_text(encoding="utf-8"))
            from ..hygiene.tool_calls import tool_schemas

            tool_schemas(tools)
        except OSError as err:
            raise CLIError(f"--tools {args.tools}: {err.strerror}") from None
        except ValueError as err:
            raise CLIError(f"--tools {args.tools}: not a JSON list of tool specs ({err})") from None
    mode, threshold = (None, 0.8)
    if args.dedup is not None:
        try:
            mode, threshold = parse_dedup(args.dedup)
        except ValueError as err:
            raise CLIError(str(err)) from None
    index = None
    if args.decontaminate:
        benchmarks = {}
        try:
            for f in args.decontaminate:
                benchmarks[Path(f).name] = load_prompts(f, args.decontaminate_column)
        except ValueError as err:
            raise CLIError(f"--decontaminate: {err}") from None
        except ImportError as err:  # a Parquet benchmark without pyarrow: the extra to install, not an internal error
            raise CLIError(f"--decontaminate {f}: {err}") from None
        index = ContaminationIndex(benchmarks, args.ngram)
    try:
        return Screen(check_tools=args.check_tools, tools=tools, skip_bad=args.skip_bad, dedup=mode,
                      threshold=threshold, contamination=index, drop_contaminated=not args.flag_contaminated)
    except ImportError as err:
        raise CLIError(str(err)) from None


class ScreenedImport:
    """Runs the screen on each chunk an importer builds and names each new problem through
    ``report`` (the first ``MAX_REPORTED``; the rest are counted)."""

    def __init__(self, screen, report):
        self.screen, self.report = screen, report
        self._told = 0

    def __call__(self, history, source, positions, *, unit="line", conv_tools=None):
        try:
            out = self.screen(history, source, positions, unit=unit, conv_tools=conv_tools)
        except ImportError as err:
            raise CLIError(str(err)) from None
        problems = self.screen.report.problems
        while self._told < len(problems):
            p = problems[self._told]
            if self._told < MAX_REPORTED:
                self.report(f"{p['where']}: {p['problem']}: {p['detail']}")
            elif self._told == MAX_REPORTED:
                self.report("more tool-call problems; not reporting them one by one (see problems.jsonl)")
            self._told += 1
        return out


def finish(screen) -> None:
    """Refuse the import (before anything is committed) if --check-tools found rows and
    --skip-bad was not given."""
    if screen is None or not screen.check_tools or screen.skip_bad:
        return
    rows = screen.report.bad_rows
    if rows:
        first = screen.report.problems[0]
        raise CLIError(f"{plural(len(rows), 'row')} with tool-call problems (first: {first['where']}: "
                       f"{first['problem']}); nothing written. Pass --skip-bad to drop them")


def check_report_dir(folder: Path, out) -> None:
    """Refuse, before any work, a report folder that is a file, that is the output dataset or lies
    inside it (the reports would be foreign files in the dataset), or that cannot be written."""
    import os

    from .paths import check_writable

    if folder.exists() and not folder.is_dir():
        raise CLIError(f"--report-dir {folder} is a file; give a folder for the reports")
    real, dataset = Path(os.path.realpath(folder)), Path(os.path.realpath(out))
    if real == dataset or dataset in real.parents:
        raise CLIError(f"--report-dir {folder} is inside the output dataset {out}; give a folder beside it "
                       f"(default: {Path(str(Path(out)) + '.hygiene')})")
    check_writable(folder / "problems.jsonl")


def report_dir(args) -> Path:
    return Path(args.report_dir) if args.report_dir else Path(str(Path(args.out)) + ".hygiene")


def summary(screen, args, quiet: bool) -> None:
    """Write the report files and print one line per check."""
    if screen is None:
        return
    written = screen.report.write(report_dir(args))
    if quiet:
        return
    for line in screen.report.summary_lines():
        say(line)
    if written:
        say(f"reports: {', '.join(str(p) for p in written)}")
