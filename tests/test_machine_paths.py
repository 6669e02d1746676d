"""No tracked file names a path that exists only on one machine.

A path such as ``/root/...``, ``/home/alice/...`` or ``/work/venv/bin/python`` in a docstring, a doc
or a test works on the machine that wrote it and misleads (or fails) everywhere else. The rule, for
every file ``git ls-files`` lists (text files only; this file is left out, since it spells the
patterns), line by line:

* an absolute path starts where a path can start: at the line's start or after a space, a quote,
  a backquote, ``(``, ``=`` or ``:``. So a relative ``tests/data/...`` is never an absolute ``/data/``;
* flagged are home folders (``/root/``, ``/home/<user>/``, ``/Users/<user>/``, ``C:\\Users\\``), the
  work trees of build machines (``/work/``, ``/workspace/``, ``/opt/``), and
  temporary folders that only one run made (``/tmp/tmpXXXXXXXX`` and ``/tmp/<prefix>-XXXXXXXX/`` as
  ``tempfile.mkdtemp`` names them, ``/tmp/pytest-of-<user>``);
* not flagged: system paths any machine has (``/dev/null``, ``/proc/...``, ``/etc/...``,
  ``/usr/...``), plain examples in ``/tmp`` (``/tmp/synth.jsonl``), which a reader can type as is,
  and ``/mnt/...``, which published chat templates use as the model's sandbox drive (gpt-oss).

Write examples as relative paths, ``~/...`` or ``tempfile.mkdtemp()``. Needs a git checkout (CI clones).
"""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START = r"(?:^|(?<=[\s'\"`(=:]))"
MACHINE_PATH = re.compile(START + r"(?:"
                          r"/root/|/home/[a-z_][\w.-]*/|/Users/[\w.-]+/|[A-Za-z]:\\Users\\"
                          r"|/work/|/workspace/|/opt/"
                          r"|/tmp/tmp[a-z0-9_]{8}\b|/tmp/[\w.-]+-[a-z0-9_]{8}/|/tmp/pytest-of-"
                          r")")


def machine_paths(root: Path):
    """``(file, line number, line)`` for every machine path in the tracked text files under ``root``."""
    res = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True)
    assert res.returncode == 0, f"this test reads `git ls-files` and needs a git checkout of chatdata: {res.stderr}"
    me = Path(__file__).resolve().relative_to(root.resolve()).as_posix()
    for name in res.stdout.split("\0"):
        path = root / name
        if not name or name == me or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:  # binary (a tokenizer, a .memmap fixture)
            continue
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if MACHINE_PATH.search(line):
                yield name, n, line.strip()


def test_the_rule_catches_machine_paths_and_spares_examples():
    caught = ["/work/venv/bin/python x.py", "see /root/.cache/x", '"/home/alice/data"', "cd `/Users/bob/src`",
              "TMPDIR=/tmp/tmpab12_xyz", "(/tmp/chatdata-tests-k3j4h5g6/ds)", "/tmp/pytest-of-root/p0",
              "/opt/wheels", r"C:\Users\me\x"]
    spared = ["tests/data/tokenizers", "cat /dev/null", "/tmp/synth.jsonl", "hub_repo/data/ corpus/",
              "~/datasets/x", "/etc/pip.conf", "chatdata-demo-", ".venv/bin/python", "a/work/b", "/usr/bin/env", "The drive at '/mnt/data'"]
    assert [s for s in caught if not MACHINE_PATH.search(s)] == []
    assert [s for s in spared if MACHINE_PATH.search(s)] == []


def test_no_tracked_file_names_a_machine_path():
    found = [f"{name}:{n}: {line[:160]}" for name, n, line in machine_paths(ROOT)]
    assert not found, ("machine-specific paths in tracked files (use a relative path, ~/ or a temporary "
                       "folder; the rule is in tests/test_machine_paths.py):\n" + "\n".join(found))
