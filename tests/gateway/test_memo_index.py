"""The index of open sessions' last bodies (``gateway/memo_index.py``): among hundreds of agents
whose bodies share their first kilobytes (one harness, one system prompt, no X-Session-Id),
each new body finds its own session's previous body, and any body finds the longest indexed
prefix it starts with, or none."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from chatdata.gateway.body_prefix import parse_body
from chatdata.gateway.memo_index import MemoIndex

SYSTEM = {"role": "system", "content": "You are a coding agent. " * 60}


def body(msgs: list) -> bytes:
    return json.dumps({"model": "m", "messages": msgs, "max_tokens": 64}).encode()


def test_each_of_300_agents_sharing_a_system_prompt_finds_its_own_previous_body():
    index, chats, memos = MemoIndex(), {}, {}
    for k in range(300):
        chats[k] = [SYSTEM, {"role": "user", "content": f"task {k % 7}"}]  # tasks repeat: tails alike, lengths too
        _, _, memos[k] = parse_body(body(chats[k]), None)
        index.add(k, memos[k])
    for turn in range(3):
        for k in range(300):
            chats[k] = chats[k] + [{"role": "assistant", "content": f"step {turn} of agent {k}"},
                                   {"role": "user", "content": "go on"}]
            raw = body(chats[k])
            found = index.find(raw)
            assert found is not None and raw.startswith(found.prefix)
            assert len(found.prefix) == len(memos[k].prefix)  # the longest: the agent's own (or its twin's)
            _, known, memo = parse_body(raw, found)
            assert known == len(chats[k]) - 2
            index.remove(k, memos[k])
            memos[k] = memo
            index.add(k, memo)
    assert len(index) == 300
    for k in range(300):
        index.remove(k, memos[k])
    assert len(index) == 0 and index._buckets == {}


words = st.sampled_from(["a", "b", "go", "x" * 40])
chat = st.lists(st.builds(lambda r, c: {"role": r, "content": c}, st.sampled_from(["user", "assistant"]),
                          st.lists(words, min_size=1, max_size=4).map(" ".join)), min_size=1, max_size=5)


@settings(max_examples=150, deadline=None)
@given(st.lists(chat, min_size=1, max_size=8), chat, st.lists(st.integers(0, 7), max_size=4))
def test_a_body_finds_the_longest_indexed_prefix_it_starts_with(chats, raw_chat, removed):
    index, held = MemoIndex(), []
    for k, c in enumerate(chats):
        _, _, memo = parse_body(body([SYSTEM, *c]), None)
        index.add(k, memo)
        held.append((k, memo))
    for k in set(removed):
        if k < len(held):
            index.remove(*held[k])
    live = [m for k, m in held if k not in set(removed)]
    raw = body([SYSTEM, *raw_chat])
    found = index.find(raw)
    matching = [m for m in live if raw.startswith(m.prefix)]
    if not matching:
        assert found is None
    else:
        assert found is not None and raw.startswith(found.prefix)
        assert len(found.prefix) == max(len(m.prefix) for m in matching)


def test_of_two_prefixes_a_body_repeats_the_longer_is_found():
    turns = [{"role": "user", "content": "u1"}, {"role": "assistant", "content": "a1"},
             {"role": "user", "content": "u2"}, {"role": "assistant", "content": "a2"}]
    index = MemoIndex()
    short = parse_body(body([SYSTEM, *turns[:1]]), None)[2]
    long = parse_body(body([SYSTEM, *turns[:3]]), None)[2]
    index.add("fork", short)  # the shorter indexed first
    index.add("main", long)
    assert index.find(body([SYSTEM, *turns])) is long
    assert index.find(body([SYSTEM, *turns[:2]])) is short
