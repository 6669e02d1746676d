"""The template matrix over every template of tests/data/templates, with both test tokenizers.

One test per template reads that template's row of the session's matrix (computed once, see
conftest.py): rendering byte-identical to transformers, masks right for the plain, tool-calling,
reasoning and multimodal probes, token-in, token-out never silently wrong, and every refusal
explained. The committed docs/templates.md must equal a fresh rendering of the matrix.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from chatdata.matrix import matrix_markdown
from chatdata.matrix.probes import KINDS
from chatdata.matrix.tito import FAILURE_MODES, ROLE_SETS

DATA = Path(__file__).resolve().parents[1] / "data"
DOC = Path(__file__).resolve().parents[2] / "docs" / "templates.md"
NAMES = sorted(p.stem for p in (DATA / "templates").glob("*.jinja"))
#: Templates that put the whole chat inside one user turn (a safety classifier): no assistant turn
#: of theirs can be placed, and the mask engine says so.
CLASSIFIERS = {"meta-llama-Llama-Guard-3-11B-Vision"}


def test_corpus_size_and_sources():
    assert len(NAMES) >= 150
    sources = (DATA / "templates" / "SOURCES.md").read_text(encoding="utf-8")
    missing = [n for n in NAMES if f"| {n} |" not in sources and f"`{n}`" not in sources and n not in sources]
    assert not missing, f"templates without a source in SOURCES.md: {missing}"


def test_doc_is_fresh(matrix):
    page = matrix_markdown(matrix["ordered"], matrix["tokenizers"])
    assert DOC.read_text(encoding="utf-8") == page, (
        "docs/templates.md is stale: regenerate it with `chatdata templates check --all`")


@pytest.mark.parametrize("name", NAMES)
def test_template(name, matrix):
    row = matrix["rows"][name]
    problems = []
    for t, o in row.render.items():
        if o.status == "differs":
            problems.append(f"render ({t}): {o.detail}")
        if o.status == "n/a" and "refuses every probe" not in o.detail:
            problems.append(f"render ({t}) n/a without a reason")
    for kind in KINDS:
        for t, o in row.masks[kind].items():
            if o.status == "wrong":
                problems.append(f"masks {kind} ({t}): {o.detail}")
            if o.status == "raise" and name not in CLASSIFIERS:
                problems.append(f"masks {kind} ({t}) raises: {o.detail}")
            if o.status == "n/a" and not o.detail.startswith(("the template refuses", "the template takes no")):
                problems.append(f"masks {kind} ({t}) n/a without a reason")
    cases = [(f"TITO {{{', '.join(rs)}}}", row.tito[", ".join(rs)]) for rs in ROLE_SETS]
    cases += [(f"failure mode {m}", row.failures[m]) for m in FAILURE_MODES]
    for what, by_tok in cases:
        for t, o in by_tok.items():
            if o.status == "silent":
                problems.append(f"{what} ({t}): silent mismatch: {o.detail}")
            elif o.status == "raise" and not o.detail.startswith("the template refuses"):
                problems.append(f"{what} ({t}) raises without a reason: {o.detail}")
            elif o.status == "exact":  # the ids are a fresh tokenization's (it may go on after the end)
                assert o.fresh[: len(o.kept)] == o.kept, (what, t)
            elif o.status == "flagged":
                assert o.fresh != o.kept, (what, t)
    assert not problems, "\n".join(problems)


def test_summary_counts_every_case(matrix):
    page = DOC.read_text(encoding="utf-8")
    n_cases = len(NAMES) * len(matrix["tokenizers"])
    section = page.split("## Summary", 1)[1].split("## Per template", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| check")]
    assert rows
    for line in rows:
        counts = [int(x) for x in line.strip("|").split("|")[1:]]
        assert sum(counts) == n_cases, line
