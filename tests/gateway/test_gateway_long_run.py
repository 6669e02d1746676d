"""A gateway that runs for days must not grow: thousands of sessions opened, forked, closed or
stored when idle leave no entry in its tables, indexes and caches, no task, thread or file
handle, and no object of theirs alive."""
from __future__ import annotations

import asyncio
import gc
import os
import threading

import pytest

import chatdata.gateway.requests as requests_module
import chatdata.rollout.delta as delta_module
import chatdata.rollout.facts as facts_module
from chatdata.gateway import create_app, read_sessions
from chatdata.rollout import Rollout
from chatdata.rollout.recent import RecentCache
from test_gateway_app import serve, tok  # noqa: F401 - the fixture and the in-process client

# 2,000 sessions (OWN_TOOLS 300) were run once (14 min with the test backend): the same footprint
# after 400 as after 2,000 (and, before the idle loop dropped its last batch, the same 2 stored
# sessions alive in both); the suite runs fewer
N_SESSIONS, OWN_TOOLS, CHECKPOINT = 24, 12, 12  # the first OWN_TOOLS sessions each send tools of their own
KINDS = ("Session", "Branch", "Conversation", "Rollout", "Journal", "BodyMemo", "Plan", "TokenRow")


def _footprint(gw) -> dict:
    gc.collect()
    live = dict.fromkeys(KINDS, 0)
    for o in gc.get_objects():
        name = type(o).__name__
        if name in live and type(o).__module__.startswith("chatdata."):
            live[name] += 1
    return {"sessions": len(gw.table.sessions), "turn index": len(gw.table._turns), "memos": len(gw.table._memos),
            "tasks": len(asyncio.all_tasks()), "threads": threading.active_count(),
            "fds": len(os.listdir("/proc/self/fd")), "logs": len(os.listdir(gw.store.journal_dir)), **live}


def test_thousands_of_sessions_and_forks_leave_nothing_behind(backend, tok, tmp_path):
    app = create_app(backend[0], tok, tmp_path / "out", durable=False, idle_timeout=0.1)
    gw = app.state.gateway
    seen: dict = {}

    async def talk(c, http):
        async def session(k: int) -> None:
            extra = {}
            if k < OWN_TOOLS:  # tools of its own: a new template variable set, which caches are keyed by
                extra["tools"] = [{"type": "function", "function": {"name": f"tool_{k}", "parameters": {
                    "type": "object", "properties": {"q": {"type": "string"}}}}}]
            h = {"X-Session-Id": f"s{k}"}
            msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"task {k}"}]
            r = await c.chat.completions.create(model="tiny", messages=msgs, max_tokens=2, seed=k, extra_headers=h,
                                                **extra)
            more = msgs + [r.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "go on"}]
            await c.chat.completions.create(model="tiny", messages=more, max_tokens=1, seed=k, extra_headers=h,
                                            **extra)
            await c.chat.completions.create(model="tiny", messages=msgs, max_tokens=1, seed=k + 1, extra_headers=h,
                                            **extra)  # a retry of the first request: a fork
            if k % 2:
                assert (await http.post(f"/v1/sessions/s{k}/close")).status_code == 200
            # the others are stored when idle

        async def settle() -> dict:
            while gw.table.sessions or os.listdir(gw.store.journal_dir):
                await asyncio.sleep(0.05)
            return _footprint(gw)

        for start in range(0, N_SESSIONS, 4):
            await asyncio.gather(*(session(k) for k in range(start, start + 4)))
            if start + 4 in (CHECKPOINT, N_SESSIONS):
                seen[start + 4] = await settle()
    serve(app, talk)
    first, last = seen[CHECKPOINT], seen[N_SESSIONS]
    assert last["threads"] <= first["threads"] + 8  # the default executor's workers start as they are needed
    del first["threads"], last["threads"]
    assert last == first, (first, last)
    assert last["sessions"] == last["turn index"] == last["memos"] == last["logs"] == 0
    assert all(last[k] == 0 for k in KINDS), last
    assert len(requests_module._RECENT) == 8  # OWN_TOOLS (12) tool sets passed: the 8 latest kept
    records = read_sessions(tmp_path / "out")
    assert len(records) == 2 * N_SESSIONS and sum(r["parent"] is not None for r in records) == N_SESSIONS


def test_what_is_learnt_of_a_template_is_kept_for_recent_keys_only():
    """The caches keyed by template and variables keep their most recent keys; an evicted key is
    learnt again, and a live conversation keeps what it learnt (a template rendered whole stays
    so for it)."""
    c = RecentCache(3)
    for k in range(3):
        c[k] = k
    assert c.get(0) == 0  # read: now the most recent
    c[3] = 3
    assert 1 not in c and 0 in c and len(c) == 3  # the least recently used went
    c[4], c[5] = 4, 5
    assert [k in c for k in range(6)] == [False, False, False, True, True, True]
    with pytest.raises(ValueError, match="integer >= 1"):
        RecentCache(0)
    from chatdata.data import load_sample_tokenizer

    tok = load_sample_tokenizer()
    ro = Rollout([[{"role": "user", "content": "hi"}]], tokenizer=tok, tools=[{"type": "function", "function": {
        "name": "only_here", "parameters": {"type": "object"}}}])
    known = ro._delta.known
    known.whole = True
    for k in range(delta_module._KNOWN.size + 1):  # other keys push it out
        delta_module.known_for(f"another template {k}")
    assert len(delta_module._KNOWN) == delta_module._KNOWN.size  # and the oldest went
    assert delta_module.known_for(ro._delta.key) is not known  # evicted: a new conversation learns afresh
    assert ro._delta.known is known and known.whole  # this one still renders its template whole
    ro.add_response([tok.encode("yo<|im_end|>", add_special_tokens=False)])
    ro.add_messages([[{"role": "user", "content": "again"}]])
    assert ro.drift() == [None]


def test_a_rollout_per_new_tool_set_keeps_the_template_facts_of_the_latest_only():
    """A server sees new tools every session, and the template facts are cached per template and
    variables (tools too): more tool sets than the cache holds leave it at its bound (a plain
    dict would hold one entry per tool set ever seen), and an evicted set is learnt again."""
    from chatdata.data import load_sample_tokenizer

    tok = load_sample_tokenizer()

    def rollout(k: int) -> Rollout:
        return Rollout([[{"role": "user", "content": "hi"}]], tokenizer=tok, tools=[{"type": "function", "function": {
            "name": f"tool_set_{k}", "parameters": {"type": "object"}}}])

    size = facts_module._CACHE.size
    for k in range(size + 8):
        rollout(k)
    assert len(facts_module._CACHE) == size
    ro = rollout(0)  # evicted long ago: measured again, and the rollout works as ever
    ro.add_response([tok.encode("yo<|im_end|>", add_special_tokens=False)])
    assert ro.drift() == [None] and len(facts_module._CACHE) == size
