"""Helpers of the prefix-tree tests: a tiny random Qwen2 in float32 and per-row reference logprobs."""
from __future__ import annotations

import torch


def tiny_qwen2_fp32(vocab_size: int, attn: str = "sdpa", seed: int = 0):
    """2 layers, hidden 64, random weights (no download), float32, eval mode."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096, use_cache=False,
                      attn_implementation=attn, tie_word_embeddings=True, initializer_range=0.2)
    return Qwen2ForCausalLM(cfg).float().eval()


def row_logprobs(model, ids: torch.Tensor) -> torch.Tensor:
    """Log-prob of each token of one row given the tokens before it, from an unpacked forward (0 at k = 0)."""
    logits = model(input_ids=ids[None], use_cache=False).logits[0].float()
    out = torch.zeros(ids.numel(), dtype=logits.dtype)
    out[1:] = logits[:-1].log_softmax(-1).gather(1, ids[1:, None])[:, 0]
    return out


def compact_vocab(rows: list[dict]) -> tuple[list[dict], int]:
    """Rows with their ids remapped to 0..V-1 (V = distinct ids), other columns kept."""
    vocab = torch.unique(torch.cat([torch.as_tensor(r["input_ids"]) for r in rows]))
    out = [{**r, "input_ids": torch.searchsorted(vocab, torch.as_tensor(r["input_ids"]))} for r in rows]
    return out, vocab.numel()


def trie_nodes(rows: list) -> int:
    """Distinct non-empty prefixes of the rows (the size a prefix tree must have)."""
    seen = set()
    for r in rows:
        ids = [int(x) for x in r]
        seen.update(tuple(ids[:k]) for k in range(1, len(ids) + 1))
    return len(seen)
