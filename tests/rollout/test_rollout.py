"""Rollout with the real Qwen2.5 tokenizer and template: kept ids, masks, logprobs, history,
drift, rows finishing at different times, persistence, and clear errors."""
from __future__ import annotations

import json

import pytest
import torch

from chatdata import History, load_memmap
from chatdata.data import sample_tools
from chatdata.rollout import Rollout, template_facts

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich", "unit": "°C"}}\n</tool_call><|im_end|>'
ANSWER = "Il fait 21 °C ☀️ à Zürich — 晴天.<|im_end|>"
LAST = "Gern geschehen 🤝<|im_end|>"
START = [{"role": "system", "content": "Réponds brièvement. 🌍"}, {"role": "user", "content": "Quel temps à Zürich? 天气"}]
TOOL = {"role": "tool", "content": json.dumps({"temp": 21, "sky": "☀️"}, ensure_ascii=False)}
USER = {"role": "user", "content": "Danke! Und morgen — 明天?"}


def enc(tok, text):
    return torch.tensor(tok.encode(text, add_special_tokens=False))


def fresh_ids(tok, chat, tools=None, gen=False):
    return tok.apply_chat_template(chat, tools=tools, add_generation_prompt=gen, tokenize=True)["input_ids"]


def test_multi_turn_tool_call_unicode_matches_full_tokenization(qwen):
    tools = sample_tools()
    ro = Rollout(History.from_chats([START, START[1:]]), tokenizer=qwen, tools=tools)
    assert ro.prompt_ids()[0].tolist() == fresh_ids(qwen, START, tools, gen=True)
    responses = [enc(qwen, CALL), enc(qwen, ANSWER), enc(qwen, LAST)]
    lps = [-torch.rand(len(r)) for r in responses]
    ro.add_response([responses[0]], logprobs=[lps[0]], rows=[0])
    ro.add_messages([[TOOL]], rows=[0])
    ro.add_response([responses[1]], logprobs=[lps[1]], rows=[0])
    ro.add_messages([[USER]], rows=[0])
    assert ro.prompt_ids()[0].tolist() == fresh_ids(qwen, ro.history.to_chats()[0], tools, gen=True)
    ro.add_response([responses[2], enc(qwen, "Bonjour!<|im_end|>")], logprobs=[lps[2], None])
    expected = START + [
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "°C"}}}]},
        TOOL, {"role": "assistant", "content": ANSWER[:-10]}, USER, {"role": "assistant", "content": LAST[:-10]}]
    chats = ro.history.to_chats()
    assert chats[0] == expected
    assert chats[1] == START[1:] + [{"role": "assistant", "content": "Bonjour!"}]
    row = ro.tokens()[0]
    ids, mask, lp = row["input_ids"], row["assistant_masks"], row["logprobs"]
    full = fresh_ids(qwen, expected, tools)
    assert full[: len(ids)] == ids.tolist() and qwen.decode(full[len(ids):]) == "\n"  # Qwen's newline after EOT
    assert torch.equal(ids[mask.bool()], torch.cat(responses))  # masks: exactly the generated ids
    assert int(mask.sum()) == sum(len(r) for r in responses)
    starts = mask.diff(prepend=torch.zeros(1, dtype=mask.dtype)).eq(1).nonzero().flatten().tolist()
    for s, r in zip(starts, responses):  # each response sits verbatim where its mask run starts
        assert torch.equal(ids[s:s + len(r)], r)
    assert torch.equal(lp[mask.bool()], torch.cat(lps)) and not lp[~mask.bool()].any()
    assert ro.drift() == [None, None]


def test_non_canonical_response_kept_verbatim_and_reported(qwen):
    chat = [{"role": "user", "content": "Say hi"}]
    ro = Rollout(History.from_chats([chat, chat]), tokenizer=qwen)
    start = len(ro.prompt_ids()[0])
    per_char = torch.tensor([qwen.convert_tokens_to_ids(qwen.tokenize(c))[0] for c in "Hello there"]
                            + [qwen.convert_tokens_to_ids("<|im_end|>")])
    assert qwen.decode(per_char) == "Hello there<|im_end|>"
    ro.add_response([per_char, enc(qwen, "Hello there<|im_end|>")])
    assert torch.equal(ro.prompt_ids()[0][start:], per_char)
    drift = ro.drift()
    assert drift[1] is None and drift[0] is not None and start <= drift[0] < start + len(per_char)
    ro.add_messages([[{"role": "user", "content": "again"}]] * 2)
    assert ro.drift()[1] is None and ro.drift()[0] == drift[0]
    assert ro.history.to_chats()[0] == ro.history.to_chats()[1]


def test_tool_call_json_the_template_rewrites_is_kept_and_reported(qwen):
    ro = Rollout([[{"role": "user", "content": "weather?"}]], tokenizer=qwen)
    start = len(ro.prompt_ids()[0])
    odd = enc(qwen, '<tool_call>\n{"arguments": {"city": "Oslo"}, "name": "get_weather"}\n</tool_call><|im_end|>')
    ro.add_response([odd])
    assert ro.history.to_chats()[0][-1]["tool_calls"] == [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]
    ro.add_messages([[{"role": "tool", "content": "rain"}]])
    ids = ro.prompt_ids()[0]
    assert torch.equal(ids[start:start + len(odd)], odd)  # the model's own key order, verbatim
    assert qwen.decode(ids[start + len(odd):]) == ("\n<|im_start|>user\n<tool_response>\nrain\n</tool_response>"
                                                  "<|im_end|>\n<|im_start|>assistant\n")
    assert ro.drift()[0] is not None and ro.drift()[0] >= start


def test_rows_finish_at_different_times(qwen):
    chats = [[{"role": "user", "content": f"q{i}"}] for i in range(3)]
    ro = Rollout(chats, tokenizer=qwen)
    before = [t.clone() for t in ro.prompt_ids()]
    ro.add_response([enc(qwen, "a<|im_end|>")] * 3)
    ro.add_messages([[{"role": "user", "content": "more"}]], rows=[2])
    ro.add_response([enc(qwen, "b<|im_end|>")], rows=torch.tensor([False, False, True]))
    lengths = [len(c) for c in ro.history.to_chats()]
    assert lengths == [2, 2, 4]
    assert torch.equal(ro.prompt_ids(rows=[0])[0][: len(before[0])], before[0])
    assert ro.drift() == [None, None, None]
    assert ro.tokens().batch_size == torch.Size([3, -1])


def test_truncated_response_gets_the_template_eot(qwen):
    ro = Rollout([[{"role": "user", "content": "Count"}]], tokenizer=qwen)
    ro.add_response([enc(qwen, "one, two, thr")])
    assert ro.history.to_chats()[0][-1] == {"role": "assistant", "content": "one, two, thr", "is_complete": False}
    ro.add_messages([[{"role": "user", "content": "go on"}]])
    assert "<|im_end|>" in qwen.decode(ro.prompt_ids()[0][-15:])
    assert ro.drift() == [None]


def test_malformed_tool_call_is_kept_as_content(qwen):
    ro = Rollout([[{"role": "user", "content": "call"}]], tokenizer=qwen)
    bad = "<tool_call>\n{not json}\n</tool_call><|im_end|>"
    ro.add_response([enc(qwen, bad)])
    assert ro.history.to_chats()[0][-1] == {"role": "assistant", "content": bad[:-10]}
    ro.add_messages([[{"role": "user", "content": "?"}]])
    assert ro.drift() == [None]


def test_tokens_memmap_round_trip(qwen, tmp_path):
    ro = Rollout([[{"role": "user", "content": "hi"}], [{"role": "user", "content": "yo ✓"}]], tokenizer=qwen)
    ro.add_response([enc(qwen, "hello<|im_end|>"), enc(qwen, "hey ✓<|im_end|>")],
                    logprobs=[torch.tensor([-1.0, -2.0]), None])
    td = ro.tokens()
    td.memmap(tmp_path / "tokens")
    back = load_memmap(tmp_path / "tokens")
    assert back.batch_size == torch.Size([2, -1])
    for i in range(2):
        for key in ("input_ids", "assistant_masks", "logprobs"):
            torch.testing.assert_close(back[i][key], td[i][key], rtol=0, atol=0, equal_nan=True)
    assert back[0]["input_ids"].dtype == torch.int64 and back[0]["logprobs"].dtype == torch.float32


def test_clear_errors_name_the_row(qwen):
    ro = Rollout([[{"role": "user", "content": "a"}]] * 2, tokenizer=qwen)
    before = [t.clone() for t in ro.prompt_ids()]
    ok = enc(qwen, "x<|im_end|>")
    with pytest.raises(ValueError, match="row 1: the response is empty"):
        ro.add_response([ok, torch.tensor([], dtype=torch.int64)])
    with pytest.raises(ValueError, match="row 1: a response must be a 1-D"):
        ro.add_response([ok, torch.ones(2, 2, dtype=torch.int64)])
    with pytest.raises(ValueError, match="row 0: logprobs have shape"):
        ro.add_response([ok, ok], logprobs=[torch.zeros(5), None])
    with pytest.raises(IndexError, match="row 5 does not exist"):
        ro.add_messages([[{"role": "user", "content": "b"}]], rows=[5])
    with pytest.raises(ValueError, match="got 1 items for 2 rows"):
        ro.add_response([ok])
    with pytest.raises(ValueError, match="padding would be kept"):
        ro.add_response(torch.ones(2, 3, dtype=torch.int64))
    with pytest.raises(TypeError, match="row 0: response ids must be integers"):
        ro.add_response([ok, torch.ones(2)], rows=[1, 0])
    with pytest.raises(TypeError, match="row 0"):
        ro.add_messages([["not a message"]], rows=[0])
    assert [torch.equal(a, b) for a, b in zip(before, ro.prompt_ids())] == [True, True]  # nothing changed
    assert [len(c) for c in ro.history.to_chats()] == [1, 1]


def test_template_facts_cached_and_exposed(qwen):
    f = template_facts(qwen.chat_template, tokenizer=qwen)
    assert f is template_facts(qwen.chat_template, tokenizer=qwen)
    assert (f.eot, f.after_eot, f.prefix_preserving, f.fixed_base_delta) == ("<|im_end|>", "\n", True, True)
    assert f.as_dict()["generation_prompt"] == "<|im_start|>assistant\n"


def test_mistral_nemo_tool_calls_with_its_own_tokenizer(mistral):
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    start = [{"role": "user", "content": "Météo à Paris? ☔"}]
    ro = Rollout([start], tokenizer=mistral, tools=tools)
    assert ro.prompt_ids()[0].tolist() == fresh_ids(mistral, start, tools, gen=True)
    call = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "abc123def"}]</s>'
    ro.add_response([enc(mistral, call)])
    parsed = ro.history.to_chats()[0][-1]
    assert parsed["tool_calls"] == [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
                                     "id": "abc123def"}]
    ro.add_messages([[{"role": "tool", "content": "pluie, 12°C", "tool_call_id": "abc123def"}]])
    ro.add_response([enc(mistral, "Il pleut, 12 °C.</s>")])
    chat = ro.history.to_chats()[0]
    kept = ro.tokens()[0]["input_ids"].tolist()
    assert kept == fresh_ids(mistral, chat, tools)  # Mistral writes nothing after its EOT
    assert ro.drift() == [None]
    ro.add_messages([[{"role": "user", "content": "Et demain?"}]])  # the tools move to the last user turn
    assert ro.drift()[0] is not None and ro.prompt_ids()[0][: len(kept)].tolist() == kept


def test_int32_ids_and_logprobs_that_require_grad_are_kept(qwen):
    """The token buffers are written through numpy views: other id dtypes and autograd
    logprobs are copied in (detached), and growing past the first capacity keeps every id."""
    ro = Rollout([[{"role": "user", "content": "hi"}]], tokenizer=qwen)
    long_answer = enc(qwen, "word " * 400 + "<|im_end|>").to(torch.int32)  # past the 256-id first capacity
    lp = torch.full((len(long_answer),), -0.5, requires_grad=True)
    ro.add_response([long_answer], logprobs=[lp])
    row = ro.tokens()[0]
    mask = row["assistant_masks"].bool()
    assert torch.equal(row["input_ids"][mask], long_answer.to(torch.int64))
    assert torch.equal(row["logprobs"][mask], lp.detach()) and not row["logprobs"].requires_grad
    assert ro.drift() == [None]
