"""Bad and edge-case input through chatdata.train's public API: each case is either right or a
clear exception naming what is wrong (never a deep torch error, a silent wrong answer or lost data)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from chatdata.train import PackingPlan, TreePackingPlan, pack


# -- packing plans -----------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, err, match", [
    ({"max_tokens": 2 ** 64}, ValueError, r"at most 2\*\*63 - 1"),
    ({"max_tokens": np.int64(8)}, None, None),
    ({"max_tokens": torch.tensor(8)}, None, None),
    ({"max_tokens": True}, TypeError, "max_tokens must be an int"),
    ({"seed": 1.5}, TypeError, "seed must be an int"),
    ({"seed": 2 ** 70}, ValueError, "torch generator seed"),
    ({"seed": np.int64(-3)}, None, None),
    ({"strategy": "tree", "seed": 2 ** 70}, ValueError, "torch generator seed"),
])
def test_pack_numbers(kwargs, err, match):
    args = {"lengths": [5, 3, 4], "max_tokens": 8} | kwargs
    if args.get("strategy") == "tree":
        args["lengths"] = [{"input_ids": [1, 2]}, {"input_ids": [1, 3]}]
    if err is None:
        assert sorted(pack(**args).indices.tolist()) == list(range(len(args["lengths"])))
    else:
        with pytest.raises(err, match=match):
            pack(**args)


def test_plan_indexing():
    plan = pack([5, 3, 4, 2, 6], max_tokens=8)
    bins = list(plan)
    assert [b.tolist() for b in plan[1:]] == [b.tolist() for b in bins[1:]]
    assert plan[np.int64(-1)].tolist() == plan[torch.tensor(2)].tolist() == bins[-1].tolist()
    # spans(-1) is the last bin (it was silently empty), out of range is an IndexError naming the bin
    assert plan.spans(-1)[0].tolist() == bins[-1].tolist()
    with pytest.raises(IndexError, match="bin 3 is out of range for a plan of 3 bins"):
        plan.spans(3)
    for bad in (1.0, True, "0"):
        with pytest.raises(TypeError, match="a bin number must be an int"):
            plan[bad]


def _broken(state, **changes):
    return {**state, **changes}


@pytest.mark.parametrize("changes, err, match", [
    ({"bin_offsets": torch.tensor([0, 4, 1, 5])}, ValueError, "bin_offsets must not decrease"),
    ({"stops": torch.full((5,), -1)}, ValueError, "stops >= starts"),
    ({"indices": torch.tensor([0, -1, 2, 3, 4])}, ValueError, "indices and starts must be >= 0"),
    ({"indices": torch.tensor([0.5, 1, 2, 3, 4])}, TypeError, "indices must be integers"),
    ({"max_tokens": 0}, ValueError, "max_tokens must be > 0"),
    ({"max_tokens": "8"}, TypeError, "max_tokens must be an int"),
])
def test_plan_state_that_cannot_be_a_plan(changes, err, match):
    state = pack([5, 3, 4, 2, 6], max_tokens=8).state_dict()
    with pytest.raises(err, match=match):
        PackingPlan.from_state_dict(_broken(state, **changes))


def test_plan_state_garbage_and_truncated():
    state = pack([5, 3, 4, 2, 6], max_tokens=8).state_dict()
    with pytest.raises(TypeError, match="must be the dict its state_dict"):
        PackingPlan.from_state_dict(None)
    with pytest.raises(ValueError, match="not a PackingPlan state: it has no 'stops'"):
        PackingPlan.from_state_dict({k: v for k, v in state.items() if k != "stops"})
    tree = pack([{"input_ids": [1, 2, 3]}, {"input_ids": [1, 2, 4]}, {"input_ids": [9]}], 4, strategy="tree")
    assert TreePackingPlan.from_state_dict(tree.state_dict()).tree_lengths.tolist() == tree.tree_lengths.tolist()
    with pytest.raises(ValueError, match="tree_lengths must have one entry per bin"):
        TreePackingPlan.from_state_dict({**tree.state_dict(), "tree_lengths": torch.tensor([4])})
    with pytest.raises(ValueError, match="it has no 'tree_lengths'"):
        TreePackingPlan.from_state_dict(state)


# -- the resumable sampler ---------------------------------------------------------------------
from hypothesis import given, settings, strategies as st  # noqa: E402

from chatdata.train import PackedBatchSampler  # noqa: E402

_L = torch.tensor([5, 3, 4, 2, 6, 7, 1, 8, 3, 3])


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 40), min_size=1, max_size=60), replicas=st.integers(1, 4),
       seed=st.integers(-5, 5), epoch=st.integers(0, 3), cut=st.integers(0, 100), drop_last=st.booleans())
def test_resume_gives_exactly_the_rest_on_every_rank(lengths, replicas, seed, epoch, cut, drop_last):
    lengths = torch.tensor(lengths)
    kw = dict(max_tokens=40, seed=seed, num_replicas=replicas, drop_last=drop_last)
    try:
        PackedBatchSampler(lengths, rank=0, **kw)
    except ValueError as err:  # drop_last with fewer bins than ranks: refused up front
        assert "drop_last=True" in str(err)
        return
    seen = []
    for rank in range(replicas):
        s = PackedBatchSampler(lengths, rank=rank, **kw)
        s.set_epoch(epoch)
        it = iter(s)
        head = [next(it) for _ in range(min(cut, len(s)))]
        state = s.state_dict()
        again = PackedBatchSampler(lengths, rank=rank, **kw)
        again.load_state_dict(state)
        rest = list(again)
        assert head + rest == list(s)  # the rest of the epoch, nothing twice, nothing skipped
        seen += [i for b in head + rest for i in b]
    if not drop_last:
        assert set(seen) == set(range(len(lengths)))


def test_resume_twice_and_from_a_state_of_another_rank():
    a = PackedBatchSampler(_L, 12, seed=1, num_replicas=2, rank=0)
    full = list(a)
    it = iter(a)
    next(it)
    b = PackedBatchSampler(_L, 12, seed=1, num_replicas=2, rank=0)
    b.load_state_dict(a.state_dict())
    it = iter(b)
    got = [next(it)]
    c = PackedBatchSampler(_L, 12, seed=1, num_replicas=2, rank=0)
    c.load_state_dict(b.state_dict())
    assert full[:1] + got + list(c) == full
    # every rank takes the same number of batches: rank 1's state resumes rank 0 at the same step
    other = PackedBatchSampler(_L, 12, seed=1, num_replicas=2, rank=1)
    other.load_state_dict(b.state_dict())
    assert list(other) == list(PackedBatchSampler(_L, 12, seed=1, num_replicas=2, rank=1))[2:]


@pytest.mark.parametrize("state, err, match", [
    (None, TypeError, "must be the dict its state_dict"),
    ({}, ValueError, "it has no 'epoch', 'batches_done'"),
    ({"epoch": 0}, ValueError, "it has no 'batches_done'"),
    ({"epoch": "1", "batches_done": 0}, TypeError, "epoch must be an int"),
    ({"epoch": 1.5, "batches_done": 0}, TypeError, "epoch must be an int"),
    ({"epoch": 0, "batches_done": 2.0}, TypeError, "batches_done must be an int"),
    ({"epoch": 0, "batches_done": -1}, ValueError, "cannot resume at batch -1"),
    ({"epoch": 0, "batches_done": 99}, ValueError, "cannot resume at batch 99: epoch 0 has"),
    ({"epoch": 2 ** 64, "batches_done": 0}, ValueError, "seed \\+ epoch"),
    ({"epoch": 0, "batches_done": 0, "version": 3}, ValueError, "version 3"),
    ({"epoch": 0, "batches_done": 0, "seed": 1}, ValueError, "seed=1"),
    ({"epoch": 0, "batches_done": 0, "num_replicas": 0}, ValueError, "num_replicas=0"),
    ({"epoch": 0, "batches_done": 9, "num_replicas": 2}, ValueError, "batch 9: epoch 0 has 2 batches on each of the 2 ranks"),
    ({"epoch": 0, "batches_done": 0, "carry": [[0, 1]]}, ValueError, "world size below 1"),
    ({"epoch": 0, "batches_done": 0, "carry": "x"}, ValueError, "carry must be"),
    ({"epoch": 0, "batches_done": 0, "carry": [[2, 1.5]]}, ValueError, "carry must be"),
    ({"epoch": 0, "batches_done": 0, "overflow": "drop"}, ValueError, "overflow='drop'"),
    ({"epoch": 0, "batches_done": 0, "num_sequences": 9}, ValueError, "num_sequences=9"),
    ({"epoch": 0, "batches_done": 0, "lengths_digest": "0" * 16}, ValueError, "lengths differ"),
])
def test_a_refused_state_leaves_the_sampler_as_it_was(state, err, match):
    s = PackedBatchSampler(_L, 12, seed=0)
    s.set_epoch(1)
    it = iter(s)
    first = next(it)
    before = s.state_dict()
    with pytest.raises(err, match=match):
        s.load_state_dict(state)
    assert s.state_dict() == before  # a bad load used to leave batches_done=-1: only the last batch came next
    fresh = PackedBatchSampler(_L, 12, seed=0)
    fresh.load_state_dict(before)
    full = list(s)  # a new pass is the whole epoch, as without the bad load
    assert full[0] == first and list(fresh) == full[1:]


def test_a_state_of_another_dataset_of_the_same_size_is_refused():
    s = PackedBatchSampler(_L, 12, seed=0)
    other = PackedBatchSampler(_L.flip(0), 12, seed=0)  # same count, other lengths: other bins
    with pytest.raises(ValueError, match="the sequence lengths differ"):
        other.load_state_dict(s.state_dict())
    old = {k: v for k, v in s.state_dict().items() if k not in ("version", "overflow", "lengths_digest")}
    PackedBatchSampler(_L, 12, seed=0).load_state_dict(old)  # a state of an older chatdata still loads
    rows = [{"input_ids": [1, 2, 3, k]} for k in range(6)]
    tree = PackedBatchSampler(rows, 8, strategy="tree", seed=0)
    moved = PackedBatchSampler([{"input_ids": [1, 2, k, 3]} for k in range(6)], 8, strategy="tree", seed=0)
    with pytest.raises(ValueError, match="the sequence lengths differ"):
        moved.load_state_dict(tree.state_dict())


@pytest.mark.parametrize("call, err, match", [
    (lambda s: s.set_epoch(1.7), TypeError, "epoch must be an int"),
    (lambda s: s.set_epoch("2"), TypeError, "epoch must be an int"),
    (lambda s: s.set_epoch(2 ** 64), ValueError, "seed \\+ epoch"),
    (lambda s: s.state_dict(batches_done=-1), ValueError, "batches_done=-1 is not a count of this epoch"),
    (lambda s: s.state_dict(batches_done=10 ** 6), ValueError, "count the batches since set_epoch"),
    (lambda s: s.state_dict(batches_done="3"), TypeError, "batches_done must be an int"),
    (lambda s: PackedBatchSampler(_L, 12, seed=2 ** 70), ValueError, "torch generator seed"),
    (lambda s: PackedBatchSampler(_L, 12, seed=1.0), TypeError, "seed must be an int"),
    (lambda s: PackedBatchSampler(_L, 2 ** 64), ValueError, r"at most 2\*\*63 - 1"),
    (lambda s: PackedBatchSampler(_L, 12, shuffle="no"), TypeError, "shuffle must be True or False"),
    (lambda s: PackedBatchSampler(_L, 12, drop_last=None), TypeError, "drop_last must be True or False"),
    (lambda s: PackedBatchSampler(_L, 12, num_replicas=2, rank=2.0), TypeError, "rank must be an int"),
])
def test_sampler_numbers(call, err, match):
    s = PackedBatchSampler(_L, 12, seed=0)
    with pytest.raises(err, match=match):
        call(s)
    s.set_epoch(np.int64(1))  # numpy and 0-d tensor ints are ints
    s.set_epoch(torch.tensor(1))
    assert PackedBatchSampler(_L, 12, num_replicas=np.int64(2), rank=torch.tensor(1)).rank == 1


# -- the weighted loss -------------------------------------------------------------------------
from chatdata.train import weighted_causal_lm_loss  # noqa: E402


def _logits_labels():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 6, 11, generator=g)
    labels = torch.randint(0, 11, (2, 6), generator=g)
    labels[0, :3] = -100
    labels[1, 4:] = -100
    return logits, labels


def test_weighted_mean_counts_only_trained_tokens():
    logits, labels = _logits_labels()
    g = torch.Generator().manual_seed(1)
    w = torch.rand(2, 6, generator=g) + 0.5  # weights everywhere, also where the label is -100
    ce = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, 11), labels[:, 1:].reshape(-1),
                                           ignore_index=-100, reduction="none")
    trained = labels[:, 1:].reshape(-1) != -100
    wt = w[:, 1:].reshape(-1) * trained
    want = float((ce * wt).sum() / wt.sum())
    # the denominator summed the weights of untrained positions too: the mean came out too small
    assert abs(float(weighted_causal_lm_loss(logits, labels, w, normalize="weights")) - want) < 1e-6
    zeroed = w.masked_fill(labels == -100, 0.0)  # what the collates give: the same number
    assert abs(float(weighted_causal_lm_loss(logits, labels, zeroed, normalize="weights")) - want) < 1e-6
    for norm in ("tokens", "sum"):
        assert torch.equal(weighted_causal_lm_loss(logits, labels, w, norm),
                           weighted_causal_lm_loss(logits, labels, zeroed, norm))


def test_weighted_loss_takes_narrow_ids_and_refuses_bad_numbers():
    logits, labels = _logits_labels()
    w = torch.ones(2, 6)
    ref = weighted_causal_lm_loss(logits, labels, w)
    assert torch.equal(weighted_causal_lm_loss(logits, labels.int(), w), ref)  # was a torch dtype error
    assert torch.equal(weighted_causal_lm_loss(logits, labels, w.long()), ref)
    for bad, match in ((float("nan"), "finite and >= 0 \\(got NaN\\)"), (-1.0, "min -1.0"),
                       (float("inf"), "finite and >= 0")):
        for where in ((0, 0), (1, 2)):  # where the label is -100 (was silently NaN) and where it is trained
            wb = w.clone()
            wb[where] = bad
            with pytest.raises(ValueError, match=match):
                weighted_causal_lm_loss(logits, labels, wb)
    with pytest.raises(TypeError, match="labels must be integer token ids"):
        weighted_causal_lm_loss(logits, labels.float(), w)
    with pytest.raises(TypeError, match="logits must be floating point"):
        weighted_causal_lm_loss(logits.long(), labels, w)
    with pytest.raises(TypeError, match="loss_weights must be a tensor"):
        weighted_causal_lm_loss(logits, labels, w.tolist())
    with pytest.raises(ValueError, match="must agree on"):
        weighted_causal_lm_loss(logits, labels, w[:, :5])


# -- TokenRows and TokenDataset ----------------------------------------------------------------
from chatdata.td import RaggedTensorDict, TensorDict  # noqa: E402
from chatdata.train import TokenDataset, TokenRows, collate_padded, collate_padding_free  # noqa: E402


def _rows(**kw):
    args = dict(input_ids=torch.tensor([5, 6, 7]), assistant_masks=torch.tensor([False, True, True]),
                offsets=torch.tensor([0, 1, 3])) | kw
    return TokenRows(**args)


def test_token_rows_integer_masks_are_nonzero_masks():
    want = collate_padding_free(_rows())
    for mask in (torch.tensor([0, 1, 1]), torch.tensor([0, 2, 1], dtype=torch.uint8), [0, 1, -1]):
        rows = _rows(assistant_masks=mask)
        # labels were computed as (ids + 100) * mask - 100: a mask of 2 gave label 112 for id 6
        assert rows.labels.tolist() == [-100, 6, 7]
        assert rows[1]["labels"].tolist() == [6, 7]  # was a torch masked_fill dtype error
        got = collate_padding_free(rows)
        assert all(torch.equal(got[k], want[k]) for k in ("input_ids", "labels", "position_ids"))
    assert collate_padded(_rows(input_ids=torch.tensor([5, 6, 7], dtype=torch.int32)), 0)["input_ids"].dtype == torch.int64


@pytest.mark.parametrize("kw, match", [
    ({"assistant_masks": torch.tensor([False, True])}, "assistant_masks has shape \\(2,\\) but input_ids \\(3,\\)"),
    ({"offsets": torch.tensor([0, 1, 5])}, "offsets must rise from 0 to the number of tokens \\(3\\)"),
    ({"offsets": torch.tensor([0, 2, 1, 3])}, "offsets must rise"),
    ({"offsets": torch.tensor([1, 3])}, "offsets must rise from 0"),
    ({"offsets": torch.tensor([0.0, 3.0])}, "offsets must be 1-D integers"),
    ({"input_ids": torch.tensor([5.0, 6.0, 7.0])}, "input_ids must be one flat tensor of integer ids"),
    ({"columns": {"logprobs": torch.zeros(2)}}, "column 'logprobs' must be a tensor with one entry per token \\(3\\)"),
    ({"columns": {"logprobs": [0.0, 0.0, 0.0]}}, "column 'logprobs' must be a tensor"),
])
def test_token_rows_that_do_not_line_up_are_refused(kw, match):
    # each gave a torch reshape/broadcast error at collate time, or silently shifted rows
    with pytest.raises(ValueError, match=match):
        _rows(**kw)


def test_token_rows_index():
    rows = _rows()
    assert rows[np.int64(-1)]["input_ids"].tolist() == [6, 7] and [r["input_ids"].tolist() for r in rows[:]] == [[5], [6, 7]]
    with pytest.raises(TypeError, match="a row number must be an int"):
        rows[1.0]
    with pytest.raises(IndexError, match="row 2 is out of range for 2 rows"):
        rows[2]


def _ragged(offsets, n=10):
    values = TensorDict({"input_ids": torch.arange(n), "assistant_masks": torch.ones(n, dtype=torch.bool)}, batch_size=[n])
    return RaggedTensorDict(values, torch.tensor(offsets))


def test_dataset_refuses_offsets_that_decrease(tmp_path):
    # it opened, and sequence 1 had length -2 (an error about a negative length later, in pack)
    with pytest.raises(ValueError, match="offsets must not decrease"):
        TokenDataset(_ragged([0, 6, 4, 10]))  # the stack itself refuses them
    _ragged([0, 4, 10]).memmap(tmp_path / "t")
    off = next(p for p in (tmp_path / "t").rglob("*") if "offsets" in p.name)
    raw = bytearray(off.read_bytes())
    raw[8:16] = (12).to_bytes(8, "little")  # a damaged folder: offsets 0, 12, 10
    off.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="offsets must not decrease"):
        TokenDataset(tmp_path / "t")


@pytest.mark.parametrize("max_length, lengths", [
    (np.int64(3), [3, 3]), (torch.tensor(3).item(), [3, 3]), (2 ** 63, [4, 6]), (10 ** 30, [4, 6]), (6, [4, 6]),
])
def test_dataset_max_length_numbers(max_length, lengths):
    ds = TokenDataset(_ragged([0, 4, 10]), max_length=max_length)  # 2**63 was an OverflowError inside numpy
    assert ds.lengths.tolist() == lengths and ds.num_tokens == sum(lengths)
    assert [int(ds[i]["input_ids"].numel()) for i in range(len(ds))] == lengths


# -- collates ----------------------------------------------------------------------------------
from chatdata.train import collate_prefix_tree  # noqa: E402


@pytest.mark.parametrize("collate", [collate_padding_free, lambda r: collate_padded(r, 0), collate_prefix_tree])
def test_collates_refuse_negative_ids(collate):
    rows = [{"input_ids": [3, 4]}, {"input_ids": [1, -100, 2], "assistant_masks": [1, 1, 1]}]
    # -100 became a label that is never trained (and -5 an embedding error inside the model)
    with pytest.raises(ValueError, match="row 1: input_ids holds -100 at position 1: token ids must be >= 0"):
        collate(rows)
    rows = TokenRows(torch.tensor([3, 4, -1]), torch.ones(3, dtype=torch.bool), torch.tensor([0, 2, 3]))
    with pytest.raises(ValueError, match="row 1: input_ids holds -1 at position 0"):
        collate(rows)


@pytest.mark.parametrize("collate", [collate_padding_free, lambda r: collate_padded(r, 0), collate_prefix_tree])
def test_a_column_only_some_rows_carry_is_refused(collate):
    # was: zeros for the rows without it; a logprob of 0 is a probability of 1
    rows = [{"input_ids": [1, 2], "logprobs": [-0.5, -1.0]}, {"input_ids": [3]}]
    with pytest.raises(ValueError, match="row 1 has no logprobs but row 0 has: give every row of a batch its logprobs"):
        collate(rows)


def test_a_row_without_a_mask_trains_every_token_in_every_batch():
    rows = [{"input_ids": [1, 2], "assistant_masks": [0, 1]}, {"input_ids": [3, 4]}]
    assert collate_padding_free(rows)["labels"].tolist() == [[-100, 2, -100, 4]]  # each row's first label: -100
    assert collate_prefix_tree(rows)["assistant_masks"].tolist() == [[False, True], [True, True]]  # was [False, False]
    rows = [{"input_ids": [1, 2], "labels": [-100, 2]}, {"input_ids": [3, 4], "assistant_masks": [1, 0]}]
    assert collate_prefix_tree(rows)["labels"].tolist() == [[-100, 2], [3, -100]]  # was [0, 0]: token 0 trained


def test_integer_masks_are_bool_masks_in_every_batch():
    # a tree batch passed a mask of 2 through as int64: a loss multiplying by it weighted that token twice
    rows = [{"input_ids": [7, 8, 9], "assistant_masks": [0, 2, 1]}, {"input_ids": [7, 8, 5], "assistant_masks": [0, 1, 0]}]
    tree = collate_prefix_tree(rows)
    assert tree["assistant_masks"].dtype == torch.bool
    assert tree["assistant_masks"].tolist() == [[False, True, True], [False, True, False]]
    assert collate_padding_free(rows)["labels"].tolist() == [[-100, 8, 9, -100, 8, -100]]
    assert collate_padded(rows, 0)["labels"].tolist() == [[-100, 8, 9], [-100, 8, -100]]


@pytest.mark.parametrize("rows, err, match", [
    ({"input_ids": [1, 2]}, TypeError, "rows must be a list of dicts"),
    (TensorDict({"input_ids": torch.tensor([1, 2])}, batch_size=[]), TypeError, "one row: wrap it in a list"),
    ("abc", TypeError, "rows must be a list of dicts"),
    ([{"input_ids": None}], TypeError, "row 0: input_ids must be a list or tensor of integer ids, got NoneType"),
    ([{"input_ids": "12"}], TypeError, "row 0: input_ids must be a list or tensor of integer ids, got str"),
    ([{"input_ids": [1, 2]}, {"input_ids": [[1], 2]}], TypeError, "row 1: input_ids must be a list or tensor"),
])
def test_collates_name_what_is_wrong_with_rows(rows, err, match):
    # a single TensorDict row said 'cannot collate an empty batch'; None and str were torch errors
    for collate in (collate_padding_free, lambda r: collate_padded(r, 0), collate_prefix_tree):
        with pytest.raises(err, match=match):
            collate(rows)


# -- prefix trees ------------------------------------------------------------------------------
from chatdata.train import ConcatTokenDataset, tree_attention_mask, tree_block_mask, tree_logprobs  # noqa: E402


@pytest.mark.parametrize("rows, T, row_index", [
    ([{"input_ids": [1, 2, 3]}], 3, [[0, 1, 2]]),                                         # a single row
    ([{"input_ids": [1, 2, 3]}, {"input_ids": [1, 2, 3]}], 3, [[0, 1, 2], [0, 1, 2]]),     # identical rows
    ([{"input_ids": [1, 2, 3]}, {"input_ids": [1, 2]}], 3, [[0, 1, 2], [0, 1, -1]]),      # a row that is a prefix
    ([{"input_ids": [7], "assistant_masks": [0]}, {"input_ids": [7], "assistant_masks": [0]}], 1, [[0], [0]]),
])
def test_tree_edge_rows_score_like_each_row_alone(rows, T, row_index):
    b = collate_prefix_tree(rows)
    assert b["input_ids"].shape == (1, T) and b["row_index"].tolist() == row_index
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(1, T, 10, generator=g)
    lp = tree_logprobs(logits, b)
    for n, r in enumerate(rows):  # each row's tokens scored against its own prefix
        ids = torch.as_tensor(r["input_ids"])
        pos = b["row_index"][n, :ids.numel()]
        want = torch.log_softmax(logits[0, pos[:-1]], -1).gather(1, ids[1:, None])[:, 0]
        assert torch.allclose(lp[n, 1:ids.numel()], want)


def test_tree_masks_and_logprobs_refuse_what_they_cannot_use():
    b = collate_prefix_tree([{"input_ids": [1, 2, 3]}, {"input_ids": [1, 2, 4]}])
    for dtype in (torch.int64, torch.bool, "float32"):  # was torch.finfo's 'requires a floating point input type'
        with pytest.raises(TypeError, match="dtype must be a floating dtype"):
            tree_attention_mask(b, dtype=dtype)
    assert tree_attention_mask(b, dtype=torch.bfloat16).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="the tree holds token id 4 but logits have 4 entries per token"):
        tree_logprobs(torch.zeros(1, 4, 4), b)  # was a bare torch IndexError
    assert tree_block_mask(b, np.int64(64)).shape == tree_block_mask(b, 64).shape


def _concat_part(n, **cols):
    values = TensorDict({"input_ids": torch.arange(n, dtype=torch.int32), "assistant_masks": torch.ones(n, dtype=torch.bool),
                         **cols}, batch_size=[n])
    return RaggedTensorDict(values, torch.tensor([0, n // 2, n]))


def test_concat_refuses_parts_that_disagree_on_a_column_up_front():
    parts = [_concat_part(4, logprobs=torch.zeros(4)), _concat_part(6, logprobs=torch.zeros(6, dtype=torch.float64))]
    # was refused only when a batch first mixed rows of both parts, mid-training
    with pytest.raises(ValueError, match="part 1 of the sources gives side column 'logprobs' as torch.float64"):
        ConcatTokenDataset(parts)
    with pytest.raises(ValueError, match="per-token shape \\(2,\\)"):
        ConcatTokenDataset([_concat_part(4, routed_experts=torch.zeros(4, 3)), _concat_part(6, routed_experts=torch.zeros(6, 2))])
    with pytest.raises(TypeError, match="takes a list of token sets"):
        ConcatTokenDataset({"a": _concat_part(4)})  # iterated the keys: 'a: no such token set'
    # a column only some parts have: its rows from the others were zeros (logprobs of 0.0 = probability 1)
    with pytest.raises(ValueError, match="part 0 of the sources has no 'logprobs' column but part 1 has one"):
        ConcatTokenDataset([_concat_part(4), _concat_part(6, logprobs=torch.zeros(6))])
    both = ConcatTokenDataset([_concat_part(4, logprobs=-torch.ones(4)), _concat_part(6, logprobs=-torch.ones(6))])
    assert torch.equal(both.__getitems__([0, 3]).columns["logprobs"], -torch.ones(5))


def test_a_dataset_where_lengths_belong_and_a_damaged_ragged_batch():
    ds = TokenDataset(_ragged([0, 4, 10]))
    with pytest.raises(TypeError, match="pass TokenDataset.lengths"):
        PackedBatchSampler(ds, 8)
    with pytest.raises(TypeError, match="pass TokenDataset.lengths"):
        pack(ds, 8)
    assert sorted(i for b in PackedBatchSampler(ds, 8, strategy="tree") for i in b) == [0, 1]
    with pytest.raises(ValueError, match="offsets must not decrease: offset 2 is 4, after 6"):
        _ragged([0, 6, 4, 10])  # collating it was a torch reshape error: the stack refuses such offsets now


def test_collate_padded_pad_token_id():
    rows = [{"input_ids": [1, 2, 3]}, {"input_ids": [4]}]
    assert collate_padded(rows, np.int64(0))["input_ids"].tolist() == [[1, 2, 3], [4, 0, 0]]  # was refused
    with pytest.raises(ValueError, match="pad_token_id must be a token id >= 0"):
        collate_padded(rows, -100)  # went into input_ids: an embedding error inside the model
    with pytest.raises(ValueError, match="pad_token_id must be an int"):
        collate_padded(rows, 0.0)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(st.tuples(st.integers(0, 50), st.integers(-2, 2)), max_size=8), min_size=1, max_size=6),
       id_dtype=st.sampled_from([torch.int32, torch.int64, torch.uint8]),
       mask_dtype=st.sampled_from([torch.bool, torch.int8, torch.int64]))
def test_token_rows_collate_like_the_same_rows_as_dicts(rows, id_dtype, mask_dtype):
    """Flat TokenRows (any int dtype, masks of any integers) and the same rows as dicts give the same batch."""
    ids = torch.tensor([i for r in rows for i, _ in r], dtype=torch.int64)
    masks = torch.tensor([m for r in rows for _, m in r], dtype=torch.int64)
    offsets = torch.tensor([0] + np.cumsum([len(r) for r in rows]).tolist())
    flat = TokenRows(ids.to(id_dtype), (masks != 0) if mask_dtype == torch.bool else masks.to(mask_dtype), offsets)
    dicts = [{"input_ids": [i for i, _ in r], "assistant_masks": [m != 0 for _, m in r]} for r in rows]
    if not ids.numel():  # every row empty: both refuse, as collate_padding_free does
        for rows_ in (flat, dicts):
            with pytest.raises(ValueError, match="all empty"):
                collate_padded(rows_, 0)
        return
    padded = collate_padded(flat, 0), collate_padded(dicts, 0)
    assert all(torch.equal(padded[0][k], padded[1][k]) for k in padded[1])
    a, b = collate_padding_free(flat), collate_padding_free(dicts)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k]
                                        for k in a)
    assert a["labels"].dtype == a["input_ids"].dtype == torch.int64
