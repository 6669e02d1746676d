"""Routing a named session when its body repeats the previous one (``gateway/body_prefix.py``):
the repeated bytes are not parsed again, and a history rewritten anywhere still forks exactly
where it did before (compared with routing the same body parsed whole)."""
from __future__ import annotations

import asyncio
import copy
import json
import unicodedata

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatdata.gateway import create_app
from chatdata.gateway.body_prefix import parse_body
from chatdata.gateway.journal import read_journal
from chatdata.gateway.requests import parse_chat_request


def scripted(text: str) -> str:
    return f"⟦reply {json.dumps(text, ensure_ascii=False)}⟧"


def body(msgs: list, ensure_ascii: bool = False) -> bytes:
    return json.dumps({"model": "tiny", "messages": msgs, "max_tokens": 24, "seed": 1},
                      ensure_ascii=ensure_ascii).encode()


@pytest.fixture(scope="module")
def tok(tiny_model):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model)


def first_difference(a: list, b: list) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


@pytest.mark.parametrize("named", [True, False], ids=["X-Session-Id", "no header"])
def test_a_history_rewritten_deep_inside_still_forks_where_it_did(backend, tok, tmp_path, named):
    app = create_app(backend[0], tok, tmp_path / "out", durable=False)
    gw = app.state.gateway
    call = '<tool_call>\n{"name": "lookup", "arguments": {"q": "café"}}\n</tool_call><|im_end|>'
    sid = "deep" if named else None

    async def main():
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw", timeout=60) as http:
                opened = []

                async def send(msgs, raw=None):
                    r = await http.post("/v1/chat/completions", content=raw or body(msgs),
                                        headers={"X-Session-Id": sid} if named else {})
                    assert r.status_code == 200, r.text
                    opened.append(r.headers["x-session-id"])
                    return r.json()["choices"][0]["message"], int(r.headers["x-chatdata-branch"])

                chat = [{"role": "system", "content": "Tu es utile."},
                        {"role": "user", "content": "Cherche " + scripted(call)}]
                turns = [[{"role": "tool", "tool_call_id": None, "content": "résultat: 42 " + scripted("Trouvé.<|im_end|>")}],
                         [{"role": "user", "content": "Et ensuite ? " + scripted("Rien de plus.<|im_end|>")}],
                         [{"role": "user", "content": "Merci 🙂 " + scripted("De rien.<|im_end|>")}]]
                for new in [[]] + turns:  # four turns on branch 0, each body repeating the previous one
                    if new and new[0]["role"] == "tool":
                        new[0]["tool_call_id"] = chat[-1]["tool_calls"][0]["id"]
                    msg, branch = await send(chat + new)
                    assert branch == 0
                    chat = chat + new + [msg]
                s = gw.table.sessions[opened[0]]
                assert len(chat) == 9 and chat[2]["tool_calls"] and chat[3]["role"] == "tool"
                # the fast path was taken: the session's last body was read after the bytes of the one before,
                # and the branch holds the very message dicts of that body
                assert s.memo is not None and len(s.memo.messages) == 8
                assert all(a is b for a, b in zip(s.memo.messages, s.branches[0].seen))

                ask = {"role": "user", "content": "Encore " + scripted("Fini.<|im_end|>")}
                nfd = unicodedata.normalize("NFD", chat[3]["content"])
                assert nfd != chat[3]["content"]
                rewrites = {  # the first one lies past the previous body: read after its bytes, then routed
                    "the last answer": lambda c: c[8].update(content=c[8]["content"] + " (edited)"),
                    "content": lambda c: c[5].update(content=c[5]["content"].replace("ensuite", "après")),
                    "tool-call arguments": lambda c: c[2]["tool_calls"][0]["function"].update(
                        arguments=json.dumps({"q": "thé"}, ensure_ascii=False)),
                    "role": lambda c: c[5].update(role="system"),
                    "deleted middle message": lambda c: c.pop(7),
                    "unicode normalization (NFD)": lambda c: c[3].update(content=nfd),
                    "a deep answer's text": lambda c: c[6].update(content="Rien."),
                }
                branches = {0}
                for name, rewrite in rewrites.items():
                    msgs = copy.deepcopy(chat)
                    rewrite(msgs)
                    msgs.append(ask)
                    k = first_difference(msgs, chat)
                    raw = body(msgs)
                    # how the same body routes when parsed whole (the path without the memo)
                    whole = gw.table.route(parse_chat_request(raw), sid)
                    memo = gw.table.memo_for(raw, sid)
                    assert (memo is not None) == (k >= len(s.memo.messages)), name  # bytes repeated up to the rewrite
                    if memo is not None:
                        assert parse_chat_request(raw, memo).raw_messages == msgs
                    _, branch = await send(msgs, raw)
                    if whole.kind == "new":  # without a header, a rewrite before the generated turns it repeats
                        assert not named and opened[-1] != s.id and branch == 0, name  # starts a session
                        continue
                    assert (whole.kind, whole.k, opened[-1]) == ("fork", k, s.id), name
                    assert branch not in branches, name  # a new branch ...
                    branches.add(branch)
                    rec = read_journal(s.journal.path)[1][-1]
                    assert rec["b"] == branch and rec["parent"] == [whole.branch.number, k], name  # ... where it departs

                # the same messages with other JSON escapes: other bytes, the same values: branch 0 goes on
                msg, branch = await send(chat + [ask], body(chat + [ask], ensure_ascii=True))
                assert branch == 0 and opened[-1] == s.id
                chat = chat + [ask, msg]
                more = {"role": "user", "content": "Dernier " + scripted("Oui.<|im_end|>")}
                _, branch = await send(chat + [more])
                assert branch == 0 and opened[-1] == s.id and s.memo.messages[-1] == more
                assert len(branches) == (8 if named else 7)  # without a header, one rewrite opened a session
                for opened_id in set(opened):
                    assert (await http.post(f"/v1/sessions/{opened_id}/close")).status_code == 200
                assert len(gw.table._memos) == 0 and s.memo is None  # a stored session leaves no body behind
    asyncio.run(main())


# -- the parse itself: always what json.loads gives --------------------------------------------------
_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)
_message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]), "content": _text})
_value = st.recursive(st.none() | st.booleans() | st.integers() | _text, lambda v: st.lists(v, max_size=3), max_leaves=5)


@settings(max_examples=150, deadline=None)
@given(head=st.dictionaries(st.sampled_from(["model", "seed", "stop"]), _value, max_size=2),
       tail=st.dictionaries(st.sampled_from(["max_tokens", "model", "tools"]), _value, max_size=2),
       first=st.lists(_message, min_size=1, max_size=4), more=st.lists(_message, max_size=3),
       changed=st.one_of(st.none(), st.integers(0, 3)), ascii2=st.booleans(), indent=st.sampled_from([None, 1]),
       cut=st.one_of(st.none(), st.integers(1, 40)))
def test_a_body_read_after_the_previous_one_is_what_json_loads_gives(head, tail, first, more, changed, ascii2, indent,
                                                                     cut):
    one = json.dumps({**head, "messages": first, **tail}, ensure_ascii=False, indent=indent).encode()
    parsed, known, memo = parse_body(one, None)
    assert parsed == json.loads(one) and known == 0 and memo is not None
    second = copy.deepcopy(first) + more
    if changed is not None and changed < len(first):
        second[changed]["content"] += "x"
    two = json.dumps({**head, "messages": second, **tail}, ensure_ascii=ascii2, indent=indent).encode()
    if cut is not None:
        two = two[:-cut]  # truncated: not JSON, or another value
    try:
        expected = json.loads(two)
    except ValueError as err:
        with pytest.raises(ValueError) as got:
            parse_body(two, memo)
        assert str(got.value) == str(err)
        return
    parsed, known, memo2 = parse_body(two, memo)
    assert parsed == expected
    if known:  # the fast path: only when the repeated bytes are the previous body's
        assert two.startswith(memo.prefix) and known == len(first)
        assert parsed["messages"][:known] == first
