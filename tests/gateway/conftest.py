"""Gateway tests: a tiny random Qwen2 served by the test backend (a real process on 127.0.0.1,
vLLM's and SGLang's token-in protocols), and ``chatdata serve`` started as a subprocess."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from gateway_helpers import Proc  # noqa: E402
from tiny_model import build_tiny_qwen2  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_qwen2(tmp_path_factory.mktemp("tiny-qwen2"))


@pytest.fixture(scope="session")
def backend(tiny_model, tmp_path_factory):
    """The test backend: ``(url, record file)``; every generation is a JSON line of the file."""
    record = tmp_path_factory.mktemp("backend") / "sampled.jsonl"
    p = Proc([sys.executable, str(HERE / "tiny_backend.py"), "--model", str(tiny_model), "--record", str(record)],
             "ready http://")
    yield p.url, record
    p.kill()
