"""loss_weights through the memmap round trip, TokenDataset / ConcatTokenDataset, both collates and a real model."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from chatdata.td import load_memmap
from chatdata.train import (ConcatTokenDataset, PackedBatchSampler, TokenDataset, collate_padded, collate_padding_free,
                            weighted_causal_lm_loss)
from tests_train_helpers import tiny_qwen2

WEIGHTS = {"user": 0.5, "tool": 0.25, "system": 0.125}


@pytest.fixture(scope="module")
def weighted_tokens(sample_tokenizer):
    from chatdata import History
    from chatdata.data import load_sample_chats, sample_tools

    return History.from_chats(load_sample_chats()[:12]).apply_chat_template(
        tokenizer=sample_tokenizer, tools=sample_tools(), add_generation_prompt=False, loss_weights=WEIGHTS)


@pytest.fixture(scope="module")
def weighted_folder(weighted_tokens, tmp_path_factory):
    path = tmp_path_factory.mktemp("wtokens") / "tokens"
    weighted_tokens.memmap(path)
    return path


def test_memmap_round_trip_and_dataset_items(weighted_tokens, weighted_folder):
    back = load_memmap(weighted_folder)
    assert back.values["loss_weights"].dtype == torch.float32
    assert torch.equal(back.values["loss_weights"], weighted_tokens.values["loss_weights"])
    ds = TokenDataset(weighted_folder)
    assert ds.has_loss_weights
    roles_seen = set()
    for i in range(len(ds)):
        row, ref = ds[i], weighted_tokens[i]
        assert torch.equal(row["loss_weights"], ref["loss_weights"])
        assert torch.equal(row["labels"] == -100, row["loss_weights"] == 0)
        assert torch.equal(row["assistant_masks"], row["loss_weights"] > 0)
        roles_seen |= set(torch.unique(row["loss_weights"]).tolist())
    assert roles_seen == {0.0, 0.125, 0.25, 0.5, 1.0}
    rows = ds.__getitems__([3, 0, 7])
    for j, i in enumerate([3, 0, 7]):
        assert torch.equal(rows[j]["loss_weights"], ds[i]["loss_weights"])


def test_weight_zero_wins_over_the_mask(weighted_tokens, tmp_path):
    """A hand-made token set whose weights say 0 where its mask says 1: the label is -100."""
    from chatdata import RaggedTensorDict, TensorDict

    vals = weighted_tokens.values
    w = vals["loss_weights"].clone()
    w[vals["assistant_masks"].bool()] = 0.0
    odd = RaggedTensorDict(TensorDict({"input_ids": vals["input_ids"], "assistant_masks": vals["assistant_masks"],
                                       "loss_weights": w}, [w.numel()]), weighted_tokens.offsets)
    ds = TokenDataset(odd)
    assert not (ds[0]["labels"][ds[0]["loss_weights"] == 0] != -100).any()
    assert not (ds.__getitems__([0, 1]).labels[ds.__getitems__([0, 1]).loss_weights == 0] != -100).any()


def test_collates_carry_weights_aligned_with_labels(weighted_folder):
    ds = TokenDataset(weighted_folder)
    sampler = PackedBatchSampler(ds.lengths, max_tokens=4096, seed=2)
    loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler, collate_fn=collate_padding_free)
    for batch, idx in zip(loader, iter(PackedBatchSampler(ds.lengths, max_tokens=4096, seed=2))):
        rows = [ds[i] for i in idx]
        ref = collate_padding_free(rows)  # rows one by one (dicts): the same batch
        assert batch.keys() == ref.keys() and "loss_weights" in batch
        assert torch.equal(batch["loss_weights"], ref["loss_weights"])
        assert batch["loss_weights"].shape == batch["labels"].shape
        assert torch.equal(batch["loss_weights"] > 0, batch["labels"] != -100)
        flat = torch.cat([r["loss_weights"] for r in rows])
        starts = batch["cu_seq_lens_q"][:-1].long()
        keep = torch.ones_like(flat, dtype=torch.bool)
        keep[starts] = False
        assert torch.equal(batch["loss_weights"][0][keep], flat[keep])
        padded = collate_padded(ds.__getitems__(idx), pad_token_id=0, padding_side="left")
        for j, r in enumerate(rows):
            n = r["input_ids"].numel()
            assert torch.equal(padded["loss_weights"][j, -n:], r["loss_weights"])
            assert padded["loss_weights"][j, :-n].abs().sum() == 0


def test_concat_dataset_weights_and_mixed_parts(weighted_tokens, weighted_folder, sample_tokens):
    ds = ConcatTokenDataset([weighted_folder, weighted_tokens])
    n = len(weighted_tokens.offsets) - 1
    got = ds.__getitems__([n + 2, 1])
    assert torch.equal(got[0]["loss_weights"], weighted_tokens[2]["loss_weights"])
    assert torch.equal(got[1]["loss_weights"], weighted_tokens[1]["loss_weights"])
    with pytest.raises(ValueError, match="part 1 .* has no 'loss_weights' column but part 0 has one"):
        ConcatTokenDataset([weighted_folder, sample_tokens])


def test_bad_rows_and_columns_fail_clearly(weighted_tokens):
    a = {"input_ids": [1, 2, 3], "loss_weights": [1.0, 0.5, 0.0]}
    with pytest.raises(ValueError, match="row 1 has no loss_weights but row 0 has"):
        collate_padding_free([a, {"input_ids": [4, 5]}])
    with pytest.raises(ValueError, match="row 0: loss_weights has 1 entries .* but input_ids has 2"):
        collate_padded([{"input_ids": [1, 2], "loss_weights": [1.0]}], pad_token_id=0)
    with pytest.raises(ValueError, match="finite and >= 0"):
        collate_padding_free([{"input_ids": [1, 2], "loss_weights": [1.0, float("nan")]}])
    from chatdata import RaggedTensorDict, TensorDict

    vals = weighted_tokens.values
    bad = RaggedTensorDict(TensorDict({"input_ids": vals["input_ids"], "assistant_masks": vals["assistant_masks"],
                                       "loss_weights": vals["assistant_masks"]}, [vals["input_ids"].numel()]),
                           weighted_tokens.offsets)
    with pytest.raises(ValueError, match="loss_weights must be one flat float16/bfloat16/float32/float64 column"):
        TokenDataset(bad)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.tuples(st.integers(1, 50), st.sampled_from([0.0, 0.25, 1.0, 3.0])), min_size=1, max_size=12),
                min_size=1, max_size=6))
def test_fuzz_weights_stay_with_their_tokens(rows):
    """Random rows: every collate puts each token's weight next to its id."""
    dicts = [{"input_ids": [t for t, _ in r], "loss_weights": [w for _, w in r]} for r in rows]
    free = collate_padding_free(dicts)
    ids, w = free["input_ids"][0], free["loss_weights"][0]
    pos = 0
    for r in rows:
        for k, (t, wt) in enumerate(r):
            assert ids[pos] == t and w[pos] == (0.0 if k == 0 else wt)
            pos += 1
    assert torch.equal(free["labels"][0] != -100, w > 0)
    padded = collate_padded(dicts, pad_token_id=0)
    for j, r in enumerate(rows):
        assert padded["loss_weights"][j, :len(r)].tolist() == [wt for _, wt in r]
        assert padded["loss_weights"][j, len(r):].abs().sum() == 0
    assert torch.equal(padded["labels"] != -100, padded["loss_weights"] > 0)


def _compact(rows):
    vocab = torch.unique(torch.cat([r["input_ids"] for r in rows]))
    return [dict(r, input_ids=torch.searchsorted(vocab, r["input_ids"]),
                 labels=torch.searchsorted(vocab, r["input_ids"]).masked_fill(r["labels"] == -100, -100))
            for r in rows], vocab.numel()


def test_weighted_loss_same_three_ways_on_a_real_model(sample_tokenizer):
    """A tiny Qwen2: the weighted loss is the same one sequence at a time, padded and packed; with
    every weight 1 it is the model's own loss; and the weights matter."""
    from chatdata import History
    from chatdata.data import load_sample_chats

    chats = [c for c in load_sample_chats()[:40] if any(m["role"] == "tool" for m in c)][:3]
    out = History.from_chats(chats).apply_chat_template(tokenizer=sample_tokenizer, add_generation_prompt=False,
                                                        loss_weights=WEIGHTS)
    ds = TokenDataset(out, max_length=180)  # cut: a few hundred tokens keep the forwards quick
    rows, vocab = _compact([ds[i] for i in range(len(ds))])
    assert {0.25, 0.5, 1.0} <= set(torch.cat([r["loss_weights"] for r in rows]).tolist())
    model = tiny_qwen2(vocab)

    def logits_of(batch):
        with torch.no_grad():
            return model(**{k: v for k, v in batch.items() if k not in ("labels", "loss_weights")}).logits

    total = count = 0.0
    for r in rows:
        b = {"input_ids": r["input_ids"][None], "labels": r["labels"][None], "loss_weights": r["loss_weights"][None]}
        total += float(weighted_causal_lm_loss(logits_of(b), b["labels"], b["loss_weights"], normalize="sum"))
        count += int((r["labels"][1:] != -100).sum())
    single = total / count
    p = collate_padded(rows, pad_token_id=0)
    padded = float(weighted_causal_lm_loss(logits_of(p), p["labels"], p["loss_weights"]))
    b = collate_padding_free(rows)
    logits = logits_of(b)
    packed = float(weighted_causal_lm_loss(logits, b["labels"], b["loss_weights"]))
    assert abs(single - padded) < 1e-6 and abs(single - packed) < 1e-6, (single, padded, packed)
    ones = (b["labels"] != -100).double()  # every weight 1: the model's own loss
    with torch.no_grad():
        ref = float(model(**{k: v for k, v in b.items() if k != "loss_weights"}).loss)
    assert abs(float(weighted_causal_lm_loss(logits, b["labels"], ones)) - ref) < 1e-6
    assert abs(ref - packed) > 1e-3  # the weights change the loss
