"""A gateway started before its backend (vLLM takes minutes to load): the context length it asks
for on the first request must be asked again once the backend is up. Before, the failed first
ask was kept for good: every later request without max_tokens asked for the default 4096 instead
of the room left, and a backend whose context that overflowed refused it with a 400."""
from __future__ import annotations

import asyncio
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from chatdata.data import load_sample_tokenizer
from chatdata.gateway import create_app

EOT = "<|im_end|>"
CONTEXT = 1000


class VLLMLike(BaseHTTPRequestHandler):
    """/v1/models with max_model_len; /v1/completions answering 'hello', recording max_tokens."""

    def _send(self, obj):
        body = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):  # noqa: N802 - http.server's name
        self._send({"object": "list", "data": [{"id": "m", "max_model_len": CONTEXT}]})

    def do_POST(self):  # noqa: N802
        sent = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        self.server.sent.append(sent)
        ids = self.server.ids
        self._send({"choices": [{"token_ids": ids, "finish_reason": "stop", "logprobs": {"token_logprobs": [-0.5] * len(ids)}}]})

    def log_message(self, *args):
        pass


def test_the_context_is_asked_again_once_the_backend_is_up(tmp_path):
    tok = load_sample_tokenizer()
    with socket.socket() as s:  # a port nothing listens on yet
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(f"http://127.0.0.1:{port}", tok, tmp_path / "out", durable=False)
    body = {"messages": [{"role": "user", "content": "hi"}]}  # no max_tokens: the room left is asked

    async def main():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gateway", timeout=60) as http:
                r = await http.post("/v1/chat/completions", json=body)
                assert r.status_code == 502 and "cannot reach the backend" in r.text, r.text
                server = ThreadingHTTPServer(("127.0.0.1", port), VLLMLike)
                server.sent, server.ids = [], tok.encode("hello" + EOT, add_special_tokens=False)
                threading.Thread(target=server.serve_forever, daemon=True).start()
                try:
                    r = await http.post("/v1/chat/completions", json=body)
                    assert r.status_code == 200, r.text
                finally:
                    server.shutdown()
                    server.server_close()
                prompt = r.json()["usage"]["prompt_tokens"]
                assert server.sent[0]["max_tokens"] == CONTEXT - prompt  # not the default 4096
    asyncio.run(main())


def test_new_messages_too_long_for_any_tokenization_are_refused_before_rendering(tmp_path):
    """A tool output of many MB was rendered and encoded on the event loop (every session waited,
    seconds per 10 MB) only to be refused as longer than the context. Text the context cannot
    hold at the vocabulary's longest token per token is refused at once; the session stays as it
    was, and a tool output that may fit is still rendered."""
    tok = load_sample_tokenizer()
    server = ThreadingHTTPServer(("127.0.0.1", 0), VLLMLike)
    server.sent, server.ids = [], tok.encode("hello" + EOT, add_special_tokens=False)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    app = create_app(f"http://127.0.0.1:{server.server_address[1]}", tok, tmp_path / "out", durable=False)
    chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    huge = "x" * (CONTEXT * 128 + 1)  # 128: Qwen2.5's longest token, in characters

    async def main():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://gateway", timeout=60) as http:
                post = lambda msgs: http.post("/v1/chat/completions", headers={"X-Session-Id": "s"},  # noqa: E731
                                              json={"messages": msgs, "max_tokens": 4})
                assert (await post(chat[:1])).status_code == 200
                r = await post([*chat, {"role": "user", "content": [{"type": "text", "text": huge}]}])
                err = r.json()["error"]
                assert r.status_code == 400 and err["code"] == "context_length_exceeded", r.text
                assert f"hold {len(huge)} characters, more than the backend's context of {CONTEXT}" in err["message"]
                r = await post([*chat, {"role": "user", "content": "x" * (CONTEXT * 8)}])  # may fit: rendered, too long
                assert r.status_code == 400 and "the conversation is" in r.json()["error"]["message"], r.text
                assert len(server.sent) == 1
                r = await post([*chat, {"role": "user", "content": "and?"}])  # the branch goes on where it was
                assert r.status_code == 200 and r.headers["x-chatdata-branch"] == "0", r.text
    try:
        asyncio.run(main())
    finally:
        server.shutdown()
        server.server_close()
