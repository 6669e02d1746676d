"""train_on / loss weights on every real template x both tokenizers x plain / tool-calling / reasoning chats.

Every role is trained, each with its own weight (assistant 1, system 0.75, user 0.5, tool 0.25):

- a system, user or tool message is trained on its content as the template renders it, and after
  it nothing but whitespace, closing tags and the template's end-of-turn text; never its header;
- a message whose content the template does not render raises UnplaceableTurnError, never a gap;
- every assistant span names the assistant message it belongs to (per-turn weights and
  last_turn_only rely on it);
- per token, mask == (weight > 0), and each role's tokens (by their weight) hold its words only
  (the assistant spans themselves are the engine's: test_masks_corpus checks them).

Renders happen once per (template, kind, tokenizer) in a session fixture; each tokenizer encodes
all texts in one batch.
"""
from __future__ import annotations

import re

import pytest

from chatdata.templates import (TemplateError, UnplaceableTurnError, render_chats, render_chats_with_weights,
                                template_profile, tokenize_chats)
from chatdata.templates.render import Renderer

from mask_chats import KINDS, WEATHER, owned_pieces
from template_paths import TOKENIZER_NAMES, template_files

TEMPLATES = {p.stem: p.read_text(encoding="utf-8") for p in template_files()}
WEIGHTS = {"assistant": 1.0, "system": 0.75, "user": 0.5, "tool": 0.25}
WORD = {"assistant": "Zqans", "system": "Zqsys", "user": "Zqusr", "tool": "Zqtool"}
CLOSING = re.compile(r"\s*(?:</[^<>\s]{1,64}>|\[/[A-Z_]{1,64}\])")
_FIXTURES = {"qwen2.5-instruct": "qwen_tok", "mistral-nemo-instruct-2407": "mistral_tok"}


def _tools_variants(kind):
    spec = KINDS[kind]
    yield spec["tools"]
    if spec["tools"] is None:
        yield [WEATHER]  # tool_use templates need tools even in plain chats


def _case(name, kind, tok, options):
    template = TEMPLATES[name]
    chats = KINDS[kind]["chats"]
    for tools in _tools_variants(kind):
        case = {"tools": tools}
        try:
            case["texts"], case["weighted"] = render_chats_with_weights(
                chats, template, tools=tools, tokenizer=tok, loss_weights=WEIGHTS, owners=True, **options)
        except UnplaceableTurnError as err:
            case["error"] = str(err)
            case["texts"] = render_chats(chats, template, tools=tools, tokenizer=tok)
        except TemplateError:
            continue
        case["profile"] = template_profile(Renderer(template, tools=tools, tokenizer=tok))
        return case
    return None  # the template rejects this chat (test_masks_corpus checks that transformers does too)


@pytest.fixture(scope="session")
def weighted_corpus(request):
    out = {}
    for tok_name in TOKENIZER_NAMES:
        tok = request.getfixturevalue(_FIXTURES[tok_name])
        cases = {(name, kind): _case(name, kind, tok, {}) for name in TEMPLATES for kind in KINDS}
        flat = [(key, i) for key, c in cases.items() if c and "error" not in c for i in range(len(c["texts"]))]
        texts = [cases[k]["texts"][i] for k, i in flat]
        spans = [[(s.start, s.end) for s in cases[k]["weighted"][i]] for k, i in flat]
        weights = [[s.weight for s in cases[k]["weighted"][i]] for k, i in flat]
        enc = tokenize_chats(texts, spans, tok, return_assistant_tokens_mask=True, span_weights=weights)
        for n, (key, i) in enumerate(flat):
            cases[key].setdefault("tokens", []).append(
                (enc["input_ids"][n], enc["assistant_masks"][n], enc["loss_weights"][n]))
        out[tok_name] = (tok, cases)
    return out


def _rest_is_end_of_turn(rest, eots):
    """``rest`` (what a span holds after the content) is '' or closing markup then an end-of-turn text."""
    if not rest:
        return True
    i = 0
    while True:
        if any(e and rest[i:] == e for e in eots):
            return True
        m = CLOSING.match(rest, i)
        if m and m.end() > i:
            i = m.end()
        elif i < len(rest) and rest[i].isspace():
            i += 1
        else:
            return False


def _char_problems(chats, case):
    problems = []
    eots = case["profile"].eots
    for chat, text, spans in zip(chats, case["texts"], case["weighted"]):
        problems += _owner_problems(chat, text, spans)
        for k, m in enumerate(chat):
            role, content = m["role"], (m.get("content") or "").strip()
            mine = [s for s in spans if s.message == k]
            if role == "assistant":
                continue
            if any(s.weight != WEIGHTS[role] for s in mine):
                problems.append(f"message {k} ({role}): wrong weight {[s.weight for s in mine]}")
            if not content:
                continue
            if not mine:
                problems.append(f"message {k} ({role}) not trained")
                continue
            piece = "".join(text[s.start:s.end] for s in mine)
            if not piece.startswith(content):
                problems.append(f"message {k} ({role}): span does not start with its content: {piece[:60]!r}")
            elif not _rest_is_end_of_turn(piece[len(content):], eots):
                problems.append(f"message {k} ({role}): after the content comes {piece[len(content):]!r}")
            others = [w for r, w in WORD.items() if r != role and w in piece]
            if others:
                problems.append(f"message {k} ({role}): holds other roles' words {others}")
    return problems


def _owned(message):
    own = owned_pieces(message)
    return [p for p in [own["content"]] + own["args"] + own["reasoning"] if p]


def _owner_problems(chat, text, spans):
    """Each assistant span names the message it belongs to (what per-turn weights and
    last_turn_only rely on): it may hold that message's words, never only another's."""
    problems = []
    for s in spans:
        if s.role != "assistant":
            continue
        piece = text[s.start:s.end]
        if s.message is None:
            problems.append(f"assistant span {piece[:40]!r} belongs to no placed turn")
            continue
        if chat[s.message]["role"] != "assistant":
            problems.append(f"assistant span {piece[:40]!r} owned by a {chat[s.message]['role']} message")
            continue
        mine = any(p in piece for p in _owned(chat[s.message]))
        theirs = [j for j, m in enumerate(chat) if j != s.message and m["role"] == "assistant"
                  and any(p in piece and not any(p in q for q in _owned(chat[s.message])) for p in _owned(m))]
        if theirs and not mine:
            problems.append(f"span {piece[:50]!r} given to message {s.message}, holds message {theirs[0]}'s words")
    return problems


def _token_problems(tok, case):
    problems = []
    for ids, mask, weights in case["tokens"]:
        if (mask.bool() != (weights > 0)).any():
            problems.append("mask != (weight > 0)")
        for role, w in WEIGHTS.items():
            decoded = tok.decode(ids[weights == w].tolist())
            others = [x for r, x in WORD.items() if r != role and x in decoded]
            if others:
                problems.append(f"{role} tokens (weight {w}) hold {others}: {decoded[:80]!r}")
    return problems


def _dropped(message, text) -> bool:
    """The template leaves out something of ``message`` a model would learn: a non-assistant
    message's content, or any owned piece (content, reasoning, call arguments) of an assistant one
    (SOLAR renders no tool calls; Llama Guard is a classifier that renders its own prompt)."""
    if message["role"] != "assistant":
        content = (message.get("content") or "").strip()
        return bool(content) and content not in text
    own = owned_pieces(message)
    return any(p and p not in text for p in [own["content"], *own["reasoning"], *own["args"]])


@pytest.mark.parametrize("tok_name", TOKENIZER_NAMES)
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_every_role_trained_with_its_weight(name, kind, tok_name, weighted_corpus):
    tok, cases = weighted_corpus[tok_name]
    case = cases[(name, kind)]
    if case is None:
        pytest.skip("the template rejects this chat (as transformers does: test_masks_corpus)")
    chats = KINDS[kind]["chats"]
    if "error" in case:
        # only when the template does not render a message's content: then it must name it
        missing = [(k, m["role"]) for chat, text in zip(chats, case["texts"]) for k, m in enumerate(chat)
                   if _dropped(m, text)]
        assert missing, case["error"]
        assert any(f"message {k} ({role})" in case["error"] for k, role in missing), case["error"]
        return
    problems = _char_problems(chats, case) + _token_problems(tok, case)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_no_eot_trains_the_content_alone(name, qwen_tok):
    """mask_eot=False: a non-assistant span is exactly the rendered content."""
    for kind in KINDS:
        case = _case(name, kind, qwen_tok, {"mask_eot": False})
        if case is None or "error" in case:
            continue
        for chat, text, spans in zip(KINDS[kind]["chats"], case["texts"], case["weighted"]):
            for s in spans:
                if s.role != "assistant":
                    assert text[s.start:s.end] == chat[s.message]["content"].strip(), (kind, s)
