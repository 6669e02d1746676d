"""Prefix-tree batches: layout and size, bad input, the flex_attention BlockMask, and tree packing."""
from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from chatdata import History
from chatdata.train import (PackedBatchSampler, TokenDataset, TreePackingPlan, collate_prefix_tree, pack,
                            tree_attention_mask, tree_block_mask, tree_logprobs, tree_model_inputs)
from tree_test_helpers import trie_nodes

rows_strategy = st.lists(st.lists(st.integers(0, 3), min_size=1, max_size=9), min_size=1, max_size=8)


def allowed_by_prefixes(rows, batch):
    """Token i may see j iff j's prefix is a prefix of i's: the rule the tree mask must encode."""
    ri = batch["row_index"]
    prefix = {}
    for n, r in enumerate(rows):
        for k in range(len(r)):
            prefix[int(ri[n, k])] = tuple(r[:k + 1])
    T = len(prefix)
    return torch.tensor([[prefix[i][:len(prefix[j])] == prefix[j] for j in range(T)] for i in range(T)])


@settings(max_examples=60, deadline=None)
@given(rows_strategy)
def test_layout_is_the_trie(rows):
    b = collate_prefix_tree([{"input_ids": r} for r in rows])
    T = b["input_ids"].shape[1]
    assert T == trie_nodes(rows)  # each distinct prefix once, exactly
    ids, pos, ri = b["input_ids"][0], b["position_ids"][0], b["row_index"]
    assert ri.shape == (len(rows), max(map(len, rows))) and b["row_lengths"].tolist() == list(map(len, rows))
    for n, r in enumerate(rows):
        assert ids[ri[n, :len(r)]].tolist() == r and pos[ri[n, :len(r)]].tolist() == list(range(len(r)))
        assert (ri[n, len(r):] == -1).all()
    assert torch.equal(tree_attention_mask(b)[0, 0] == 0, allowed_by_prefixes(rows, b))
    assert b["subtree_end"].dtype == b["row_index"].dtype == torch.int64
    # depth-first: every subtree is one contiguous range that starts at its root
    se = b["subtree_end"][0]
    assert bool(((se > torch.arange(T)) & (se <= T)).all())


def test_grpo_group_costs_prompt_plus_responses():
    prompt = list(range(100, 160))
    responses = [[k] + list(range(200, 200 + 5 * k)) for k in range(8)]
    b = collate_prefix_tree([{"input_ids": prompt + r} for r in responses])
    assert b["input_ids"].shape[1] == len(prompt) + sum(map(len, responses))
    # identical rows and a row that is a prefix of another add nothing
    b = collate_prefix_tree([{"input_ids": prompt + responses[3]}] * 3 + [{"input_ids": prompt}])
    assert b["input_ids"].shape[1] == len(prompt) + len(responses[3])


def test_session_branches_share_their_prefix():
    """Records as chatdata serve's read_sessions gives them: forks share the prefix, metadata is left out."""
    trunk = torch.arange(10, 40)
    records = []
    for branch, tail in enumerate([torch.tensor([1, 2, 3, 4]), torch.tensor([1, 2, 9]), torch.tensor([7])]):
        ids = torch.cat([trunk, tail])
        mask = torch.zeros(ids.numel(), dtype=torch.int64)
        mask[30:] = 1
        records.append({"session_id": "s1", "branch": branch, "parent": None if branch == 0 else (0, 30 + (branch == 1) * 2),
                        "history": History.from_chats([[{"role": "user", "content": "hi"}]]),
                        "input_ids": ids, "assistant_masks": mask, "logprobs": -mask.float() * 0.5})
    b = collate_prefix_tree(records)
    assert b["input_ids"].shape[1] == 30 + 4 + 1 + 1
    assert set(b) == {"input_ids", "position_ids", "subtree_end", "row_index", "row_lengths", "assistant_masks", "logprobs"}
    assert torch.equal(b["logprobs"][1, :33], records[1]["logprobs"])


@pytest.mark.parametrize("rows, match", [
    ([{"input_ids": [1, 2, 3], "logprobs": torch.zeros(2)}], r"row 0: logprobs has 2 entries .* input_ids has 3"),
    ([{"input_ids": [1, 2]}, {"input_ids": [1], "routed_experts": torch.zeros(2, 4, 2)}], "row 1: routed_experts"),
    ([{"input_ids": [1, 2]}, {"input_ids": []}], "row 1: input_ids is empty"),
    ([{"input_ids": [[1, 2]]}], "row 0: input_ids must be 1-D"),
    ([{"input_ids": [1, 2], "row_index": torch.zeros(2)}], "row_index"),
    ([{"input_ids": [1], "w": torch.zeros(1, 2)}, {"input_ids": [2], "w": torch.zeros(1, 3)}], "row 1: w has per-token shape"),
    ([], "empty"),
])
def test_bad_rows_name_row_and_column(rows, match):
    with pytest.raises(ValueError, match=match):
        collate_prefix_tree(rows)


def test_bad_batch_and_logits():
    b = collate_prefix_tree([{"input_ids": [1, 2]}, {"input_ids": [1, 3]}])
    with pytest.raises(ValueError, match="not a prefix-tree batch"):
        tree_attention_mask({"input_ids": b["input_ids"]})
    with pytest.raises(ValueError, match="T = 3"):
        tree_logprobs(torch.zeros(1, 4, 5), b)
    with pytest.raises(ValueError, match="flash"):
        tree_model_inputs(b, attn_implementation="flash_attention_2")
    with pytest.raises(ValueError, match="block_size"):
        tree_block_mask(b, block_size=0)


def test_block_mask_attends_like_the_dense_mask():
    """flex_attention with tree_block_mask equals sdpa with the dense mask (forward, no grad: what
    torch runs on CPU), with full, partial and skipped blocks all present."""
    from torch.nn.attention.flex_attention import flex_attention

    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(0, 50, (150,), generator=g)
    rows = [{"input_ids": torch.cat([prompt[:100 + 10 * k], torch.randint(0, 50, (40 + 30 * k,), generator=g)])}
            for k in range(5)]
    b = collate_prefix_tree(rows)
    T = b["input_ids"].shape[1]
    bm = tree_block_mask(b, block_size=64)
    assert bm.shape == (1, 1, T, T)
    assert int(bm.full_kv_num_blocks.sum()) > 0 and int(bm.kv_num_blocks.sum()) > 0
    assert int(bm.kv_num_blocks.sum() + bm.full_kv_num_blocks.sum()) < bm.kv_indices.shape[-1] ** 2  # some skipped
    q, k, v = torch.randn(3, 1, 2, T, 16, generator=g).unbind(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager flex_attention warns that it is unfused
        out = flex_attention(q, k, v, block_mask=bm)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=tree_attention_mask(b))
    assert float((out - ref).abs().max()) < 1e-5
    inputs = tree_model_inputs(b, attn_implementation="flex_attention")
    assert type(inputs["attention_mask"]).__name__ == "BlockMask" and inputs["use_cache"] is False


def grpo_dataset_rows(groups=6, G=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    rows, group_of = [], []
    head = [1, 2, 3, 4]  # every row starts with it (a system prompt): counted once per bin
    for k in range(groups):
        prompt = head + [100 + k] + torch.randint(10, 90, (int(torch.randint(5, 40, (1,), generator=g)),), generator=g).tolist()
        for r in range(G):
            rows.append({"input_ids": prompt + [r] + torch.randint(10, 90, (int(torch.randint(1, 30, (1,), generator=g)),),
                                                                 generator=g).tolist()})
            group_of.append(k)
    return rows, group_of


def test_pack_tree_keeps_groups_and_fits_bins():
    rows, group_of = grpo_dataset_rows()
    plan = pack(rows, max_tokens=120, strategy="tree", seed=3)
    assert isinstance(plan, TreePackingPlan) and sorted(plan.indices.tolist()) == list(range(len(rows)))
    for i in range(len(plan)):
        b = collate_prefix_tree([rows[j] for j in plan[i].tolist()])
        assert b["input_ids"].shape[1] == int(plan.tree_lengths[i]) <= 120
    for k in set(group_of):
        members = [j for j, g in enumerate(group_of) if g == k]
        size = collate_prefix_tree([rows[j] for j in members])["input_ids"].shape[1]
        holding = {i for i in range(len(plan)) if set(plan[i].tolist()) & set(members)}
        assert len(holding) == 1 or size > 120, (k, holding, size)
    assert 0 < plan.efficiency <= 1 and plan.lower_bound <= len(plan)
    assert TreePackingPlan.from_state_dict(plan.state_dict()).tree_lengths.tolist() == plan.tree_lengths.tolist()
    # a group larger than a bin is split into subtrees; each bin still fits
    small = pack(rows, max_tokens=50, strategy="tree", overflow="drop")
    assert all(int(t) <= 50 for t in small.tree_lengths)
    assert sorted(small.indices.tolist() + small.dropped.tolist()) == list(range(len(rows)))
    cut = pack(rows, max_tokens=50, strategy="tree", overflow="truncate")
    assert int(cut.stops.max()) == 50 and all(int(t) <= 50 for t in cut.tree_lengths)


def test_pack_tree_bad_input():
    rows, _ = grpo_dataset_rows(groups=2)
    with pytest.raises(TypeError, match="pass the dataset"):
        pack(torch.tensor([3, 4]), max_tokens=10, strategy="tree")
    with pytest.raises(ValueError, match=r"sequence \d+ has \d+ tokens, more than max_tokens=10"):
        pack(rows, max_tokens=10, strategy="tree")
    with pytest.raises(ValueError, match="'split' would cut a row from its own prefix"):
        pack(rows, max_tokens=10, strategy="tree", overflow="split")


def test_sampler_feeds_tree_batches(tmp_path, sample_tokenizer):
    """TokenDataset + PackedBatchSampler(strategy="tree") + collate_prefix_tree in a DataLoader."""
    from chatdata import History

    chats = [[{"role": "system", "content": "You are terse."}, {"role": "user", "content": f"Question {q}?"},
              {"role": "assistant", "content": f"Answer {q}.{a}"}] for q in range(6) for a in range(4)]
    out = History.from_chats(chats).apply_chat_template(tokenizer=sample_tokenizer, tokenize=True, return_dict=True,
                                                        return_assistant_tokens_mask=True, add_generation_prompt=False)
    out.memmap(tmp_path / "tok")
    ds = TokenDataset(tmp_path / "tok")
    sampler = PackedBatchSampler(ds, max_tokens=200, strategy="tree", num_replicas=2, rank=1, seed=0)
    loader = torch.utils.data.DataLoader(ds, batch_sampler=sampler, collate_fn=collate_prefix_tree)
    seen = 0
    for batch, idx in zip(loader, iter(PackedBatchSampler(ds, max_tokens=200, strategy="tree", num_replicas=2, rank=1))):
        assert batch["input_ids"].shape[1] <= 200 < int(ds.lengths[idx].sum())
        assert torch.equal(batch["labels"][0, :int(ds.lengths[idx[0]])], ds[idx[0]]["labels"])
        seen += 1
    assert seen == len(sampler) > 0
    with pytest.raises(TypeError, match="pass the dataset"):
        PackedBatchSampler(ds.lengths, max_tokens=200, strategy="tree")
