"""Property tests (hypothesis) with the Qwen2.5 tokenizer: random multi-row, multi-turn rollouts
with unicode, tool calls and rows finishing at different times."""
from __future__ import annotations

import json

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatdata.rollout import Rollout

BAD = ("<|", "|>", "<tool", "</tool", "<think", "</think")
text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30).filter(
    lambda s: not any(b in s for b in BAD) and s.strip() == s and s)
args = st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), st.one_of(st.integers(), text), max_size=2)
call = st.fixed_dictionaries({"name": st.from_regex(r"[a-z_]{1,8}", fullmatch=True), "arguments": args})


def response_text(content, calls):
    body = content
    for c in calls:
        body += ("\n" if body else "") + "<tool_call>\n" + json.dumps({"name": c["name"], "arguments": c["arguments"]}, ensure_ascii=False) + "\n</tool_call>"
    return body + "<|im_end|>"


@st.composite
def scripts(draw):
    n_rows = draw(st.integers(1, 3))
    starts = [[{"role": "user", "content": draw(text)}] for _ in range(n_rows)]
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        rows = sorted(draw(st.sets(st.integers(0, n_rows - 1), min_size=1)))
        resp = [(draw(text), draw(st.lists(call, max_size=2))) for _ in rows]
        follow = [[{"role": "tool", "content": draw(text)} for _ in c] or [{"role": "user", "content": draw(text)}]
                  for _, c in resp]
        steps.append((rows, resp, follow))
    return starts, steps


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(scripts())
def test_random_rollouts_keep_ids_and_render_the_same_text(qwen, script):
    starts, steps = script
    ro = Rollout(starts, tokenizer=qwen)
    generated = [[] for _ in starts]
    for rows, resp, follow in steps:
        ids = [torch.tensor(qwen.encode(response_text(c, k), add_special_tokens=False)) for c, k in resp]
        ro.add_response(ids, logprobs=[-torch.arange(len(t), dtype=torch.float32) for t in ids], rows=rows)
        for r, t in zip(rows, ids):
            generated[r].append(t)
        ro.add_messages(follow, rows=rows)
    drift = ro.drift()
    chats = ro.history.to_chats()
    for r, chat in enumerate(chats):
        row = ro.tokens()[r]
        ids, mask, lp = row["input_ids"], row["assistant_masks"].bool(), row["logprobs"]
        expected = torch.cat(generated[r]) if generated[r] else torch.zeros(0, dtype=torch.int64)
        assert torch.equal(ids[mask], expected)
        assert torch.equal(lp[mask], torch.cat([-torch.arange(len(t), dtype=torch.float32) for t in generated[r]])
                           if generated[r] else torch.zeros(0))
        rendered = qwen.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        # the same text, whatever the tokenization (decoded after the tokenizer's own NFC normalisation)
        assert qwen.decode(ids) == qwen.decode(qwen.encode(rendered, add_special_tokens=False))
        fresh = qwen.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)["input_ids"]
        assert (drift[r] is None) == (fresh == ids.tolist())
        for m in chat:
            if m["role"] == "assistant":
                assert "<tool_call>" not in m["content"] and "<|im_end|>" not in m["content"]
