"""The HTML token view in a real headless Chromium (Debian's package, driven by playwright).

Three pages written by the CLI -- a dataset conversation (`chatdata show DS I --html`), a token
set row (`chatdata show TOKENS I --html`) and a template report (`chatdata templates check --html`)
-- must load without console errors or network requests, render a screenshot that is not blank,
show on hover the token id and weight, and hold, token for token, the ids and weights that
training gets, coloured exactly where the weight is > 0 and by role.
"""
from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import pytest
import torch

from chatdata import History
from chatdata.cli import main
from chatdata.data import load_sample_chats, load_sample_tokenizer
from chatdata.rollout import rollout_section
from chatdata.templates import TrainSelection, get_chat_template, tokenize_chats
from chatdata.templates.report import check_template
from chatdata.train import TokenDataset
from chatdata.view.html import ROLE_COLORS

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WEIGHTS = {"tool": 0.25, "user": 0.5}
READ_CHIPS = """() => [...document.querySelectorAll('section')].map(sec =>
  [...sec.querySelectorAll('.tok')].map(el => {
    const bg = getComputedStyle(el).backgroundColor;
    const m = bg.match(/rgba?\\(([^)]*)\\)/)[1].split(',').map(Number);
    return {id: Number(el.dataset.id), w: Number(el.dataset.w), role: el.dataset.role || null,
            rgb: m.slice(0, 3), alpha: m.length > 3 ? m[3] : 1};
  }))"""


def _chromium() -> str:
    path = os.environ.get("CHATDATA_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(path).exists(), ("Debian's chromium is needed for the HTML view tests: apt-get install -y chromium "
                                 "(.ci/run installs it)")
    return path


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=_chromium(), headless=True,
            args=FLAGS[1:], viewport={"width": 1100, "height": 900})
        try:
            yield ctx
        finally:
            ctx.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """(html file, expected [(ids, weights)] per section) of the three pages."""
    root = tmp_path_factory.mktemp("view")
    chats = load_sample_chats()[:8]
    History.from_chats(chats).memmap(root / "ds")
    index = next(i for i, c in enumerate(chats) if any(m["role"] == "tool" for m in c))
    tok = load_sample_tokenizer()
    flags = ["--train-on", "assistant,tool", "--loss-weight", "tool=0.25", "--loss-weight", "user=0.5"]
    out = {}

    assert main(["show", str(root / "ds"), str(index), "--html", str(root / "chat.html")] + flags) == 0
    ref = History.from_chats(chats[index]).apply_chat_template(
        tokenizer=tok, add_generation_prompt=False, train_on=["assistant", "tool"], loss_weights=WEIGHTS)
    out["chat"] = (root / "chat.html", [(ref["input_ids"], ref["loss_weights"])])

    assert main(["tokenize", str(root / "ds"), str(root / "tokens"), "-q"] + flags) == 0
    assert main(["show", str(root / "tokens"), str(index), "--html", str(root / "tokens.html")]) == 0
    row = TokenDataset(root / "tokens")[index]
    out["tokens"] = (root / "tokens.html", [(row["input_ids"], row["loss_weights"])])

    assert main(["templates", "check", "qwen", "--html", str(root / "check.html")] + flags) == 0
    sections = check_template(get_chat_template("qwen"), selection=TrainSelection(["assistant", "tool"], False, WEIGHTS))
    sections += rollout_section(get_chat_template("qwen"))  # the CLI's last section (facts, no chat)
    expected = []
    for sec in sections:
        if sec.text is None:
            expected.append((torch.zeros(0), torch.zeros(0)))
            continue
        enc = tokenize_chats([sec.text], [[(w.start, w.end) for w in sec.weighted]], tok,
                             return_assistant_tokens_mask=True, span_weights=[[w.weight for w in sec.weighted]])
        expected.append((enc["input_ids"][0], enc["loss_weights"][0]))
    out["check"] = (root / "check.html", expected)
    return out


def _not_blank(png: bytes) -> None:
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    colors = img.getcolors(maxcolors=1 << 20)
    assert colors is not None and len(colors) > 50, "the screenshot is (nearly) one colour"
    green = ROLE_COLORS["assistant"]
    near = sum(n for n, c in colors if all(abs(a - b) <= 12 for a, b in zip(c, green)))
    assert near > 200, "no trained (assistant-green) token is visible"


@pytest.mark.parametrize("name", ["chat", "tokens", "check"])
def test_page_in_chromium(browser, pages, name, tmp_path):
    path, expected = pages[name]
    page = browser.new_page()
    problems, requests = [], []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto(path.as_uri(), wait_until="load")
        png = page.screenshot(full_page=False)
        (tmp_path / f"{name}.png").write_bytes(png)
        _not_blank(png)
        sections = page.evaluate(READ_CHIPS)
        assert len(sections) == len(expected)
        for chips, (ids, weights) in zip(sections, expected):
            assert [c["id"] for c in chips] == ids.tolist()
            assert [c["w"] for c in chips] == pytest.approx(weights.tolist(), rel=1e-6)
            for c in chips:
                assert (c["alpha"] > 0) == (c["w"] > 0), c
                if c["w"] > 0 and c["role"] in ROLE_COLORS:
                    assert c["rgb"] == list(ROLE_COLORS[c["role"]]), c
        roles = {c["role"] for chips in sections for c in chips if c["w"] > 0}
        assert roles == ({"trained"} if name == "tokens" else {"assistant", "tool", "user"})
        # hover a trained token of the lightest weight: the bar shows its id and weight
        target = page.locator('.tok[data-w="0.25"]').first
        target.scroll_into_view_if_needed()
        target.hover()
        tip = page.locator("#tip").inner_text()
        assert f"id {target.get_attribute('data-id')}" in tip and "weight 0.25" in tip, tip
        assert not problems, problems
        assert requests and all(u.startswith("file://") for u in requests), requests
    finally:
        page.close()
