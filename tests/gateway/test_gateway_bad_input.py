"""Bad input never gives a traceback: requests and backend answers found by fuzzing the gateway
in-process (a scripted backend on 127.0.0.1). Each case must get an OpenAI-shaped error with the
right status, the gateway must serve the next good request, and what it recorded must stay
readable."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from chatdata.data import load_sample_tokenizer
from chatdata.gateway import create_app, read_sessions

EOT = "<|im_end|>"


class Scripted(BaseHTTPRequestHandler):
    """A vLLM (``/v1/completions``) or SGLang (``/generate``) backend answering ``server.answer``
    (bytes), or a well-formed answer of ``server.reply_ids`` when it is None."""

    def do_POST(self):  # noqa: N802 - http.server's name
        self.server.last_body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        time.sleep(getattr(self.server, "delay", 0))
        body, server = self.server.answer, self.server
        if body is None:
            ids = server.reply_ids
            if self.path.endswith("/generate"):
                body = json.dumps({"output_ids": ids, "meta_info": {
                    "finish_reason": {"type": "stop"}, "output_token_logprobs": [[-0.5, i, None] for i in ids]}})
            else:
                body = json.dumps({"choices": [{"token_ids": ids, "finish_reason": "stop",
                                                "logprobs": {"token_logprobs": [-0.5] * len(ids)}}]})
            body = body.encode()
        try:
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the gateway gave up waiting (a timeout test)
            pass

    def do_GET(self):  # noqa: N802 - no /v1/models: no context length
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def tok():
    return load_sample_tokenizer()


@pytest.fixture(scope="module")
def scripted(tok):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    server.good_ids = tok.encode("hello" + EOT, add_special_tokens=False)
    server.reply_ids, server.answer = server.good_ids, None
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def run(app, fn):
    async def main():
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # a 500 is a response here
            async with httpx.AsyncClient(transport=transport, base_url="http://gateway", timeout=60) as http:
                return await fn(http)
    return asyncio.run(main())


def assert_error(r: httpx.Response, status: int, words: str, case) -> dict:
    assert r.status_code == status, (case, r.status_code, r.text[:500])
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and words in err["message"], (case, err)
    return err


async def still_serving(http, sid="good"):
    r = await http.post("/v1/chat/completions", headers={"X-Session-Id": sid},
                        json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
    assert r.status_code == 200, r.text


def _chat(*extra_messages, **fields) -> dict:
    return {"messages": [{"role": "user", "content": "hi"}, *extra_messages], "max_tokens": 4, **fields}


def _chat_bytes(*raw_messages: bytes) -> bytes:
    return b'{"messages": [{"role": "user", "content": "hi"}, ' + b", ".join(raw_messages) + b'], "max_tokens": 4}'


_CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
_DEEP = "[" * 900 + "]" * 900


def _with_call(**change) -> dict:
    call = json.loads(json.dumps(_CALL))
    call["tool_calls"][0].update(change.pop("call", {}))
    call["tool_calls"][0]["function"].update(change)
    return _chat(call, {"role": "tool", "tool_call_id": "c1", "content": "42"}, {"role": "user", "content": "and?"})


# (case, raw body, words of the 400's message). Each was a 500 with a traceback before: a
# RecursionError (json, the template's recursion over tools / arguments), a UnicodeEncodeError
# when the gateway logged or answered a string holding a lone surrogate (the answer's turn was
# logged, then the client got a 500), a TypeError from a template variable named like one of
# the Conversation's own arguments.
BAD_REQUESTS = [
    ("a body nested 100000 levels", b"[" * 100000 + b"]" * 100000, "nested too deeply"),
    ("a message nested 5000 levels",
     b'{"messages": [{"role": "user", "content": "x", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}]}", "nested too deeply"),
    ("tools nested 900 levels", json.dumps(_chat(tools=[{"type": "function", "function": {
        "name": "f", "parameters": json.loads(_DEEP)}}])).encode(), "tools is nested more than"),
    ("tool-call arguments nested 900 levels", json.dumps(_with_call(arguments='{"a": ' + _DEEP + "}")).encode(),
     "arguments is nested more than"),
    ("tool-call arguments nested 5000 levels",
     json.dumps(_with_call(arguments='{"a": ' + "[" * 5000 + "]" * 5000 + "}")).encode(), "nested more than"),
    ("a lone surrogate in model", b'{"messages": [{"role": "user", "content": "x"}], "model": "\\ud800"}',
     "model holds a lone surrogate"),
    ("a lone surrogate in a tool-call id", json.dumps(_with_call(call={"id": "\udc00"})).encode("utf-8", "surrogatepass"),
     "messages[1] holds a lone surrogate"),
    ("a lone surrogate in arguments' escapes", json.dumps(_with_call(arguments='{"a": "\\ud800"}')).encode(),
     "arguments holds a lone surrogate"),
    ("a lone surrogate in a tool message's name",
     b'{"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "r", "name": "\\ud800"}]}',
     "messages[1] holds a lone surrogate"),
    ("a lone surrogate in a template variable",
     b'{"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": "\\ud800"}}',
     "chat_template_kwargs holds a lone surrogate"),
    ("a surrogate encoded as UTF-8 bytes", b'{"messages": [{"role": "user", "content": "\xed\xa0\x80"}]}',
     "lone surrogate"),
    ("chat_template_kwargs.tokenizer", json.dumps(_chat(chat_template_kwargs={"tokenizer": 1})).encode(),
     "may not set tokenizer"),
    ("chat_template_kwargs.chat_template", json.dumps(_chat(chat_template_kwargs={"chat_template": "{{ 1 }}"})).encode(),
     "may not set chat_template"),
    ("chat_template_kwargs.template", json.dumps(_chat(chat_template_kwargs={"template": "x"})).encode(),
     "may not set template"),
    ("chat_template_kwargs.self", json.dumps(_chat(chat_template_kwargs={"self": 1})).encode(), "may not set self"),
    ("chat_template_kwargs.history", json.dumps(_chat(chat_template_kwargs={"history": []})).encode(),
     "may not set history"),
    ("chat_template_kwargs.documents not a list", json.dumps(_chat(chat_template_kwargs={"documents": 5})).encode(),
     "documents' must be a list of objects"),
    ("chat_template_kwargs.documents of non-objects", json.dumps(_chat(chat_template_kwargs={"documents": [1]})).encode(),
     "documents' must be a list of objects"),
    # fields the gateway cannot honour were answered as if it had (empty top_logprobs lists, output
    # not constrained to JSON, a prefill answered as a new turn), and an empty stop string went to the backend as a stop at every position
    ("top_logprobs", json.dumps(_chat(logprobs=True, top_logprobs=5)).encode(), "'top_logprobs' is not supported"),
    ("response_format json_object", json.dumps(_chat(response_format={"type": "json_object"})).encode(),
     "'response_format' 'json_object' is not supported"),
    ("response_format json_schema", json.dumps(_chat(response_format={"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object"}}})).encode(), "'response_format' 'json_schema' is not supported"),
    ("stop ''", json.dumps(_chat(stop="")).encode(), "'stop' must be a non-empty string"),
    # the engines parse int64: a larger seed was a 500 of vLLM's (seen as a 502 naming nothing sent)
    ("seed 2**64", json.dumps(_chat(seed=2**64)).encode(), "'seed' must fit in 64 bits"),
    ("seed -2**63 - 1", json.dumps(_chat(seed=-2**63 - 1)).encode(), "'seed' must fit in 64 bits"),
    # answered as if honoured before: legacy functions were not rendered (the model saw no tools), an
    # assistant's function_call was dropped from the stored chat, token biases and vLLM's guided
    # decoding never reached the backend
    ("functions", json.dumps(_chat(functions=[{"name": "f", "parameters": {}}])).encode(),
     "'functions' (the deprecated form of tools) is not supported"),
    ("function_call", json.dumps(_chat(function_call="auto")).encode(), "'function_call' (the deprecated form"),
    ("an assistant's function_call", json.dumps(_chat({"role": "assistant", "content": None, "function_call": {
        "name": "f", "arguments": "{}"}}, {"role": "user", "content": "and?"})).encode(),
     "messages[1].function_call (the deprecated form of tool_calls) is not supported"),
    # logit_bias is passed on (OpenAI's shape, which both engines take); a malformed one was a 502 or 500 of theirs
    ("logit_bias not an object", json.dumps(_chat(logit_bias=[15, -100])).encode(), "'logit_bias' must be an object"),
    ("logit_bias key not a token id", json.dumps(_chat(logit_bias={"hello": 1})).encode(), "written as decimal strings"),
    ("logit_bias negative key", json.dumps(_chat(logit_bias={"-1": 1})).encode(), "written as decimal strings"),
    ("logit_bias key 2**31", json.dumps(_chat(logit_bias={str(2**31): 1})).encode(), "written as decimal strings"),
    ("logit_bias 100.5", json.dumps(_chat(logit_bias={"15": 100.5})).encode(), "between -100 and 100, got 100.5"),
    ("logit_bias true", json.dumps(_chat(logit_bias={"15": True})).encode(), "between -100 and 100, got True"),
    ("logit_bias a string", json.dumps(_chat(logit_bias={"15": "5"})).encode(), "between -100 and 100, got '5'"),
    ("logit_bias one token twice", json.dumps(_chat(logit_bias={"15": 1, "015": 2})).encode(), "names token 15 twice"),
    ("stream_options without stream", json.dumps(_chat(stream_options={"include_usage": True})).encode(),
     "'stream_options' is only allowed when 'stream' is true"),
    ("guided_json", json.dumps(_chat(guided_json={"type": "object"})).encode(), "'guided_json' is not supported"),
    ("a text part without text", json.dumps({"messages": [{"role": "user", "content": [{"type": "text"}]}]}).encode(),
     "messages[0].content[0]: a text part needs a string 'text'"),
    ("top_k -2", json.dumps(_chat(top_k=-2)).encode(), "'top_k' must be >= -1"),
    ("min_p 1.5", json.dumps(_chat(min_p=1.5)).encode(), "'min_p' must be between 0.0 and 1.0"),
    ("repetition_penalty 0", json.dumps(_chat(repetition_penalty=0)).encode(), "'repetition_penalty' must be a positive"),
    # NaN / Infinity (Python's json writes them) and 1e999 (read as inf): answered, logged, then every
    # commit of the session (and of the sessions stored with it) failed: never stored
    ("NaN in tool-call arguments", json.dumps(_with_call(arguments={"a": float("nan")})).encode(), "NaN is not JSON"),
    ("Infinity in tools", json.dumps(_chat(tools=[{"type": "function", "function": {
        "name": "f", "parameters": {"maximum": float("inf")}}}])).encode(), "Infinity is not JSON"),
    ("1e999 in a message", _chat_bytes(b'{"role": "user", "content": "x", "n": 1e999}'), "1e999 is too large for a float"),
    ("max_tokens 10**30", json.dumps({**_chat(), "max_tokens": 10**30}).encode(), "'max_tokens' must fit in 64 bits"),
    ("vLLM's continue_final_message", json.dumps(_chat({"role": "assistant", "content": "Sure,"},
                                                       continue_final_message=True, add_generation_prompt=False)).encode(),
     "'continue_final_message' / 'add_generation_prompt: false' are not supported"),
    ("add_generation_prompt false", json.dumps(_chat(add_generation_prompt=False)).encode(),
     "are not supported: each request's answer is a new assistant turn"),
]


def test_malformed_requests_are_400_and_change_nothing(scripted, tok, tmp_path):
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}", tok, tmp_path / "out", durable=False)

    async def talk(http):
        await still_serving(http)
        for case, raw, words in BAD_REQUESTS:
            r = await http.post("/v1/chat/completions", content=raw, headers={"X-Session-Id": "bad",
                                                                              "content-type": "application/json"})
            assert_error(r, 400, words, case)
            await still_serving(http)
        assert (await http.get("/health")).json()["open_sessions"] == 1  # no refused request opened one
        assert {r["session_id"] for r in read_sessions(tmp_path / "out", include_open=True)} == {"good"}
    run(app, talk)
    records = read_sessions(tmp_path / "out")  # only the good requests' turns were recorded
    assert {r["session_id"] for r in records} == {"good"}
    assert sum(int(r["assistant_masks"].sum()) for r in records) >= (len(BAD_REQUESTS) + 1) * len(scripted.good_ids)


def test_the_harmless_forms_of_refused_fields_are_served(scripted, tok, tmp_path):
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}", tok, tmp_path / "out", durable=False)

    async def talk(http):
        r = await http.post("/v1/chat/completions", json=_chat(logprobs=True, top_logprobs=0, stop=["x"], seed=2**63 - 1,
                                                              response_format={"type": "text"}))
        assert r.status_code == 200, r.text
        assert [t["logprob"] for t in r.json()["choices"][0]["logprobs"]["content"]] == [-0.5] * len(scripted.good_ids)
        r = await http.post("/v1/chat/completions", json=_chat(logit_bias={}, functions=None))
        assert r.status_code == 200, r.text
        # arguments as a string that is not JSON (NaN): kept as the string, and the session is stored
        r = await http.post("/v1/chat/completions", json=_with_call(arguments='{"a": NaN}'), headers={"X-Session-Id": "n"})
        assert r.status_code == 200, r.text
        assert (await http.post("/v1/sessions/n/close")).status_code == 200
    run(app, talk)
    (call,) = [m for r in read_sessions(tmp_path / "out") for m in r["history"].to_chats() if m.get("tool_calls")]
    assert call["tool_calls"][0]["function"]["arguments"] == '{"a": NaN}'


@pytest.mark.parametrize("path, where", [("", None), ("/generate", "sampling_params")])
def test_vllms_sampling_extras_reach_the_backend(scripted, tok, tmp_path, path, where):
    """top_k, min_p and repetition_penalty (what RL harnesses send vLLM's own server through
    extra_body) were dropped: the answer was sampled without them, as if they had been honoured."""
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}{path}", tok, tmp_path / "out", durable=False)
    asked = {"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1}

    async def talk(http):
        r = await http.post("/v1/chat/completions", json=_chat(**asked))
        assert r.status_code == 200, r.text
        sent = scripted.last_body[where] if where else scripted.last_body
        assert {k: sent.get(k) for k in asked} == asked
    run(app, talk)


@pytest.mark.parametrize("path", ["", "/generate"])
def test_logit_bias_reaches_either_engine_in_openais_shape(scripted, tok, tmp_path, path):
    """logit_bias was refused; vLLM's /v1/completions and SGLang's sampling_params take OpenAI's
    shape (token ids as strings), so it is passed on, its ids written plainly; an empty one is no
    bias (nothing sent)."""
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}{path}", tok, tmp_path / "out", durable=False)

    async def talk(http):
        r = await http.post("/v1/chat/completions", json=_chat(logit_bias={"15": -100, "0042": 2.5, "7": 0}))
        assert r.status_code == 200, r.text
        sent = scripted.last_body["sampling_params"] if path else scripted.last_body
        assert sent["logit_bias"] == {"15": -100.0, "42": 2.5, "7": 0.0}
        r = await http.post("/v1/chat/completions", json=_chat(logit_bias={}))
        assert r.status_code == 200, r.text
        sent = scripted.last_body["sampling_params"] if path else scripted.last_body
        assert "logit_bias" not in sent
    run(app, talk)


@pytest.mark.parametrize("path, names", [("", ("min_tokens", "ignore_eos")),
                                         ("/generate", ("min_new_tokens", "ignore_eos"))])
def test_min_tokens_ignore_eos_stop_token_ids_and_top_k_0_reach_either_engine_in_its_terms(scripted, tok, tmp_path, path, names):
    """vLLM's min_tokens, ignore_eos and stop_token_ids were dropped: the answer was sampled
    without them. The template's end-of-turn id stays a stop id (first, once), but not with
    ignore_eos (Qwen's end-of-turn is its EOS: sent as a stop id, it stopped the turn anyway)."""
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}{path}", tok, tmp_path / "out", durable=False)
    eot = tok.convert_tokens_to_ids(EOT)

    async def talk(http):
        r = await http.post("/v1/chat/completions", json=_chat(min_tokens=2, ignore_eos=True, stop_token_ids=[7, 7]))
        assert r.status_code == 200, r.text
        sent = scripted.last_body["sampling_params"] if path else scripted.last_body
        assert [sent.get(n) for n in names] == [2, True] and sent["stop_token_ids"] == [7]
        r = await http.post("/v1/chat/completions", json=_chat(min_tokens=0, ignore_eos=False, stop_token_ids=[7, eot]))
        assert r.status_code == 200, r.text
        sent = scripted.last_body["sampling_params"] if path else scripted.last_body
        assert not set(names) & set(sent) and sent["stop_token_ids"] == [eot, 7]
        # top_k 0 is no top-k to vLLM (its default); SGLang refused it with a 400 and wants -1
        r = await http.post("/v1/chat/completions", json=_chat(top_k=0))
        assert r.status_code == 200, r.text
        assert (scripted.last_body["sampling_params"]["top_k"] == -1) if path else (scripted.last_body["top_k"] == 0)
    run(app, talk)


def test_a_close_during_a_request_answers_the_branches_it_stored(scripted, tok, tmp_path):
    """The close waits for the request in flight and stores its new branch, but its answer
    counted the branches before: 'branches': 1 for a session stored with 2."""
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}", tok, tmp_path / "out", durable=False)
    h = {"X-Session-Id": "busy"}

    async def talk(http):
        assert (await http.post("/v1/chat/completions", json=_chat(), headers=h)).status_code == 200
        scripted.delay = 0.5
        try:
            other = {"messages": [{"role": "user", "content": "another root"}], "max_tokens": 4}
            slow = asyncio.create_task(http.post("/v1/chat/completions", json=other, headers=h))
            await asyncio.sleep(0.2)  # the request is waiting for the backend
            closed = await http.post("/v1/sessions/busy/close")
            assert (await slow).status_code == 200
        finally:
            scripted.delay = 0
        assert closed.status_code == 200 and closed.json()["branches"] == 2, closed.text
        assert (await http.post("/v1/sessions/busy/close")).status_code == 404  # twice: stored already
    run(app, talk)
    assert sorted(r["branch"] for r in read_sessions(tmp_path / "out")) == [0, 1]


def test_hostile_session_ids_stay_names_and_can_be_closed(scripted, tok, tmp_path):
    """Session ids never reach a path (logs are named by a random uid): ids holding '/' or '..'
    are stored under their name and stay in --out. Before, such an id could not be closed (the
    route took no '/': a 404 naming another route), and an id sent as UTF-8 bytes was stored as
    Latin-1 mojibake ('café' as 'cafÃ©')."""
    from urllib.parse import quote

    out = tmp_path / "out"
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}", tok, out, durable=False)
    hostile = ["a/b", "../../../escape", "..", "/abs/path", "x" * 256, "sp ace%2F"]

    async def talk(http):
        for sid in hostile:
            r = await http.post("/v1/chat/completions", json=_chat(), headers={"X-Session-Id": sid})
            assert r.status_code == 200 and r.headers["x-session-id"] == sid, (sid, r.text)
            path = quote(sid, safe="").replace(".", "%2E")  # a client normalises a bare '..' segment away
            r = await http.post(f"/v1/sessions/{path}/close")
            assert r.status_code == 200 and r.json()["id"] == sid, (sid, r.text)
        r = await http.post("/v1/chat/completions", json=_chat(), headers={"X-Session-Id": "café".encode()})
        assert_error(r, 400, "must be 1 to 256 printable ASCII characters", "UTF-8 bytes")
        r = await http.post("/v1/sessions/%2E%2E/close")
        assert_error(r, 404, "no open session '..'", "closed twice")
    run(app, talk)
    assert sorted(r["session_id"] for r in read_sessions(out)) == sorted(hostile)
    assert not (tmp_path / "escape").exists() and not list(tmp_path.parent.glob("escape"))
    assert {p.name for p in out.iterdir()} == {"manifest.json", "shards", "tokens", "branches", "journal",
                                               "gateway.json", ".gateway.lock", ".manifest.lock"}


def _vllm(ids, lps) -> bytes:
    return json.dumps({"choices": [{"token_ids": ids, "finish_reason": "stop",
                                    "logprobs": {"token_logprobs": lps}}]}).encode()


# (case, backend answer, words of the 502's message). Before: ids from 2**31 on were kept and
# made the session's log unreadable (its close a 500, read_sessions leaving the session out, a
# restart refusing the folder); from 2**40 on a 500; a -inf logprob was kept and the answer with
# logprobs a 500 (and an SSE event holding -Infinity, which is no JSON); a body nested too deeply
# and SGLang's finish_reason "abort" as a plain string a 500; more ids than max_tokens were kept.
BAD_ANSWERS = [
    ("an id of 2**31", _vllm([5, 2**31], [-0.5, -0.5]), "token ids in [0, 2**31)"),
    ("an id of 2**40", _vllm([2**40], [-0.5]), "token ids in [0, 2**31)"),
    ("an id of 2**64", _vllm([2**64], [-0.5]), "token ids in [0, 2**31)"),
    ("a -inf logprob", _vllm([5, 6], [-0.5, float("-inf")]), "a logprob must be a finite number"),
    ("more ids than max_tokens (4)", _vllm([5, 6, 7, 8, 9], [-0.5] * 5), "5 sampled ids, more than the max_tokens=4"),
    ("an answer nested 100000 levels", b'{"choices": [{"token_ids": ' + b"[" * 100000 + b"]" * 100000 + b"}]}",
     "not JSON"),
]


@pytest.mark.parametrize("stream", [False, True])
def test_backend_answers_the_log_cannot_hold_are_502(scripted, tok, tmp_path, stream):
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}", tok, tmp_path / "out", durable=False)

    async def talk(http):
        for case, answer, words in BAD_ANSWERS:
            await still_serving(http, "s")  # the session goes on after each failed turn
            scripted.answer = answer
            try:
                r = await http.post("/v1/chat/completions", headers={"X-Session-Id": "s"},
                                    json=_chat(logprobs=True, stream=stream))
            finally:
                scripted.answer = None
            err = assert_error(r, 502, words, case)
            assert err["type"] == "backend_error"
        assert (await http.post("/v1/sessions/s/close")).status_code == 200
    run(app, talk)
    records = read_sessions(tmp_path / "out")
    assert {r["session_id"] for r in records} == {"s"}  # the good turns only, each a branch of "s"
    assert sum(int(r["assistant_masks"].sum()) for r in records) == len(BAD_ANSWERS) * len(scripted.good_ids)


def test_sglang_abort_without_a_message_is_502(scripted, tok, tmp_path):
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}/generate", tok, tmp_path / "out", durable=False)

    async def talk(http):
        for finish in ("abort", {"type": "abort"}):
            scripted.answer = json.dumps({"output_ids": [], "meta_info": {"finish_reason": finish,
                                                                          "output_token_logprobs": []}}).encode()
            try:
                r = await http.post("/v1/chat/completions", json=_chat())
            finally:
                scripted.answer = None
            assert_error(r, 502, "the backend aborted the request: no reason given", finish)
        await still_serving(http)
    run(app, talk)


def test_a_backend_that_does_not_answer_in_time_is_504(scripted, tok, tmp_path):
    """A gateway timeout is HTTP's 504 (the official client retries it as it does 502)."""
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}", tok, tmp_path / "out", durable=False,
                     timeout=0.3)

    async def talk(http):
        scripted.delay = 1.5
        try:
            r = await http.post("/v1/chat/completions", headers={"X-Session-Id": "slow"}, json=_chat())
        finally:
            scripted.delay = 0
        assert_error(r, 504, "did not answer within 0.3 s", "slow backend")
        await still_serving(http)
    run(app, talk)
    assert read_sessions(tmp_path / "out", include_open=True) and \
        {r["session_id"] for r in read_sessions(tmp_path / "out", include_open=True)} == {"good"}


@pytest.mark.parametrize("call", [
    '{"name": "f", "arguments": ' + "[" * 5000 + "]" * 5000 + "}",  # json.loads: RecursionError
    '{"name": "f", "arguments": ' + _DEEP + "}",  # parsed, but rendering it back recursed too deep
    '{"name": "f", "arguments": {"a": "\\ud800"}}',  # a lone surrogate: the log could not be written
    '{"name": "f\\udc00", "arguments": {}}',
    '{"name": "f", "arguments": {"a": 1e999}}',  # valid JSON read as inf: the session could never be stored
])
def test_a_tool_call_the_model_writes_that_cannot_be_stored_stays_text(scripted, tok, tmp_path, call):
    """The model's text is kept (as content, like any malformed tool call) instead of a 500."""
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}", tok, tmp_path / "out", durable=False)
    written = "<tool_call>\n" + call + "\n</tool_call>"

    async def talk(http):
        await still_serving(http, "s")
        scripted.reply_ids = tok.encode(written + EOT, add_special_tokens=False)
        try:
            r = await http.post("/v1/chat/completions", headers={"X-Session-Id": "s"},
                                json=_chat({"role": "assistant", "content": "hello"}, {"role": "user", "content": "go"},
                                           max_tokens=len(scripted.reply_ids)))  # the scripted reply, whole
        finally:
            scripted.reply_ids = scripted.good_ids
        assert r.status_code == 200, r.text
        msg = r.json()["choices"][0]["message"]
        assert msg["content"] == written and not msg.get("tool_calls")
        await still_serving(http, "s")  # a fork of the session: the branch holding the call is whole
        assert (await http.post("/v1/sessions/s/close")).status_code == 200
    run(app, talk)
    records = read_sessions(tmp_path / "out")
    assert any(m["content"] == written for r in records for m in r["history"].to_chats())


def test_a_turn_the_log_cannot_take_fails_with_its_own_error_and_leaves_routing_clean(scripted, tok, tmp_path,
                                                                                     monkeypatch):
    """A log write failing on a session's second turn (a full disk) answers that error; before, the
    session's removal from routing tripped over the unpublished turn (an IndexError instead, and
    the closed session's first turn left in the routing index)."""
    from chatdata.gateway import journal

    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}", tok, tmp_path / "out", durable=False)
    gw = app.state.gateway
    append = journal.Journal.append

    def full(self, record):
        raise OSError(28, "No space left on device")

    async def talk(http):
        await still_serving(http, "s")
        monkeypatch.setattr(journal.Journal, "append", full)
        body = _chat({"role": "assistant", "content": "hello"}, {"role": "user", "content": "more"})
        r = await http.post("/v1/chat/completions", headers={"X-Session-Id": "s"}, json=body)
        monkeypatch.setattr(journal.Journal, "append", append)
        assert_error(r, 500, "No space left on device", "disk full")
        assert gw.table.sessions == {} and gw.table._turns == {}  # the session left routing whole
        r = await http.post("/v1/chat/completions", json=body)  # no header: a new session, not the closed one
        assert r.status_code == 200, r.text
    run(app, talk)
    records = read_sessions(tmp_path / "out", include_open=True)  # "s" is in its log, stored at the next start
    assert sorted(len(r["history"].to_chats()) for r in records) == [2, 4]  # its first turn was kept


@pytest.mark.parametrize("flag", ["--backend-timeout", "--max-body-mb"])
@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_serve_refuses_a_backend_timeout_or_body_limit_that_is_not_positive(tmp_path, flag, value):
    import subprocess
    import sys
    from pathlib import Path

    import chatdata

    tok_dir = Path(chatdata.__file__).parent / "data" / "qwen2.5-tokenizer"
    res = subprocess.run([sys.executable, "-m", "chatdata", "serve", "--backend", "http://127.0.0.1:9", "--tokenizer",
                          str(tok_dir), "--out", str(tmp_path / "out"), flag, value],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    assert f"{flag} must be positive" in res.stderr, res.stderr
    assert not (tmp_path / "out").exists()


def test_a_body_over_the_limit_is_413_and_changes_nothing(scripted, tok, tmp_path):
    # before, any body was read whole into memory: one client could fill a long-running gateway's RAM
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}", tok, tmp_path / "out", durable=False,
                     max_body_mb=0.01)
    big = _chat(**{"user": "x" * 20000})

    async def chunks():  # streamed without a Content-Length: refused while it comes in
        data = json.dumps(big).encode()
        for i in range(0, len(data), 1000):
            yield data[i:i + 1000]

    async def talk(http):
        await still_serving(http)
        r = await http.post("/v1/chat/completions", json=big)
        err = assert_error(r, 413, "larger than this gateway's limit of 0.01 MiB (chatdata serve --max-body-mb)", "declared")
        assert err["code"] == "request_too_large"
        r = await http.post("/v1/chat/completions", content=chunks(), headers={"content-type": "application/json"})
        assert_error(r, 413, "larger than this gateway's limit", "streamed")
        await still_serving(http)
        assert (await http.get("/health")).json()["open_sessions"] == 1
    run(app, talk)


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), True, "64"])
def test_create_app_refuses_a_body_limit_that_is_not_a_positive_number(tok, tmp_path, value):
    with pytest.raises(ValueError, match="max_body_mb must be a positive number of MiB"):
        create_app("http://127.0.0.1:9", tok, tmp_path / "out", max_body_mb=value)
    assert not (tmp_path / "out").exists()


def test_only_turns_the_gateway_generated_keep_their_mask(scripted, tok, tmp_path):
    """What a harness sends as an assistant turn is marked only when it is a turn the gateway
    generated, sent back as received (or without its reasoning): an injected turn, or one whose
    text or reasoning the harness edited, is prompt text (mask 0, logprob 0) on a new branch.
    An edited reasoning counted as the generated turn before: the stored branch kept the sampled
    reasoning marked, and the harness's edit (which Qwen3 renders in a tool loop) was lost."""
    qwen3 = (Path(__file__).resolve().parents[1] / "data" / "templates" / "Qwen-Qwen3-0.6B.jinja").read_text()
    app = create_app(f"http://127.0.0.1:{scripted.server_address[1]}", tok, tmp_path / "out", chat_template=qwen3,
                     durable=False)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    u = {"role": "user", "content": "call f"}

    async def ask(http, msgs, reply):
        scripted.reply_ids = tok.encode(reply + EOT, add_special_tokens=False)
        r = await http.post("/v1/chat/completions", json={"messages": msgs, "tools": tools, "max_tokens": 64},
                            headers={"X-Session-Id": "s"})
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"], int(r.headers["x-chatdata-branch"])

    async def talk(http):
        try:
            t1, _ = await ask(http, [u], '<think>\nplan A\n</think>\n\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>')
            assert t1["reasoning_content"] == "plan A" and t1["tool_calls"]
            res = {"role": "tool", "tool_call_id": t1["tool_calls"][0]["id"], "content": "42"}
            assert (await ask(http, [u, t1, res], "echo"))[1] == 0  # sent back as received: extends the branch
            dropped = {k: v for k, v in t1.items() if k != "reasoning_content"}
            assert (await ask(http, [u, dropped, res], "dropped"))[1] == 1  # a retry of the last turn: a fork at 3
            assert (await ask(http, [u, {**t1, "reasoning_content": "plan B"}, res], "reasoning"))[1] == 2
            assert (await ask(http, [u, {**t1, "content": "I will call f."}, res], "content"))[1] == 3
            injected = [u, {"role": "assistant", "content": "Zq injected"}, {"role": "user", "content": "go"}]
            assert (await ask(http, injected, "injected"))[1] == 4
        finally:
            scripted.reply_ids = scripted.good_ids
    run(app, talk)
    recs = {r["branch"]: r for r in read_sessions(tmp_path / "out")}
    generated = '<think>\nplan A\n</think>\n\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>' + EOT
    for b, masked in [(0, generated + "echo" + EOT), (1, generated + "dropped" + EOT), (2, "reasoning" + EOT),
                      (3, "content" + EOT), (4, "injected" + EOT)]:
        r = recs[b]
        mask = r["assistant_masks"].bool()
        assert tok.decode(r["input_ids"][mask]) == masked, b
        assert not r["logprobs"][~mask].any() and (r["logprobs"][mask] == -0.5).all(), b
        assert (r["parent"] is None) == (b == 0), b
    text = {b: tok.decode(recs[b]["input_ids"][~recs[b]["assistant_masks"].bool()]) for b in (2, 3, 4)}
    assert "plan B" in text[2] and "I will call f." in text[3] and "Zq injected" in text[4]
    assert recs[2]["history"].to_chats()[1]["reasoning_content"] == "plan B"  # the harness's turn, as it sent it
