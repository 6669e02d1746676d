"""Bad or edge-case input to the rollout API (the real Qwen2.5 tokenizer and template): every case
ends in correct ids, masks, logprobs and history, or in a clear error that names the row and
changes nothing."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatdata.rollout import Conversation, Rollout

EOT = "<|im_end|>"
USER = [{"role": "user", "content": "Wie spät ist es? 🕐"}]


def enc(tok, text):
    return torch.tensor(tok.encode(text, add_special_tokens=False))


def snapshot(ro):
    return [t.clone() for t in ro.prompt_ids()], ro.history.to_chats(), [s.clone() for s in ro.turn_spans()]


def unchanged(ro, before):
    ids, chats, spans = snapshot(ro)
    return (all(torch.equal(a, b) for a, b in zip(ids, before[0])) and chats == before[1]
            and all(torch.equal(a, b) for a, b in zip(spans, before[2])))


@pytest.mark.parametrize("bad", [-1, 2 ** 31, 2 ** 40])
def test_ids_that_are_not_token_ids_are_refused_and_change_nothing(qwen, bad):
    ro = Rollout([USER, USER], tokenizer=qwen)
    before = snapshot(ro)
    ok = enc(qwen, "Zehn." + EOT)
    with pytest.raises(ValueError, match=rf"row 1: sampled id {bad} is not a token id \(ids are in \[0, 2\*\*31\)\)"):
        ro.add_response([ok, torch.tensor([19, bad, 151645])])
    assert unchanged(ro, before)


def test_ids_past_the_tokenizer_are_kept_verbatim(qwen):
    """A model's embedding is often larger than its tokenizer (Qwen2.5: 151,936 rows for 151,665
    tokens): a policy can sample those rows, and what it sampled is what it trains on."""
    ro = Rollout([USER], tokenizer=qwen)
    sampled = torch.tensor([len(qwen) - 1, len(qwen), 151935, 151645])
    ro.add_response([sampled])
    assert torch.equal(ro.prompt_ids()[0][-4:], sampled)
    row = ro.tokens()[0]
    assert torch.equal(row["input_ids"][row["assistant_masks"].bool()][-4:], sampled)


def test_id_containers_give_the_same_rollout(qwen):
    ids = enc(qwen, "Es ist zehn Uhr." + EOT)
    kept = []
    for given in (ids, ids.tolist(), tuple(ids.tolist()), ids.to(torch.int32), ids.numpy()):
        ro = Rollout([USER], tokenizer=qwen)
        ro.add_response([given])
        kept.append((ro.tokens()[0]["input_ids"].tolist(), ro.history.to_chats()))
    assert all(k == kept[0] for k in kept)
    ro = Rollout([USER], tokenizer=qwen)
    ro.add_response(ids.numpy())  # one row's ids as one numpy array, like one 1-D tensor
    assert ro.tokens()[0]["input_ids"].tolist() == kept[0][0]


@pytest.mark.parametrize("given, error, match", [
    (None, TypeError, "row 0: a response must be a 1-D tensor or a list of numbers, got NoneType"),
    (["a", "b"], TypeError, "row 0: a response must be a 1-D tensor or a list of numbers"),
    ([1.0, 2.0], TypeError, "row 0: response ids must be integers, got torch.float32"),
    ([], ValueError, "row 0: the response is empty"),
    (torch.tensor([1, 2], device="meta"), ValueError, "row 0: the response ids are a meta tensor"),
])
def test_ids_that_are_not_ids_are_refused(qwen, given, error, match):
    ro = Rollout([USER], tokenizer=qwen)
    before = snapshot(ro)
    with pytest.raises(error, match=match):
        ro.add_response([given])
    with pytest.raises(TypeError, match="add_response takes a list with one id tensor per row, got int"):
        ro.add_response(5)
    assert unchanged(ro, before)


@pytest.mark.parametrize("value, error, match", [
    (float("nan"), ValueError, r"row 0: logprobs must be log-probabilities \(<= 0 give or take rounding, or -inf\); got nan at position 1"),
    (float("inf"), ValueError, "got inf at position 1"),
    (0.5, ValueError, "got 0.5 at position 1"),  # a probability, not its log
    (0.125, ValueError, "got 0.125 at position 1"),
])
def test_logprobs_that_are_not_log_probabilities_are_refused(qwen, value, error, match):
    ro = Rollout([USER], tokenizer=qwen)
    before = snapshot(ro)
    ids = enc(qwen, "Zehn." + EOT)
    lp = torch.full((len(ids),), -0.5)
    lp[1] = value
    with pytest.raises(error, match=match):
        ro.add_response([ids], logprobs=[lp])
    assert unchanged(ro, before)


def test_logprobs_a_backend_rounded_a_little_above_zero_are_kept(qwen):
    ro = Rollout([USER], tokenizer=qwen)
    ids = enc(qwen, "Zehn." + EOT)
    lp = torch.full((len(ids),), -0.5)
    lp[0], lp[1] = 3e-7, 0.0625  # float32 / bf16 rounding of log_softmax near 0
    ro.add_response([ids], logprobs=[lp])
    assert torch.equal(ro.tokens()[0]["logprobs"][-len(ids):], lp)


def test_logprob_types_and_lengths(qwen):
    ids = enc(qwen, "Zehn." + EOT)
    n = len(ids)
    ro = Rollout([USER], tokenizer=qwen)
    before = snapshot(ro)
    for lp, error, match in ((torch.full((n,), -1 + 0j), TypeError, "row 0: logprobs must be real numbers, got torch.complex64"),
                             (torch.zeros(n, dtype=torch.bool), TypeError, "logprobs must be real numbers, got torch.bool"),
                             (["x"] * n, TypeError, "row 0: logprobs must be a 1-D tensor or a list of numbers"),
                             (torch.zeros(n + 1), ValueError, f"row 0: logprobs have shape \\({n + 1},\\) but the response has {n} ids"),
                             (torch.zeros(1, n), ValueError, "logprobs have shape")):
        with pytest.raises(error, match=match):
            ro.add_response([ids], logprobs=[lp])
    assert unchanged(ro, before)
    # -inf (a token the sampler could not have picked, as some engines report it), float64, ints: kept as float32
    lp = [float("-inf")] + [-1e-3] * (n - 2) + [0]
    ro.add_response(ids, logprobs=torch.tensor(lp, dtype=torch.float64))  # one row: one 1-D tensor each
    row = ro.tokens()[0]
    assert row["logprobs"].dtype == torch.float32
    assert row["logprobs"][row["assistant_masks"].bool()].tolist() == torch.tensor(lp, dtype=torch.float32).tolist()


def test_rows_given_as_numpy_or_a_mask(qwen):
    ok = enc(qwen, "Zehn." + EOT)
    ro = Rollout([USER] * 3, tokenizer=qwen)
    before = snapshot(ro)
    with pytest.raises(ValueError, match=r"add_response: a bool mask of rows needs one entry per row \(3\), got shape \(2,\)"):
        ro.add_response([ok], rows=torch.tensor([True, False]))  # was: read as rows [0], silently
    with pytest.raises(ValueError, match="a bool mask of rows needs one entry per row"):
        ro.add_response([ok], rows=np.array([False, True]))
    with pytest.raises(TypeError, match="rows must be ints, got 1.0"):
        ro.add_response([ok], rows=[1.0])
    assert unchanged(ro, before)
    with pytest.raises(ValueError, match="a bool mask of rows needs one entry per row"):
        ro.add_response([ok], rows=[True, False])
    assert unchanged(ro, before)
    ro.add_response([ok], rows=np.array([True, False, False]))
    ro.add_response([ok], rows=[np.int64(1)])
    ro.add_response([ok], rows=np.int32(-1))
    assert [len(s) for s in ro.turn_spans()] == [1, 1, 1]
    ro.add_messages([USER], rows=[False, True, False])  # a mask written as a list
    assert [len(c) for c in ro.history.to_chats()] == [2, 3, 2]


@pytest.mark.parametrize("start, match", [
    ([[{"content": "no role"}]], r"row 0: Rollout takes a list of message dicts with a str 'role' per row; message 0 is "
                                 r"a dict without a str 'role' \(keys: \['content'\]\)"),
    ([[{"role": "user", "content": "a"}], ["hello"]], "row 1: Rollout takes .* message 0 is str"),
    ([[{"role": None, "content": "a"}]], "row 0: Rollout takes"),
])
def test_starting_messages_without_a_role_are_refused(qwen, start, match):
    """They were kept in the history but dropped from the ids (or a ValueError from dict())."""
    with pytest.raises(TypeError, match=match):
        Rollout(start, tokenizer=qwen)


def test_add_messages_and_conversation_take_lists_of_messages(qwen):
    ro = Rollout([USER], tokenizer=qwen)
    before = snapshot(ro)
    with pytest.raises(TypeError, match="add_messages takes one list of message dicts per row, got str"):
        ro.add_messages("hello")
    with pytest.raises(TypeError, match="row 0: add_messages takes a list of message dicts with a str 'role' per row; message 1"):
        ro.add_messages([[{"role": "user", "content": "a"}, {"content": "b"}]])
    assert unchanged(ro, before)
    with pytest.raises(TypeError, match="row 0: Conversation takes a list of message dicts per row, got str"):
        Conversation("hello", tokenizer=qwen)
    c = Conversation(USER[0], tokenizer=qwen)  # one message dict is one message
    assert c.messages == USER


def test_extras_that_are_not_numbers_are_refused(qwen):
    ro = Rollout([USER], tokenizer=qwen)
    before = snapshot(ro)
    with pytest.raises(TypeError, match=r"row 0: extras\['e'\] must be a tensor \(or nested lists of numbers\), got list"):
        ro.add_response([enc(qwen, "a" + EOT)], extras={"e": [["x", "y"]]})
    assert unchanged(ro, before)


def test_fork_takes_a_message_count(qwen):
    c = Conversation(USER, tokenizer=qwen)
    c.add_response(enc(qwen, "Zehn." + EOT))
    for bad in (True, "1", 1.0, 0, 3):
        with pytest.raises(ValueError, match=r"fork: n_messages must be in \[1, 2\] \(an int\)"):
            c.fork(bad)
    assert c.fork(2).messages == c.messages


def test_tool_messages_before_any_assistant_turn(qwen):
    tool = {"role": "tool", "content": '{"time": "10:00"}'}
    ro = Rollout([[tool], USER], tokenizer=qwen)
    ro.add_messages([[tool]], rows=[1])
    ro.add_response([enc(qwen, "Zehn Uhr." + EOT)] * 2)
    ro.add_messages([[tool], [tool]])
    chats = ro.history.to_chats()
    assert chats[0] == [tool, {"role": "assistant", "content": "Zehn Uhr."}, tool]
    assert chats[1] == USER + [tool, {"role": "assistant", "content": "Zehn Uhr."}, tool]
    for r in range(2):
        fresh = qwen.apply_chat_template(chats[r], add_generation_prompt=True)["input_ids"]
        assert ro.prompt_ids()[r].tolist() == fresh
    assert ro.drift() == [None, None]


def test_an_empty_rollout(qwen):
    ro = Rollout([], tokenizer=qwen)
    assert len(ro) == 0 and ro.prompt_ids() == [] and ro.drift() == []
    ro.add_response([])
    assert ro.tokens().batch_size == torch.Size([0, -1]) and ro.tokens(per_turn=True).batch_size == torch.Size([0, -1])


# -- a response cut before its end of turn, and what may follow a response ---------------------------
TEXTS = ("Es ist zehn Uhr. 🫠 Gute Nacht — 晚安", "<tool_call>\n{\"name\": \"clock\", \"arguments\": {\"tz\": \"Zürich\"}}\n</tool_call>")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.sampled_from(TEXTS), cut=st.floats(0.01, 0.99))
def test_a_cut_response_and_its_continuation_are_one_message(qwen, text, cut):
    """A response cut anywhere (inside a multi-token character too) and continued: the ids are
    kept verbatim, the history holds one message, parsed from the whole text, and a fresh render
    gives the same ids. Before, the history held two assistant messages (the first one cut, with
    U+FFFD for a split character) and drift() flagged every such row."""
    ids = enc(qwen, text + EOT)
    k = max(1, min(len(ids) - 1, int(cut * len(ids))))
    whole = Rollout([USER], tokenizer=qwen)
    whole.add_response([ids])
    ro = Rollout([USER], tokenizer=qwen)
    prompts = [ro.prompt_ids()[0].clone()]
    ro.add_response([ids[:k]], logprobs=[-torch.arange(k, dtype=torch.float32)])
    prompts.append(ro.prompt_ids()[0].clone())  # the policy goes on from its own cut text
    ro.add_response([ids[k:]], logprobs=[-torch.arange(len(ids) - k, dtype=torch.float32)])
    assert ro.history.to_chats() == whole.history.to_chats()
    row = ro.tokens()[0]
    assert torch.equal(row["input_ids"], whole.tokens()[0]["input_ids"])
    assert torch.equal(row["input_ids"][row["assistant_masks"].bool()], ids)
    assert row["logprobs"][row["assistant_masks"].bool()].tolist() == \
        (-torch.cat([torch.arange(k), torch.arange(len(ids) - k)]).float()).tolist()
    per_turn = ro.tokens(per_turn=True)
    for t, p in enumerate(prompts):  # one row per sampled piece: the prompt it was given, then its ids
        assert torch.equal(per_turn[t]["input_ids"][:len(p)], p)
        assert int(per_turn[t]["assistant_masks"].sum()) == len(per_turn[t]["input_ids"]) - len(p)
    ro.add_messages([[{"role": "user", "content": "Danke"}]])
    whole.add_messages([[{"role": "user", "content": "Danke"}]])
    assert torch.equal(ro.prompt_ids()[0], whole.prompt_ids()[0])
    assert ro.drift() == [None]


def test_a_cut_response_then_new_messages(qwen):
    ro = Rollout([USER], tokenizer=qwen)
    start = len(ro.prompt_ids()[0])
    emoji = enc(qwen, "🫠")
    assert len(emoji) == 3  # one character, three byte-level ids
    ro.add_response([emoji[:2]])  # cut inside the character
    assert ro.history.to_chats()[0][-1] == {"role": "assistant", "content": "\ufffd", "is_complete": False}
    ro.add_messages([[{"role": "user", "content": "weiter"}]])
    ids = ro.prompt_ids()[0]
    assert torch.equal(ids[start:start + 2], emoji[:2])  # kept verbatim
    assert qwen.decode(ids[start + 2:]).startswith(EOT)  # the template's end of turn closes the turn
    assert ro.drift() == [start]  # a fresh render of U+FFFD is other ids: reported where they differ


def test_a_response_after_a_complete_turn_needs_messages_first(qwen):
    ro = Rollout([USER, USER], tokenizer=qwen)
    done = enc(qwen, "Zehn." + EOT)
    ro.add_response([done, done])
    before = snapshot(ro)
    with pytest.raises(ValueError, match="row 0: its last response ended its turn and no message was added since"):
        ro.add_response([done, done])  # was: kept right after the EOT, as a second assistant message
    assert unchanged(ro, before)
    ro.add_messages([[]], rows=[1])  # another assistant turn: the template's generation prompt
    ro.add_response([done], rows=[1])
    chat = ro.history.to_chats()[1]
    assert [m["role"] for m in chat] == ["user", "assistant", "assistant"]
    full = qwen.apply_chat_template(chat)["input_ids"]
    assert full[:len(ro.prompt_ids()[1])] == ro.prompt_ids()[1].tolist() and ro.drift() == [None, None]


def test_add_messages_the_template_refuses_leaves_every_row_as_it_was(qwen):
    ro = Rollout([USER, USER], tokenizer=qwen)
    ro.add_response([enc(qwen, "Zehn." + EOT)] * 2)
    before = snapshot(ro)
    good, bad = [{"role": "user", "content": "ok"}], [{"role": "user"}]  # Qwen's template needs a content
    with pytest.raises(ValueError, match="row 1: the chat template cannot render this conversation"):
        ro.add_messages([good, bad])
    assert unchanged(ro, before)  # was: row 0 grew, and row 1 kept the message but not its ids
    ro.add_messages([good, good])
    assert ro.drift() == [None, None]


def test_conversation_rollback_after_a_cut_response(qwen):
    c = Conversation(USER, tokenizer=qwen)
    ids = enc(qwen, "Es ist zehn Uhr." + EOT)
    c.add_response(ids[:3])
    mark = c.checkpoint()
    c.add_messages([{"role": "user", "content": "weiter"}])
    c.rollback(mark)  # the request failed: the cut response may still be continued
    c.add_response(ids[3:])
    assert c.messages[-1] == {"role": "assistant", "content": "Es ist zehn Uhr."}
    assert [t[0] for t in c.turns] == [1, 1]
    with pytest.raises(ValueError, match="a turn was generated after this checkpoint"):
        c.rollback(mark)
    with pytest.raises(TypeError, match="rollback takes a mark from checkpoint"):
        c.rollback((1, 1, 0, torch.zeros(0)))
    f = c.fork(2)
    assert f.messages == c.messages and torch.equal(f.tokens()["input_ids"], c.tokens()["input_ids"])


def test_qwen3_cut_thinking_continued_then_rewritten_keeps_per_turn_rows(qwen):
    """Qwen3 drops earlier <think> blocks from a render: the kept ids are the ones used, and
    each per-turn row is exactly the prompt the policy was given, then its ids."""
    from pathlib import Path

    from chatdata.matrix.tito import family_tokenizer

    src = (Path(__file__).resolve().parents[1] / "data" / "templates" / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    tok = family_tokenizer(qwen, [src])
    ro = Rollout([[{"role": "user", "content": "2+2?"}]], tokenizer=tok, chat_template=src)
    pieces = [enc(tok, "<think>\nEa"), enc(tok, "sy, vier.\n</think>\n\n4<|im_end|>"), enc(tok, "<think>\nx\n</think>\n\n6<|im_end|>")]
    prompts = []
    for k, ids in enumerate(pieces):
        if k == 2:
            ro.add_messages([[{"role": "user", "content": "3+3?"}]])
        prompts.append(ro.prompt_ids()[0].clone())
        ro.add_response([ids], logprobs=[torch.full((len(ids),), -0.5)])
    chat = ro.history.to_chats()[0]
    assert chat[1] == {"role": "assistant", "content": "4", "reasoning_content": "Easy, vier."}  # one message
    assert chat[3] == {"role": "assistant", "content": "6", "reasoning_content": "x"}
    rows = ro.tokens(per_turn=True)
    assert rows.batch_size[0] == 3
    for t, (p, ids) in enumerate(zip(prompts, pieces)):
        row = rows[t]
        assert torch.equal(row["input_ids"], torch.cat([p, ids]))
        assert torch.equal(row["assistant_masks"].bool(), torch.arange(len(row["input_ids"])) >= len(p))
        assert torch.equal(row["logprobs"][len(p):], torch.full((len(ids),), -0.5))
    assert ro.drift()[0] is not None  # the earlier <think> is gone from a fresh render: reported


def test_tokens_flags_must_be_booleans(qwen):
    ro = Rollout([USER], tokenizer=qwen)
    ro.add_response([enc(qwen, "a" + EOT)], extras={"w": [torch.ones(2, requires_grad=True)]})
    with pytest.raises(TypeError, match="tokens: per_turn must be True or False, got 'no'"):
        ro.tokens(per_turn="no")  # was: a per-turn token set (a non-empty string is true)
    with pytest.raises(TypeError, match="tokens: compact must be True or False, got None"):
        ro.tokens(compact=None)
    td = ro.tokens(per_turn=np.bool_(True))
    assert not td[0]["w"].requires_grad  # extras keep their values, not their autograd graph


def test_logprobs_as_one_2d_tensor(qwen):
    ro = Rollout([USER, USER], tokenizer=qwen)
    a, b = enc(qwen, "Acht." + EOT), enc(qwen, "Vier." + EOT)
    assert len(a) == len(b)
    lp = -torch.rand(2, len(a))
    ro.add_response([a, b], logprobs=lp)  # one row of logprobs per response, all of its length
    for r in range(2):
        row = ro.tokens()[r]
        assert torch.equal(row["logprobs"][row["assistant_masks"].bool()], lp[r])
    ro.add_messages([USER, USER])
    with pytest.raises(ValueError, match=r"row 1: logprobs have shape \(4,\) but the response has 2 ids"):
        ro.add_response([a, b[:2]], logprobs=torch.zeros(2, 4))  # padded: refused, not kept


def test_a_tokenizer_name_is_not_a_tokenizer(qwen, tmp_path):
    """A str has .encode: Rollout failed inside it ('add_special_tokens' is an invalid keyword)."""
    for bad in ("Qwen/Qwen2.5-7B-Instruct", tmp_path):
        with pytest.raises(TypeError, match="Rollout needs the policy's tokenizer object .* got (str|PosixPath)"):
            Rollout([USER], tokenizer=bad)
        with pytest.raises(TypeError, match="tokenizer object"):
            Conversation(USER, tokenizer=bad)


@pytest.mark.parametrize("cut", [1, 3, 15])
def test_mistral_tool_call_cut_and_continued_is_one_call(mistral, cut):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    ids = enc(mistral, '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123def"}]</s>')
    ro = Rollout([[{"role": "user", "content": "Météo à Paris? ☔"}]], tokenizer=mistral, tools=tools)
    ro.add_response([ids[:cut]])
    ro.add_response([ids[cut:]])
    assert ro.history.to_chats()[0][-1]["tool_calls"] == [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}, "id": "abc123def"}]
    ro.add_messages([[{"role": "tool", "content": "pluie, 12°C", "tool_call_id": "abc123def"}]])
    assert ro.drift() == [None]


def test_conversation_rollback_refuses_a_stale_or_foreign_mark(qwen):
    """A mark whose messages an earlier rollback had replaced (m2 after rollback(m1) and new
    messages of the same count), or a mark of another conversation, was accepted: it set the
    pending ids of the old messages, so prompt_ids() said 'AAAA' while messages said 'BBBB'."""
    c = Conversation(USER, tokenizer=qwen)
    c.add_response(enc(qwen, "Hallo." + EOT))
    m1 = c.checkpoint()
    c.add_messages([{"role": "user", "content": "AAAA"}])
    m2 = c.checkpoint()
    c.rollback(m1)
    c.add_messages([{"role": "user", "content": "BBBB"}])
    before = c.prompt_ids().clone()
    with pytest.raises(ValueError, match="rolled back and replaced since"):
        c.rollback(m2)
    assert torch.equal(c.prompt_ids(), before) and c.messages[-1]["content"] == "BBBB"  # refused: unchanged
    other = Conversation(USER, tokenizer=qwen)
    with pytest.raises(ValueError, match="another conversation's"):
        other.rollback(m1)
    c.rollback(m1)  # the older mark still holds: its messages are all there
    c.add_messages([{"role": "user", "content": "CCCC"}])
    assert "CCCC" in qwen.decode(c.prompt_ids()) and "BBBB" not in qwen.decode(c.prompt_ids())
