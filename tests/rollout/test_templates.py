"""Every template of tests/data/templates: incremental ids equal the full tokenization on
prefix-preserving templates; on the others drift is reported, never raised.

The tokenizer is the packaged Qwen2.5 one with each template's turn markers (``<|...|>``,
``<｜...｜>``, ``<think>``/``</think>`` and its end-of-turn text) added as special tokens, as the
family's own tokenizer has them: then a boundary between kept ids and template text is a token boundary in both.
"""
from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import pytest
import torch

from chatdata.rollout import Rollout, template_facts
from chatdata.templates import TemplateError
from chatdata.templates.parsers import parse_response, parser_for_template

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "templates"))
from template_paths import template_files  # noqa: E402

FILES = template_files()
CONV = [{"role": "system", "content": "Be brief. ☀"}, {"role": "user", "content": "Hi — ça va? 你好"},
        {"role": "assistant", "content": "Très bien, merci!"}, {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4."}, {"role": "user", "content": "Bye"},
        {"role": "assistant", "content": "Au revoir 👋"}]
_PIPES = re.compile(r"<\|[^<>|\s]{1,40}\|>|<｜[^<>｜]{1,40}｜>")


def hf_render(tok, chat, src, **kw):
    return tok.apply_chat_template(chat, chat_template=src, tokenize=False, **kw)


def renderable(tok, src):
    for chat in (CONV, CONV[1:]):
        try:
            hf_render(tok, chat, src)
            return chat
        except Exception:  # noqa: BLE001 - transformers refuses the conversation
            continue
    return None


@pytest.fixture(scope="module")
def family_tok(qwen):
    markers = {"<think>", "</think>"}
    for path in FILES:
        src = path.read_text(encoding="utf-8")
        markers |= set(_PIPES.findall(src))
        markers.add(template_facts(src, tokenizer=qwen).eot)
    tok = copy.deepcopy(qwen)
    tok.add_special_tokens({"additional_special_tokens": sorted(m for m in markers if m)})
    return tok


def play(tok, src, chat):
    """Run the conversation through a Rollout: each assistant turn is 'generated' as the
    canonical ids of the text the template writes for it."""
    facts = template_facts(src, tokenizer=tok)
    first = next(i for i, m in enumerate(chat) if m["role"] == "assistant")
    ro = Rollout([chat[:first]], tokenizer=tok, chat_template=src)
    k = first
    while k < len(chat):
        before = hf_render(tok, chat[:k], src, add_generation_prompt=True)
        after = hf_render(tok, chat[:k + 1], src)
        text = after[len(before):] if after.startswith(before) else chat[k]["content"] + facts.eot
        if facts.eot and facts.after_eot and text.endswith(facts.after_eot):  # the model stops at its EOT
            text = text[: len(text) - len(facts.after_eot)]
        ro.add_response([torch.tensor(tok.encode(text, add_special_tokens=False))])
        j = k + 1
        while j < len(chat) and chat[j]["role"] != "assistant":
            j += 1
        if j > k + 1:
            ro.add_messages([chat[k + 1:j]])
        k = j
    return ro, facts


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_template(family_tok, path):
    tok, src = family_tok, path.read_text(encoding="utf-8")
    chat = renderable(tok, src)
    if chat is None:  # transformers cannot render it either: a clear error, naming the row
        with pytest.raises((ValueError, TemplateError), match="row 0"):
            Rollout([CONV[:2]], tokenizer=tok, chat_template=src)
        return
    ro, facts = play(tok, src, chat)
    drift = ro.drift()  # never raises
    assert len(drift) == 1
    kept = ro.tokens()[0]["input_ids"].tolist()
    fresh = tok.apply_chat_template(ro.history.to_chats()[0], chat_template=src, tokenize=True)["input_ids"]
    if facts.prefix_preserving:
        assert drift == [None]
        assert fresh[: len(kept)] == kept and tok.decode(fresh[len(kept):]) in ("", facts.after_eot)
    else:
        assert drift == [None] or (isinstance(drift[0], int) and 0 <= drift[0] <= len(kept))


def test_expected_families_are_prefix_preserving(qwen):
    facts = {p.stem: template_facts(p.read_text(encoding="utf-8"), tokenizer=qwen) for p in FILES}
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
