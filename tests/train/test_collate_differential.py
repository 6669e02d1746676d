"""Differential tests: every batch kind against a naive reference built row by row.

Random rows (lengths from 1, duplicates, rows that are prefixes of others, forks at the last
token, prefixes shared at every length), with masks, labels, loss weights and side columns of
several dtypes (float32, bfloat16, int16 of per-token shape (k,)) go through
``collate_padding_free``, ``collate_padded`` (both sides) and ``collate_prefix_tree``; each value
must come out where the reference puts it, and the tree must let each token see exactly its
own row's earlier tokens.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from chatdata.train import collate_padded, collate_padding_free, collate_prefix_tree, tree_attention_mask

COLUMNS = ("logprobs", "advantages", "routed_experts")


@st.composite
def batches(draw):
    """Rows that share prefixes of a common base at every length (0 to all of it), with copies."""
    base = draw(st.lists(st.integers(0, 5), max_size=6))
    k = draw(st.integers(1, 3))
    has = {name: draw(st.booleans()) for name in (*COLUMNS, "loss_weights", "assistant_masks", "labels")}
    rows = []
    for _ in range(draw(st.integers(1, 6))):
        if rows and draw(st.booleans()) and draw(st.booleans()):  # a duplicate of the row before
            rows.append({name: v.clone() for name, v in rows[-1].items()})
            continue
        cut = draw(st.integers(0, len(base)))
        ids = base[:cut] + draw(st.lists(st.integers(0, 5), min_size=0 if cut else 1, max_size=4))
        n = len(ids)
        row = {"input_ids": torch.tensor(ids)}
        if has["logprobs"]:
            row["logprobs"] = -torch.tensor(draw(st.lists(st.floats(0, 9, width=32), min_size=n, max_size=n)))
        if has["advantages"]:
            row["advantages"] = torch.tensor(draw(st.lists(st.floats(-4, 4), min_size=n, max_size=n))).bfloat16()
        if has["routed_experts"]:
            row["routed_experts"] = torch.tensor(draw(st.lists(st.lists(st.integers(0, 255), min_size=k, max_size=k),
                                                               min_size=n, max_size=n)), dtype=torch.int16)
        if has["loss_weights"]:
            row["loss_weights"] = torch.tensor(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0]), min_size=n,
                                                             max_size=n)))
        if has["assistant_masks"]:
            row["assistant_masks"] = torch.tensor(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=torch.bool)
        if has["labels"]:
            keep = draw(st.lists(st.booleans(), min_size=n, max_size=n))
            row["labels"] = torch.tensor([t if kept else -100 for t, kept in zip(ids, keep)])
        rows.append(row)
    return rows


def reference(row: dict) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """(labels, loss_weights, trained) of one row as the docs define them: labels are the row's own,
    else its ids where its mask is set; a weight of 0 is not trained, and nothing untrained keeps a weight."""
    ids = row["input_ids"]
    if "labels" in row:
        labels = row["labels"].clone()
    elif "assistant_masks" in row:
        labels = ids.masked_fill(~row["assistant_masks"], -100)
    else:
        labels = ids.clone()
    weights = row.get("loss_weights")
    if weights is not None:
        labels[weights == 0] = -100
        weights = weights.masked_fill(labels == -100, 0.0)
    return labels, weights, labels != -100


def same(got: torch.Tensor, want: torch.Tensor, what) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want), (what, got, want)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(batches())
def test_padding_free_and_padded_equal_the_rows_one_by_one(rows):
    b = collate_padding_free(rows)
    at = seq = 0
    for j, row in enumerate(rows):
        n = row["input_ids"].numel()
        span = slice(at, at + n)
        labels, weights, _ = reference(row)
        labels[0] = -100  # no sequence predicts across a boundary
        same(b["input_ids"][0, span], row["input_ids"], ("ids", j))
        same(b["labels"][0, span], labels, ("labels", j))
        same(b["position_ids"][0, span], torch.arange(n), ("positions", j))
        same(b["seq_idx"][0, span], torch.full((n,), seq, dtype=torch.int32), ("seq_idx", j))  # rows with tokens
        seq += n > 0
        if weights is not None:
            same(b["loss_weights"][0, span], weights.masked_fill(labels == -100, 0.0), ("weights", j))
        for name in COLUMNS:
            if name in row:
                same(b[name][0, span], row[name], (name, j))
        at += n
    assert b["input_ids"].shape == (1, at) and b["cu_seq_lens_q"][-1] == at
    for side in ("right", "left"):
        b = collate_padded(rows, pad_token_id=7, padding_side=side, pad_to_multiple_of=3)
        L = b["input_ids"].shape[1]
        assert L % 3 == 0
        for j, row in enumerate(rows):
            n = row["input_ids"].numel()
            tok, pad = (slice(0, n), slice(n, L)) if side == "right" else (slice(L - n, L), slice(0, L - n))
            labels, weights, _ = reference(row)
            same(b["input_ids"][j, tok], row["input_ids"], (side, "ids", j))
            assert (b["input_ids"][j, pad] == 7).all() and (b["labels"][j, pad] == -100).all()
            assert (b["attention_mask"][j, tok] == 1).all() and (b["attention_mask"][j, pad] == 0).all()
            same(b["labels"][j, tok], labels, (side, "labels", j))
            if weights is not None:
                same(b["loss_weights"][j, tok], weights, (side, "weights", j))
                assert (b["loss_weights"][j, pad] == 0).all()
            for name in COLUMNS:
                if name in row:
                    same(b[name][j, tok], row[name], (side, name, j))
                    assert (b[name][j, pad] == 0).all()


@settings(max_examples=100, deadline=None, derandomize=True)
@given(batches())
def test_prefix_tree_equals_the_rows_one_by_one(rows):
    b = collate_prefix_tree(rows)
    tree_ids = b["input_ids"][0]
    trie = {tuple(r["input_ids"].tolist()[:k]) for r in rows for k in range(1, r["input_ids"].numel() + 1)}
    assert tree_ids.numel() == len(trie)  # every distinct prefix once
    sees = tree_attention_mask(b)[0, 0] == 0
    for j, row in enumerate(rows):
        n = row["input_ids"].numel()
        at = b["row_index"][j]
        assert (at[:n] >= 0).all() and (at[n:] == -1).all()
        same(tree_ids[at[:n]], row["input_ids"], ("ids", j))
        same(b["position_ids"][0, at[:n]], torch.arange(n), ("depth", j))
        for k in range(n):  # token k sees exactly the row's tokens 0..k
            assert set(torch.nonzero(sees[int(at[k])]).flatten().tolist()) == set(at[:k + 1].tolist()), (j, k)
        labels, weights, trained = reference(row)
        if "labels" in b:
            same(b["labels"][j, :n], labels, ("labels", j))
        if "assistant_masks" in row:  # weights reconcile the mask; without them it is the row's own
            same(b["assistant_masks"][j, :n], row["assistant_masks"] & trained if weights is not None
                 else row["assistant_masks"], ("mask", j))
        if weights is not None:
            same(b["loss_weights"][j, :n], weights, ("weights", j))
        for name in COLUMNS:
            if name in row:
                same(b[name][j, :n], row[name], (name, j))
                assert (b[name][j, n:] == 0).all()


def test_tree_weights_are_zero_where_the_mask_is_off():
    """Rows with a mask and weights but no labels (GRPO rows written by hand): the padded batches
    zeroed the weight of every untrained token, the tree batch kept it, so a loss weighted by
    ``loss_weights`` trained the prompt of every row."""
    rows = [{"input_ids": torch.tensor([1, 2, 3, 4]), "assistant_masks": torch.tensor([False, False, True, True]),
             "loss_weights": torch.ones(4)},
            {"input_ids": torch.tensor([1, 2, 5]), "assistant_masks": torch.tensor([False, False, True]),
             "loss_weights": torch.tensor([1.0, 1.0, 0.0])}]
    b = collate_prefix_tree(rows)
    assert b["loss_weights"].tolist() == [[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]]
    assert b["assistant_masks"].tolist() == [[False, False, True, True], [False, False, False, False]]
    padded = collate_padded(rows, pad_token_id=0)
    assert padded["loss_weights"].tolist() == b["loss_weights"].tolist()


_MODEL = {}


def _tiny_model():
    if "m" not in _MODEL:
        from tree_test_helpers import tiny_qwen2_fp32

        _MODEL["m"] = tiny_qwen2_fp32(6)
    return _MODEL["m"]


@settings(max_examples=8, deadline=None, derandomize=True)
@given(batches())
def test_a_tiny_model_scores_every_batch_kind_as_the_rows_one_by_one(rows):
    """The model's per-row log-probs and the weighted loss (sum over trained tokens) of a tree,
    padding-free and padded batch equal those of each row alone (float32, within 1e-5 / 1e-4)."""
    from chatdata.train import tree_logprobs, tree_model_inputs, weighted_causal_lm_loss
    from tree_test_helpers import row_logprobs

    model = _tiny_model()
    rows = [{"input_ids": r["input_ids"], "loss_weights": r.get("loss_weights", torch.ones(r["input_ids"].numel())),
             **({"assistant_masks": r["assistant_masks"]} if "assistant_masks" in r else {})} for r in rows]
    with torch.no_grad():
        alone = [row_logprobs(model, r["input_ids"]) for r in rows]
        want = 0.0
        for r, lp in zip(rows, alone):
            _, weights, _ = reference(r)
            want -= float((lp[1:] * weights[1:]).sum())
        b = collate_prefix_tree(rows)
        lp = tree_logprobs(model(**tree_model_inputs(b, model)).logits, b)
        for j, r in enumerate(rows):
            assert torch.allclose(lp[j, :r["input_ids"].numel()], alone[j], atol=1e-5)
        for batch in (collate_padding_free(rows), collate_padded(rows, pad_token_id=0)):
            w = batch.pop("loss_weights")
            logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
            got = float(weighted_causal_lm_loss(logits, batch["labels"], w, normalize="sum"))
            assert abs(got - want) < 1e-4 * max(1.0, abs(want))


@pytest.mark.parametrize("seed", range(4))
def test_long_rows_are_laid_out_by_the_copy_path_as_the_rows_one_by_one(seed):
    """Rows of 128 tokens or more on average are copied slice by slice (pad_rows' other path)."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(0, 50, (200,), generator=g)
    rows = []
    for k in range(5):
        cut = int(torch.randint(0, 201, (), generator=g))
        ids = torch.cat([base[:cut], torch.randint(0, 50, (int(torch.randint(130, 300, (), generator=g)),), generator=g)])
        n = ids.numel()
        rows.append({"input_ids": ids, "logprobs": -torch.rand(n, generator=g), "advantages": torch.randn(n, generator=g).bfloat16(),
                     "routed_experts": torch.randint(0, 256, (n, 2), generator=g, dtype=torch.int16),
                     "assistant_masks": torch.rand(n, generator=g) < 0.5, "loss_weights": torch.rand(n, generator=g).round()})
    rows.append({k: v.clone() for k, v in rows[-1].items()})  # a duplicate
    for side in ("right", "left"):
        b = collate_padded(rows, pad_token_id=7, padding_side=side)
        L = b["input_ids"].shape[1]
        for j, row in enumerate(rows):
            n = row["input_ids"].numel()
            tok = slice(0, n) if side == "right" else slice(L - n, L)
            labels, weights, _ = reference(row)
            same(b["labels"][j, tok], labels, (side, "labels", j))
            same(b["loss_weights"][j, tok], weights, (side, "weights", j))
            for name in COLUMNS:
                same(b[name][j, tok], row[name], (side, name, j))
    b = collate_prefix_tree(rows)
    for j, row in enumerate(rows):
        n = row["input_ids"].numel()
        same(b["input_ids"][0, b["row_index"][j, :n]], row["input_ids"], ("tree ids", j))
        for name in COLUMNS:
            same(b[name][j, :n], row[name], ("tree", name, j))
