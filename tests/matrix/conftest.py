"""The template matrix, computed once per session over every template of tests/data/templates with
both test tokenizers: the same computation ``chatdata templates check --all`` writes to
docs/templates.md, shared by every corpus test."""
from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"
TOKENIZER_DIRS = sorted(p for p in (DATA / "tokenizers").iterdir() if p.is_dir())  # as the CLI takes them


@pytest.fixture(scope="session")
def matrix(tmp_path_factory):
    from chatdata.matrix import check_corpus, load_templates, load_tokenizers

    tokenizers = load_tokenizers(TOKENIZER_DIRS, tmp_path_factory.mktemp("matrix-tokenizers"))
    templates = load_templates(DATA / "templates")
    rows = check_corpus(templates, tokenizers)
    return {"rows": {r.name: r for r in rows}, "ordered": rows, "tokenizers": list(tokenizers),
            "templates": templates}
