"""`chatdata templates check` prints the rollout facts section."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_templates_check_prints_rollout_facts():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "chatdata", "templates", "check", "qwen", "--color", "never"],
                         capture_output=True, text=True, env=env, timeout=300, check=True).stdout
    section = out.split("== rollout facts (token in, token out) ==\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert section[:2] == ["eot: '<|im_end|>'", "after_eot: '\\n'"]
    assert "prefix_preserving: True" in section and "fixed_base_delta: True" in section
