"""Walk README.md as a newcomer does: every command it shows, top to bottom, in one venv.

Runs as a script in any venv: it needs only the standard library and chatdata, so it runs in a
bare install (``pip install torch==2.13.0 && pip install -e .``, no pytest there). It prints one
JSON list: per README item its line, text, the extras its context names, and what happened.
``tests/cli/test_readme.py`` runs it twice, in a bare venv and in the test venv, and judges.

What counts as a README command, and how it runs:

* a ```` ```python ```` block: executed, blocks in README order in one working folder (a block may
  use what an earlier one saved, as ``ds/``);
* a line of a ```` ```bash ```` block, or an inline code span in prose, that starts with
  ``chatdata`` or ``python FILE.py``: ``chatdata ...`` runs through ``chatdata.cli.main`` in a folder
  of its own holding copies of the inputs it names (``ds/``, ``tokens/``, ... as the Python blocks
  left them; ``chats.jsonl`` is the packaged sample); ``python FILE.py`` is checked by resolving every
  module the script imports (running the benchmarks takes minutes; the examples have tests of their own);
* install lines (``python3 -m venv ...``, ``pip install ...``) and mentions without an argument
  (`` `chatdata verify` ``) are not run here.

An item "names an extra" when its context does: ``chatdata[plot]``, ``.[arrow,hf]`` or a lone
backquoted ``[ray]``, in the Python block itself, on the bash line, or in the prose paragraph of
the span. Usage: ``python tests/cli/readme_walk.py README.md WORKDIR``.
"""
from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import sys
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

EXTRA = re.compile(r"(?:chatdata|\.)\[([a-z]+(?:,[a-z]+)*)\]|`\[([a-z]+)\]`")
SPAN = re.compile(r"`((?:chatdata|python) [^`]+)`")
# placeholders the README uses for the reader's own files; the walk puts real ones there
PLACEHOLDERS = {"PATH_OR_NAME": "qwen", "path/to/tokenizer": "{tok}", "PATH": "{tok}", "DIR": "demo-out/"}
WRITES_SECOND = {"import", "export", "tokenize"}  # their second argument is the output


@dataclass
class Item:
    line: int
    kind: str            # "python", "chatdata", "script", "install" or "mention"
    text: str
    extras: list = field(default_factory=list)
    status: str = ""     # "ok", "failed" or "not run"
    detail: str = ""


def _extras(text: str) -> list:
    found = []
    for a, b in EXTRA.findall(text):
        found += (a or b).split(",")
    return sorted(set(found))


def _classify(cmd: str) -> str:
    words = shlex.split(cmd, comments=True)
    if not words:
        return "mention"
    if words[0] == "python3" and "venv" in words or "pip" in words:
        return "install"
    if words[0] == "chatdata":
        skip = 3 if words[1:2] == ["templates"] else 2  # the subcommand's own words
        return "chatdata" if [w for w in words[skip:] if not w.startswith("-")] else "mention"
    if words[0] == "python" and len(words) > 1 and words[1].endswith(".py"):
        return "script"
    return "mention"


def readme_items(text: str) -> list:
    """Every command of the README, in order (see the module docstring for what counts)."""
    items, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"```(\w*)", line)
        if fence:
            lang, start = fence.group(1), i
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                i += 1
            body = lines[start + 1:i]
            if lang == "python":
                code = "\n".join(body) + "\n"
                items.append(Item(start + 2, "python", code, _extras(code)))
            elif lang == "bash":
                for k, cmd in enumerate(body):
                    if cmd.strip() and not cmd.lstrip().startswith("#"):
                        items.append(Item(start + 2 + k, _classify(cmd), cmd.strip(), _extras(cmd)))
            i += 1
            continue
        if not line.strip():
            i += 1
            continue
        start = i  # a prose paragraph: spans may wrap onto the next line
        while i < len(lines) and lines[i].strip() and not lines[i].startswith("```"):
            i += 1
        paragraph = "\n".join(lines[start:i])
        for m in SPAN.finditer(paragraph):
            span = " ".join(m.group(1).split())
            items.append(Item(start + 1 + paragraph.count("\n", 0, m.start()), _classify(span), span,
                              _extras(paragraph)))
    return items


def _argv(cmd: str, tok: str) -> list:
    words = shlex.split(cmd, comments=True)[1:]
    out = []
    for w in words:
        w = w.strip("[]") if w.startswith("[") or w.endswith("]") else w
        out.append(PLACEHOLDERS.get(w, w).format(tok=tok))
    return out


def _seed_inputs(argv: list, walk: Path, here: Path) -> None:
    """Copy into ``here`` the inputs the command names, as the README's earlier steps left them."""
    positional = [a for a in argv[1:] if not a.startswith("-")]
    output = positional[1] if argv[0] in WRITES_SECOND and len(positional) > 1 else None
    for name in positional:
        if name == output or os.path.isabs(name):
            continue
        src = walk / name
        if src.is_dir():
            shutil.copytree(src, here / name)
        elif src.is_file():
            shutil.copy(src, here / name)
        elif name == "chats.jsonl":
            import gzip

            from chatdata.data import sample_chats_path

            with gzip.open(sample_chats_path(), "rb") as f:
                (here / name).write_bytes(b"".join(f.readlines()[:40]))


def _run_chatdata(item: Item, walk: Path, tok: str, k: int) -> None:
    from chatdata.cli import main

    argv = _argv(item.text, tok)
    here = walk.parent / f"cmd-{k}"
    here.mkdir()
    _seed_inputs(argv, walk, here)
    err, out = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(here)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(argv)
    except SystemExit as e:  # argparse: bad usage
        code = e.code
    except Exception:
        code, err = 1, io.StringIO(traceback.format_exc(limit=-3))
    finally:
        os.chdir(old)
    item.status = "ok" if code == 0 else "failed"
    item.detail = f"exit {code}: {err.getvalue().strip()[-1500:]}" if code else ""


def _imported_modules(path: Path) -> set:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def _check_script(item: Item, root: Path) -> None:
    script = root / shlex.split(item.text)[1]
    if not script.is_file():
        item.status, item.detail = "failed", f"{script.relative_to(root)} does not exist"
        return
    def in_checkout(m):  # a module of this repository (the script puts its folder on sys.path)
        return (root / m).is_dir() or any(".venv" not in p.parts for p in root.rglob(f"{m}.py"))

    missing = sorted(m for m in _imported_modules(script) if m not in sys.stdlib_module_names
                     and importlib.util.find_spec(m) is None and not in_checkout(m))
    item.status = "failed" if missing else "ok"
    item.detail = f"imports {', '.join(missing)}, which this install does not have" if missing else ""


def _run_python(item: Item, walk: Path) -> None:
    old = os.getcwd()
    os.chdir(walk)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(item.text, f"README.md line {item.line}", "exec"), {"__name__": "__main__"})
        item.status = "ok"
    except Exception as err:  # the test reports it with the README line
        item.status, item.detail = "failed", f"{type(err).__name__}: {err}"[:1500]
    finally:
        os.chdir(old)


def walk(readme: Path, workdir: Path, skip=()) -> list:
    """Run every item of ``readme`` (see the module docstring); ``skip``: texts not to run."""
    from chatdata.data import sample_tokenizer_path

    tok = str(sample_tokenizer_path())
    root = readme.parent
    items = readme_items(readme.read_text(encoding="utf-8"))
    walk_dir = workdir / "walk"
    walk_dir.mkdir(parents=True)
    for k, item in enumerate(items):
        if item.kind in ("install", "mention") or any(s in item.text for s in skip):
            item.status = "not run"
        elif item.kind == "python":
            _run_python(item, walk_dir)
        elif item.kind == "chatdata":
            _run_chatdata(item, walk_dir, tok, k)
        else:
            _check_script(item, root)
    return items


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    readme_path, work = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    print(json.dumps([asdict(x) for x in walk(readme_path, work, skip=sys.argv[3:])]))
