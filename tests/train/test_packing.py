"""pack(): invariants (hypothesis), quality, overflow modes and bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from chatdata.train import PackingPlan, pack


def _check_plan(plan, lengths, max_tokens):
    idx = plan.indices
    assert idx.dtype == torch.int64
    assert sorted(idx.tolist()) == list(range(len(lengths)))          # every index exactly once
    assert all(b.dtype == torch.int64 and b.numel() > 0 for b in plan)
    per_bin = torch.tensor([int(torch.as_tensor(lengths)[b].sum()) for b in plan])
    assert int(per_bin.max()) <= max_tokens                          # no bin over max_tokens
    assert torch.equal(per_bin, plan.bin_lengths)
    assert len(plan) >= plan.lower_bound


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=200), st.integers(1, 300), st.sampled_from(["bfd", "ffd"]),
       st.one_of(st.none(), st.integers(0, 2**31)))
def test_pack_invariants(lengths, max_tokens, strategy, seed):
    lengths = [min(x, max_tokens) for x in lengths]
    plan = pack(torch.tensor(lengths), max_tokens, strategy=strategy, seed=seed)
    _check_plan(plan, lengths, max_tokens)
    tokens = sum(lengths)
    assert plan.efficiency == pytest.approx(tokens / (len(plan) * max_tokens))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=60), st.integers(1, 20))
def test_split_and_truncate_keep_every_token_or_cut(lengths, max_tokens):
    split = pack(lengths, max_tokens, overflow="split")
    assert int(split.bin_lengths.max()) <= max_tokens
    assert split.num_tokens == sum(lengths)                            # split loses nothing
    cover = {}
    for i, a, b in zip(split.indices.tolist(), split.starts.tolist(), split.stops.tolist()):
        cover.setdefault(i, []).append((a, b))
    for i, spans in cover.items():                                     # pieces tile each sequence
        spans.sort()
        assert spans[0][0] == 0 and spans[-1][1] == lengths[i]
        assert all(p[1] == q[0] for p, q in zip(spans, spans[1:]))
    trunc = pack(lengths, max_tokens, overflow="truncate")
    assert sorted(trunc.indices.tolist()) == list(range(len(lengths)))
    assert trunc.num_tokens == sum(min(x, max_tokens) for x in lengths)
    dropped = pack(lengths, max_tokens, overflow="drop") if any(x <= max_tokens for x in lengths) else None
    if dropped is not None:
        kept = sorted(dropped.indices.tolist())
        assert kept == [i for i, x in enumerate(lengths) if x <= max_tokens]
        assert dropped.dropped.tolist() == [i for i, x in enumerate(lengths) if x > max_tokens]


def test_near_lower_bound_on_lognormal_lengths():
    rng = np.random.default_rng(0)
    lengths = np.clip(np.rint(rng.lognormal(math.log(600) - 0.5, 1.0, 20_000)), 1, 8192).astype(np.int64)
    for strategy in ("bfd", "ffd"):
        plan = pack(torch.from_numpy(lengths), 8192, strategy=strategy)
        _check_plan(plan, lengths, 8192)
        assert len(plan) <= math.ceil(plan.lower_bound * 1.002) + 1, (strategy, len(plan), plan.lower_bound)


def test_best_fit_uses_the_tightest_bin():
    # 6 opens a bin (room 2), 5 (room 3), 4 (room 4); 3 goes to the room-3 bin under BFD,
    # to the first bin with room (room 3 too: bin 1) under FFD; 2 goes to room 2 (BFD) / bin 0 (FFD)
    assert [b.tolist() for b in pack([5, 3, 4, 2, 6], 8)] == [[4, 3], [0, 1], [2]]
    assert [b.tolist() for b in pack([2, 7, 5, 1], 8, strategy="ffd")] == [[1, 3], [2, 0]]
    assert [b.tolist() for b in pack([2, 7, 5, 1], 8, strategy="bfd")] == [[1, 3], [2, 0]]


def test_plan_state_dict_round_trip(tmp_path):
    plan = pack([5, 3, 4, 2, 6], 8)
    torch.save(plan.state_dict(), tmp_path / "plan.pt")
    again = PackingPlan.from_state_dict(torch.load(tmp_path / "plan.pt", weights_only=True))
    assert [b.tolist() for b in again] == [b.tolist() for b in plan] and again.max_tokens == 8


def test_seed_changes_bin_mates_deterministically():
    lengths = torch.full((64,), 10)
    a, b, c = pack(lengths, 40, seed=1), pack(lengths, 40, seed=1), pack(lengths, 40, seed=2)
    assert [x.tolist() for x in a] == [x.tolist() for x in b]
    assert [x.tolist() for x in a] != [x.tolist() for x in c]


def test_empty_sequences_are_kept():
    plan = pack([0, 3, 0], 4)
    assert sorted(plan.indices.tolist()) == [0, 1, 2]
    assert len(pack([0, 0], 4)) == 1


@pytest.mark.parametrize("lengths, max_tokens, kwargs, err, match", [
    ([], 8, {}, ValueError, "empty"),
    (torch.tensor([1.0, 2.0]), 8, {}, TypeError, "float32"),
    (np.array([1.5]), 8, {}, TypeError, "float64"),
    (torch.tensor([True]), 8, {}, TypeError, "bool"),
    ([[1, 2]], 8, {}, ValueError, "1-D"),
    ([3, -1], 8, {}, ValueError, r"lengths\[1\] is -1"),
    ([3], 0, {}, ValueError, "max_tokens must be > 0"),
    ([3], -5, {}, ValueError, "max_tokens must be > 0"),
    ([3], 2.5, {}, TypeError, "max_tokens must be an int"),
    ([3], 8, {"strategy": "nf"}, ValueError, "strategy"),
    ([3], 8, {"overflow": "wrap"}, ValueError, "overflow"),
    ([3], 8, {"strategy": "bfd_split"}, ValueError, "overflow='split'"),  # TRL's names, said in ours
    ([3], 8, {"strategy": "wrapped"}, ValueError, "no counterpart"),
    ([3, 9, 12], 8, {}, ValueError, r"sequence 1 has 9 tokens, more than max_tokens=8 \(2 sequence"),
    ([9], 8, {"overflow": "drop"}, ValueError, "empty"),
    (["a"], 8, {}, TypeError, "lengths"),
])
def test_bad_input(lengths, max_tokens, kwargs, err, match):
    with pytest.raises(err, match=match):
        pack(lengths, max_tokens, **kwargs)


def _one_at_a_time(lengths, max_tokens, best_fit):
    """Textbook BFD / FFD: sequences by decreasing length, each into the tightest (BFD) or the first
    (FFD) bin it fits, else a new bin (what TRL's pack_dataset "bfd" does within one map batch)."""
    rooms = []
    for n in sorted(lengths, reverse=True):
        fits = [j for j, r in enumerate(rooms) if r >= n]
        if not fits:
            rooms.append(max_tokens - n)
            continue
        j = min(fits, key=lambda j: rooms[j]) if best_fit else fits[0]
        rooms[j] -= n
    return len(rooms)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(1, 99), min_size=1, max_size=150), st.integers(99, 400), st.sampled_from(["bfd", "ffd"]))
def test_lengths_below_the_grouping_pack_into_as_many_bins_as_textbook_bfd_ffd(lengths, max_tokens, strategy):
    """Below ~100 tokens every length is a group of its own, so the grouped placement is exact: as
    many bins as placing the sequences one at a time (docs/train.md compares it with TRL's)."""
    plan = pack(lengths, max_tokens, strategy=strategy)
    assert len(plan) == _one_at_a_time(lengths, max_tokens, strategy == "bfd")
