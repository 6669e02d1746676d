"""Where the benchmarks find the reference environment (tensordict 0.14.3 + torchrl 0.14.1) and the
tokenizer, with no path of one machine.

The reference Python is, in this order: the ``--reference-python PATH`` flag, the
``CHATDATA_REFERENCE_PYTHON`` environment variable, then ``.refvenv/bin/python`` at the repository
root (the venv that ``benchmarks/reference_env.md`` builds). The tokenizer is the Qwen2.5 copy in
``tests/data/tokenizers`` (gzip-compressed), unpacked once into a temporary folder.

Example:
    >>> import argparse
    >>> ap = argparse.ArgumentParser(); add_reference_argument(ap)
    >>> ap.parse_args(["--reference-python", "/x/bin/python"]).reference_python
    '/x/bin/python'
"""
from __future__ import annotations

import atexit
import gzip
import os
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV_VAR = "CHATDATA_REFERENCE_PYTHON"
DEFAULT_VENV = ROOT / ".refvenv"
QWEN_COPY = ROOT / "tests" / "data" / "tokenizers" / "qwen2.5-instruct"
HOW_TO_BUILD = ("build it with the commands in benchmarks/reference_env.md (python3 -m venv .refvenv && "
                ".refvenv/bin/pip install torch==2.13.0 tensordict==0.14.3 torchrl==0.14.1 transformers), "
                f"or pass --reference-python PATH / set {ENV_VAR}")


def add_reference_argument(parser) -> None:
    """Add ``--reference-python PATH`` (default: ``$CHATDATA_REFERENCE_PYTHON``) to ``parser``."""
    parser.add_argument("--reference-python", default=os.environ.get(ENV_VAR),
                        help=f"python of the tensordict/torchrl reference venv (default: ${ENV_VAR}, "
                             f"then .refvenv/bin/python at the repository root)")


def reference_python(value: str | None) -> Path | None:
    """The reference interpreter to use, or None (after printing how to get one) when there is none."""
    candidates = [Path(value)] if value else [DEFAULT_VENV / "bin" / "python"]
    for path in candidates:
        if path.exists():
            return path
    where = value or f"{DEFAULT_VENV / 'bin' / 'python'} (no --reference-python, no ${ENV_VAR})"
    print(f"reference: {where} not found; skipped. To compare with torchrl, {HOW_TO_BUILD}.")
    return None


def tokenizer_folder(path: str | None = None) -> str:
    """A folder ``AutoTokenizer.from_pretrained`` loads: ``path`` itself, or the unpacked Qwen2.5 copy."""
    if path:
        return str(path)
    tmp = Path(tempfile.mkdtemp(prefix="bench-tok-"))
    atexit.register(shutil.rmtree, tmp, True)
    for f in QWEN_COPY.iterdir():
        if f.name.endswith(".gz"):
            with gzip.open(f) as fin, open(tmp / f.name[:-3], "wb") as fout:
                shutil.copyfileobj(fin, fout)
        elif f.is_file():
            shutil.copy(f, tmp / f.name)
    return str(tmp)


class ReferenceWorker:
    """``benchmarks/reference_worker.py`` running in the reference venv, asked for one timing at a
    time so that the caller alternates it with its own (``None``-safe: see :func:`start_worker`)."""

    def __init__(self, python: Path) -> None:
        import json
        import subprocess

        self._json = json
        self.proc = subprocess.Popen([str(python), str(ROOT / "benchmarks" / "reference_worker.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self.proc.stdout.readline()
        if not ready.strip():
            raise RuntimeError("reference worker did not start (is torchrl installed in the reference venv?)")

    def ask(self, **request) -> float:
        self.proc.stdin.write(self._json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._json.loads(self.proc.stdout.readline())["seconds"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write('{"op": "quit"}\n')
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def start_worker(value: str | None) -> "ReferenceWorker | None":
    """A running reference worker, or None (after saying why) when there is no reference venv."""
    python = reference_python(value)
    if python is None:
        return None
    try:
        return ReferenceWorker(python)
    except (OSError, RuntimeError) as err:
        print(f"reference: {err}; skipped")
        return None
