"""Every script in examples/ runs bare, as a newcomer would run it: from an empty folder, with no
argument and nothing prepared, and leaves no file behind (neither there nor in the temp folder)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# examples run by a test of their own, which also checks what they show
OWN_TEST = {"train_sft.py": "tests/train/test_example_train_sft.py"}
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.py") if p.name not in OWN_TEST)


def test_there_are_examples_and_each_is_run():
    assert {p.name for p in EXAMPLES} >= {"quickstart.py", "train_loop.py"}
    for name, test in OWN_TEST.items():
        assert (ROOT / "examples" / name).is_file() and name in (ROOT / test).read_text()


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_bare_and_leaves_nothing(script, tmp_path):
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    # importing a transformers model imports torch._dynamo, which makes torch's compile cache folder
    # ($TMPDIR/torchinductor_<user>) unless TORCHINDUCTOR_CACHE_DIR names one: torch's, not the example's.
    # A worker that imported it already passes its own value on, so the test sets it either way.
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), TMPDIR=str(tmp),
               TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "torch-cache"))
    res = subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip(), "an example prints what it did"
    assert list(cwd.iterdir()) == []
    assert list(tmp.iterdir()) == []


def test_train_loop_given_conversations_instead_of_tokens_says_to_tokenize(tmp_path):
    """A newcomer passing ``ds/`` (chatdata import's output) got 'AttributeError: offsets'."""
    from chatdata import History

    History.from_chats([[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]]).memmap(tmp_path / "ds")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for arg, said in (("ds", "ds holds conversations, not tokens: tokenize it first (chatdata tokenize ds tokens/)"),
                      ("nope", "nope: no such folder; pass the output of `chatdata tokenize ds/ tokens/`")):
        res = subprocess.run([sys.executable, str(ROOT / "examples" / "train_loop.py"), arg], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 1 and said in res.stderr and "Traceback" not in res.stderr, res.stderr[-2000:]
