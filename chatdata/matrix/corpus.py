"""Run every check of the template matrix over a folder of templates with several tokenizers.

:func:`check_corpus` gives one :class:`TemplateRow` per template: rendering against transformers,
masks of the four probe kinds (:mod:`.masks`), the token-in, token-out role sets and failure
modes (:mod:`.tito`), and the template's facts. Token masks of all templates are made in one
batch per tokenizer. :func:`load_tokenizers` opens tokenizer folders whose files may be gzipped
(as ``tests/data/tokenizers`` keeps them).

Example:
    >>> from chatdata.data import load_sample_tokenizer
    >>> from chatdata.templates import get_chat_template
    >>> rows = check_corpus({"qwen": get_chat_template("qwen")}, {"qwen2.5": load_sample_tokenizer()}, tito=False)
    >>> rows[0].masks["tools"]["qwen2.5"].status, rows[0].masks["parts"]["qwen2.5"].status
    ('ok', 'n/a')
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import shutil
from pathlib import Path
from typing import Any

from ..rollout import template_facts
from ..templates import TemplateError, tokenize_chats
from .clock import fixed_clock
from .masks import OPTIONS, MaskCase, Outcome, audit, render_case, token_offsets
from .probes import KINDS
from .tito import FAILURE_MODES, ROLE_SETS, family_tokenizer, failure_case, role_set_case

__all__ = ["TemplateRow", "check_corpus", "load_templates", "load_tokenizers", "roles_label"]


def roles_label(roles) -> str:
    """``("tool", "user")`` -> ``"tool, user"``."""
    return ", ".join(roles)


@dataclasses.dataclass
class TemplateRow:
    """Everything the matrix knows about one template; each check maps tokenizer name -> outcome."""

    name: str
    facts: dict = dataclasses.field(default_factory=dict)  # tokenizer -> {eot, prefix_preserving, ...}
    render: dict = dataclasses.field(default_factory=dict)
    masks: dict = dataclasses.field(default_factory=dict)  # kind -> tokenizer -> Outcome
    tito: dict = dataclasses.field(default_factory=dict)  # "tool, user" -> tokenizer -> TitoResult
    failures: dict = dataclasses.field(default_factory=dict)  # mode -> tokenizer -> TitoResult
    cases: dict = dataclasses.field(default_factory=dict)  # (kind, tokenizer) -> MaskCase


def load_templates(folder: str | Path) -> dict[str, str]:
    """``{file stem: source}`` of the ``*.jinja`` files of ``folder``, sorted by name."""
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(Path(folder).glob("*.jinja"))}


def load_tokenizers(folders, cache_dir: str | Path) -> dict[str, Any]:
    """``{folder name: tokenizer}``; gzipped files (``tokenizer.json.gz``) are decompressed
    once into ``cache_dir`` (a sub-folder per content hash)."""
    from transformers import AutoTokenizer

    out = {}
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such tokenizer folder")
        files = sorted(f for f in folder.iterdir() if f.is_file())
        digest = hashlib.sha1(b"".join(f.name.encode() + f.read_bytes()[:1 << 16] for f in files)).hexdigest()[:12]
        dst = Path(cache_dir) / f"{folder.name}-{digest}"
        if not (dst / ".complete").exists():
            dst.mkdir(parents=True, exist_ok=True)
            for f in files:
                if f.name.endswith(".gz"):
                    with gzip.open(f, "rb") as fin, open(dst / f.name[:-3], "wb") as fout:
                        shutil.copyfileobj(fin, fout)
                else:
                    shutil.copy(f, dst / f.name)
            (dst / ".complete").touch()
        out[folder.name] = AutoTokenizer.from_pretrained(str(dst))
    return out


def _facts(template: str, tok: Any) -> dict:
    try:
        f = template_facts(template, tokenizer=tok)
    except (TemplateError, TypeError, ValueError) as err:
        return {"error": str(err)[:100]}
    return {"eot": f.eot, "prefix_preserving": f.prefix_preserving, "fixed_base_delta": f.fixed_base_delta,
            "turn_prefix": f.turn_prefix, "first_rewrite": f.first_rewrite}


def _mask_outcomes(rows: list[TemplateRow], tok_name: str, tok: Any, parts: bool) -> None:
    """Tokenize every rendered case of one tokenizer in one batch, then audit each: the ``parts``
    cases (``parts=True``) with a tokenizer holding the placeholders as special tokens, as a
    processor's tokenizer does, the others with the tokenizer as it is."""
    flat = [(row, case, opt, i) for row in rows for (kind, t), case in row.cases.items() if t == tok_name
            and (kind == "parts") == parts and case.outcome.status == "ok"
            for opt in OPTIONS for i in range(len(case.chats))]
    texts = [case.texts[opt][i] for _, case, opt, i in flat]
    spans = [case.spans[opt][i] for _, case, opt, i in flat]
    enc = tokenize_chats(texts, spans, tok, return_assistant_tokens_mask=True) if flat else {}
    grouped: dict = {}
    for n, (row, case, opt, i) in enumerate(flat):
        g = grouped.setdefault(id(case), (row, case, {o: [] for o in OPTIONS}, {o: [] for o in OPTIONS},
                                          {o: [] for o in OPTIONS}))
        g[2][opt].append(enc["input_ids"][n].tolist())
        g[3][opt].append(enc["assistant_masks"][n].tolist())
        g[4][opt].append(token_offsets(tok, texts[n]) if case.placeholders[i] else [])
    for row, case, ids, masks, offsets in grouped.values():
        row.masks[case.kind][tok_name] = audit(case, ids, masks, offsets, tok.decode)


def check_corpus(templates: dict[str, str], tokenizers: dict[str, Any], *, tito: bool = True,
                 failure_modes: bool = True, progress: Any = None) -> list[TemplateRow]:
    """One :class:`TemplateRow` per template (``{name: source}``), checked with each tokenizer
    (``{name: tokenizer}``). ``tito=False`` / ``failure_modes=False`` skip those columns;
    ``progress`` (optional) is called with each template name as it starts."""
    with fixed_clock():  # templates that write the time render the same in every run (clock.py)
        return _check_corpus(templates, tokenizers, tito=tito, failure_modes=failure_modes, progress=progress)


def _check_corpus(templates: dict[str, str], tokenizers: dict[str, Any], *, tito: bool, failure_modes: bool,
                  progress: Any) -> list[TemplateRow]:
    rows = [TemplateRow(name) for name in templates]
    families = {t: family_tokenizer(tok, templates.values()) for t, tok in tokenizers.items()} if tito else {}
    for row in rows:
        src = templates[row.name]
        if progress is not None:
            progress(row.name)
        for t, tok in tokenizers.items():
            row.facts[t] = _facts(src, families.get(t, tok))
            for kind in KINDS:
                case: MaskCase = render_case(src, tok, kind)
                row.cases[(kind, t)] = case
                row.masks.setdefault(kind, {})[t] = case.outcome
                if case.render is not None:
                    prev = row.render.get(t)
                    if prev is None or prev.status == "ok":
                        row.render[t] = case.render
            row.render.setdefault(t, Outcome("n/a", "the template refuses every probe"))
            if not tito:
                continue
            for roles in ROLE_SETS:
                row.tito.setdefault(roles_label(roles), {})[t] = role_set_case(src, families[t], roles)
            if failure_modes:
                for mode in FAILURE_MODES:
                    row.failures.setdefault(mode, {})[t] = failure_case(src, families[t], mode)
    for t, tok in tokenizers.items():
        _mask_outcomes(rows, t, tok, parts=False)
        if any(k == "parts" and u == t and c.outcome.status == "ok" for r in rows for (k, u), c in r.cases.items()):
            _mask_outcomes(rows, t, families.get(t) or family_tokenizer(tok, templates.values()), parts=True)
    return rows
