#!/usr/bin/env python
"""Supervised fine-tuning with padding-free packed batches, end to end, offline, on CPU.

    python examples/train_sft.py [--steps 30] [--max-tokens 2048] [--chats 300]

The packaged sample chats are tokenized with the packaged Qwen2.5 tokenizer (assistant masks
included) and saved as a token set in a temporary folder; a tiny Qwen2 built from a config
(random weights, no download) then trains on packed bins: one bin of at most ``--max-tokens``
tokens per step, positions restarting per chat, no padding. Only the assistant's tokens are
trained (labels are -100 elsewhere). The loss falls as the model learns the chats.

To keep the toy model small, token ids are mapped to a compact vocabulary (the ids that occur
in the sample); with a real model you would skip that step. The temporary folder is removed
at the end.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from chatdata import History  # noqa: E402
from chatdata.data import load_sample_chats, load_sample_tokenizer  # noqa: E402
from chatdata.train import PackedBatchSampler, TokenDataset, collate_padding_free  # noqa: E402


def tiny_qwen2(vocab_size: int):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192,
                      use_cache=False, attn_implementation="sdpa", tie_word_embeddings=True)
    return Qwen2ForCausalLM(cfg)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--max-tokens", type=int, default=2048)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--chats", type=int, default=300, help="use the first N sample chats (default: all 300)")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    tmp = Path(tempfile.mkdtemp(prefix="chatdata-sft-"))
    try:
        t0 = time.perf_counter()
        tok = load_sample_tokenizer(cache_dir=tmp / "cache")
        tokens = History.from_chats(load_sample_chats()[: args.chats]).apply_chat_template(
            tokenizer=tok, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
            add_generation_prompt=False)
        tokens.memmap(tmp / "tokens")                       # what `chatdata tokenize` writes
        ds = TokenDataset(tmp / "tokens", max_length=args.max_tokens)
        vocab = torch.unique(tokens.values.get("input_ids"))
        to_compact = torch.zeros(int(vocab.max()) + 1, dtype=torch.int64)
        to_compact[vocab] = torch.arange(vocab.numel())

        def collate(rows):
            batch = collate_padding_free(rows)
            batch["input_ids"] = to_compact[batch["input_ids"]]
            trained = batch["labels"] != -100
            batch["labels"][trained] = to_compact[batch["labels"][trained]]
            return batch

        sampler = PackedBatchSampler(ds.lengths, max_tokens=args.max_tokens, seed=0)
        loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler, collate_fn=collate)
        print(f"{len(ds)} chats, {ds.num_tokens:,} tokens -> {len(sampler)} packed batches of <= {args.max_tokens} "
              f"tokens (prepared in {time.perf_counter() - t0:.1f} s); compact vocab {vocab.numel():,} ids")
        model = tiny_qwen2(vocab.numel()).train()
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
        losses, step, epoch = [], 0, 0
        while step < args.steps:
            sampler.set_epoch(epoch)
            for batch in loader:
                loss = model(**batch).loss
                opt.zero_grad()
                loss.backward()
                opt.step()
                step += 1
                losses.append(loss.item())
                if step == 1 or step % 5 == 0 or step == args.steps:
                    n_seq = batch["cu_seq_lens_q"].numel() - 1
                    print(f"step {step:>3}  loss {losses[-1]:.3f}  ({batch['input_ids'].shape[1]:,} tokens, "
                          f"{n_seq} chats packed)")
                if step == args.steps:
                    break
            epoch += 1
        first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
        print(f"loss fell from {first:.3f} to {last:.3f} (mean of the first and last 3 steps) in "
              f"{time.perf_counter() - t0:.1f} s")
        return 0 if last < first else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
