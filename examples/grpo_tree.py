"""One GRPO step on a prefix-tree batch: a tiny Qwen2 (random weights, CPU, offline) samples G
responses per prompt into a ``Rollout``, the group's rows go through ``collate_prefix_tree`` (the
shared prompt is computed once), and a clipped policy loss is taken from one forward.

    python examples/grpo_tree.py [--group 4] [--prompts 2] [--max-new 16]

It prints the tokens of the tree batch against the flat rows, the loss from the tree against the
loss from padded rows (they agree within 1e-5), and the loss after one optimizer step.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import Qwen2Config, Qwen2ForCausalLM  # noqa: E402

from chatdata import History  # noqa: E402
from chatdata.data import load_sample_tokenizer  # noqa: E402
from chatdata.rollout import Rollout  # noqa: E402
from chatdata.train import collate_padded, collate_prefix_tree, tree_logprobs, tree_model_inputs  # noqa: E402


def tiny_policy(vocab_size: int) -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, use_cache=False, attn_implementation="sdpa",
                      tie_word_embeddings=True)
    return Qwen2ForCausalLM(cfg).float()


@torch.no_grad()
def sample_group(model, prompt: torch.Tensor, group: int, max_new: int, eot: int, words: int, gen: torch.Generator):
    """``group`` responses to one prompt (ordinary word pieces, then EOT) and their sampling logprobs."""
    ids = prompt.repeat(group, 1)
    picks, lps = [], []
    for _ in range(max_new):
        logp = model(input_ids=ids, logits_to_keep=1).logits[:, -1, :words].log_softmax(-1)
        nxt = torch.multinomial(logp.exp(), 1, generator=gen)
        picks.append(nxt[:, 0])
        lps.append(logp.gather(1, nxt)[:, 0])
        ids = torch.cat([ids, nxt], 1)
    picks, lps = torch.stack(picks, 1), torch.stack(lps, 1)
    out = []
    for g in range(group):
        n = int(torch.randint(2, max_new + 1, (1,), generator=gen))  # the policy stopped here
        resp = torch.cat([picks[g, :n], torch.tensor([eot])])
        last = model(input_ids=torch.cat([prompt, picks[g, :n]])[None], logits_to_keep=1).logits[0, -1]
        with_eot = torch.cat([lps[g, :n], last.log_softmax(-1)[eot:eot + 1]])
        out.append((resp, with_eot))
    return out


def clipped_loss(new, old, adv, mask, eps=0.2):
    ratio = torch.exp(new - old)
    obj = torch.minimum(ratio * adv, ratio.clamp(1 - eps, 1 + eps) * adv)
    return -(obj * mask).sum() / mask.sum()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--max-new", type=int, default=16)
    args = ap.parse_args(argv)

    tok = load_sample_tokenizer()
    eot = tok.convert_tokens_to_ids("<|im_end|>")
    model = tiny_policy(len(tok))
    questions = [f"Question {q}: name a prime number above {10 * q}." for q in range(args.prompts)]
    chats = [[{"role": "system", "content": "Answer in one short line."}, {"role": "user", "content": q}]
             for q in questions for _ in range(args.group)]
    ro = Rollout(History.from_chats(chats), tokenizer=tok)  # one row per sample
    gen = torch.Generator().manual_seed(0)

    responses, logprobs, advantages = [], [], []
    prompts = ro.prompt_ids()
    for q in range(args.prompts):
        group = sample_group(model, prompts[q * args.group], args.group, args.max_new, eot, tok.vocab_size, gen)
        reward = torch.tensor([-float(len(r)) for r, _ in group])  # a stand-in reward: shorter is better
        adv = (reward - reward.mean()) / (reward.std() + 1e-6)
        for (r, lp), a in zip(group, adv):
            responses.append(r)
            logprobs.append(lp)
            advantages.append(torch.full((len(r),), float(a)))
    # the advantages ride along as a per-token side column, aligned with the sampled ids
    ro.add_response(responses, logprobs=logprobs, extras={"advantages": advantages})

    td = ro.tokens()
    rows = [{k: td[i][k] for k in ("input_ids", "assistant_masks", "logprobs", "advantages")} for i in range(len(td))]
    batch = collate_prefix_tree(rows)
    flat = int(batch["row_lengths"].sum())
    T = batch["input_ids"].shape[1]
    print(f"{len(rows)} rows ({args.prompts} prompts x {args.group} samples): tree batch {T} tokens, "
          f"flat rows {flat} tokens ({flat / T:.2f}x)")

    mask = batch["assistant_masks"].float()
    new = tree_logprobs(model(**tree_model_inputs(batch, model)).logits, batch)
    loss = clipped_loss(new, batch["logprobs"], batch["advantages"], mask)

    padded = collate_padded(rows, pad_token_id=tok.pad_token_id)  # the same loss, the long way
    with torch.no_grad():
        logits = model(input_ids=padded["input_ids"], attention_mask=padded["attention_mask"]).logits
    ids = padded["input_ids"]
    ref = torch.zeros(ids.shape)
    ref[:, 1:] = logits[:, :-1].log_softmax(-1).gather(2, ids[:, 1:, None])[..., 0]
    loss_padded = clipped_loss(ref, padded["logprobs"], padded["advantages"], (padded["labels"] != -100).float())
    diff = abs(loss.item() - loss_padded.item())
    print(f"loss from the tree {loss.item():.6f}, from padded rows {float(loss_padded):.6f} (|diff| {diff:.1e})")
    if diff > 1e-5:
        raise SystemExit("the tree batch and the padded rows disagree")

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss.backward()
    opt.step()
    with torch.no_grad():
        after = clipped_loss(tree_logprobs(model(**tree_model_inputs(batch, model)).logits, batch),
                             batch["logprobs"], batch["advantages"], mask)
    print(f"after one step: loss {float(after):.6f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
