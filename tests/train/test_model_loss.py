"""The proof: a tiny real Qwen2 gets the same loss one sequence at a time, padded, and padding-free packed."""
from __future__ import annotations

import torch

from chatdata.train import PackedBatchSampler, TokenDataset, collate_padded, collate_padding_free
from tests_train_helpers import tiny_qwen2


def _compact_vocab(rows):
    """Remap the ids of ``rows`` to 0..V-1 (V = distinct ids), so the tiny model's vocab stays small."""
    vocab = torch.unique(torch.cat([r["input_ids"] for r in rows]))
    out = []
    for r in rows:
        ids = torch.searchsorted(vocab, r["input_ids"])
        out.append({"input_ids": ids, "labels": ids.masked_fill(~r["assistant_masks"], -100)})
    return out, vocab.numel()


def _losses(model, rows, pad_id):
    with torch.no_grad():
        total = count = 0.0
        for r in rows:  # one sequence at a time, weighted by its trained (shifted) tokens
            n = int((r["labels"][1:] != -100).sum())
            loss = model(input_ids=r["input_ids"][None], labels=r["labels"][None]).loss
            total += float(loss) * n
            count += n
        single = total / count
        padded = float(model(**collate_padded(rows, pad_token_id=pad_id, pad_to_multiple_of=8)).loss)
        packed_batch = collate_padding_free(rows)
        packed = float(model(**packed_batch).loss)
        # rows packed two by two as TRL's pack_dataset writes them (seq_lengths): the same batch
        trl_rows = [{"input_ids": torch.cat([r["input_ids"] for r in pair]), "labels": torch.cat([r["labels"] for r in pair]),
                     "seq_lengths": [r["input_ids"].numel() for r in pair]} for pair in (rows[i:i + 2] for i in range(0, len(rows), 2))]
        trl_packed = float(model(**collate_padding_free(trl_rows)).loss)
        assert abs(trl_packed - packed) < 1e-9, (trl_packed, packed)
    return single, padded, packed


def test_same_loss_three_ways(sample_tokens):
    ds = TokenDataset(sample_tokens)
    # a packed bin of several real chats, as the sampler makes it
    sampler = PackedBatchSampler(ds.lengths, max_tokens=4096, shuffle=True, seed=3)
    bin_indices = max(iter(sampler), key=len)
    assert len(bin_indices) >= 3
    rows, vocab = _compact_vocab([ds[i] for i in bin_indices])
    assert all(int((r["labels"] != -100).sum()) > 0 for r in rows)
    model = tiny_qwen2(vocab)
    single, padded, packed = _losses(model, rows, pad_id=0)
    assert abs(single - padded) < 1e-4, (single, padded)
    assert abs(single - packed) < 1e-4, (single, packed)
    # the check has teeth: without the restarting positions the sequences see each other
    broken = collate_padding_free(rows)
    broken["position_ids"] = torch.arange(broken["input_ids"].shape[1])[None]
    with torch.no_grad():
        wrong = float(model(**broken).loss)
        # an all-ones attention_mask (older TRL collators gave one) hides the packing from sdpa as well
        ones = collate_padding_free(rows)
        ones["attention_mask"] = torch.ones_like(ones["input_ids"])
        wrong_mask = float(model(**ones).loss)
    assert abs(wrong - single) > 1e-2, (wrong, single, padded, packed)
    assert abs(wrong_mask - single) > 1e-2, (wrong_mask, single)


def test_packed_batch_from_dataloader_matches(token_folder):
    """The DataLoader path (TokenDataset.__getitems__ -> flat rows) collates to the same batch as rows one by one."""
    ds = TokenDataset(token_folder)
    sampler = PackedBatchSampler(ds.lengths, max_tokens=4096, seed=1)
    loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler, collate_fn=collate_padding_free)
    for batch, idx in zip(loader, iter(PackedBatchSampler(ds.lengths, max_tokens=4096, seed=1))):
        ref = collate_padding_free([ds[i] for i in idx])
        assert batch.keys() == ref.keys()
        for k in ref:
            assert (batch[k] == ref[k]).all() if isinstance(ref[k], torch.Tensor) else batch[k] == ref[k]
