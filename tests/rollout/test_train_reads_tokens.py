"""The training package reads a rollout's tokens (chatdata.train.TokenDataset)."""
from __future__ import annotations

import torch

from chatdata import load_memmap
from chatdata.rollout import Rollout
from chatdata.train import TokenDataset


def test_token_dataset_reads_rollout_tokens(qwen, tmp_path):
    ro = Rollout([[{"role": "user", "content": "2+2?"}], [{"role": "user", "content": "3+3? ✓"}]], tokenizer=qwen)
    answers = [torch.tensor(qwen.encode(a, add_special_tokens=False)) for a in ("4<|im_end|>", "6 ✓<|im_end|>")]
    ro.add_response(answers)
    ro.add_messages([[{"role": "user", "content": "and 5+5?"}]], rows=[0])
    ro.add_response([torch.tensor(qwen.encode("10<|im_end|>", add_special_tokens=False))], rows=[0])
    tokens = ro.tokens()
    tokens.memmap(tmp_path / "rollout")
    for source in (tokens, tmp_path / "rollout", str(tmp_path / "rollout")):
        ds = TokenDataset(source)
        assert len(ds) == 2 and ds.lengths.tolist() == tokens.offsets.diff().tolist()
        for i in range(2):
            row = ds[i]
            assert torch.equal(row["input_ids"], tokens[i]["input_ids"])
            assert torch.equal(row["assistant_masks"], tokens[i]["assistant_masks"].bool())
            generated = row["labels"][row["labels"] != -100]
            assert torch.equal(generated, tokens[i]["input_ids"][tokens[i]["assistant_masks"].bool()])
    assert load_memmap(tmp_path / "rollout")[0]["logprobs"].shape == tokens[0]["logprobs"].shape
