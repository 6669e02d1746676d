"""Helpers for the CLI tests: run the command as a user would."""
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class CLIResult:
    """What a run left: ``returncode``, ``stdout``, ``stderr`` (as ``subprocess.CompletedProcess``)."""

    def __init__(self, args, returncode, stdout, stderr):
        self.args, self.returncode, self.stdout, self.stderr = args, returncode, stdout, stderr


def run_cli(*args, cwd=None, env=None, timeout=300, process=False):
    """Run ``chatdata ARGS`` as a user would; returns the exit status and what it printed.

    By default the command runs in this process: ``chatdata.cli.main(ARGS)``, the function behind
    both ``chatdata`` and ``python -m chatdata``, with stdout and stderr captured and the
    environment (``env`` added, ``CHATDATA_DEBUG`` removed) and working folder (``cwd``) set for
    the call and restored after. Same parsing, dispatch, one-line errors and exit statuses (a
    usage error's ``SystemExit`` becomes the status), without a Python start (torch, transformers:
    seconds) per call. ``process=True`` runs ``python -m chatdata ARGS`` in a new process instead:
    for what only a process shows (the entry point, what is left behind at exit).
    """
    args = [str(a) for a in args]
    if process:
        e = dict(os.environ)
        e.pop("CHATDATA_DEBUG", None)
        e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
        e.update(env or {})
        return subprocess.run([sys.executable, "-m", "chatdata", *args], capture_output=True, text=True,
                              cwd=cwd, env=e, timeout=timeout)
    return _in_process(args, cwd, env or {})


# Python's default warning filters (``python -W`` unset, not a debug build), most general first
_DEFAULT_FILTERS = (("default", Warning), ("ignore", ResourceWarning), ("ignore", ImportWarning),
                    ("ignore", PendingDeprecationWarning), ("ignore", DeprecationWarning))


def _in_process(args, cwd, env):
    from chatdata.cli import main

    saved_env, saved_cwd, saved_tempdir = dict(os.environ), os.getcwd(), tempfile.tempdir
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    try:
        os.environ.pop("CHATDATA_DEBUG", None)
        os.environ.update(env)
        if "TMPDIR" in env:
            tempfile.tempdir = None  # read TMPDIR again, as a new process would
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            # warnings print to the command's stderr under Python's default filters, as in a new
            # process (pytest would otherwise record them and hide them from the test)
            warnings.resetwarnings()
            for action, category in _DEFAULT_FILTERS:
                warnings.simplefilter(action, category)
            warnings.showwarning = warnings._showwarning_orig
            try:
                code = main(args)
            except SystemExit as exit_:  # argparse: --help, --version, usage errors
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                if isinstance(exit_.code, str):
                    print(exit_.code, file=sys.stderr)
            sys.stdout.flush()
            sys.stderr.flush()
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        tempfile.tempdir = saved_tempdir
    return CLIResult(["chatdata", *args], code, _text(out), _text(err))


def _text(stream):
    stream.flush()
    # as subprocess.run(text=True) reads it: universal newlines
    return stream.buffer.getvalue().decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n")
    return path
