"""The proof of prefix-tree batches: a tiny random Qwen2 (float32, CPU) gives, from one forward over a
tree batch, the per-token logprobs an unpacked forward of each row gives (within 1e-5), with sdpa and
with eager attention; a wrong position_ids or a wrong mask breaks it; a GRPO-style clipped loss and its
gradients equal those from padded rows."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from chatdata.train import (collate_padded, collate_prefix_tree, tree_attention_mask, tree_logprobs,
                            tree_model_inputs)
from tree_test_helpers import compact_vocab, row_logprobs, tiny_qwen2_fp32, trie_nodes

V = 211
TEMPLATES = Path(__file__).resolve().parents[1] / "data" / "templates"


def grpo_rows(seed=0, prompts=3, group=4):
    g = torch.Generator().manual_seed(seed)
    rows = []
    for p in range(prompts):
        prompt = torch.randint(0, V, (int(torch.randint(12, 40, (1,), generator=g)),), generator=g)
        for r in range(group):
            n = int(torch.randint(3, 25, (1,), generator=g))
            resp = torch.randint(0, V, (n,), generator=g)
            resp[0] = r  # responses differ at their first token: the group costs P + sum(R)
            ids = torch.cat([prompt, resp])
            mask = torch.zeros(ids.numel(), dtype=torch.bool)
            mask[prompt.numel():] = True
            rows.append({"input_ids": ids, "assistant_masks": mask,
                         "logprobs": torch.where(mask, -torch.rand(ids.numel(), generator=g) * 3, 0.0),
                         "advantages": torch.where(mask, torch.randn((), generator=g), 0.0)})
    return rows


def fork_rows():
    g = torch.Generator().manual_seed(1)
    turn1, turn2 = torch.randint(0, V, (17,), generator=g), torch.randint(0, V, (9,), generator=g)
    shared = torch.cat([turn1, turn2])
    tails = [torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6, 7, 8]), torch.tensor([4, 5, 9]), torch.tensor([], dtype=torch.long)]
    return [{"input_ids": torch.cat([shared, t])} for t in tails] + [{"input_ids": turn1.clone()}]


def per_turn_rollout_rows():
    """Per-turn rows of a real 3-turn rollout on Qwen3's template (it drops earlier <think> blocks)."""
    from chatdata.data import load_sample_tokenizer
    from chatdata.rollout import Rollout

    tok = load_sample_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
    src = (TEMPLATES / "Qwen-Qwen3-0.6B.jinja").read_text(encoding="utf-8")
    ro = Rollout([[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]], tokenizer=tok,
                 chat_template=src)
    for k, (thought, answer, user) in enumerate([("Add them.", "4", "and 3+3?"), ("Six.", "6", "and 5+5?"),
                                                ("Ten, surely.", "10", None)]):
        ids = torch.tensor(tok.encode(f"<think>\n{thought}\n</think>\n\n{answer}<|im_end|>", add_special_tokens=False))
        ro.add_response([ids], logprobs=[-torch.rand(ids.numel())])
        if user:
            ro.add_messages([[{"role": "user", "content": user}]])
    assert ro.drift()[0] is not None  # the template rewrites the past: train per turn
    td = ro.tokens(per_turn=True)
    return [{k: td[i][k] for k in ("input_ids", "assistant_masks", "logprobs")} for i in range(len(td))]


def tree_forward(model, batch, **override):
    inputs = {**tree_model_inputs(batch, model), **override}
    return tree_logprobs(model(**inputs).logits, batch)


def max_error(lp, rows, model):
    err = 0.0
    for n, r in enumerate(rows):
        ids = torch.as_tensor(r["input_ids"])
        err = max(err, float((lp[n, :ids.numel()] - row_logprobs(model, ids)).abs().max()))
        assert not lp[n, ids.numel():].any()
    return err


CASES = {"grpo": grpo_rows, "fork": fork_rows, "per_turn": per_turn_rollout_rows}


@pytest.fixture(scope="module")
def cases():
    out = {}
    for name, make in CASES.items():
        rows, vocab = compact_vocab(make()) if name == "per_turn" else (make(), V)
        out[name] = (rows, vocab)
    return out


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_tree_logprobs_equal_unpacked_rows(cases, attn):
    for name, (rows, vocab) in cases.items():
        model = tiny_qwen2_fp32(vocab, attn)
        batch = collate_prefix_tree(rows)
        T = batch["input_ids"].shape[1]
        assert T == trie_nodes([r["input_ids"] for r in rows]) < sum(len(r["input_ids"]) for r in rows), name
        with torch.no_grad():
            lp = tree_forward(model, batch)
            assert max_error(lp, rows, model) < 1e-5, (name, attn)
            if name != "grpo":
                continue
            # the check has teeth: wrong positions, or a plain causal mask over the tree, break it
            wrong_pos = tree_forward(model, batch, position_ids=torch.arange(T)[None])
            assert max_error(wrong_pos, rows, model) > 1e-3
            causal = torch.full((T, T), torch.finfo(torch.float32).min).triu(1)[None, None]
            assert max_error(tree_forward(model, batch, attention_mask=causal), rows, model) > 1e-3
            shifted = dict(batch, subtree_end=batch["subtree_end"] + 1)  # each subtree reaching one token too far
            wrong_mask = tree_forward(model, batch, attention_mask=tree_attention_mask(shifted))
            assert max_error(wrong_mask, rows, model) > 1e-3


def grpo_loss(new, old, adv, mask, eps=0.2):
    ratio = torch.exp(new - old)
    obj = torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
    return -(obj * mask).sum() / mask.sum()


def test_grpo_loss_and_gradients_equal_padded_rows():
    rows = grpo_rows(seed=5)
    model = tiny_qwen2_fp32(V, "sdpa")
    params = [model.model.layers[0].self_attn.q_proj.weight, model.model.embed_tokens.weight]

    tree = collate_prefix_tree(rows)
    assert tree["logprobs"].shape == tree["advantages"].shape == tree["row_index"].shape
    lp = tree_logprobs(model(**tree_model_inputs(tree, model)).logits, tree)
    old = tree["logprobs"] + 0.1 * torch.randn(tree["logprobs"].shape, generator=torch.Generator().manual_seed(0))
    old = old * tree["assistant_masks"]
    loss_tree = grpo_loss(lp, old, tree["advantages"], tree["assistant_masks"].float())
    grads_tree = torch.autograd.grad(loss_tree, params)

    padded = collate_padded(rows, pad_token_id=0)
    logits = model(input_ids=padded["input_ids"], attention_mask=padded["attention_mask"]).logits
    lp_pad = torch.zeros(padded["input_ids"].shape)
    lp_pad[:, 1:] = logits[:, :-1].log_softmax(-1).gather(2, padded["input_ids"][:, 1:, None])[..., 0]
    lp_pad = lp_pad * padded["attention_mask"]
    mask = (padded["labels"] != -100).float()  # assistant_masks became labels
    loss_pad = grpo_loss(lp_pad, old, padded["advantages"], mask)
    grads_pad = torch.autograd.grad(loss_pad, params)

    assert torch.equal(padded["advantages"], tree["advantages"])
    assert abs(loss_tree.item() - loss_pad.item()) < 1e-5, (loss_tree.item(), loss_pad.item())
    for a, b in zip(grads_tree, grads_pad):
        assert float(b.abs().max()) > 1e-4  # the gradient is there
        assert float((a - b).abs().max()) < 1e-5
