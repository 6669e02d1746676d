"""Big requests are prepared off the event loop: a fork that re-renders a big shared prefix, new
messages whose size is in their tool calls or tools, and a big request's log line. Other sessions,
the fork's own source branch and ``/health`` are served meanwhile; what is stored is what the
event-loop path stores."""
from __future__ import annotations

import asyncio
import json
import threading

import pytest
import torch

from chatdata.gateway import create_app, read_sessions
from chatdata.gateway.sizes import rendered_chars, text_chars
from test_gateway_app import garbage, serve, tok  # noqa: F401 - fixtures and the in-process client

HUGE = "lorem ipsum dolor sit amet " * 200_000  # 5.4 MB


async def _preparing(http) -> int:
    return (await http.get("/health")).json()["preparing"]


def _gate_forks(gateway) -> threading.Event:
    """Hold the worker thread that renders a fork, at the start of the gateway's own
    ``table.render``, until the returned event is set: while it waits, the fork is being prepared
    for as long as the test needs, whatever the machine's speed (the render itself is the real one)."""
    gate, render = threading.Event(), gateway.table.render

    def gated(plan):
        if plan.kind == "fork":
            assert threading.current_thread() is not threading.main_thread(), "a fork rendered on the event loop"
            gate.wait(timeout=120)  # a bound only so that a broken test fails instead of hanging
        return render(plan)

    gateway.table.render = gated
    return gate


CYCLES = 2  # other sessions' and the source branch's turns served while the fork is prepared


def _retry_agent(gw_of: dict, key, gate):
    """Two turns (the second after a 5 MB tool output), then a retry of the second (a fork that
    re-renders the 5 MB prefix and adds nothing). Offloaded (``gate`` given): while the fork's
    worker is held, another session and the fork's own source branch are served, each from start
    to end, ``CYCLES`` times, /health saying all along that the fork is being prepared; then the
    worker goes on. On the event loop (``gate`` None): the same requests, one after another."""
    async def talk(c, http):
        h = {"X-Session-Id": "big"}
        msgs = [{"role": "user", "content": "q"}]
        r = await c.chat.completions.create(model="tiny", messages=msgs, max_tokens=1, extra_headers=h)
        msgs += [r.choices[0].message.model_dump(exclude_none=True), {"role": "tool", "content": HUGE}]
        r = await c.chat.completions.create(model="tiny", messages=msgs, max_tokens=1, extra_headers=h)
        source = msgs + [r.choices[0].message.model_dump(exclude_none=True)]

        async def cycle(n: int) -> None:
            nonlocal source
            r = await c.chat.completions.with_raw_response.create(
                model="tiny", messages=[{"role": "user", "content": f"small {n}"}], max_tokens=1,
                extra_headers={"X-Session-Id": f"small-{n}"})
            assert r.headers["x-chatdata-branch"] == "0"
            source = source + [{"role": "user", "content": f"more {n}"}]
            r = await c.chat.completions.with_raw_response.create(model="tiny", messages=source, max_tokens=1,
                                                                  extra_headers=h)
            assert r.headers["x-chatdata-branch"] == "0"  # extends the fork's source while the fork is prepared
            source = source + [r.parse().choices[0].message.model_dump(exclude_none=True)]

        await cycle(0)  # once before: the first turn of a kind renders the whole chat (rollout's delta check)
        retry = c.chat.completions.with_raw_response.create(model="tiny", messages=msgs, max_tokens=1,
                                                            extra_headers=h)
        if gate is None:  # the event loop's path: the same requests in order
            for n in range(1, CYCLES + 1):
                await cycle(n)
            r = await retry
        else:
            task = asyncio.create_task(retry)
            while not await _preparing(http):  # until the fork reaches its worker (held there)
                assert not task.done(), "the fork was answered without being prepared off the loop"
                await asyncio.sleep(0)
            for n in range(1, CYCLES + 1):
                await cycle(n)
                assert (await http.get("/health")).json() == {"status": "ok", "open_sessions": 2 + n,
                                                              "preparing": 1}
            assert not task.done()
            gate.set()
            r = await task
        assert r.headers["x-chatdata-branch"] == "1"
        assert gw_of[key].preparing == 0
    return talk


def test_a_big_fork_is_prepared_off_the_loop_while_its_source_and_others_are_served(garbage, tok, tmp_path):
    """A retry after a 5 MB tool output forks the session and re-renders the shared 5 MB: that ran on
    the event loop, every session waiting (seconds). Now a worker thread renders it from what the
    fork took of its source branch, while the source itself gets new turns: the fork is the
    same, id for id, as on the event loop, and so is everything else stored."""
    gw_of: dict = {}
    for key, offload in (("thread", 1 << 16), ("loop", 1 << 40)):
        app = create_app(garbage + "/ok", tok, tmp_path / key, durable=False, offload_chars=offload)
        gw_of[key] = app.state.gateway
        serve(app, _retry_agent(gw_of, key, _gate_forks(gw_of[key]) if key == "thread" else None))
    threaded, inline = ({(r["session_id"], r["branch"]): r for r in read_sessions(tmp_path / key)}
                        for key in ("thread", "loop"))
    assert sorted(threaded) == sorted(inline) and len(threaded) == 3 + CYCLES
    for name, a in threaded.items():
        b = inline[name]
        assert a["parent"] == b["parent"]
        for key in ("input_ids", "assistant_masks", "logprobs"):
            assert torch.equal(a[key], b[key]), (name, key)
        assert a["history"].to_chats() == b["history"].to_chats()
    src, fork = threaded[("big", 0)], threaded[("big", 1)]
    n = len(fork["input_ids"]) - 1  # its prompt: every id of the source before its second answer
    assert fork["parent"][0] == 0 and fork["parent"][1] >= n  # the common prefix (here the same answer too)
    assert torch.equal(fork["input_ids"][:n], src["input_ids"][:n])
    assert len(src["input_ids"]) > len(fork["input_ids"]) > 1_000_000


@pytest.mark.parametrize("where", ["arguments", "tools"])
def test_new_messages_big_in_their_tool_calls_or_tools_are_rendered_off_the_loop(garbage, tok, tmp_path, where):
    """Only message content was counted: a harness's own tool call carrying 1 MB of arguments (a
    file it wrote), or 1 MB of tool schemas, was rendered and encoded on the event loop. /health
    now says it is being prepared before it is answered."""
    app = create_app(garbage + "/ok", tok, tmp_path / "out", durable=False)
    big = "lorem ipsum " * 90_000
    call = {"id": "c1", "type": "function", "function": {"name": "write", "arguments": json.dumps({"text": big})}}
    msgs = [{"role": "user", "content": "write it"}, {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "done"}]
    tools = None
    if where == "tools":
        msgs = [{"role": "user", "content": "hi"}]
        tools = [{"type": "function", "function": {"name": "write", "description": big,
                                                   "parameters": {"type": "object", "properties": {}}}}]
    assert rendered_chars(msgs) + text_chars(tools) > app.state.gateway.offload_chars

    async def talk(c, http):
        body = {"messages": msgs, "max_tokens": 1, **({"tools": tools} if tools else {})}
        task = asyncio.create_task(http.post("/v1/chat/completions", json=body, headers={"X-Session-Id": "s"}))
        seen = False
        while not task.done():
            await asyncio.sleep(0)
            seen = seen or bool(await _preparing(http))
        assert (await task).status_code == 200
        assert seen, "the request was prepared on the event loop: /health never saw it being prepared"
    serve(app, talk)
    (rec,) = read_sessions(tmp_path / "out")
    assert len(rec["input_ids"]) > 100_000


def test_a_big_request_is_in_its_log_when_answered_without_fsync(garbage, tok, tmp_path):
    """With durable=False (--no-fsync) a big request's log line is written in a worker thread; the
    answer still comes only once the line is in the log (a kill right after it loses nothing)."""
    app = create_app(garbage + "/ok", tok, tmp_path / "out", durable=False)
    gw = app.state.gateway

    async def talk(c, http):
        r = await c.chat.completions.create(model="tiny", messages=[{"role": "user", "content": HUGE}], max_tokens=1,
                                            extra_headers={"X-Session-Id": "s"})
        assert r.choices[0].finish_reason == "stop"
        path = gw.table.sessions["s"].journal.path
        lines = path.read_bytes().split(b"\n")
        assert lines[-1] == b"" and len(lines) == 3  # the header, the request, a whole line
        assert json.loads(lines[1])["messages"][0]["content"] == HUGE
    serve(app, talk)
    (rec,) = read_sessions(tmp_path / "out")
    assert rec["history"].to_chats()[0]["content"] == HUGE


def test_a_big_echo_of_the_prompt_is_still_checked_off_the_loop(garbage, tok, tmp_path):
    """vLLM echoes every prompt id; for a big chat that answer (8.7 MB for 1.2 M ids) is parsed and
    compared in a worker thread, and an echo that is not the prompt is still a 502."""
    app = create_app(garbage + "/echo", tok, tmp_path / "out", durable=False)

    async def talk(c, http):
        r = await http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": HUGE}],
                                                          "max_tokens": 1}, headers={"X-Session-Id": "s"})
        assert r.status_code == 502 and "are not the prompt it was sent" in r.json()["error"]["message"], r.text
    serve(app, talk)
    assert read_sessions(tmp_path / "out") == []
