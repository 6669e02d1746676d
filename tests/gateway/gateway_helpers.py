"""Helpers of the gateway tests: server subprocesses and the backend's record of what it sampled."""
from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}


class Proc:
    """A server subprocess whose stdout is read by a thread (so a full pipe never blocks it)."""

    def __init__(self, args: list[str], ready: str, timeout: float = 120.0) -> None:
        self.args = args
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        self.lines: queue.Queue = queue.Queue()
        self.out: list[str] = []
        self.err: list[str] = []
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.out, True), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.err, False), daemon=True).start()
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is not None and ready in line:
                self.url = re.search(r"http://[0-9.:]+", line).group(0)
                return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"{args[:4]} did not start: {''.join(self.err)[-3000:]}")

    def _pump(self, stream, sink: list, signal_lines: bool) -> None:
        for line in stream:
            sink.append(line)
            if signal_lines:
                self.lines.put(line)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM, then wait for the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def sampled(record: Path, since: int = 0) -> list[dict]:
    """The generations the backend recorded, from line ``since`` on."""
    lines = record.read_text(encoding="utf-8").splitlines() if record.exists() else []
    return [json.loads(x) for x in lines[since:]]


def start_gateway(backend_url: str, model_dir: Path, out: Path, *extra: str) -> Proc:
    """``chatdata serve`` as a subprocess on a free port (its URL in ``.url``)."""
    return Proc([sys.executable, "-m", "chatdata", "serve", "--backend", backend_url, "--tokenizer", str(model_dir),
                 "--out", str(out), "--port", "0", *extra], "chatdata serve: ready at")
