"""Token in, token out on templates that rewrite the past (they drop earlier reasoning, move the
system prompt, re-render tool calls), with tool calls and user turns between the responses, next
to one that only appends (Qwen2.5):

* the kept ids hold every response verbatim, the mask exactly on them, the logprobs aligned;
* the text added between two turns is what a fresh render of the rollout's history writes after
  the turn, whatever the template did to the turns before it (docs/rollout.md, "The rule for the
  new text");
* ``drift()`` is None exactly when the kept ids equal a fresh tokenization, and reports the
  rewrite otherwise, never raising;
* each per-turn row is the prompt the policy was given, then its ids.

Each response is the text the template itself writes for that assistant turn, so a template that
only appends gives back a fresh tokenization id for id.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from chatdata.matrix.tito import family_tokenizer
from chatdata.rollout import Rollout, template_facts
from chatdata.templates import render_chats
from chatdata.templates.profile import common_prefix_len

TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "templates"
TOOL = {"type": "function", "function": {"name": "lookup", "description": "Look a word up.",
                                         "parameters": {"type": "object", "properties": {"word": {"type": "string"}},
                                                        "required": ["word"]}}}
CALL = {"type": "function", "id": "call0TIDE", "function": {"name": "lookup", "arguments": {"word": "tide"}}}
START = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is a tide?"}]
# (the assistant turn the policy "generates", the messages appended after it)
TURNS = [({"role": "assistant", "content": "", "reasoning_content": "I should look it up.", "tool_calls": [CALL]},
          [{"role": "tool", "content": "the rise and fall of the sea", "tool_call_id": "call0TIDE"}]),
         ({"role": "assistant", "content": "The sea rising and falling.", "reasoning_content": "The tool says so."},
          [{"role": "user", "content": "Why does it happen?"}]),
         ({"role": "assistant", "content": "The moon pulls the water.", "reasoning_content": "Gravity."}, [])]

# chatdata's parsers do not read gpt-oss's and MiniMax-M2's tool calls back (docs/rollout.md): a user turn there
PLAIN = [({"role": "assistant", "content": "Water rising.", "reasoning_content": "Easy."},
          [{"role": "user", "content": "More?"}]), *TURNS[1:]]
REWRITING = ["Qwen-Qwen3-0.6B", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "microsoft-Phi-3.5-mini-instruct",
             "mistralai-Mistral-Nemo-Instruct-2407", "zai-org-GLM-4.5", "openai-gpt-oss-120b", "MiniMax-M2"]
NO_TOOL_PARSER = ("openai-gpt-oss-120b", "MiniMax-M2")


def _render(src, tok, chat, gen):
    return render_chats([chat], src, tools=[TOOL], tokenizer=tok, add_generation_prompt=gen)[0]


def _turn_text(src, tok, chat, facts):
    """What the template writes for the last message of ``chat`` after its generation prompt."""
    before, after = _render(src, tok, chat[:-1], True), _render(src, tok, chat, False)
    text = after[common_prefix_len(before, after):]  # (R1 distills open the prompt with <think>, not the turn)
    if facts.after_eot and text.endswith(facts.eot + facts.after_eot):
        text = text[: len(text) - len(facts.after_eot)]
    return text


@pytest.mark.parametrize("name", ["Qwen-Qwen2.5-7B-Instruct", *REWRITING])
def test_kept_ids_new_text_drift_and_per_turn_rows(qwen, name):
    src = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
    tok = family_tokenizer(qwen, [src])
    facts = template_facts(src, tokenizer=tok, tools=[TOOL])
    assert facts.prefix_preserving == (name not in REWRITING)
    ro = Rollout([START], tokenizer=tok, chat_template=src, tools=[TOOL])
    known, prompts, responses, logprobs = list(START), [], [], []
    turns = PLAIN if name in NO_TOOL_PARSER else TURNS
    for k, (assistant, appended) in enumerate(turns):
        ids = torch.tensor(tok.encode(_turn_text(src, tok, known + [assistant], facts), add_special_tokens=False))
        prompts.append(ro.prompt_ids()[0].clone())
        responses.append(ids)
        logprobs.append(-torch.rand(ids.numel(), generator=torch.Generator().manual_seed(k)))
        ro.add_response([ids], logprobs=[logprobs[-1]])
        known += [assistant] + appended
        if appended:
            before = prompts[-1].numel() + ids.numel()
            ro.add_messages([appended])
            new = tok.decode(ro.prompt_ids()[0][before:])
            fresh = _render(src, tok, ro.history.to_chats()[0], True)
            assert new and fresh.endswith(new), (k, new, fresh[-len(new) - 40:])
            assert torch.equal(ro.prompt_ids()[0][:before], torch.cat([prompts[-1], ids]))  # the past is kept
    row = ro.tokens()[0]
    kept, mask, lp = row["input_ids"], row["assistant_masks"].bool(), row["logprobs"]
    assert torch.equal(kept[mask], torch.cat(responses)) and torch.equal(lp[mask], torch.cat(logprobs))
    assert not lp[~mask].any()
    for prompt, ids in zip(prompts, responses):  # each response verbatim right after the prompt it was given
        assert torch.equal(kept[prompt.numel():prompt.numel() + ids.numel()], ids)
    fresh_ids = tok.apply_chat_template(ro.history.to_chats()[0], chat_template=src, tools=[TOOL], tokenize=True)
    fresh_ids = list(fresh_ids["input_ids"] if hasattr(fresh_ids, "keys") else fresh_ids)
    same = fresh_ids[:kept.numel()] == kept.tolist() and tok.decode(fresh_ids[kept.numel():]) in ("", facts.after_eot)
    drift = ro.drift()[0]
    assert (drift is None) == same, (drift, same)
    assert same == (name not in REWRITING)  # every rewriting template here changes the past of this chat
    if not same:  # drift says where a fresh tokenization first differs
        assert drift == next((i for i, (a, b) in enumerate(zip(kept.tolist(), fresh_ids)) if a != b),
                             min(kept.numel(), len(fresh_ids)))
    per_turn = ro.tokens(per_turn=True)
    assert len(per_turn) == len(turns)
    for t, (prompt, ids) in enumerate(zip(prompts, responses)):
        assert torch.equal(per_turn[t]["input_ids"], torch.cat([prompt, ids]))
        assert per_turn[t]["assistant_masks"].bool().tolist() == [False] * prompt.numel() + [True] * ids.numel()
