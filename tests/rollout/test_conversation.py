"""``Conversation``: one rollout row that forks at a message index and rolls a request back."""
import pytest
import torch

from chatdata.rollout import Conversation

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}]


def enc(tok, text):
    return torch.tensor(tok.encode(text, add_special_tokens=False))


def fresh(tok, chat, gen=True):
    return tok.apply_chat_template(chat, tools=TOOLS, add_generation_prompt=gen, tokenize=True, return_dict=True)["input_ids"]


@pytest.fixture()
def chat_with_turns(qwen):
    c = Conversation([{"role": "system", "content": "Sois bref."}, {"role": "user", "content": "Météo à Zürich?"}],
                     tokenizer=qwen, tools=TOOLS)
    call = enc(qwen, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call><|im_end|>')
    odd = torch.tensor([qwen.convert_tokens_to_ids(qwen.tokenize(ch))[0] for ch in "Il pleut"] + [151645])  # non-canonical
    msg = c.add_response(call, -torch.rand(len(call)))
    msg["tool_calls"][0]["id"] = "call_1"  # what a server adds; a fork keeps the same dict
    c.add_messages([{"role": "tool", "content": "12°C ☔", "tool_call_id": "call_1"}])
    c.add_response(odd, -torch.rand(len(odd)))
    c.add_messages([{"role": "user", "content": "Et demain?"}])
    c.add_response(enc(qwen, "Soleil.<|im_end|>"))
    return c


def test_turns_and_tokens(chat_with_turns):
    c = chat_with_turns
    t = c.tokens()
    assert [a for a, _, _ in c.turns] == [2, 4, 6] and c.committed == len(t["input_ids"])
    for k, (_, s, e) in enumerate(c.turns):
        assert t["assistant_masks"][s:e].all() and t["logprobs"][s:e].isnan().all() == (k == 2)  # the last had none: NaN, no value
    assert int(t["assistant_masks"].sum()) == sum(e - s for _, s, e in c.turns)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7])
def test_fork_shares_every_kept_turn_id_for_id(chat_with_turns, qwen, n):
    c = chat_with_turns
    f = c.fork(n)
    assert f.messages == c.messages[:n]
    kept = [t for t in c.turns if t[0] < n]
    end = kept[-1][2] if kept else 0
    assert torch.equal(f.prompt_ids()[:end], c.prompt_ids()[:end])  # the non-canonical ids stay verbatim
    torch.testing.assert_close(f.tokens()["logprobs"], c.tokens()["logprobs"][:end], rtol=0, atol=0, equal_nan=True)
    for a, _, _ in kept:
        assert f.messages[a] is c.messages[a]  # the same dicts (the server's call ids stay)
    if c.messages[n - 1]["role"] != "assistant":  # ends with a prompt: the text a fresh render ends with
        tail = qwen.decode(f.prompt_ids()[end:])
        assert tail and qwen.decode(fresh(qwen, c.messages[:n])).endswith(tail)
    g = f.fork(len(f.messages))  # a fork of a fork
    assert torch.equal(g.tokens()["input_ids"], f.tokens()["input_ids"])


def test_rollback_undoes_a_request(chat_with_turns):
    c = chat_with_turns
    c.add_messages([{"role": "user", "content": "one"}])
    before, n = c.prompt_ids().clone(), len(c.messages)
    mark = c.checkpoint()
    c.add_messages([{"role": "tool", "content": "two"}, {"role": "user", "content": "three"}])
    assert len(c.messages) == n + 2
    c.rollback(mark)
    assert len(c.messages) == n and torch.equal(c.prompt_ids(), before)
    c.add_messages([{"role": "user", "content": "four"}])
    c.add_response(torch.tensor([9, 151645]))
    with pytest.raises(ValueError, match="generated after this checkpoint"):
        c.rollback(mark)
    for bad in (0, 99):
        with pytest.raises(ValueError, match=r"n_messages must be in \[1, "):
            c.fork(bad)
