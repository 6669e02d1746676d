"""The parts of the template matrix: the audit catches wrong masks, probes are fitted to what a
template accepts, rollouts are classified, and ``chatdata templates check --all`` writes the page."""
from __future__ import annotations

from pathlib import Path

import pytest

from chatdata.cli import main
from chatdata.data import load_sample_tokenizer
from chatdata.matrix.masks import audit_case, render_case
from chatdata.matrix.probes import Variant, fit, variants
from chatdata.matrix.tito import failure_case, family_tokenizer, role_set_case
from chatdata.templates import TemplateError, get_chat_template

DATA = Path(__file__).resolve().parents[1] / "data"


def _src(name: str) -> str:
    return (DATA / "templates" / f"{name}.jinja").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def tok():
    return load_sample_tokenizer()


def test_audit_catches_foreign_text_a_missing_turn_and_a_learned_placeholder(tok):
    case = render_case(get_chat_template("qwen"), tok, "plain")
    assert audit_case(case, tok).status == "ok"
    text = case.texts["default"][0]
    user = text.index("Wqusr one?")
    case.spans["default"][0] = [(user, user + 5)] + case.spans["default"][0][1:]  # a user word, not the 1st answer
    detail = audit_case(case, tok).detail
    assert "not learned 'Wqans one.'" in detail or "learned foreign text Wqusr" in detail

    vl = render_case(_src("Qwen-Qwen2.5-VL-7B-Instruct"), tok, "parts")
    assert vl.placeholders[0] and audit_case(vl, tok).status == "ok"
    a, b = vl.placeholders[0][-1]  # the assistant's own image: learn it on purpose
    vl.spans["default"][0] = sorted(vl.spans["default"][0] + [(a, b)])
    assert "placeholder learned" in audit_case(vl, tok).detail


def test_audit_checks_options(tok):
    case = render_case(get_chat_template("qwen"), tok, "plain")
    case.spans["no_eot"] = case.spans["default"]  # the end of turn left in with mask_eot=False
    assert "end of turn learned with mask_eot=False" in audit_case(case, tok).detail


def test_fit_tries_variants_derived_from_refusals():
    seen = []

    def attempt(v: Variant):
        seen.append(v)
        if not (v.no_system and v.specials):
            raise TemplateError("System role not supported")
        return "rendered"

    v, result, err = fit("plain", attempt)
    assert (v.no_system, v.specials, result, err) == (True, True, "rendered", "")
    assert seen[-1] == v and len(seen) == 7  # as is, tools; without system; then the special tokens
    v, result, err = fit("tools", lambda v: (_ for _ in ()).throw(ValueError("no tools here")))
    assert v is None and err == "no tools here"
    assert all(v.tools for v in variants("tools"))
    parts = [v.label() for v in variants("parts")]
    assert parts[0] == "as is" and "flat assistant, images only" in parts


def test_parts_probe_fits_text_only_and_list_only_templates(tok):
    assert render_case(get_chat_template("qwen"), tok, "parts").outcome.detail.startswith("the template refuses")
    llava = render_case(_src("llava-hf-llava-v1.6-mistral-7b-hf"), tok, "plain")  # reads only lists
    assert llava.outcome.status == "ok" and "as parts" in llava.variant


def test_rollouts_are_exact_or_flagged(tok):
    fam = family_tokenizer(tok, [_src("Qwen-Qwen3-0.6B")])
    exact = role_set_case(get_chat_template("qwen"), tok, ("tool", "user", "system"))
    assert exact.status == "exact" and exact.fresh[: len(exact.kept)] == exact.kept
    assert len(exact.turn_prompts) == 3 and exact.turn_prompts[1][: len(exact.turn_prompts[0])] == exact.turn_prompts[0]
    think = failure_case(_src("Qwen-Qwen3-0.6B"), fam, "stripped_think")  # Qwen3 drops earlier reasoning
    assert think.status == "flagged" and "Wqrsn" in fam.decode(think.kept) and "Wqrsn" not in fam.decode(think.fresh)
    cut = failure_case(get_chat_template("qwen"), tok, "truncated")  # the EOT comes as template text: exact
    assert cut.status == "exact"
    refused = role_set_case(_src("google-gemma-2-2b-it"), tok, ("tool",))
    assert refused.status == "raise" and refused.detail.startswith("the template refuses a tool reply")


def test_cli_all_writes_the_page(tmp_path, capsys):
    folder = tmp_path / "templates"
    folder.mkdir()
    for name in ("Qwen-Qwen2.5-7B-Instruct", "google-gemma-2-2b-it"):
        (folder / f"{name}.jinja").write_text(_src(name), encoding="utf-8")
    out = tmp_path / "page.md"
    args = ["templates", "check", "--all", "--templates-dir", str(folder), "--out", str(out),
            "--tokenizer-dir", str(DATA / "tokenizers" / "qwen2.5-instruct")]
    assert main(args) == 0
    page = out.read_text(encoding="utf-8")
    assert "| `Qwen-Qwen2.5-7B-Instruct` | ok | ok | ok | ok | n/a | exact | exact | exact |" in page
    assert "`google-gemma-2-2b-it` · TITO {tool}: **raise** — the template refuses a tool reply" in page
    assert "2 templates x 1 tokenizers" in capsys.readouterr().out
    assert main(["templates", "check", "--all", "--templates-dir", str(tmp_path / "none")]) == 1
    assert "no .jinja templates" in capsys.readouterr().err
    assert main(["templates", "check"]) == 1
