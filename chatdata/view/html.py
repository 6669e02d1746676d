"""One self-contained HTML page of token chips: what a model is trained on, token by token.

Each token is a chip showing its text (whitespace kept, a newline shown as ``↵``); a trained token
is coloured by its role (assistant, tool, user, system, or "trained" when the role is unknown),
more opaque the higher its loss weight; an untrained one is plain. Hovering a chip shows its index,
token id, weight, role and message in a bar at the bottom of the window. Sections (one per probe
chat, or one per sequence) carry a title, lines of facts, and chips.

The page has no external assets (inline CSS and a few lines of script), so it can be mailed or
attached to an issue. Chips carry their data as attributes (``data-id``, ``data-w``,
``data-role``, ``data-msg``), which is also how the tests read them back.

Example:
    >>> from chatdata.view.chips import TokenChip
    >>> page = html_page("demo", [ViewSection("chat", ["2 tokens"], [TokenChip("hi", 5, 1.0, "assistant", 1),
    ...                                                             TokenChip("\\n", 6, 0.0, None, None)])])
    >>> page.startswith("<!DOCTYPE html>") and 'data-id="5"' in page and "http" not in page
    True
"""
from __future__ import annotations

import dataclasses
import html
import math
from pathlib import Path
from typing import Sequence

from .chips import TokenChip

__all__ = ["ViewSection", "html_page", "write_html", "ROLE_COLORS"]

# role -> (r, g, b); other roles get OTHER_COLOR
ROLE_COLORS = {"assistant": (34, 160, 80), "tool": (230, 126, 20), "user": (40, 110, 220),
               "system": (150, 70, 200), "trained": (34, 160, 80)}
OTHER_COLOR = (0, 150, 160)


@dataclasses.dataclass
class ViewSection:
    """A part of the page: a ``title``, ``lines`` of text, and ``chips`` (may be empty)."""

    title: str
    lines: Sequence[str] = ()
    chips: Sequence[TokenChip] = ()


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;padding:16px 20px 64px;background:#fafafa;color:#222}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}
.sub{color:#555;margin:0 0 10px}.facts{margin:4px 0 8px;padding-left:18px;color:#333}
.legend{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin:8px 0 4px}
.key{padding:1px 8px;border-radius:4px;border:1px solid #ccc}
.tokens{font:13px/1.9 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;white-space:pre-wrap;word-break:break-all;
background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px}
.tok{border:1px solid #e4e4e4;border-radius:3px;margin:0 1px;padding:0 1px;cursor:default}
.tok:hover{outline:2px solid #333}.nl{color:#999}
#tip{position:fixed;left:0;right:0;bottom:0;background:#222;color:#fff;font:13px ui-monospace,monospace;
padding:6px 12px;min-height:18px}
"""

_JS = """
(function(){var tip=document.getElementById('tip');
document.addEventListener('mouseover',function(e){var t=e.target.closest('.tok');if(!t)return;
var s='token '+t.dataset.i+' \\u00b7 id '+t.dataset.id+' \\u00b7 weight '+t.dataset.w;
if(t.dataset.role)s+=' \\u00b7 '+t.dataset.role;if(t.dataset.msg)s+=' (message '+t.dataset.msg+')';
tip.textContent=s;});})();
"""


def _color(role: str | None) -> tuple[int, int, int]:
    return ROLE_COLORS.get(role or "trained", OTHER_COLOR)


def _alpha(weight: float, top: float) -> float:
    return round(0.2 + 0.8 * min(weight / top, 1.0), 3) if weight > 0 else 0.0


def _weight_text(w: float) -> str:
    return f"{w:g}"


def _chip(i: int, c: TokenChip, top: float) -> str:
    shown = html.escape(str(c.text)).replace("\n", '<span class="nl">\u21b5</span>\n')
    attrs = f'class="tok" data-i="{i}" data-id="{html.escape(str(c.token_id))}" data-w="{_weight_text(c.weight)}"'
    if c.weight > 0:
        r, g, b = _color(c.role)
        attrs += f' data-role="{html.escape(str(c.role or "trained"))}" style="background:rgba({r},{g},{b},{_alpha(c.weight, top)})"'
        if c.message is not None:
            attrs += f' data-msg="{html.escape(str(c.message))}"'
    return f"<span {attrs}>{shown}</span>"


def _check_sections(sections) -> None:
    """A list of ViewSections whose chips carry finite real weights (TypeError / ValueError
    naming the section and token otherwise): a NaN or infinite weight would make the opacity
    scale meaningless (every other chip faded to the floor) and write invalid CSS."""
    if isinstance(sections, ViewSection) or not all(isinstance(s, ViewSection) for s in sections):
        raise TypeError("sections must be a list of ViewSection (wrap a single one: [section])")
    for n, sec in enumerate(sections):
        for i, c in enumerate(sec.chips):
            w = getattr(c, "weight", None)
            if isinstance(w, bool) or not isinstance(w, (int, float)):
                raise TypeError(f"section {n} ({sec.title!r:.40}), token {i}: chips must be TokenChips with a float "
                                f"weight, got {c!r:.80}")
            if not math.isfinite(w):
                raise ValueError(f"section {n} ({sec.title!r:.40}), token {i}: weight {w} is not finite")


def _legend(sections: Sequence[ViewSection], top: float) -> str:
    roles = sorted({c.role or "trained" for s in sections for c in s.chips if c.weight > 0})
    keys = []
    for role in roles:
        r, g, b = _color(role)
        keys.append(f'<span class="key" style="background:rgba({r},{g},{b},1)">{html.escape(role)}</span>')
    carrier: dict = {}  # each weight drawn in the colour of a role whose tokens carry it (tool 0.2: orange)
    for s in sections:
        for c in s.chips:
            if c.weight > 0:
                carrier.setdefault(c.weight, c.role or "trained")
    shown = sorted(carrier) or [top]
    if len(shown) > 6:  # many distinct weights: six of them, evenly spread
        shown = [shown[round(k * (len(shown) - 1) / 5)] for k in range(6)]
    scale = " ".join(f'<span class="key" style="background:rgba({",".join(map(str, _color(carrier.get(w, "assistant"))))},'
                     f'{_alpha(w, top)})">weight {_weight_text(w)}</span>' for w in shown)
    return (f'<div class="legend">trained, by role: {" ".join(keys) or "(nothing trained)"}</div>'
            f'<div class="legend">opacity is the loss weight: {scale}; untrained tokens are plain</div>')


def html_page(title: str, sections: Sequence[ViewSection], subtitle: str = "") -> str:
    """The page (a str) for ``sections``; see the module docstring."""
    _check_sections(sections)
    top = max([1.0] + [c.weight for s in sections for c in s.chips])
    body = [f"<h1>{html.escape(title)}</h1>"]
    if subtitle:
        body.append(f'<p class="sub">{html.escape(subtitle)}</p>')
    body.append(_legend(sections, top))
    for n, sec in enumerate(sections):
        body.append(f'<section data-section="{n}"><h2>{html.escape(sec.title)}</h2>')
        if sec.lines:
            body.append('<ul class="facts">' + "".join(f"<li>{html.escape(str(x))}</li>" for x in sec.lines) + "</ul>")
        if sec.chips:
            body.append('<div class="tokens">' + "".join(_chip(i, c, top) for i, c in enumerate(sec.chips)) + "</div>")
        body.append("</section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
            + "\n".join(body)
            + '<div id="tip">hover a token to see its id and weight</div>'
            f"<script>{_JS}</script></body></html>\n")


def write_html(path, title: str, sections: Sequence[ViewSection], subtitle: str = "") -> Path:
    """Write :func:`html_page` to ``path`` (UTF-8, replaced atomically) and return the path."""
    import os
    import uuid

    path = Path(path)
    page = html_page(title, sections, subtitle)
    # a plain open (not mkstemp, whose file is 0600): the page gets the umask's mode, as any file
    # the user writes, so a page put on a web server or a shared folder can be read there
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(page)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
