"""The ``chatdata`` command: import, export, info, templates, tokenize, pack, show, verify, serve and an offline demo.

Every subcommand has ``--help`` with an example. Errors are one line on stderr and a non-zero
exit status (1 for a failed command, 2 for bad usage, 130 when interrupted); set
``CHATDATA_DEBUG=1`` to see the Python traceback of an unexpected error.

Example:
    >>> from chatdata import History
    >>> _ = History.from_chats([[{"role": "user", "content": "hi"}]]).memmap("ds/")
    >>> main(["verify", "ds/"])  # the exit status; ``chatdata --version`` exits through argparse
    ok: ds/: ... files, ... checksums match (...)
    0
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys

from .common import CLIError
from ..io.deps import MissingExtraError

__all__ = ["main", "CLIError"]

# the subcommands, in the order --help lists them; a module of this package that defines
# ``add_parser(subparsers)`` and is not listed here is added after them (in name order), so a new
# subcommand is one new module
_SUBCOMMANDS = ("import_", "export", "info", "tokenize", "show", "demo")
DESCRIPTION = ("chatdata: chat-history datasets for PyTorch (import, inspect, check templates, tokenize, pack, verify, "
               "export; serve: a gateway recording agent sessions).")
EPILOG = """start with:
  chatdata demo                          # offline tour on packaged sample data
  chatdata import chats.jsonl ds/        # OpenAI / ShareGPT JSON Lines, Parquet, Arrow -> dataset
  chatdata info ds/ --plot lengths.png
  chatdata templates check path/to/tokenizer   # what the assistant mask trains, before training
  chatdata tokenize ds/ tokens/ --tokenizer path/to/tokenizer
  chatdata pack tokens/ --max-tokens 8192
  chatdata show ds/ 0
  chatdata verify ds/
  chatdata export ds/ chats.jsonl
  chatdata serve --backend URL --tokenizer PATH --out sessions/   # gateway recording agent sessions

run `chatdata COMMAND --help` for the options of a command."""


class _Parser(argparse.ArgumentParser):
    def parse_known_args(self, args=None, namespace=None):
        self._words = list(sys.argv[1:] if args is None else args)  # for error(): what the user typed
        return super().parse_known_args(args, namespace)

    def error(self, message):  # one line, exit 2
        if message.startswith("the following arguments are required"):
            # an option taking several values (--decontaminate A B) also takes the positionals after it
            greedy = [a.option_strings[-1] for a in self._actions if a.nargs in ("+", "*") and a.option_strings
                      and set(a.option_strings) & set(getattr(self, "_words", ()))]
            if greedy:
                message += f"; {greedy[0]} takes every word after it as one of its values: put it after them"
        prog = self.prog
        if message.startswith("unrecognized arguments"):
            # parse_args reports them on the top parser: name the subcommand they were given to
            parser = self._subcommand_parser()
            prog = parser.prog
            message += _close_options(parser, message)
        elif "invalid choice" in message:
            message += _close_choice(message)
        self.exit(2, f"{prog}: error: {message} (see `{prog} --help`)\n")

    def _subcommand_parser(self) -> argparse.ArgumentParser:
        """The (sub)parser of the subcommand the typed words name, or this one."""
        parser, words = self, list(getattr(self, "_words", ()))
        while True:
            sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            word = next((w for w in words if not w.startswith("-")), None)
            if sub is None or word not in sub.choices:
                return parser
            parser, words = sub.choices[word], words[words.index(word) + 1:]


def _close_options(parser, message: str) -> str:
    """``; did you mean --x?`` for the misspelt options of an 'unrecognized arguments' message.

    Example:
        >>> p = argparse.ArgumentParser(prog="p"); _ = p.add_argument("--max-length")
        >>> _close_options(p, "unrecognized arguments: --max-lenght 5")
        '; did you mean --max-length?'
    """
    import difflib

    known = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    pairs = []
    for word in message.partition(":")[2].split():
        flag = word.split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.75) if flag.startswith("--") else []
        pairs += [(flag, close[0])] if close else []
    if len(pairs) == 1:
        return f"; did you mean {pairs[0][1]}?"
    return f"; did you mean {', '.join(f'{right} for {wrong}' for wrong, right in pairs)}?" if pairs else ""


def _close_choice(message: str) -> str:
    """``; did you mean 'x'?`` for an 'invalid choice' message (a misspelt subcommand).

    Example:
        >>> _close_choice("argument COMMAND: invalid choice: 'tokenise' (choose from 'import', 'tokenize')")
        "; did you mean 'tokenize'?"
    """
    import difflib
    import re

    m = re.search(r"invalid choice: '?([^'(]*?)'? \(choose from (.*)\)", message)
    if not m:
        return ""
    choices = re.findall(r"'([^']*)'", m.group(2)) or [c.strip() for c in m.group(2).split(",")]
    close = difflib.get_close_matches(m.group(1), choices, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def build_parser() -> argparse.ArgumentParser:
    import importlib


    parser = _Parser(prog="chatdata", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"chatdata {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in _subcommand_modules():
        importlib.import_module(f".{name}", __name__).add_parser(sub)
    return parser


def _subcommand_modules() -> list:
    import importlib
    import pkgutil

    names = list(_SUBCOMMANDS)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in names or info.name.startswith("_"):
            continue
        if hasattr(importlib.import_module(f".{info.name}", __name__), "add_parser"):
            names.append(info.name)
    return names


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("chatdata")
    except Exception:  # not installed (run from a checkout)
        return "0.1.0"


def _quiet_torch_logs() -> None:
    # torch prints a one-time fx warning through logging on some code paths; a command's
    # stderr is for the user's errors only
    import logging

    logging.getLogger("torch.fx._symbolic_trace").setLevel(logging.ERROR)


_PROCESS_LOGGERS = ("transformers", "torch.fx._symbolic_trace")  # what commands quiet
_PROCESS_ENV = ("TOKENIZERS_PARALLELISM",)  # what loading a tokenizer sets


@contextlib.contextmanager
def _process_state_kept():
    """Give back the environment variables and logger levels a command changes for its own
    run, so that ``main([...])`` called from Python leaves its caller's process as it was."""
    import logging

    env = {k: os.environ.get(k) for k in _PROCESS_ENV}
    levels = {name: logging.getLogger(name).level for name in _PROCESS_LOGGERS}
    fresh_transformers = "transformers" not in sys.modules  # its import sets its own default level
    try:
        yield
    finally:
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        for name, level in levels.items():
            if name == "transformers" and fresh_transformers and "transformers" in sys.modules:
                level = _transformers_default_level(level)
            logging.getLogger(name).setLevel(level)


def _transformers_default_level(fallback: int) -> int:
    """The level transformers gives its logger when imported (TRANSFORMERS_VERBOSITY, else
    WARNING): what the process would have without the command."""
    try:
        from transformers.utils import logging as hf_logging

        return hf_logging._get_default_logging_level()
    except (ImportError, AttributeError):
        import logging

        return logging.WARNING if fallback == logging.NOTSET else fallback


def _one_line(err) -> str:
    """The message of ``err`` on one line: a line break in it (a path such as ``$'a\\nb'``, a
    library's multi-line message) is shown escaped, as ``\\n``.

    Example:
        >>> _one_line(ValueError("new\\nline/: no such dataset"))
        'new\\\\nline/: no such dataset'
    """
    return str(err).replace("\r", "\\r").replace("\n", "\\n")


def main(argv=None) -> int:
    """Run the command with ``argv`` (default ``sys.argv[1:]``); returns the exit status.
    Called from Python, it gives back ``TOKENIZERS_PARALLELISM`` and the transformers and
    torch.fx logger levels as they were (process-wide state: two commands run at once in
    threads of one process, e.g. ``serve`` in a thread, may give them back in either order)."""
    with _process_state_kept():
        return _main(argv)


def _main(argv) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    _quiet_torch_logs()
    prog = " ".join(["chatdata", args.command, *([args.action] if getattr(args, "action", None) else [])])  # templates check
    try:
        return int(args.func(args) or 0)
    except CLIError as err:
        print(f"{prog}: error: {_one_line(err)}", file=sys.stderr)
        return err.code
    except KeyboardInterrupt:
        print(f"\n{prog}: interrupted (nothing half-written was kept)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except (OSError, ValueError, MissingExtraError) as err:  # a missing extra is the user's to install
        if os.environ.get("CHATDATA_DEBUG"):
            raise
        print(f"{prog}: error: {_one_line(err)}", file=sys.stderr)
        return 1
    except Exception as err:  # a bug: still one line, with a way to see more
        if os.environ.get("CHATDATA_DEBUG"):
            raise
        print(f"{prog}: internal error: {type(err).__name__}: {_one_line(err)} (set CHATDATA_DEBUG=1 for the "
              "traceback)", file=sys.stderr)
        return 1
