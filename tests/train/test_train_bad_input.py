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
