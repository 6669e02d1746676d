"""``create_app`` in-process (the official async client over httpx's ASGI transport): SGLang's
``/generate``, backends that are down or answer garbage, a template that refuses, idle commits,
and closed sessions leaving memory."""
from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import openai
import pytest
import torch

from chatdata.gateway import create_app, read_sessions
from gateway_helpers import sampled


def scripted(text: str) -> str:
    return f"⟦reply {json.dumps(text, ensure_ascii=False)}⟧"


def serve(app, fn):
    """Run ``fn(client, http)`` against ``app`` with its lifespan (startup and shutdown)."""
    async def main():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gateway", timeout=60) as http:
                c = openai.AsyncOpenAI(base_url="http://gateway/v1", api_key="none", http_client=http, max_retries=0)
                return await fn(c, http)
    return asyncio.run(main())


class Garbage(BaseHTTPRequestHandler):
    """A backend that answers 200 with bodies the gateway cannot use (the path picks which)."""

    BODIES = {"/notjson/v1/completions": b"<html>oops</html>",
              "/noids/v1/completions": json.dumps({"choices": [{"text": "hi", "finish_reason": "stop"}]}).encode(),
              "/short/v1/completions": json.dumps({"choices": [{"token_ids": [1, 2], "finish_reason": "stop",
                                                                "logprobs": {"token_logprobs": [-0.1]}}]}).encode(),
              "/abort/generate": json.dumps({"output_ids": [], "meta_info": {"finish_reason": {"type": "abort",
                                             "message": "out of memory"}, "output_token_logprobs": []}}).encode(),
              "/crash/v1/completions": b"internal",
              # a well-formed one-token answer, whatever the prompt (no /v1/models: no context to check against)
              "/ok/v1/completions": json.dumps({"choices": [{"token_ids": [151645], "finish_reason": "stop",
                                                             "logprobs": {"token_logprobs": [-0.5]}}]}).encode()}

    def do_POST(self):  # noqa: N802 - http.server's name
        sent = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        body = self.BODIES.get(self.path, b"{}")
        if self.path.startswith("/echo"):  # a proxy or another tokenizer's prompt: the last id differs
            echoed = sent["prompt"][:-1] + [sent["prompt"][-1] + 1]
            body = json.dumps({"choices": [{"token_ids": [1], "finish_reason": "stop", "prompt_token_ids": echoed,
                                            "logprobs": {"token_logprobs": [-0.1]}}]}).encode()
        self.send_response(500 if self.path.startswith("/crash") else 200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def tok(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)  # loaded once: create_app takes a tokenizer too


@pytest.fixture(scope="module")
def garbage():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_sglang_generate_backend(backend, tok, tmp_path):
    since = len(sampled(backend[1]))
    app = create_app(backend[0] + "/generate", tok, tmp_path / "out", durable=False)
    assert type(app.state.gateway.backend).__name__ == "SGLangBackend"
    call = '<tool_call>\n{"name": "lookup", "arguments": {"q": "ß"}}\n</tool_call><|im_end|>'

    async def talk(c, http):
        msgs = [{"role": "user", "content": "Cherche ß " + scripted(call)}]
        r = await c.chat.completions.create(model="tiny", messages=msgs, seed=3, max_tokens=40,
                                            extra_headers={"X-Session-Id": "sg"})
        assert r.choices[0].finish_reason == "tool_calls"
        msgs += [r.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": r.choices[0].message.tool_calls[0].id, "content": "trouvé"}]
        r = await c.chat.completions.create(model="tiny", messages=msgs, seed=4, max_tokens=4,
                                            extra_headers={"X-Session-Id": "sg"})
        assert r.choices[0].finish_reason == "length"
        assert (await http.post("/v1/sessions/sg/close")).status_code == 200
    serve(app, talk)
    gens = sampled(backend[1], since)
    assert [g["api"] for g in gens] == ["sglang", "sglang"]
    (rec,) = read_sessions(tmp_path / "out")
    ids, mask = rec["input_ids"], rec["assistant_masks"]
    for g in gens:
        n = len(g["prompt"])
        assert ids[:n].tolist() == g["prompt"] and ids[n:n + len(g["ids"])].tolist() == g["ids"]
        assert rec["logprobs"][n:n + len(g["ids"])].tolist() == pytest.approx(g["logprobs"], abs=1e-6)
    assert int(mask.sum()) == sum(len(g["ids"]) for g in gens)


@pytest.mark.parametrize("path, words", [
    ("/notjson", "not JSON"), ("/noids", "vLLM >= 0.10.2"), ("/short", "expected 2 logprobs"),
    ("/abort/generate", "aborted the request: out of memory"), ("/crash", "HTTP 500"), (None, "cannot reach the backend"),
    ("/echo", "are not the prompt it was sent"),
])
def test_a_backend_down_or_answering_garbage_is_a_502(garbage, tok, tmp_path, path, words):
    url = "http://127.0.0.1:9" if path is None else garbage + path  # port 9 (discard): nothing listens
    app = create_app(url, tok, tmp_path / "out", durable=False)

    async def talk(c, http):
        r = await http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                          "max_tokens": 4}, headers={"X-Session-Id": "s"})
        assert r.status_code == 502, r.text
        err = r.json()["error"]
        assert err["type"] == "backend_error" and words in err["message"], err
        with pytest.raises(openai.InternalServerError):
            await c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
        assert (await http.get("/health")).json()["open_sessions"] == 0  # a failed first request opens nothing
    serve(app, talk)
    assert read_sessions(tmp_path / "out") == []


def test_a_backend_refusal_and_a_template_refusal_are_400(backend, tok, tmp_path):
    app = create_app(backend[0], tok, tmp_path / "a", backend_model="no-such-model", durable=False)

    async def refused(c, http):
        with pytest.raises(openai.BadRequestError, match="does not exist"):
            await c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=4)
    serve(app, refused)
    app = create_app(backend[0], tok, tmp_path / "b", chat_template_name="mistral", durable=False)

    async def template(c, http):
        with pytest.raises(openai.BadRequestError, match="roles must alternate"):
            await c.chat.completions.create(model="tiny", max_tokens=4, messages=[
                {"role": "user", "content": "one"}, {"role": "user", "content": "two"}])
        r = await c.chat.completions.create(model="tiny", max_tokens=3, seed=1,
                                            messages=[{"role": "user", "content": "one"}])
        assert r.usage.completion_tokens == 3
    serve(app, template)
    assert len(read_sessions(tmp_path / "b")) == 1  # stored at shutdown


def test_idle_sessions_are_stored_and_leave_memory(backend, tok, tmp_path):
    app = create_app(backend[0], tok, tmp_path / "out", idle_timeout=0.2, durable=False)
    gw = app.state.gateway

    async def talk(c, http):
        for k in range(6):
            msgs = [{"role": "user", "content": f"hello {k} " + scripted(f"hi {k}<|im_end|>")}]
            r = await c.chat.completions.create(model="tiny", messages=msgs, seed=k, max_tokens=8)
            msgs += [r.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "and?"}]
            await c.chat.completions.create(model="tiny", messages=msgs, seed=k, max_tokens=2)  # no header: joins it
        for _ in range(400):
            if not gw.table.sessions:
                break
            await asyncio.sleep(0.05)
        assert gw.table.sessions == {} and gw.table._turns == {} and len(gw.table._memos) == 0  # nothing of a stored session stays
        for _ in range(400):  # the last commit may still be writing
            if len(read_sessions(tmp_path / "out")) == 6:
                break
            await asyncio.sleep(0.05)
        assert len(read_sessions(tmp_path / "out")) == 6
    serve(app, talk)
    records = read_sessions(tmp_path / "out")
    assert sorted(len(r["history"].to_chats()) for r in records) == [4] * 6


def test_a_big_request_is_rendered_in_a_worker_thread_while_others_are_served(garbage, tok, tmp_path):
    """A message of 5 MB was rendered and encoded on the event loop: every other session, and
    /health, waited for it (about 1.7 s with Qwen's tokenizer). /health now answers while it is
    prepared (and says so), and another session is answered from start to end meanwhile: /health
    says the big one is being prepared before that request is sent and after it is answered."""
    app = create_app(garbage + "/ok", tok, tmp_path / "out", durable=False)
    huge = "lorem ipsum dolor sit amet " * 200_000  # 5.4 MB

    async def preparing(http) -> int:
        return (await http.get("/health")).json()["preparing"]

    async def talk(c, http):
        big = asyncio.create_task(http.post("/v1/chat/completions", headers={"X-Session-Id": "big"},
                                            json={"messages": [{"role": "user", "content": huge}], "max_tokens": 1}))
        small = 0
        while True:
            assert not big.done(), "the big request was answered before a small one was served during its rendering"
            await asyncio.sleep(0)  # in-process, requests that never wait would never let the big one run
            before = await preparing(http)
            if not before:
                continue
            small += 1
            r = await c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": f"small {small}"}],
                                                max_tokens=1, extra_headers={"X-Session-Id": f"small-{small}"})
            assert r.choices[0].finish_reason == "stop"
            if await preparing(http):  # the big one was being prepared all along
                break
        assert (await big).status_code == 200
        assert (await http.get("/health")).json() == {"status": "ok", "open_sessions": small + 1, "preparing": 0}
    serve(app, talk)
    recs = {r["session_id"]: r for r in read_sessions(tmp_path / "out")}
    assert recs["big"]["history"].to_chats()[0]["content"] == huge
    assert len(recs["big"]["input_ids"]) > 1_000_000 and int(recs["big"]["assistant_masks"].sum()) == 1


def _agent(offload: bool):
    """Two turns, a rewritten history (a fork), a request twice at once on one branch (the second
    waits for the first's rendering when that runs in a thread, then forks), and a new root."""
    async def talk(c, http):
        h = {"X-Session-Id": "a"}
        msgs = [{"role": "system", "content": "Sois bref."}, {"role": "user", "content": "un " + scripted("deux<|im_end|>")}]
        r = await c.chat.completions.create(model="tiny", messages=msgs, max_tokens=8, extra_headers=h)
        msgs += [r.choices[0].message.model_dump(exclude_none=True),
                 {"role": "user", "content": "trois " + scripted("quatre ✓<|im_end|>")}]
        r = await c.chat.completions.create(model="tiny", messages=msgs, max_tokens=8, extra_headers=h)
        msgs += [r.choices[0].message.model_dump(exclude_none=True),
                 {"role": "user", "content": "encore " + scripted("fin<|im_end|>")}]
        both = await asyncio.gather(*(c.chat.completions.with_raw_response.create(
            model="tiny", messages=msgs, max_tokens=8, extra_headers=h) for _ in range(2)))
        assert sorted(x.headers["x-chatdata-branch"] for x in both) == ["0", "1"]
        rewritten = msgs[:2] + [{"role": "assistant", "content": "(résumé)"},
                                {"role": "user", "content": "cinq " + scripted("six<|im_end|>")}]
        await c.chat.completions.create(model="tiny", messages=rewritten, max_tokens=8, extra_headers=h)
        await c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "autre " + scripted(
            "sept<|im_end|>")}], max_tokens=8, extra_headers=h)
        gw = app_of[offload].state.gateway
        assert gw.preparing == 0 and all(b.preparing is None for b in gw.table.sessions["a"].branches)
    return talk


app_of: dict = {}


def test_rendering_in_a_worker_thread_records_the_same_data(backend, tok, tmp_path):
    """The same chats through a gateway that renders every request in a worker thread
    (offload_chars=0) and one that renders them all on the event loop: the same records."""
    for offload in (False, True):
        app_of[offload] = create_app(backend[0], tok, tmp_path / str(offload), durable=False,
                                     offload_chars=0 if offload else 1 << 40)
        serve(app_of[offload], _agent(offload))
    inline, threaded = (sorted(read_sessions(tmp_path / str(o)), key=lambda r: r["branch"]) for o in (False, True))
    assert [r["branch"] for r in inline] == [0, 1, 2, 3]
    for a, b in zip(inline, threaded):
        assert (a["branch"], a["parent"]) == (b["branch"], b["parent"])
        for key in ("input_ids", "assistant_masks", "logprobs"):
            assert torch.equal(a[key], b[key]), key
        assert a["history"].to_chats() == b["history"].to_chats()
    # the second of the two requests on one branch forked it where both began: the same ids
    assert inline[1]["parent"][0] == 0 and torch.equal(inline[1]["input_ids"], inline[0]["input_ids"])
    assert [r["parent"] is None for r in inline] == [True, False, False, True]


def test_a_request_cancelled_while_its_big_message_is_rendered_leaves_its_branch_whole(garbage, tok, tmp_path):
    """A cancelled request (a client gone, a shutdown) undoes what it added to its branch; while a
    worker thread still renders into that branch, the undo waits for the thread (undone under it,
    the branch would keep half a rendering). The session goes on as if the request never came."""
    app = create_app(garbage + "/ok", tok, tmp_path / "out", durable=False)
    gw = app.state.gateway
    h = {"X-Session-Id": "s"}
    first = [{"role": "user", "content": "hi"}]

    async def talk(c, http):
        r = await c.chat.completions.create(model="tiny", messages=first, max_tokens=1, extra_headers=h)
        msgs = first + [r.choices[0].message.model_dump(exclude_none=True)]
        big = json.dumps({"messages": msgs + [{"role": "user", "content": "lorem ipsum " * 400_000}],
                          "max_tokens": 1}).encode()
        task = asyncio.create_task(gw.chat(big, "s"))
        while not gw.preparing:
            assert not task.done()
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert gw.preparing == 0 and gw.table.sessions["s"].branches[0].busy is False
        r = await c.chat.completions.with_raw_response.create(
            model="tiny", messages=msgs + [{"role": "user", "content": "again"}], max_tokens=1, extra_headers=h)
        assert r.headers["x-chatdata-branch"] == "0"  # extends the branch, as if the big one never came
    serve(app, talk)
    (rec,) = read_sessions(tmp_path / "out")
    assert [m["content"] for m in rec["history"].to_chats() if m["role"] == "user"] == ["hi", "again"]
    assert int(rec["assistant_masks"].sum()) == 2
