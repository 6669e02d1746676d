"""Fixtures for the rollout tests: the packaged Qwen2.5 tokenizer (chatdata.data) and the
Mistral-Nemo tokenizer copied in tests/data/tokenizers."""
from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="session")
def qwen(tmp_path_factory):
    from chatdata.data import load_sample_tokenizer

    return load_sample_tokenizer(cache_dir=tmp_path_factory.mktemp("tok"))


@pytest.fixture(scope="session")
def mistral(tmp_path_factory):
    from transformers import AutoTokenizer

    src, dst = DATA / "tokenizers" / "mistral-nemo-instruct-2407", tmp_path_factory.mktemp("mistral")
    for f in src.iterdir():
        if f.name.endswith(".gz"):
            with gzip.open(f, "rb") as fin, open(dst / f.name[:-3], "wb") as fout:
                shutil.copyfileobj(fin, fout)
        else:
            shutil.copy(f, dst / f.name)
    return AutoTokenizer.from_pretrained(str(dst))
