"""End to end: the official ``openai`` client talks to ``chatdata serve`` (a subprocess), which
talks token ids to the test backend (a tiny random Qwen2); what the gateway stored is compared
with what the backend sampled, and with a forward of the same model."""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
import torch

import chatdata
from chatdata.cli import main
from chatdata.gateway import read_sessions
from chatdata.train import ConcatTokenDataset
from gateway_helpers import sampled, start_gateway

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
         {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
                                           "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}]
CITIES = ["Zürich", "東京", "São Paulo", "Kraków", "Reykjavík", "Montréal", "İstanbul", "Zagreb"]


def scripted(text: str) -> str:
    """The test backend's hook: the next answer is exactly ``text`` (see tiny_backend.py)."""
    return f"⟦reply {json.dumps(text, ensure_ascii=False)}⟧"


def call(name: str, args: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"


def client(g, timeout: float = 60.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=g.url + "/v1", api_key="none", max_retries=0, timeout=timeout)


def ask(c, msgs, headers, seed, max_tokens=64, **kw):
    raw = c.chat.completions.with_raw_response.create(model="tiny", messages=msgs, tools=TOOLS, seed=seed,
                                                      max_tokens=max_tokens, extra_headers=headers, **kw)
    return raw.parse(), raw.headers["x-session-id"]


def agent(g, a: int) -> dict:
    """One scripted agent: a tool call, a tool reply, a text answer, a free (truncated) turn, two
    tool calls; then a compacted history (a fork). Even agents name their session, odd ones do not."""
    c = client(g)
    headers = {"X-Session-Id": f"agent-{a}"} if a % 2 == 0 else {}
    city = CITIES[a]
    msgs = [{"role": "system", "content": f"Agent {a}. Réponds brièvement 🌍."},
            {"role": "user", "content": f"Météo à {city}? " + scripted(call("get_weather", {"city": city, "day": a}) + "<|im_end|>")}]
    r, sid = ask(c, msgs, headers, 10 * a + 1)
    assert r.choices[0].finish_reason == "tool_calls"
    m = r.choices[0].message
    assert m.tool_calls[0].function.name == "get_weather"
    assert json.loads(m.tool_calls[0].function.arguments) == {"city": city, "day": a}
    msgs.append(m.model_dump(exclude_none=True))
    msgs.append({"role": "tool", "tool_call_id": m.tool_calls[0].id,
                 "content": f"{a + 10}°C, pluie ☔ " + scripted(f"Il pleut à {city}: {a + 10}°C ☔.<|im_end|>")})
    r, sid2 = ask(c, msgs, headers, 10 * a + 2)
    assert (r.choices[0].finish_reason, r.choices[0].message.content) == ("stop", f"Il pleut à {city}: {a + 10}°C ☔.")
    msgs.append(r.choices[0].message.model_dump(exclude_none=True))
    msgs.append({"role": "user", "content": "Et demain? Dis-m'en plus."})
    r, sid3 = ask(c, msgs, headers, 10 * a + 3, max_tokens=5)  # sampled by the random model: cut at 5 ids
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 5
    msgs.append(r.choices[0].message.model_dump(exclude_none=True))
    msgs.append({"role": "user", "content": "Les deux, s'il te plaît. " + scripted(
        call("get_weather", {"city": city}) + "\n" + call("get_time", {"tz": "Europe/Zürich"}) + "<|im_end|>")})
    r, sid4 = ask(c, msgs, headers, 10 * a + 4)
    assert [t.function.name for t in r.choices[0].message.tool_calls] == ["get_weather", "get_time"]
    msgs.append(r.choices[0].message.model_dump(exclude_none=True))
    assert sid == sid2 == sid3 == sid4  # with or without the header, one session
    out = {"sid": sid, "msgs": msgs, "fork": None}
    if a < 2:  # the harness compacts its history: keep the first tool round, summarise the rest
        compact = msgs[:4] + [{"role": "user", "content": "Résumé: il pleut. Continue. " + scripted("D'accord ✅.<|im_end|>")}]
        r, sid5 = ask(c, compact, headers, 10 * a + 5)
        assert sid5 == sid and r.choices[0].message.content == "D'accord ✅."
        out["fork"] = compact + [r.choices[0].message.model_dump(exclude_none=True)]
    return out


@pytest.fixture(scope="module")
def gateway(backend, tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("gateway") / "sessions"
    g = start_gateway(backend[0], tiny_model, out)
    g.out = out
    yield g
    g.kill()


@pytest.fixture(scope="module")
def scenario(gateway, backend):
    """8 concurrent agents x 4 turns (+ 2 forks), then every session closed and read back."""
    since = len(sampled(backend[1]))
    with ThreadPoolExecutor(8) as pool:
        agents = list(pool.map(lambda a: agent(gateway, a), range(8)))
    for ag in agents:
        r = httpx.post(f"{gateway.url}/v1/sessions/{ag['sid']}/close", timeout=60)
        assert r.status_code == 200 and r.json()["closed"] is True, r.text
    return {"agents": agents, "gens": sampled(backend[1], since), "records": read_sessions(gateway.out)}


def _runs(mask: torch.Tensor) -> list[tuple[int, int]]:
    edges = torch.diff(mask, prepend=torch.zeros(1, dtype=mask.dtype), append=torch.zeros(1, dtype=mask.dtype))
    starts, ends = (edges == 1).nonzero().flatten().tolist(), (edges == -1).nonzero().flatten().tolist()
    return list(zip(starts, ends))


def test_stored_ids_and_logprobs_are_the_backends_and_masks_mark_exactly_them(scenario):
    gens, records = scenario["gens"], scenario["records"]
    assert len(gens) == 8 * 4 + 2 and all(g["api"] == "vllm" for g in gens)
    by_prompt = {tuple(g["prompt"]): g for g in gens}
    found = set()
    for r in records:
        ids, mask, lp = r["input_ids"], r["assistant_masks"], r["logprobs"]
        assert ids.ndim == mask.ndim == lp.ndim == 1 and len(ids) == len(mask) == len(lp)
        assert ids.dtype == torch.int64 and lp.dtype == torch.float32
        assert not lp[mask == 0].any()  # 0.0 wherever nothing was sampled
        for a, e in _runs(mask):  # every sampled run: one generation, sent with exactly the ids before it
            g = by_prompt[tuple(ids[:a].tolist())]
            assert ids[a:e].tolist() == g["ids"]
            assert torch.equal(lp[a:e], torch.tensor(g["logprobs"], dtype=torch.float32))
            found.add(tuple(g["prompt"]))
    assert found == set(by_prompt)  # and every generation is stored


def test_a_forward_of_the_model_reproduces_the_stored_logprobs(scenario, tiny_model):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    worst = 0.0
    with torch.no_grad():
        for r in scenario["records"]:
            ids, mask = r["input_ids"], r["assistant_masks"].bool()
            at = mask[1:].nonzero().flatten()  # position p predicts id p + 1: the head only where an id was sampled
            hidden = model.model(ids[None]).last_hidden_state[0, at]
            forward = torch.log_softmax(model.lm_head(hidden).float(), -1).gather(1, ids[at + 1, None])[:, 0]
            worst = max(worst, float((forward - r["logprobs"][at + 1]).abs().max()))
    assert worst < 1e-4


def test_each_session_trains_once_as_a_prefix_tree(scenario, tiny_model):
    """read_sessions -> collate_prefix_tree: a session's branches share their common prefix once
    (T = the trie's nodes, the fork's shared ids not repeated), and one forward of the model over
    the tree reproduces every stored logprob, on both branches."""
    from transformers import AutoModelForCausalLM

    from chatdata.train import collate_prefix_tree, tree_logprobs, tree_model_inputs

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32, attn_implementation="sdpa").eval()
    by_session: dict = {}
    for r in scenario["records"]:
        by_session.setdefault(r["session_id"], []).append(r)
    forked = [rs for rs in by_session.values() if len(rs) > 1]
    assert len(forked) == 2
    worst = 0.0
    for rows in forked:
        rows = sorted(rows, key=lambda r: r["branch"])
        batch = collate_prefix_tree(rows)
        nodes = {tuple(r["input_ids"][:k + 1].tolist()) for r in rows for k in range(len(r["input_ids"]))}
        _, shared = rows[1]["parent"]
        assert batch["input_ids"].shape[1] == len(nodes) == sum(len(r["input_ids"]) for r in rows) - shared
        with torch.no_grad():
            lp = tree_logprobs(model(**tree_model_inputs(batch, model)).logits, batch)
        for j, r in enumerate(rows):
            m = r["assistant_masks"].bool()
            assert torch.equal(batch["logprobs"][j, :len(m)], r["logprobs"])  # the stored column, aligned
            worst = max(worst, float((lp[j, :len(m)][m] - r["logprobs"][m]).abs().max()))
    assert worst < 1e-4


def test_sessions_are_trees_and_a_rewritten_history_forks(scenario):
    by_session: dict = {}
    for r in scenario["records"]:
        by_session.setdefault(r["session_id"], []).append(r)
    agents = scenario["agents"]
    assert sorted(by_session) == sorted(a["sid"] for a in agents) and len(by_session) == 8
    assert agents[0]["sid"] == "agent-0" and agents[1]["sid"].startswith("sess-")
    for a, ag in enumerate(agents):
        branches = sorted(by_session[ag["sid"]], key=lambda r: r["branch"])
        assert [b["branch"] for b in branches] == list(range(2 if a < 2 else 1))
        assert branches[0]["parent"] is None
        assert branches[0]["history"].to_chats()[-1]["tool_calls"][1]["function"]["name"] == "get_time"
        if a < 2:
            fork = branches[1]
            parent, pos = fork["parent"]
            assert parent == 0
            main = branches[0]["input_ids"]
            assert torch.equal(fork["input_ids"][:pos], main[:pos]) and fork["input_ids"][pos] != main[pos]
            first_turn = _runs(branches[0]["assistant_masks"])[0]
            assert pos > first_turn[1]  # the first tool round is shared, id for id
            assert torch.equal(fork["assistant_masks"][:pos], branches[0]["assistant_masks"][:pos])
            assert fork["history"].to_chats()[-1]["content"] == "D'accord ✅."


def test_the_stored_conversation_is_what_the_client_saw(scenario):
    for ag in scenario["agents"]:
        stored = next(r for r in scenario["records"] if r["session_id"] == ag["sid"] and r["branch"] == 0)
        chat = stored["history"].to_chats()
        sent = ag["msgs"]
        assert [m["role"] for m in chat] == [m["role"] for m in sent]
        for s, m in zip(chat, sent):
            if m["role"] == "assistant" and "tool_calls" in m:
                assert [c["id"] for c in s["tool_calls"]] == [c["id"] for c in m["tool_calls"]]
                assert [c["function"]["arguments"] for c in s["tool_calls"]] == \
                       [json.loads(c["function"]["arguments"]) for c in m["tool_calls"]]  # the input shape
            else:
                assert s["content"] == (m.get("content") or "")
        assert chat[6].get("is_complete") is False  # the truncated turn (finish_reason "length")
        assert chat[2].get("is_complete", True) and chat[4].get("is_complete", True)


def test_info_verify_and_training_read_the_output(scenario, gateway, capsys):
    out = gateway.out
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0  # the conversations, the token set and the branch table
    assert "ok:" in capsys.readouterr().out
    assert main(["info", str(out), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["conversations"] == 10 and stats["gateway"]["sessions"] == 8
    assert stats["gateway"]["forks"] == 2 and stats["gateway"]["truncated_turns"] == 8
    ds = ConcatTokenDataset(chatdata.open_dataset(out / "tokens"))
    assert len(ds) == 10
    for i, r in enumerate(scenario["records"]):
        row = ds[i]
        assert torch.equal(row["input_ids"], r["input_ids"]) and torch.equal(row["assistant_masks"], r["assistant_masks"].bool())
        assert torch.equal(row["labels"] != -100, r["assistant_masks"].bool())


def test_closed_sessions_leave_the_gateway(scenario, gateway, tiny_model):
    health = httpx.get(gateway.url + "/health", timeout=10).json()
    assert health == {"status": "ok", "open_sessions": 0, "preparing": 0}
    assert [m.id for m in client(gateway).models.list().data] == [tiny_model.name]  # the tokenizer folder's name


def test_streaming_equals_non_streaming(gateway):
    c = client(gateway)
    msgs = [{"role": "user", "content": "Stream? " + scripted("Oui: ça marche ✓ " * 9 + call("get_time", {"tz": "UTC"}) + "<|im_end|>")}]
    plain = c.chat.completions.with_raw_response.create(model="tiny", messages=msgs, tools=TOOLS, seed=7, max_tokens=200,
                                                         extra_headers={"X-Session-Id": "stream-plain"}).parse()
    stream = c.chat.completions.create(model="tiny", messages=msgs, tools=TOOLS, seed=7, max_tokens=200, stream=True,
                                       stream_options={"include_usage": True}, extra_headers={"X-Session-Id": "stream-sse"})
    content, calls, finish, usage = "", {}, None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for ch in chunk.choices:
            content += ch.delta.content or ""
            for tc in ch.delta.tool_calls or ():
                calls.setdefault(tc.index, {"id": tc.id, "name": tc.function.name, "arguments": ""})
                calls[tc.index]["arguments"] += tc.function.arguments or ""
            finish = ch.finish_reason or finish
    m = plain.choices[0].message
    assert content == m.content and finish == plain.choices[0].finish_reason == "tool_calls"
    assert [(x["name"], x["arguments"]) for x in calls.values()] == [(t.function.name, t.function.arguments) for t in m.tool_calls]
    assert usage.completion_tokens == plain.usage.completion_tokens
    for sid in ("stream-plain", "stream-sse"):
        assert httpx.post(f"{gateway.url}/v1/sessions/{sid}/close", timeout=60).status_code == 200
    recs = {r["session_id"]: r for r in read_sessions(gateway.out) if r["session_id"].startswith("stream-")}
    a, b = recs["stream-plain"], recs["stream-sse"]
    for key in ("input_ids", "assistant_masks", "logprobs"):
        assert torch.equal(a[key], b[key])
    ca, cb = a["history"].to_chats(), b["history"].to_chats()
    for x in (ca, cb):  # the generated call ids differ; everything else is the same record
        for call_ in x[-1]["tool_calls"]:
            call_.pop("id")
    assert ca == cb


def test_stop_strings_chat_logprobs_and_two_requests_on_one_branch(gateway):
    c = client(gateway)
    h = {"X-Session-Id": "stop-1"}
    msgs = [{"role": "user", "content": "Compte " + scripted("un deux STOP trois<|im_end|>")}]
    r = c.chat.completions.create(model="tiny", messages=msgs, seed=1, stop=["STOP"], logprobs=True, extra_headers=h)
    # cut where the stop string begins, as OpenAI and vLLM answer; the stored turn keeps every sampled id
    assert r.choices[0].finish_reason == "stop" and r.choices[0].message.content == "un deux "
    lps = [x.logprob for x in r.choices[0].logprobs.content]
    assert len(lps) == r.usage.completion_tokens
    msgs += [r.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Suite " + scripted("ok<|im_end|>")}]
    with ThreadPoolExecutor(2) as pool:  # the same request twice at once: the second forks the branch
        both = list(pool.map(lambda _: c.chat.completions.with_raw_response.create(
            model="tiny", messages=msgs, seed=2, extra_headers=h), range(2)))
    assert sorted(x.headers["x-chatdata-branch"] for x in both) == ["0", "1"]
    assert httpx.post(f"{gateway.url}/v1/sessions/stop-1/close", timeout=60).status_code == 200
    rec = sorted((r for r in read_sessions(gateway.out) if r["session_id"] == "stop-1"), key=lambda r: r["branch"])
    assert [r["parent"] is None for r in rec] == [True, False]
    first = _runs(rec[0]["assistant_masks"])[0]
    assert rec[0]["logprobs"][first[0]:first[1]].tolist() == pytest.approx(lps, abs=1e-6)
    chat = rec[0]["history"].to_chats()
    assert chat[1] == {"role": "assistant", "content": "un deux STOP", "is_complete": False}  # no EOT sampled
    assert rec[1]["parent"][1] > first[1] and torch.equal(rec[1]["input_ids"], rec[0]["input_ids"])  # same seed


def test_a_turn_cut_at_its_stop_string_still_extends_its_branch_after_a_kill_and_restart(backend, tiny_model,
                                                                                         tmp_path):
    """The client receives the content cut at the stop string; the log keeps that cut text, so the
    client's copy of the turn routes to its branch (no fork) after the gateway is killed and
    restarted on the same folder, and the stored turn is every id sampled."""
    out = tmp_path / "stop-restart"
    h = {"X-Session-Id": "react"}
    msgs = [{"role": "user", "content": "Go " + scripted("Action: search\nObservation: made up<|im_end|>")}]
    g = start_gateway(backend[0], tiny_model, out, "--idle-timeout", "600")
    try:
        r = client(g).chat.completions.create(model="tiny", messages=msgs, seed=1, stop=["\nObservation"],
                                              extra_headers=h)
        assert r.choices[0].message.content == "Action: search"
    finally:
        g.kill()  # SIGKILL: the session is resumed from its log at the next start
    msgs += [r.choices[0].message.model_dump(exclude_none=True),
             {"role": "user", "content": "Observation: found " + scripted("Done.<|im_end|>")}]
    g = start_gateway(backend[0], tiny_model, out, "--idle-timeout", "600")
    try:
        r2 = client(g).chat.completions.with_raw_response.create(model="tiny", messages=msgs, seed=2, extra_headers=h)
        assert r2.headers["x-chatdata-branch"] == "0" and r2.parse().choices[0].message.content == "Done."
        assert httpx.post(f"{g.url}/v1/sessions/react/close", timeout=60).status_code == 200
    finally:
        g.kill()
    (rec,) = [x for x in read_sessions(out) if x["session_id"] == "react"]
    chat = rec["history"].to_chats()
    assert chat[1]["content"].startswith("Action: search\nObservation") and chat[3]["content"] == "Done."



def test_without_a_session_header_a_turn_cut_at_its_stop_string_finds_its_session(gateway):
    """A harness that names no session is routed by the generated turns it repeats: the cut
    answer it received must find the branch that holds the whole sampled turn."""
    c = client(gateway)
    msgs = [{"role": "system", "content": "ReAct agent without a session header"},
            {"role": "user", "content": "Go " + scripted("Action: look\nObservation: invented<|im_end|>")}]
    r = c.chat.completions.with_raw_response.create(model="tiny", messages=msgs, seed=3, stop=["\nObservation"])
    first = r.parse().choices[0].message
    assert first.content == "Action: look"
    msgs += [first.model_dump(exclude_none=True), {"role": "user", "content": "Observation: x " + scripted("ok<|im_end|>")}]
    r2 = c.chat.completions.with_raw_response.create(model="tiny", messages=msgs, seed=4)
    assert r2.headers["x-session-id"] == r.headers["x-session-id"] and r2.headers["x-chatdata-branch"] == "0"


def test_logprob_bytes_of_tokens_split_inside_a_character_join_to_the_text(gateway):
    """'🌍' is three byte-level tokens: each one's 'bytes' were those of U+FFFD (decode of a lone
    part), so the joined bytes of an answer were not its text."""
    c = client(gateway)
    text = "日本語 🌍🌍 ok ✓"
    msgs = [{"role": "user", "content": "Bytes " + scripted(text + "<|im_end|>")}]
    for stream in (False, True):
        r = c.chat.completions.create(model="tiny", messages=msgs, seed=1, logprobs=True, stream=stream,
                                      extra_headers={"X-Session-Id": f"bytes-{stream}"})
        if stream:
            lps = [x for ch in r for choice in ch.choices for x in (choice.logprobs.content if choice.logprobs else ())]
        else:
            assert r.choices[0].message.content == text
            lps = r.choices[0].logprobs.content
        joined = b"".join(bytes(x.bytes) for x in lps)
        assert joined.decode("utf-8") == text + "<|im_end|>"
        assert any(x.token == "\ufffd" for x in lps)  # a lone part's text is still what the tokenizer decodes
        assert httpx.post(f"{gateway.url}/v1/sessions/bytes-{stream}/close", timeout=60).status_code == 200


def test_bad_requests_get_openai_errors_and_lose_nothing(gateway):
    url = gateway.url + "/v1/chat/completions"
    c = client(gateway)
    good = [{"role": "user", "content": "Salut " + scripted("Bonjour!<|im_end|>")}]
    first = c.chat.completions.create(model="tiny", messages=good, seed=1, extra_headers={"X-Session-Id": "bad-1"})
    good.append(first.choices[0].message.model_dump(exclude_none=True))
    cases = [
        (b'{"messages": [', 400, None, "not valid JSON"),
        (b'[1, 2]', 400, None, "must be a JSON object"),
        (json.dumps({"messages": "hi"}).encode(), 400, "messages", "non-empty list"),
        (json.dumps({"messages": good, "temperature": "hot"}).encode(), 400, "temperature", "must be a number"),
        (json.dumps({"messages": good, "max_tokens": -3}).encode(), 400, "max_tokens", ">= 1"),
        (json.dumps({"messages": good, "n": 2}).encode(), 400, "n", "must be 1"),
        (json.dumps({"messages": good, "stream": "yes"}).encode(), 400, "stream", "true or false"),
        (json.dumps({"messages": good, "tools": [{"type": "function"}]}).encode(), 400, "tools[0]", "tools[0]"),
        (json.dumps({"messages": good + [{"role": "robot", "content": "x"}]}).encode(), 400, "messages[2].role", "robot"),
        (json.dumps({"messages": good + [{"role": "user", "content": 5}]}).encode(), 400, "messages[2].content", "string"),
        (json.dumps({"messages": good + [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}).encode(),
         400, "messages[2].content", "only text parts"),
        (json.dumps({"messages": good + [{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}]}).encode(),
         400, "messages[2].tool_calls[0]", "tool_calls[0]"),
    ]
    for body, status, param, words in cases:
        r = httpx.post(url, content=body, headers={"X-Session-Id": "bad-1", "content-type": "application/json"}, timeout=30)
        assert r.status_code == status, (body, r.text)
        err = r.json()["error"]
        assert words in err["message"] and err["param"] == param and err["type"] == "invalid_request_error", err
    r = httpx.post(url, json={"messages": good + [{"role": "user", "content": "x"}]}, headers={"X-Session-Id": "\x01"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "X-Session-Id"
    r = httpx.post(url, json={"messages": good + [{"role": "user", "content": "y" * 30000}]}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    r = httpx.get(url, timeout=10)
    assert r.status_code == 405 and "error" in r.json()
    with pytest.raises(openai.BadRequestError, match="must be a number"):
        c.chat.completions.create(model="tiny", messages=good, temperature="hot")  # type: ignore[arg-type]
    with pytest.raises(openai.NotFoundError):
        c.post("/sessions/never-opened/close", cast_to=object)
    good.append({"role": "user", "content": "Encore " + scripted("Re-bonjour!<|im_end|>")})  # the session goes on
    again = c.chat.completions.with_raw_response.create(model="tiny", messages=good, seed=2, extra_headers={"X-Session-Id": "bad-1"})
    assert again.headers["x-chatdata-branch"] == "0" and again.parse().choices[0].message.content == "Re-bonjour!"
    assert httpx.post(f"{gateway.url}/v1/sessions/bad-1/close", timeout=60).status_code == 200
    rec = [r for r in read_sessions(gateway.out) if r["session_id"] == "bad-1"]
    assert len(rec) == 1 and [m["content"] for m in rec[0]["history"].to_chats()][-1] == "Re-bonjour!"
    assert len(_runs(rec[0]["assistant_masks"])) == 2


def test_sigkill_under_load_then_restart(backend, tiny_model, tmp_path):
    out = tmp_path / "crash"
    g = start_gateway(backend[0], tiny_model, out, "--idle-timeout", "600")
    since = len(sampled(backend[1]))
    done: list = []
    stop = threading.Event()

    def load(a: int) -> None:
        c = client(g, timeout=30)
        msgs = [{"role": "system", "content": f"Crash agent {a}"}]
        t = 0
        while not stop.is_set():
            msgs.append({"role": "user", "content": f"turn {t} " + scripted(f"ok {a}.{t} ✓<|im_end|>")})
            try:
                r = c.chat.completions.create(model="tiny", messages=msgs, seed=1000 * a + t, max_tokens=16,
                                              extra_headers={"X-Session-Id": f"crash-{a}"})
            except (openai.APIConnectionError, openai.APIStatusError):
                return
            done.append((a, t, 1000 * a + t, list(msgs)))
            msgs.append(r.choices[0].message.model_dump(exclude_none=True))
            t += 1

    threads = [threading.Thread(target=load, args=(a,)) for a in range(6)]
    for th in threads:
        th.start()
    deadline = time.monotonic() + 90
    while len(done) < 18 and time.monotonic() < deadline:
        time.sleep(0.02)
    g.kill()  # SIGKILL, requests in flight
    stop.set()
    for th in threads:
        th.join(60)
    assert len(done) >= 18
    gens = {x["seed"]: x for x in sampled(backend[1], since)}

    g2 = start_gateway(backend[0], tiny_model, out, "--idle-timeout", "600")  # resumes the open sessions
    a, t, seed, msgs = max((d for d in done if d[0] == 0), key=lambda d: d[1])
    c = client(g2)
    last = c.chat.completions.create(model="tiny", messages=msgs, seed=seed, max_tokens=16, extra_headers={"X-Session-Id": "crash-0"})
    msgs = msgs + [last.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "after restart " + scripted("encore ✓<|im_end|>")}]
    after = c.chat.completions.create(model="tiny", messages=msgs, seed=99_999, max_tokens=16, extra_headers={"X-Session-Id": "crash-0"})
    assert after.choices[0].message.content == "encore ✓"
    assert g2.terminate() == 0, "".join(g2.err)[-2000:]  # SIGTERM stores every open session

    records = read_sessions(out)
    for a, t, seed, _ in done:  # every answered request is stored, ids as the backend sampled them
        gen = gens[seed]
        n = len(gen["prompt"])
        assert any(r["session_id"] == f"crash-{a}" and r["input_ids"][:n].tolist() == gen["prompt"]
                   and r["input_ids"][n:n + len(gen["ids"])].tolist() == gen["ids"]
                   and bool(r["assistant_masks"][n:n + len(gen["ids"])].all()) for r in records), (a, t)
    final = [r for r in records if r["session_id"] == "crash-0" and r["history"].to_chats()[-1]["content"] == "encore ✓"]
    assert len(final) == 1  # resumed: the turns sampled before the kill are still marked sampled in it
    assert len(_runs(final[0]["assistant_masks"])) == len(msgs) // 2
    assert not list((out / "journal").iterdir())
    assert main(["verify", str(out)]) == 0


def test_an_idle_connection_outlives_a_clients_keep_alive(gateway):
    """An agent that runs a tool for longer than uvicorn's default 5 s keep-alive, then reuses its
    connection, finds it open: a server that closes at the clients' own 5 s expiry races them."""
    import socket
    from urllib.parse import urlparse

    u = urlparse(gateway.url)
    request = f"GET /health HTTP/1.1\r\nHost: {u.hostname}\r\nConnection: keep-alive\r\n\r\n".encode()
    with socket.create_connection((u.hostname, u.port), timeout=30) as s:
        for k in range(2):
            if k:
                time.sleep(6.5)  # past httpx's and uvicorn's default 5 s
            s.sendall(request)
            got = b""
            while b"\r\n\r\n" not in got or not got.rstrip().endswith(b"}"):
                chunk = s.recv(65536)
                assert chunk, "the gateway closed the idle connection"
                got += chunk
            assert got.startswith(b"HTTP/1.1 200")
