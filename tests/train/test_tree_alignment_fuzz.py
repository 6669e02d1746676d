"""Alignment fuzz: random rollouts with random side columns go through Rollout.tokens() (whole and per
turn), memmap / load_memmap, TokenDataset and every collate; every value must land at its (row,
position). Misalignments counted: 0."""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatdata import load_memmap
from chatdata.rollout import Rollout
from chatdata.train import TokenDataset, collate_padded, collate_padding_free, collate_prefix_tree

WORDS = list(range(1000, 3000))  # ordinary word pieces of the Qwen2.5 vocabulary
EOT = 151645  # <|im_end|>

turn = st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), st.integers(0, 2 ** 16 - 1),
                 st.booleans(), st.booleans())
rollout_plan = st.lists(st.lists(turn, min_size=1, max_size=3), min_size=1, max_size=4)


def expected_columns(ro, plan, given):
    """Per row, the columns exactly as they must come out: given values on each turn's span, 0 elsewhere."""
    out = []
    for r, spans in enumerate(ro.turn_spans()):
        n = len(ro.prompt_ids(rows=[r])[0])
        cols = {"logprobs": torch.zeros(n), "routed_experts": torch.zeros(n, 2, 3, dtype=torch.int16),
                "advantages": torch.zeros(n), "assistant_masks": torch.zeros(n, dtype=torch.int64)}
        for t, (s, e) in enumerate(spans.tolist()):
            for name, value in given[(r, t)].items():
                cols[name][s:e] = value
            cols["assistant_masks"][s:e] = 1
        out.append((ro.prompt_ids(rows=[r])[0].clone(), cols))
    return out


def per_turn_expected(ro, full):
    rows = []
    for (ids, cols), spans in zip(full, ro.turn_spans()):
        for s, e in spans.tolist():
            c = {k: torch.zeros_like(v[:e]) for k, v in cols.items()}
            for k in c:
                c[k][s:e] = cols[k][s:e]
            rows.append((ids[:e], c))
    return rows


def own_dtype(got, name):
    """The dtype a column stands for: a token set stores fitting expert ids as uint8 and records
    the own dtype in its ``column_dtypes`` entry; training rows give the own dtype back."""
    recorded = got.get("column_dtypes") if "column_dtypes" in got.keys() else None
    recorded = getattr(recorded, "data", recorded) or {}
    return getattr(torch, recorded[name]) if name in recorded else got[name].dtype


def misalignments(batch_rows, expected) -> int:
    """Elements whose value differs from the expected one, over every row and column (a missing
    row or column counts all its elements)."""
    bad = 0
    if len(batch_rows) != len(expected):
        return sum(ids.numel() for ids, _ in expected)
    for got, (ids, cols) in zip(batch_rows, expected):
        bad += int((got["input_ids"] != ids).sum()) if got["input_ids"].shape == ids.shape else ids.numel()
        for k, v in cols.items():
            if k not in got.keys():
                bad += v.numel()
                continue
            g = got[k]
            if g.shape != v.shape or (k == "routed_experts" and own_dtype(got, k) != torch.int16):
                bad += v.numel()
            else:
                bad += int((g.to(v.dtype) != v).sum())
    return bad


SIDE = ("logprobs", "routed_experts", "advantages")


def from_padding_free(b, n):
    cu = b["cu_seq_lens_q"].tolist()
    return [{"input_ids": b["input_ids"][0, cu[i]:cu[i + 1]],
             **{k: b[k][0, cu[i]:cu[i + 1]] for k in SIDE if k in b},
             "assistant_masks": (b["labels"][0, cu[i]:cu[i + 1]] != -100).long()} for i in range(n)]


def from_padded(b, lengths):
    return [{k: b[k][i, :n] for k in ("input_ids", *SIDE) if k in b}
            | {"assistant_masks": (b["labels"][i, :n] != -100).long()} for i, n in enumerate(lengths)]


def from_tree(b, lengths):
    ids = b["input_ids"][0]
    return [{"input_ids": ids[b["row_index"][i, :n]], **{k: b[k][i, :n] for k in (*SIDE, "assistant_masks") if k in b}}
            for i, n in enumerate(lengths)]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rollout_plan, st.randoms(use_true_random=False))
def test_every_value_lands_at_its_row_and_position(sample_tokenizer, plan, rnd):
    tok = sample_tokenizer
    ro = Rollout([[{"role": "user", "content": f"task {r} ✓"}] for r in range(len(plan))], tokenizer=tok)
    given_values = {}
    for t in range(max(map(len, plan))):
        rows = [r for r in range(len(plan)) if t < len(plan[r])]
        ids, lps, experts, advs = [], [], [], []
        for r in rows:
            words, seed, with_experts, with_adv = plan[r][t]
            g = torch.Generator().manual_seed(seed)
            x = torch.tensor(words + [EOT])
            ids.append(x)
            lps.append(-torch.rand(x.numel(), generator=g) - 0.01)
            top = 256 if seed % 2 else 2 ** 15  # sometimes the ids fit uint8, sometimes not
            experts.append(torch.randint(0, top, (x.numel(), 2, 3), generator=g, dtype=torch.int16) if with_experts else None)
            advs.append(torch.randn((), generator=g).expand(x.numel()).clone() if with_adv else None)
            given_values[(r, t)] = {"logprobs": lps[-1], **({"routed_experts": experts[-1]} if with_experts else {}),
                                    **({"advantages": advs[-1]} if with_adv else {})}
        ro.add_response(ids, logprobs=lps, extras={"routed_experts": experts, "advantages": advs}, rows=rows)
        going = [r for r in rows if t + 1 < len(plan[r])]
        if going:
            ro.add_messages([[{"role": "user", "content": f"next {rnd.randint(0, 9)}"}]] * len(going), rows=going)
    full = expected_columns(ro, plan, given_values)
    for per_turn, expected in ((False, full), (True, per_turn_expected(ro, full))):
        td = ro.tokens(per_turn=per_turn)
        if not any(v.get("routed_experts") is not None for v in given_values.values()):
            for _, cols in expected:
                cols.pop("routed_experts")
        if not any(v.get("advantages") is not None for v in given_values.values()):
            for _, cols in expected:
                cols.pop("advantages")
        bad = misalignments([td[i] for i in range(len(td))], expected)
        with tempfile.TemporaryDirectory() as d:
            td.memmap(Path(d) / "t")
            loaded = load_memmap(Path(d) / "t")
            bad += misalignments([loaded[i] for i in range(len(loaded))], expected)
            ds = TokenDataset(Path(d) / "t")
            order = list(range(len(ds)))
            rnd.shuffle(order)
            exp = [expected[i] for i in order]
            lengths = [int(ds.lengths[i]) for i in order]
            bad += misalignments([ds[i] for i in order], exp)
            flat = ds.__getitems__(order)
            bad += misalignments([flat[j] for j in range(len(order))], exp)
            for rows in (flat, [ds[i] for i in order]):
                bad += misalignments(from_padding_free(collate_padding_free(rows), len(order)), exp)
                bad += misalignments(from_padded(collate_padded(rows, pad_token_id=0), lengths), exp)
                bad += misalignments(from_tree(collate_prefix_tree(rows), lengths), exp)
            del ds, flat, loaded
        assert bad == 0
