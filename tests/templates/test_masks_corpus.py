"""Assistant masks on every real template: continuing a final message, and the fast path.

The masks of the plain, tool-calling, reasoning and multimodal probes on every template with
both tokenizers are checked by the template matrix (tests/matrix), computed once per session.
"""
from __future__ import annotations

import pytest

from chatdata.templates import TemplateError, render_chats, render_chats_with_spans, template_profile
from chatdata.templates.render import Renderer

from mask_chats import FOREIGN, KINDS, WEATHER
from template_paths import template_files

TEMPLATES = {p.stem: p.read_text(encoding="utf-8") for p in template_files()}


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_continue_final_message(name, qwen_tok):
    template = TEMPLATES[name]
    chat = KINDS["plain"]["chats"][0][:-1] + [{"role": "assistant", "content": "Zqans partial"}]
    for tools in (None, [WEATHER]):
        try:
            text = render_chats([chat], template, tools=tools, tokenizer=qwen_tok, continue_final_message=True)[0]
            break
        except TemplateError as err:
            reason = str(err).splitlines()[0][:120]
    else:
        pytest.skip(f"template raises: {reason}")
    texts, spans = render_chats_with_spans([chat], template, tools=tools, tokenizer=qwen_tok,
                                           continue_final_message=True)
    assert texts == [text]
    s, e = spans[0][-1]
    assert e == len(text) and text[s:e].endswith("Zqans partial")
    masked = "".join(text[a:b] for a, b in spans[0])
    assert "Zqans first answer." in masked and not any(w in masked for w in FOREIGN)


def test_fast_path_places_turns_like_prefix_renderings(qwen_tok):
    """Where a template may use the one-render fast path, it gives the prefix renderings' bounds."""
    from chatdata.templates.fast_turns import fast_bounds, fast_path_ok
    from chatdata.templates.render import prepare_chat
    from chatdata.templates.turns import turn_bounds

    checked = 0
    for name, template in TEMPLATES.items():
        for kind in KINDS:
            chats, tools = KINDS[kind]["chats"], KINDS[kind]["tools"]
            renderer = Renderer(template, tools=tools, tokenizer=qwen_tok)
            try:
                texts = render_chats(chats, template, tools=tools, tokenizer=qwen_tok)
            except TemplateError:
                continue
            profile = template_profile(renderer)
            if not fast_path_ok(renderer, profile):
                continue
            for chat, text in zip(chats, texts):
                chat = prepare_chat(chat)
                fast = fast_bounds(chat, text, profile)
                if fast is not None:
                    assert fast == turn_bounds(renderer, chat, text, profile), (name, kind)
                    checked += 1
    assert checked > 50
