"""Side columns of a rollout (add_response(extras=...)), their compact storage, and per-turn rows."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from chatdata import load_memmap
from chatdata.rollout import Rollout
from chatdata.train import TokenDataset, collate_padded, collate_padding_free, collate_prefix_tree

TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "templates"


def say(tok, text):
    return torch.tensor(tok.encode(text, add_special_tokens=False))


def test_extras_are_checked_before_anything_is_stored(qwen):
    ro = Rollout([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]], tokenizer=qwen)
    good, bad = say(qwen, "yes<|im_end|>"), say(qwen, "no<|im_end|>")
    experts = torch.zeros(good.numel(), 3, 2, dtype=torch.int16)
    cases = [
        ({"routed_experts": [experts, torch.zeros(bad.numel() + 1, 3, 2, dtype=torch.int16)]},
         r"row 1: extras\['routed_experts'\] has \d+ entries along its first dim but the response has \d+ ids"),
        ({"logprobs": [experts, experts]}, "writes itself"),
        ({"routed_experts": [experts]}, "1 entries for 2 rows"),
        ({"w": torch.zeros(3)}, "one tensor per row"),
        ({"w": [torch.tensor(1.0), None]}, "row 0"),
    ]
    before = [t.clone() for t in ro.prompt_ids()]
    for extras, match in cases:
        with pytest.raises((ValueError, TypeError), match=match):
            ro.add_response([good, bad], extras=extras)
    assert all(s.shape == (0, 2) for s in ro.turn_spans())  # a refused call stored nothing
    assert all(torch.equal(a, b) for a, b in zip(before, ro.prompt_ids()))
    assert "routed_experts" not in ro.tokens().keys()
    ro.add_response([good, bad], extras={"routed_experts": [experts, None]})
    ro.add_messages([[{"role": "user", "content": "c"}]], rows=[0])
    with pytest.raises(ValueError, match=r"row 0: .*per-token shape \(3, 3\) .* has \(3, 2\)"):
        ro.add_response([good], extras={"routed_experts": [torch.zeros(good.numel(), 3, 3, dtype=torch.int16)]}, rows=[0])


def test_routed_experts_stored_compact_and_round_trip_exactly(qwen, tmp_path):
    g = torch.Generator().manual_seed(0)
    ro = Rollout([[{"role": "user", "content": f"q{i}"}] for i in range(3)], tokenizer=qwen)
    given = {}
    for turn in range(2):
        ids = [say(qwen, f"answer {turn} {i}<|im_end|>") for i in range(3)]
        ex = [torch.randint(0, 256, (t.numel(), 4, 8), generator=g, dtype=torch.int16) for t in ids]
        ro.add_response(ids, extras={"routed_experts": ex, "big": [e.to(torch.int32) * 300 for e in ex]})
        for i, (t, e) in enumerate(zip(ids, ex)):
            given[(i, turn)] = e
        ro.add_messages([[{"role": "user", "content": "more"}]] * 3)
    td = ro.tokens()
    assert td.values.get("routed_experts").dtype == torch.uint8 and td.values.get("big").dtype == torch.int32
    td.memmap(tmp_path / "ro")
    stored = (tmp_path / "ro" / "_values" / "routed_experts.memmap").stat().st_size
    raw_int16 = td.values.get("routed_experts").numel() * 2
    assert stored * 2 <= raw_int16
    spans = ro.turn_spans()
    for source in (td, load_memmap(tmp_path / "ro"), tmp_path / "ro"):
        ds = TokenDataset(source)
        for i in range(3):
            item = ds[i]
            assert item["routed_experts"].dtype == torch.int16 and item["big"].dtype == torch.int32
            for turn, (s, e) in enumerate(spans[i].tolist()):
                assert torch.equal(item["routed_experts"][s:e], given[(i, turn)])
                assert torch.equal(item["big"][s:e], given[(i, turn)].to(torch.int32) * 300)
            outside = torch.ones(item["input_ids"].numel(), dtype=torch.bool)
            for s, e in spans[i].tolist():
                outside[s:e] = False
            assert not item["routed_experts"][outside].any()
        for batch in (collate_padding_free(ds.__getitems__([2, 0])), collate_padded([ds[2], ds[0]], pad_token_id=0),
                      collate_prefix_tree(ds.__getitems__([2, 0]))):
            assert batch["routed_experts"].dtype == torch.int16
    wide = ro.tokens(compact=False)
    assert wide.values.get("routed_experts").dtype == torch.int16 and "column_dtypes" not in wide.keys()


def test_per_turn_rows_are_the_prompts_the_policy_saw(qwen):
    """On Qwen3's template (drops earlier <think>), drift is reported, and each per-turn row is exactly
    prompt_ids() as it was when the turn was sampled, then the turn's ids, masked alone."""
    tok = copy.deepcopy(qwen)
    tok.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
    src = (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    ro = Rollout([[{"role": "user", "content": "2+2?"}], [{"role": "user", "content": "1+1?"}]], tokenizer=tok,
                 chat_template=src)
    seen = {0: [], 1: []}
    for turn in range(3):
        rows = [0, 1] if turn < 2 else [0]
        prompts = ro.prompt_ids(rows=rows)
        ids = [say(tok, f"<think>\nstep {turn} of {r}\n</think>\n\n{turn + r}<|im_end|>") for r in rows]
        lps = [-torch.rand(t.numel()) for t in ids]
        ro.add_response(ids, logprobs=lps, extras={"adv": [torch.full((t.numel(),), float(turn)) for t in ids]}, rows=rows)
        for r, p, t, lp in zip(rows, prompts, ids, lps):
            seen[r].append((p.clone(), t, lp))
        if turn < 2:
            ro.add_messages([[{"role": "user", "content": f"then {turn}?"}]] * len(rows), rows=rows)
    assert all(d is not None for d in ro.drift())  # a fresh render drops the earlier <think>
    per_turn = ro.tokens(per_turn=True)
    expected = [x for r in (0, 1) for x in seen[r]]
    assert len(per_turn) == len(expected) == 5
    for k, (prompt, ids, lp) in enumerate(expected):
        row = per_turn[k]
        assert torch.equal(row["input_ids"], torch.cat([prompt, ids]))
        assert row["assistant_masks"].tolist() == [0] * prompt.numel() + [1] * ids.numel()
        assert torch.equal(row["logprobs"][prompt.numel():], lp) and not row["logprobs"][:prompt.numel()].any()
        assert not row["adv"][:prompt.numel()].any()
    # one tree of a row's turns costs one conversation: the kept ids up to its last response
    for r in (0, 1):
        rows = [per_turn[k] for k in range(len(per_turn)) if k // 3 == r] if r == 0 else [per_turn[3], per_turn[4]]
        tree = collate_prefix_tree(rows)
        last = int(ro.turn_spans(rows=[r])[0][-1, 1])
        assert tree["input_ids"].shape[1] == last < sum(int(x["input_ids"].numel()) for x in rows)
        assert torch.equal(tree["input_ids"][0], ro.tokens()[r]["input_ids"][:last])
    assert collate_prefix_tree(per_turn)["assistant_masks"].sum() == ro.tokens()["assistant_masks"].sum()
