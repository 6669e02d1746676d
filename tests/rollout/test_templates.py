"""Rollouts on real templates: which families preserve prefixes, and Qwen3 rewriting the past.

Every template of tests/data/templates is played through 3-turn rollouts and replayed failure
modes by the template matrix (tests/matrix; exact, or drift reported, never silent).
The tokenizer here is the packaged Qwen2.5 one with Qwen3's turn markers added as special tokens,
as the family's own tokenizer has them.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from chatdata.rollout import Rollout, template_facts
from chatdata.templates.parsers import parse_response, parser_for_template

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "templates"))
from template_paths import template_files  # noqa: E402

FILES = template_files()


@pytest.fixture(scope="module")
def family_tok(qwen):
    from chatdata.matrix.tito import family_tokenizer

    return family_tokenizer(qwen, [(Path(FILES[0]).parent / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")])


def test_expected_families_are_prefix_preserving(qwen):
    names = ("Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct", "google-gemma-2-2b-it", "Qwen-Qwen3-0.6B",
             "Qwen-QwQ-32B", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B")
    facts = {p.stem: template_facts(p.read_text(encoding="utf-8"), tokenizer=qwen) for p in FILES if p.stem in names}
    for name in ("Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct", "google-gemma-2-2b-it"):
        assert facts[name].prefix_preserving, name
    for name in ("Qwen-Qwen3-0.6B", "Qwen-QwQ-32B", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"):
        assert not facts[name].prefix_preserving and facts[name].first_rewrite, name


def test_qwen3_rewrites_the_past_and_keeps_the_used_ids(family_tok):
    src = (Path(FILES[0]).parent / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    tok = family_tok
    ro = Rollout([[{"role": "user", "content": "2+2?"}]], tokenizer=tok, chat_template=src)
    thought = torch.tensor(tok.encode("<think>\nEasy: four.\n</think>\n\n4<|im_end|>", add_special_tokens=False))
    ro.add_response([thought])
    assert ro.history.to_chats()[0][-1] == {"role": "assistant", "content": "4", "reasoning_content": "Easy: four."}
    assert ro.drift() == [None]  # the last turn keeps its reasoning in a fresh render
    start = len(ro.prompt_ids()[0]) - len(thought)
    ro.add_messages([[{"role": "user", "content": "3+3?"}]])
    ids = ro.prompt_ids()[0]
    assert torch.equal(ids[start:start + len(thought)], thought)  # the used ids, think included
    assert tok.decode(ids[start + len(thought):]) == "\n<|im_start|>user\n3+3?<|im_end|>\n<|im_start|>assistant\n"
    assert ro.drift()[0] is not None  # a fresh render drops the earlier <think>: reported, not raised
    prompt = parse_response("<think>\nx\n</think>\n\ny<|im_end|>", parser_for_template(src))
    assert prompt["reasoning_content"] == "x" and prompt["content"] == "y"
