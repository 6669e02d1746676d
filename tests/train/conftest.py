"""Shared fixtures of the train/ tests: real chats tokenized by the packaged Qwen2.5 tokenizer."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def sample_tokenizer(tmp_path_factory):
    from chatdata.data import load_sample_tokenizer

    return load_sample_tokenizer(cache_dir=tmp_path_factory.mktemp("tokcache"))


@pytest.fixture(scope="session")
def sample_tokens(sample_tokenizer):
    """The ragged output of apply_chat_template on 40 packaged sample chats (input_ids + masks)."""
    from chatdata import History
    from chatdata.data import load_sample_chats

    chats = load_sample_chats()[:40]
    return History.from_chats(chats).apply_chat_template(
        tokenizer=sample_tokenizer, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
        add_generation_prompt=False)


@pytest.fixture(scope="session")
def token_folder(sample_tokens, tmp_path_factory):
    """The same tokens memmapped to a folder (the token-set format `chatdata tokenize` writes)."""
    path = tmp_path_factory.mktemp("tokens") / "tokens"
    sample_tokens.memmap(path)
    return path


@pytest.fixture(scope="session")
def cli_token_folder(tmp_path_factory):
    """A token set written by `chatdata tokenize` itself (import + tokenize the packaged chats)."""
    import gzip

    from chatdata.data import sample_chats_path
    from tests_train_helpers import run_cli

    root = tmp_path_factory.mktemp("cli")
    jsonl = root / "chats.jsonl"
    with gzip.open(sample_chats_path(), "rb") as f:  # the first 60 chats keep the test quick
        jsonl.write_bytes(b"".join(f.readlines()[:60]))
    for args in (("import", jsonl, root / "ds"), ("tokenize", root / "ds", root / "tokens", "-q")):
        res = run_cli(*args, env={"CHATDATA_CACHE": str(root / "cache")})
        assert res.returncode == 0, res.stderr
    return root / "tokens"
