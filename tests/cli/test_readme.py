"""The README works for a newcomer: every command it shows runs with exactly what the README
installed before it, and its test command is exactly what CI runs.

``readme_walk.py`` (beside this file) says what counts as a README command and how each runs. It
walks the README twice:

* in a fresh venv made by the README's own first command (``pip install torch==2.13.0 && pip
  install -e .``: no extras), whose last step ``chatdata demo`` must work as typed. There every
  command must work, unless its context names the extra it needs (``chatdata[plot]``,
  ``.[arrow,hf]``, a backquoted ``[ray]``);
* in the test venv, which has every extra: there every command must work.

The fresh venv is made once per module, with pip's cache, and ``--no-compile`` (bytecode is then
compiled at first import instead; it halves the install time and installs the same files).
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from readme_walk import readme_items

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
WALK = Path(__file__).with_name("readme_walk.py")
RUN_LINE = next(l for l in README.splitlines() if l.startswith("python3 -m venv") and "chatdata demo" in l)
BARE = f"`{RUN_LINE.split('&& ', 2)[-1].rsplit(' && ', 1)[0]}`, no extras"
# README commands the walks leave to tests that already run them (each named test must say so)
COVERED_ELSEWHERE = {
    "chatdata demo": ("tests/cli/test_commands.py", '"demo", "--out"'),   # bare: the fixture below runs it
    "--ray": ("tests/io/test_io_ray.py", '"--ray"'),                       # a local Ray cluster costs ~30 s
    "chatdata serve": ("tests/gateway/gateway_helpers.py", '"chatdata", "serve"'),  # needs a backend behind it
    "chatdata info sessions/": ("tests/gateway/test_gateway_e2e.py", 'main(["info", str(out)'),  # what serve wrote
}


def _env(venv_bin=None):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "CHATDATA_DEBUG")}
    env["HF_HUB_OFFLINE"] = "1"
    if venv_bin:
        env["PATH"], env["VIRTUAL_ENV"] = f"{venv_bin}{os.pathsep}{env.get('PATH', '')}", str(venv_bin.parent)
    return env


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory):
    """The README's first command up to its last step, run as written: returns the venv's bin/."""
    tmp = tmp_path_factory.mktemp("bare")
    steps = [s.strip() for s in RUN_LINE.split("&&")]
    venv_bin = None
    for step in steps[:-1]:
        words = step.split()
        if words[:3] == ["python3", "-m", "venv"]:
            subprocess.run([sys.executable, "-m", "venv", str(tmp / words[3])], check=True, timeout=300)
            venv_bin = tmp / words[3] / "bin"
        elif words[0] == "." and words[1].endswith("/bin/activate"):
            assert venv_bin == tmp / words[1][: -len("/bin/activate")] / "bin", step
        elif words[:4] == ["python", "-m", "pip", "install"]:
            res = subprocess.run([str(venv_bin / "python"), "-m", "pip", "install", "-q", "--no-compile",
                                  *words[4:]], cwd=ROOT, env=_env(venv_bin), capture_output=True, text=True,
                                 timeout=900)
            assert res.returncode == 0, f"README.md: `{step}` failed in a fresh venv:\n{res.stderr[-3000:]}"
        else:
            pytest.fail(f"README.md: the test does not know how to run the install step `{step}`; teach bare_venv")
    return venv_bin


def _walk(python, workdir, env, skip):
    res = subprocess.run([str(python), str(WALK), str(ROOT / "README.md"), str(workdir), *skip], env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, f"the README walk crashed:\n{res.stderr[-3000:]}"
    return json.loads(res.stdout.splitlines()[-1])


def _failures(items, where, allow_named_extras):
    bad = [it for it in items if it["status"] == "failed" and not (allow_named_extras and it["extras"])]
    return "\n\n".join(
        f"README.md line {it['line']}: `{it['text'].splitlines()[0][:100]}` fails {where}:\n  {it['detail']}\n"
        + ("  Make it work there, or name the extra it needs beside it (e.g. `chatdata[plot]`)."
           if allow_named_extras else "") for it in bad)


def test_readme_first_command_works_on_a_bare_install(bare_venv, tmp_path):
    last = RUN_LINE.split("&&")[-1].split()
    res = subprocess.run([str(bare_venv / last[0]), *last[1:]], cwd=tmp_path, env=_env(bare_venv),
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, (f"README.md: the first command's last step `{' '.join(last)}` fails after "
                                 f"{BARE}:\n{res.stderr[-3000:]}")
    assert "== 4/4" in res.stdout and 'pip install "chatdata[plot]"' in res.stdout  # says how to get the plot
    extras = subprocess.run([str(bare_venv / "python"), "-c", "import importlib.util as u; print([m for m in "
                             "('matplotlib', 'pyarrow', 'datasets', 'ray', 'pytest') if u.find_spec(m)])"],
                            capture_output=True, text=True, env=_env(bare_venv))
    assert extras.stdout.strip() == "[]", "the bare venv is not bare: " + extras.stdout


def test_readme_walk_on_a_bare_install(bare_venv, tmp_path):
    items = _walk(bare_venv / "python", tmp_path, _env(bare_venv), skip=list(COVERED_ELSEWHERE))
    assert sum(it["status"] == "ok" for it in items) >= 15, items
    failures = _failures(items, f"after the README's install ({BARE})", allow_named_extras=True)
    assert not failures, failures


def test_readme_walk_with_every_extra(tmp_path):
    items = _walk(sys.executable, tmp_path, _env(), skip=list(COVERED_ELSEWHERE))
    assert {it["kind"] for it in items if it["status"] == "ok"} == {"python", "chatdata", "script"}
    failures = _failures(items, "with every extra installed", allow_named_extras=False)
    assert not failures, failures
    assert (tmp_path / "walk" / "ds" / "meta.json").is_file()


def test_commands_left_to_other_tests_are_run_there():
    texts = [it.text for it in readme_items(README)]
    for pattern, (test_file, call) in COVERED_ELSEWHERE.items():
        assert any(pattern in t for t in texts), f"no README command has {pattern!r}: drop it from COVERED_ELSEWHERE"
        assert call in (ROOT / test_file).read_text(encoding="utf-8"), f"{test_file} no longer runs {pattern!r}"


def test_readme_commands_match_ci():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ci_cmds = [l.strip() for l in ci.splitlines() if l.strip().startswith("python -m pip install") or
               l.strip().startswith("python -m pytest")]
    ci_cmds = [re.sub(r"\s-q\s", " ", c) if "pip" in c else c for c in ci_cmds]  # pip's -q is cosmetic
    test_line = next(l for l in README.splitlines() if "pytest" in l and l.startswith("python3 -m venv"))
    parts = [p.strip() for p in test_line.split("&&")]
    assert parts[-1] == next(c for c in ci_cmds if "pytest" in c)
    assert "python -m pip install torch==2.13.0" in parts and 'python -m pip install -e ".[test]"' in parts
    assert RUN_LINE.split("&&")[-1].strip() == "chatdata demo"


def test_a_broken_readme_command_is_named(tmp_path):
    from readme_walk import walk

    readme = tmp_path / "README.md"
    readme.write_text("Run `chatdata info nowhere/` first.\n\n```python\nraise RuntimeError('boom')\n```\n\n"
                      "```bash\nchatdata verify ds/   # needs \"chatdata[plot]\"\n```\n", encoding="utf-8")
    items = [vars(it) for it in walk(readme, tmp_path / "w")]
    strict = _failures(items, "here", allow_named_extras=False)
    assert "README.md line 1: `chatdata info nowhere/` fails here:\n  exit 1: chatdata info: error:" in strict
    assert "README.md line 4: `raise RuntimeError('boom')` fails here:\n  RuntimeError: boom" in strict
    assert "README.md line 8: `chatdata verify ds/" in strict
    lenient = _failures(items, "here", allow_named_extras=True)
    assert "line 8" not in lenient and "line 1:" in lenient and "name the extra it needs" in lenient
