"""Fixtures for the rollout tests: the packaged Qwen2.5 tokenizer (chatdata.data)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def qwen(tmp_path_factory):
    from chatdata.data import load_sample_tokenizer

    return load_sample_tokenizer(cache_dir=tmp_path_factory.mktemp("tok"))
