"""Read a tokenized dataset lazily in a PyTorch training loop (padded batches, labels -100
outside the assistant mask).

    python examples/train_loop.py            # tokenizes the packaged sample chats into a temporary folder
    python examples/train_loop.py tokens/    # or reads the output of `chatdata tokenize ds/ tokens/`
"""
import sys
import tempfile
from pathlib import Path

import torch

from chatdata import History, load_memmap
from chatdata.data import load_sample_chats, load_sample_tokenizer


def tokenize_samples(folder: str) -> str:
    """The packaged chats, templated and tokenized with assistant masks, saved under ``folder``."""
    history = History.from_chats(load_sample_chats())
    out = history.apply_chat_template(tokenizer=load_sample_tokenizer(), add_generation_prompt=False,
                                      tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    out.memmap(f"{folder}/tokens")                                # what `chatdata tokenize` writes
    return f"{folder}/tokens"


def batches(tokens, batch_size=8, pad_id=0):
    lengths = tokens.offsets[1:] - tokens.offsets[:-1]
    order = torch.randperm(len(lengths), generator=torch.Generator().manual_seed(0))
    for k in range(0, len(order), batch_size):
        rows = [tokens[int(i)] for i in order[k:k + batch_size]]       # reads only these rows from disk
        width = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        for j, r in enumerate(rows):
            n = len(r["input_ids"])
            ids[j, :n] = r["input_ids"].long()
            labels[j, :n] = r["input_ids"].long().masked_fill(~r["assistant_masks"].bool(), -100)
        yield ids, labels


def main(argv):
    with tempfile.TemporaryDirectory(prefix="chatdata-example-") as tmp:
        path = argv[1] if len(argv) > 1 else tokenize_samples(tmp)
        if not Path(path).is_dir():
            sys.exit(f"{path}: no such folder; pass the output of `chatdata tokenize ds/ tokens/`")
        tokens = load_memmap(path)                                    # RaggedTensorDict (n, -1), lazy
        if isinstance(tokens, History):                               # `chatdata import`'s output, not tokens
            sys.exit(f"{path} holds conversations, not tokens: tokenize it first "
                     f"(chatdata tokenize {path} tokens/) and pass tokens/")
        lengths = tokens.offsets[1:] - tokens.offsets[:-1]
        print(f"{len(lengths)} conversations, {int(lengths.sum()):,} tokens")
        ids, labels = next(batches(tokens))
        print("first batch:", tuple(ids.shape), f"{int((labels != -100).sum())} trained tokens")


if __name__ == "__main__":
    main(sys.argv)
