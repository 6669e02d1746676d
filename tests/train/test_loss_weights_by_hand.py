"""Per-role and per-turn loss weights, as a TRL user would set them, on a tiny random Qwen2: the weighted
loss of padded (both sides), padding-free and prefix-tree batches equals one computed by hand from each
sequence's own forward, token by token."""
from __future__ import annotations

import math

import torch

from chatdata import History
from chatdata.train import (TokenDataset, collate_padded, collate_padding_free, collate_prefix_tree, tree_logprobs,
                            tree_model_inputs, weighted_causal_lm_loss)
from tests_train_helpers import tiny_qwen2

Q = {"role": "user", "content": "What is two plus two?"}
CHATS = [  # two share their first turns: the tree batch shares that prefix
    [{"role": "system", "content": "Be brief."}, Q, {"role": "assistant", "content": "Four."},
     {"role": "user", "content": "And three plus three?"}, {"role": "assistant", "content": "Six."}],
    [{"role": "system", "content": "Be brief."}, Q, {"role": "assistant", "content": "Four."},
     {"role": "user", "content": "Thanks"}, {"role": "assistant", "content": "You are welcome.", "weight": 0.0}],
    [Q, {"role": "assistant", "content": "It is four, of course."}],
]


def _rows(tok, **options):
    out = History.from_chats(CHATS).apply_chat_template(tokenizer=tok, add_generation_prompt=False, **options)
    ds = TokenDataset(out)
    rows = [ds[i] for i in range(len(ds))]
    vocab = torch.unique(torch.cat([r["input_ids"] for r in rows]))  # a small vocabulary: a quick model
    return [dict(r, input_ids=torch.searchsorted(vocab, r["input_ids"]),
                 labels=torch.searchsorted(vocab, r["input_ids"]).masked_fill(r["labels"] == -100, -100))
            for r in rows], vocab.numel()


def _by_hand(model, rows):
    """Sum over every sequence and token t >= 1 of -log p(token t | tokens < t) * weight[t], over the
    number of trained tokens, from one forward per sequence."""
    total, count = 0.0, 0
    for r in rows:
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=r["input_ids"][None]).logits[0].double(), -1)
        for t in range(1, r["input_ids"].numel()):
            w = float(r["loss_weights"][t])
            if r["labels"][t] != -100:
                total += -float(logp[t - 1, r["input_ids"][t]]) * w
                count += 1
            else:
                assert w == 0.0
    return total / count


def test_role_and_turn_weights_give_the_hand_computed_loss_in_every_batch(sample_tokenizer):
    rows, vocab = _rows(sample_tokenizer, loss_weights={"assistant": 2.0, "user": 0.5}, last_turn_only=False)
    weights = set(torch.cat([r["loss_weights"] for r in rows]).tolist())
    assert weights == {0.0, 0.5, 2.0}  # the system message and the answer with "weight": 0 are not trained
    model = tiny_qwen2(vocab)
    want = _by_hand(model, rows)

    def loss(batch):
        with torch.no_grad():
            logits = model(**{k: v for k, v in batch.items() if k not in ("labels", "loss_weights")}).logits
        return float(weighted_causal_lm_loss(logits, batch["labels"], batch["loss_weights"]))

    for side in ("right", "left"):
        assert math.isclose(loss(collate_padded(rows, pad_token_id=0, padding_side=side)), want, rel_tol=1e-5)
    assert math.isclose(loss(collate_padding_free(rows)), want, rel_tol=1e-5)
    tree = collate_prefix_tree(rows)
    assert tree["input_ids"].shape[1] < sum(r["input_ids"].numel() for r in rows)  # a prefix is shared
    with torch.no_grad():
        lp = tree_logprobs(model(**tree_model_inputs(tree, model)).logits, tree)
    trained = tree["labels"] != -100
    assert torch.equal(trained, tree["loss_weights"] > 0)
    got = float(-(lp.double() * tree["loss_weights"]).sum() / trained[:, 1:].sum())
    assert math.isclose(got, want, rel_tol=1e-5)


def test_last_turn_only_weights_the_last_answer_of_each_conversation(sample_tokenizer):
    tok = sample_tokenizer
    out = History.from_chats(CHATS).apply_chat_template(tokenizer=tok, add_generation_prompt=False,
                                                        loss_weights={"assistant": 3.0}, last_turn_only=True)
    ds = TokenDataset(out)
    # chat 1's last answer has "weight": 0: of its turns with a weight > 0, "Four." is the last
    for i, want in enumerate(["Six.", "Four.", "It is four, of course."]):
        r = ds[i]
        assert tok.decode(r["input_ids"][r["loss_weights"] > 0]) == want + "<|im_end|>"
        assert set(r["loss_weights"][r["loss_weights"] > 0].tolist()) == {3.0}
        assert torch.equal(r["labels"] != -100, r["loss_weights"] > 0)


def test_every_weight_one_is_the_models_assistant_only_loss(sample_tokenizer):
    """TRL's assistant_only_loss: labels -100 outside the assistant mask, the model's own mean loss."""
    rows, vocab = _rows(sample_tokenizer, loss_weights=True)
    model = tiny_qwen2(vocab)
    b = collate_padding_free(rows)
    with torch.no_grad():
        out = model(**{k: v for k, v in b.items() if k != "loss_weights"})
    assert math.isclose(float(weighted_causal_lm_loss(out.logits, b["labels"], b["loss_weights"])),
                        float(out.loss), rel_tol=1e-5)
    assert math.isclose(float(out.loss), _by_hand(model, rows), rel_tol=1e-5)
