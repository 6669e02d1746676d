"""The tiny random Qwen2 the gateway tests serve: built from a config (fixed seed), with the
packaged Qwen2.5 tokenizer, saved to a folder that both the test backend and vLLM load."""
from __future__ import annotations

import shutil
from pathlib import Path

EOT, ENDOFTEXT = 151645, 151643


def build_tiny_qwen2(out: Path) -> Path:
    """Save the model (2 layers, hidden 64, Qwen2.5's vocabulary) and tokenizer into ``out``."""
    import torch
    import transformers

    from chatdata.data import sample_tokenizer_path

    out = Path(out)
    torch.manual_seed(0)
    cfg = transformers.Qwen2Config(vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                                   max_position_embeddings=4096, tie_word_embeddings=True,
                                   bos_token_id=ENDOFTEXT, eos_token_id=EOT)
    model = transformers.Qwen2ForCausalLM(cfg).to(torch.float32)
    model.generation_config.eos_token_id = [EOT, ENDOFTEXT]
    model.save_pretrained(out)
    for f in Path(sample_tokenizer_path()).iterdir():
        if f.is_file() and f.name.startswith("tokenizer"):
            shutil.copy(f, out / f.name)
    return out
