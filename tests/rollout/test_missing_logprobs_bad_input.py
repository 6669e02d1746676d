"""A response given without logprobs has no logprob values: its ids carry NaN, never 0.0.

0.0 is a real logprob (probability 1): an importance ratio ``exp(new - old)`` or a KL term built
on it would be silently wrong. NaN makes such a loss NaN. The ids the policy did not sample
(mask 0) keep 0.0, so a masked loss over rows that have logprobs stays finite. The values travel
unchanged through ``tokens()`` (both forms), ``memmap``, ``TokenDataset`` and the collates.
"""
from __future__ import annotations

import torch

from chatdata.rollout import Conversation, Rollout
from chatdata.train import TokenDataset, collate_padded, collate_padding_free, collate_prefix_tree


def enc(tok, text):
    return torch.tensor(tok.encode(text, add_special_tokens=False))


def _rollout(qwen):
    ro = Rollout([[{"role": "user", "content": "2+2?"}], [{"role": "user", "content": "3+3?"}]], tokenizer=qwen)
    ro.add_response([enc(qwen, "4<|im_end|>"), enc(qwen, "6<|im_end|>")], logprobs=[torch.tensor([-0.5, -0.25]), None])
    ro.add_messages([[{"role": "user", "content": "and 5+5?"}]] * 2)
    ro.add_response([enc(qwen, "10<|im_end|>")] * 2)  # a backend that gave no logprobs: both rows
    return ro


def _check(mask: torch.Tensor, lp: torch.Tensor, nan_on_mask: bool) -> None:
    m = mask.bool()
    assert not lp[~m].any(), "ids the policy did not sample hold 0.0 (masked out)"
    assert lp[m].isnan().all() if nan_on_mask else not lp[m].isnan().any()


def test_rollout_tokens_hold_nan_where_no_logprobs_were_given(qwen):
    ro = _rollout(qwen)
    t = ro.tokens()
    spans = ro.turn_spans()
    for i in range(2):
        lp, mask = t[i]["logprobs"], t[i]["assistant_masks"]
        (s0, e0), (s1, e1) = spans[i].tolist()
        if i == 0:
            assert lp[s0:e0].tolist() == [-0.5, -0.25]
        else:
            assert lp[s0:e0].isnan().all()
        assert lp[s1:e1].isnan().all()
        assert not lp[~mask.bool()].any()
    # a PPO ratio on these rows is NaN: the missing values cannot be trained on by accident
    new = torch.zeros_like(t[1]["logprobs"])
    ratio = torch.exp(new - t[1]["logprobs"])[t[1]["assistant_masks"].bool()]
    assert ratio.isnan().all()
    per_turn = ro.tokens(per_turn=True)
    assert len(per_turn) == 4
    for j, nan in enumerate([False, True, True, True]):
        _check(per_turn[j]["assistant_masks"], per_turn[j]["logprobs"], nan)


def test_prompt_only_row_has_no_nan(qwen):
    ro = Rollout([[{"role": "user", "content": "hi"}]], tokenizer=qwen)
    t = ro.tokens()[0]
    assert not t["assistant_masks"].any() and not t["logprobs"].isnan().any() and not t["logprobs"].any()


def test_nan_logprobs_stay_aligned_through_memmap_dataset_and_collates(qwen, tmp_path):
    ro = _rollout(qwen)
    tokens = ro.tokens(per_turn=True)
    tokens.memmap(tmp_path / "turns")
    ds = TokenDataset(tmp_path / "turns")
    rows = [ds[i] for i in range(len(ds))]
    for j, nan in enumerate([False, True, True, True]):
        _check(rows[j]["assistant_masks"], rows[j]["logprobs"], nan)
    flat = collate_padding_free(rows)
    n0 = len(rows[0]["input_ids"])
    _check(flat["labels"][0, :n0] != -100, flat["logprobs"][0, :n0], False)
    _check(flat["labels"][0, n0:] != -100, flat["logprobs"][0, n0:], True)
    padded = collate_padded(rows, pad_token_id=qwen.pad_token_id)
    for j, nan in enumerate([False, True, True, True]):
        n = len(rows[j]["input_ids"])
        _check(padded["labels"][j, :n] != -100, padded["logprobs"][j, :n], nan)
    tree = collate_prefix_tree(rows)
    for j, nan in enumerate([False, True, True, True]):
        n = len(rows[j]["input_ids"])
        _check(tree["assistant_masks"][j, :n], tree["logprobs"][j, :n], nan)


def test_conversation_fork_replays_a_turn_without_logprobs(qwen):
    c = Conversation([{"role": "user", "content": "hi"}], tokenizer=qwen)
    c.add_response(enc(qwen, "yo<|im_end|>"))  # no logprobs
    c.add_messages([{"role": "user", "content": "again"}])
    c.add_response(enc(qwen, "ok<|im_end|>"), torch.tensor([-1.0, -2.0]))
    f = c.fork(4)  # the turn without logprobs is replayed without them (NaN is no logprob to pass on)
    lp, mask = f.tokens()["logprobs"], f.tokens()["assistant_masks"].bool()
    torch.testing.assert_close(lp, c.tokens()["logprobs"], rtol=0, atol=0, equal_nan=True)
    assert lp[mask].isnan().sum() == 2 and lp[mask][-2:].tolist() == [-1.0, -2.0]
