"""A rollout encodes the template's new text with the tokenizer's verified tiktoken twin when it
has one: the kept ids, masks, parsed messages and drift reports are the same as with the
tokenizer alone (``CHATDATA_SPLICE=0``), on both real tokenizers, with tools, Unicode, text the
NFC normalizer changes, and responses cut inside a character."""
from __future__ import annotations

import json

import pytest
import torch

from chatdata.rollout import Rollout
from chatdata.templates.tiktoken_bpe import tiktoken_bpe_for

QWEN_TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Wetter — 天气",
                                                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def _script(name: str):
    """(start, responses (texts), follow-up messages) for the tokenizer ``name``."""
    if name == "qwen":
        eot = "<|im_end|>"
        call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>' + eot
    else:
        eot = "</s>"
        call = '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Zürich"}, "id": "abc123def"}]' + eot
    tool_msg = {"role": "tool", "content": json.dumps({"temp": 21, "sky": "☀️ 晴"}, ensure_ascii=False)}
    if name == "mistral":
        tool_msg["tool_call_id"] = "abc123def"
    start = [{"role": "user", "content": "Quel temps à Zürich? 天气 👋🏽\n\n  indent\tand  spaces"}]
    responses = [call, "Il fait 21 °C ☀️ — cafe\u0301 (not NFC) 한국어." + eot, "Gern 🤝" + eot]
    follow = [[tool_msg], [{"role": "user", "content": "Und morgen — cafe\u0301, naïve?  "}],
              [{"role": "user", "content": "ok <|im_start|> [INST] literal"}]]
    return start, responses, follow


def _broken_ids(tok) -> list[int]:
    """The first ids of a character the tokenizer splits into several tokens: bytes that are
    not UTF-8 on their own."""
    for ch in ("\U0001FAE8", "\U00020BB7", "\U0001D11E", "\u2E80", "\uA9C1"):
        ids = tok.encode(ch, add_special_tokens=False)
        if len(ids) > 1:
            return ids[:1]
    raise AssertionError("no character split into several tokens")


def _run(tok, name, monkeypatch, twin: bool):
    if twin:
        monkeypatch.delenv("CHATDATA_SPLICE", raising=False)
    else:
        monkeypatch.setenv("CHATDATA_SPLICE", "0")
    start, responses, follow = _script(name)
    ro = Rollout([start, start], tokenizer=tok, tools=QWEN_TOOLS)
    assert (ro._twin is not None) == twin  # the switch really changes the path
    seen = [[t.tolist() for t in ro.prompt_ids()]]
    for k, (resp, msgs) in enumerate(zip(responses, follow)):
        ids = torch.tensor(tok.encode(resp, add_special_tokens=False))
        cut = ids[:-1] if k == 1 else ids  # row 1: a response cut before its EOT
        ro.add_response([ids, cut])
        ro.add_messages([msgs, msgs])
        seen.append([t.tolist() for t in ro.prompt_ids()])
    # a response cut inside a multi-byte character (invalid UTF-8 for the twin's decode)
    partial = torch.tensor(_broken_ids(tok))
    ro.add_response([partial, partial])
    tokens = ro.tokens()
    return seen, tokens["input_ids"].tolist(), tokens["assistant_masks"].tolist(), ro.history.to_chats(), ro.drift()


@pytest.mark.parametrize("name", ["qwen", "mistral"])
def test_the_twin_gives_the_tokenizers_rollout(name, request, monkeypatch):
    tok = request.getfixturevalue(name)
    assert tiktoken_bpe_for(tok) is not None, "the test needs a tokenizer with a twin"
    with_twin = _run(tok, name, monkeypatch, twin=True)
    without = _run(tok, name, monkeypatch, twin=False)
    assert with_twin == without
    seen, ids, masks, chats, drift = with_twin
    start = chats[0][:1]
    first = tok.apply_chat_template(start, tools=QWEN_TOOLS, add_generation_prompt=True, tokenize=True)["input_ids"]
    assert seen[0][0] == first  # the first prompt is the tokenizer's own


def test_the_twin_decodes_like_the_tokenizer(qwen, mistral):
    for tok in (qwen, mistral):
        bpe = tiktoken_bpe_for(tok)
        assert bpe.decodes_exactly
        for text in ("Héllo 👋🏽 wörld<|im_end|>\n", "[INST] 日本語 </s>", "  \t\n x"):
            ids = tok.encode(text, add_special_tokens=False)
            assert bpe.decode(ids) == tok.backend_tokenizer.decode(ids, skip_special_tokens=False)
        broken = _broken_ids(tok)
        assert bpe.decode(broken) is None  # not UTF-8: the tokenizer's own decode replaces the bytes
        assert bpe.decode([10**9]) is None and bpe.decode([-1]) is None  # unknown ids: the tokenizer decides
