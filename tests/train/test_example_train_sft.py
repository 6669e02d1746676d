"""examples/train_sft.py runs bare, trains on padding-free packed batches, and its loss falls."""
from __future__ import annotations

import os
import subprocess
import sys

from tests_train_helpers import ROOT


def test_train_sft_example_loss_falls(tmp_path):
    tmp, cwd = tmp_path / "tmp", tmp_path / "cwd"
    tmp.mkdir()
    cwd.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    res = subprocess.run([sys.executable, str(ROOT / "examples" / "train_sft.py"), "--steps", "12", "--chats", "60",
                          "--max-tokens", "1024"], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "loss fell from" in res.stdout and "chats packed" in res.stdout
    first, last = (float(x) for x in res.stdout.split("loss fell from ")[1].split(" (")[0].split(" to "))
    assert last < first
    # it wrote only to its own temporary folder, and removed it (torch may leave its own cache there)
    assert list(cwd.iterdir()) == [] and not list(tmp.glob("chatdata-sft-*"))
