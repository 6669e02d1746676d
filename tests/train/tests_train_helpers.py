"""Helpers of the train/ tests, importable under a unique name: run the CLI as a user would."""
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "tests" / "cli"))
# the CLI tests' runner: ``chatdata.cli.main`` in this process (``process=True``: a new process)
from cli_helpers import run_cli  # noqa: E402,F401


def tiny_qwen2(vocab_size: int, seed: int = 0):
    """A 2-layer Qwen2 with random weights (no download), float64 for exact comparisons."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                      use_cache=False, attn_implementation="sdpa", tie_word_embeddings=True,
                      initializer_range=0.5)
    return Qwen2ForCausalLM(cfg).double().eval()
