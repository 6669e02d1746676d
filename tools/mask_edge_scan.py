"""Edge-case scan of the assistant masks: every corpus template x both test tokenizers x adversarial chats.

Usage::

    .venv/bin/python tools/mask_edge_scan.py [--templates NAME,...] [--json out.json] [-v]

For every template of ``tests/data/templates`` and both tokenizers of ``tests/data/tokenizers`` it
renders adversarial chats -- empty, whitespace-only and unicode contents, contents equal to the
template's own generation header or end-of-turn text, tool calls with empty / blank / nested
arguments, reasoning only, several system messages, consecutive assistant turns, content given as
parts -- with ``render_chats_with_spans`` (default options and ``mask_eot=False``) and checks the
invariant of ``docs/masks.md``:

- **foreign**: no trained token touches the content of a system, user or tool message;
- **missed**: every character of an assistant message's own words (content, reasoning, tool-call
  argument values) that the template renders is trained;
- **stray**: what is trained beyond those words is the markup of the turn (tool-call syntax, end
  of turn, reasoning tags): its words are words the template writes around the assistant's own
  words on clean chats (its *baseline*), never prompt prose or another role's header;
- **crash**: the engine fails with anything but a ``TemplateError`` (a refusal must name what is
  wrong: ``UnplaceableTurnError`` names the template, the chat and the message).

Where each message's words sit is found without the mask engine: the chat is rendered again with
one value replaced by a unique word; where the template renders that word as it renders the value
(the two renderings agree once the word is put back), the word's places are the value's places.
A value the template transforms (strips, splits at ``</think>``) has no known place and is only
checked through the words it contributes.

It prints one line per finding and the counts; ``--json`` writes them. It is a tool, not a test:
the regressions it found are tests in ``tests/templates/test_mask_edge_cases.py``. Findings that were
looked at and are right as the engine has them are listed in :data:`KNOWN`, each with its reason:
they are counted as ``known``, not ``wrong`` (``-v`` prints them with the reason).
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
TOKENIZERS = ("qwen2.5-instruct", "mistral-nemo-instruct-2407")
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather.", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
OPTIONS = ({}, {"mask_eot": False})
_WORD = re.compile(r"[^\W\d_]{2,}")

# (template, chat, finding) patterns of findings that are right as they are, and why (one line each)
KNOWN = [
    (r"llama-cpp-deepseek-r1", r"(last_)?assistant=empty|reasoning_only_(middle|last)|consecutive_after_empty",
     r"stray: trained words \['begin', 'calls', 'tool'\]",
     "the template writes an answer without content as an empty tool-call block (<｜tool▁calls▁begin｜>"
     "<｜tool▁calls▁end｜>), markup the model writes; it refuses tools=, so the clean baseline lacks those words"),
    (r"Qwen-QwQ-32B", r"inline_think_(only|empty)_last", r"missed: \(1, 'content'\) '<think>",
     "the answer's <think> (and </think>) sit where QwQ's generation prompt writes <think>\\n</think>: "
     "the prompt's, not learned (docs/masks.md, how turns are placed, step 2)"),
]


def known_reason(name: str, cname: str, finding: str) -> str | None:
    """Why ``finding`` of template ``name`` on chat ``cname`` is right as it is (:data:`KNOWN`), or None."""
    for tpl, chat, pattern, why in KNOWN:
        if re.fullmatch(tpl, name) and re.fullmatch(chat, cname) and re.match(pattern, finding):
            return why
    return None


def load_tokenizers(tmp: Path) -> dict:
    from transformers import AutoTokenizer

    out = {}
    for name in TOKENIZERS:
        dst = tmp / name
        dst.mkdir()
        for f in (DATA / "tokenizers" / name).iterdir():
            if f.name.endswith(".gz"):
                with gzip.open(f, "rb") as fin, open(dst / f.name[:-3], "wb") as fout:
                    shutil.copyfileobj(fin, fout)
            else:
                shutil.copy(f, dst / f.name)
        out[name] = AutoTokenizer.from_pretrained(str(dst))
    return out


def _call(i: int, args) -> dict:
    return {"id": f"call{i}abcd", "type": "function", "function": {"name": "get_weather", "arguments": args}}


def _m(role: str, content, **extra) -> dict:
    return {"role": role, "content": content, **extra}


def clean_chats() -> dict[str, tuple[list, list | None]]:
    """The baseline: plain, tool-calling and reasoning chats whose texts are marker words."""
    return {
        "plain": ([_m("system", "Zqs1q rules."), _m("user", "Zqu1q one?"), _m("assistant", "Zqa1q one."),
                   _m("user", "Zqu2q two?"), _m("assistant", "Zqa2q two.")], None),
        "tools": ([_m("user", "Zqu1q weather?"), _m("assistant", "", tool_calls=[_call(1, {"city": "Zqg1q"})]),
                   _m("tool", "Zqt1q rain", tool_call_id="call1abcd", name="get_weather"),
                   _m("assistant", "Zqa1q more.", tool_calls=[_call(2, {"city": "Zqg2q"})]),
                   _m("tool", "Zqt2q sun", tool_call_id="call2abcd", name="get_weather"),
                   _m("assistant", "Zqa2q done.")], [WEATHER]),
        "tools_nested": ([_m("user", "Zqu1q weather?"), _m("assistant", " ", tool_calls=[
            _call(1, {"city": {"a": [1, {"b": "Zqg1q"}], "c": False}})]),
            _m("tool", "Zqt1q rain", tool_call_id="call1abcd", name="get_weather"), _m("assistant", "Zqa2q done.")],
            [WEATHER]),
        "tools_text": ([_m("user", "Zqu1q weather?"), _m("assistant", " ", tool_calls=[
            _call(1, {"city": "Zqg1q\nline é 🎉"}), _call(2, {"city": "Zqg2q"})]),
            _m("tool", "Zqt1q rain", tool_call_id="call1abcd", name="get_weather"),
            _m("tool", "Zqt2q sun", tool_call_id="call2abcd", name="get_weather"), _m("assistant", "Zqa2q done.")],
            [WEATHER]),
        "tools_str": ([_m("user", "Zqu1q weather?"), _m("assistant", "", tool_calls=[_call(1, '{"city": "Zqg1q"}')]),
                       _m("tool", "Zqt1q rain", tool_call_id="call1abcd", name="get_weather"),
                       _m("assistant", "Zqa2q done.")], [WEATHER]),
        "reasoning": ([_m("user", "Zqu1q one?"), _m("assistant", "Zqa1q one.", reasoning_content="Zqr1q think."),
                       _m("user", "Zqu2q two?"), _m("assistant", "Zqa2q two.", reasoning_content="Zqr2q think.")],
                      None),
    }


def adversarial_chats(header: str, eots: tuple) -> dict[str, tuple[list, list | None]]:
    """``{name: (chat, tools)}``: the chats of the scan (``header`` / ``eots``: the template's own)."""
    texts = {"empty": "", "space": " ", "newlines": "\n\n", "blank": " \t\n ", "unicode": "e\u0301 שלום 👩\u200d👩\u200d👧 \u2028 é",
             "header": header or "<|im_start|>assistant\n", "header_stripped": (header or "<|im_start|>assistant").strip(),
             "eot": eots[0] if eots else "<|im_end|>", "role_word": "User:", "think_open": "<think>"}
    out: dict[str, tuple[list, list | None]] = {}
    for tname, x in texts.items():
        for role in ("system", "user", "assistant"):
            chat = [_m("system", "Zqs1q rules."), _m("user", "Zqu1q one?"), _m("assistant", "Zqa1q one."),
                    _m("user", "Zqu2q two?"), _m("assistant", "Zqa2q two.")]
            idx = {"system": 0, "user": 1, "assistant": 2}[role]
            chat[idx] = _m(role, x)
            out[f"{role}={tname}"] = (chat, None)
        if tname in ("empty", "space", "eot", "header"):
            chat = [_m("user", "Zqu1q weather?"), _m("assistant", "", tool_calls=[_call(1, {"city": "Zqg1q"})]),
                    _m("tool", x, tool_call_id="call1abcd", name="get_weather"), _m("assistant", "Zqa1q done.")]
            out[f"tool={tname}"] = (chat, [WEATHER])
        out[f"last_assistant={tname}"] = ([_m("user", "Zqu1q one?"), _m("assistant", x)], None)
    for aname, args in {"args_empty": {}, "arg_empty": {"city": ""}, "arg_blank": {"city": " "},
                        "arg_newline": {"city": "\n"}, "arg_nested": {"city": {"a": [1, {"b": "Zqg1q"}]}},
                        "args_str_empty_obj": "{}", "args_str": '{"city": "Zqg1q"}', "arg_unicode": {"city": "Zqg1q é 🎉"},
                        "arg_eot": {"city": eots[0] if eots else "<|im_end|>"}}.items():
        for content in ("", " "):
            chat = [_m("user", "Zqu1q weather?"), _m("assistant", content, tool_calls=[_call(1, args)]),
                    _m("tool", "Zqt1q rain", tool_call_id="call1abcd", name="get_weather"),
                    _m("assistant", "Zqa1q done.")]
            out[f"call_{aname}_content={content!r}"] = (chat, [WEATHER])
    out["two_calls"] = ([_m("user", "Zqu1q weather?"), _m("assistant", "Zqa1q both.", tool_calls=[
        _call(1, {"city": "Zqg1q"}), _call(2, {"city": "Zqg2q"})]),
        _m("tool", "Zqt1q rain", tool_call_id="call1abcd", name="get_weather"),
        _m("tool", "Zqt2q sun", tool_call_id="call2abcd", name="get_weather"), _m("assistant", "Zqa2q done.")], [WEATHER])
    out["call_last"] = ([_m("user", "Zqu1q weather?"), _m("assistant", "", tool_calls=[_call(1, {"city": "Zqg1q"})])],
                        [WEATHER])
    for rname, msg in {"reasoning_only": _m("assistant", "", reasoning_content="Zqr1q think."),
                       "reasoning_blank": _m("assistant", "Zqa1q one.", reasoning_content=" "),
                       "inline_think_only": _m("assistant", "<think>Zqr1q think.</think>"),
                       "inline_think_empty": _m("assistant", "<think></think>Zqa1q one.")}.items():
        out[f"{rname}_middle"] = ([_m("user", "Zqu1q one?"), msg, _m("user", "Zqu2q two?"),
                                   _m("assistant", "Zqa2q two.")], None)
        out[f"{rname}_last"] = ([_m("user", "Zqu1q one?"), dict(msg)], None)
    out["two_systems"] = ([_m("system", "Zqs1q rules."), _m("system", "Zqs2q more."), _m("user", "Zqu1q one?"),
                           _m("assistant", "Zqa1q one.")], None)
    out["system_midway"] = ([_m("system", "Zqs1q rules."), _m("user", "Zqu1q one?"), _m("assistant", "Zqa1q one."),
                             _m("system", "Zqs2q more."), _m("user", "Zqu2q two?"), _m("assistant", "Zqa2q two.")], None)
    out["consecutive_assistants"] = ([_m("user", "Zqu1q one?"), _m("assistant", "Zqa1q one."),
                                      _m("assistant", "Zqa2q two.")], None)
    out["consecutive_assistants_then_user"] = ([_m("user", "Zqu1q one?"), _m("assistant", "Zqa1q one."),
                                                _m("assistant", "Zqa2q two."), _m("user", "Zqu2q again?"),
                                                _m("assistant", "Zqa3q three.")], None)
    out["consecutive_after_empty"] = ([_m("user", "Zqu1q one?"), _m("assistant", ""),
                                       _m("assistant", "Zqa2q two.")], None)
    parts = lambda s: [{"type": "text", "text": s}]  # noqa: E731
    out["parts_plain"] = ([_m("user", parts("Zqu1q one?")), _m("assistant", parts("Zqa1q one."))], None)
    out["parts_empty_user"] = ([_m("user", parts("")), _m("assistant", parts("Zqa1q one."))], None)
    out["parts_blank_user"] = ([_m("user", parts(" ")), _m("assistant", parts("Zqa1q one."))], None)
    out["parts_empty_user_two_turns"] = ([_m("user", parts("")), _m("assistant", parts("Zqa1q one.")),
                                          _m("user", parts("")), _m("assistant", parts("Zqa2q two."))], None)
    return out


def _slots(chat: list) -> list[tuple[tuple, str, bool]]:
    """``(path, value, owned by the assistant)`` of every non-blank string the chat's messages hold."""
    out = []
    for k, m in enumerate(chat):
        own = m["role"] == "assistant"
        c = m.get("content")
        if isinstance(c, str) and c.strip():
            out.append(((k, "content"), c, own))
        elif isinstance(c, list):
            for j, p in enumerate(c):
                if p.get("type") == "text" and p["text"].strip():
                    out.append(((k, "content", j), p["text"], own))
        r = m.get("reasoning_content")
        if isinstance(r, str) and r.strip():
            out.append(((k, "reasoning_content"), r, own))
        for i, call in enumerate(m.get("tool_calls") or ()):
            args = call["function"]["arguments"]
            if isinstance(args, dict):
                for key, v in args.items():
                    if isinstance(v, str) and v.strip():
                        out.append(((k, "args", i, key), v, own))
    return out


def _replace(chat: list, path: tuple, value: str) -> list:
    out = [dict(m) for m in chat]
    m = out[path[0]]
    if path[1] == "content" and len(path) == 2:
        m["content"] = value
    elif path[1] == "content":
        m["content"] = [dict(p) for p in m["content"]]
        m["content"][path[2]]["text"] = value
    elif path[1] == "reasoning_content":
        m["reasoning_content"] = value
    else:
        calls = [json.loads(json.dumps(c)) for c in m["tool_calls"]]
        calls[path[2]]["function"]["arguments"][path[3]] = value
        m["tool_calls"] = calls
    return out


def regions(render, chat: list, text: str) -> tuple[list, list, list]:
    """``(assistant regions, other regions, assistant words)``: where each value is rendered as
    given (found by re-rendering with it replaced by a unique word), and the words of the
    assistant's values (for those the template transforms)."""
    own, other = [], []
    words = {w.lower() for m in chat if m["role"] == "assistant"
             for w in _WORD.findall(json.dumps([m.get("content"), m.get("reasoning_content"), m.get("tool_calls")],
                                               ensure_ascii=False))}
    for n, (path, value, mine) in enumerate(_slots(chat)):
        mark = f"Vkxw{n}wxkV"
        try:
            twin = render(_replace(chat, path, mark))
        except Exception:  # noqa: BLE001 - the template refuses the twin: no known place
            continue
        if twin.replace(mark, value) != text:
            continue  # the template transforms this value
        shift, pos = 0, 0
        while True:
            i = twin.find(mark, pos)
            if i < 0:
                break
            a = i + shift
            lead = len(value) - len(value.lstrip())
            b = a + len(value) - (len(value) - len(value.rstrip()))
            (own if mine else other).append((a + lead, b, path))
            shift += len(value) - len(mark)
            pos = i + len(mark)
    return own, other, words


def residue_words(text: str, trained: bytearray, own: list) -> set[str]:
    keep = bytearray(trained)
    for a, b, _ in own:
        keep[a:b] = bytes(b - a)
    residue = "".join(c if keep[i] else " " for i, c in enumerate(text))
    return {w.lower() for w in _WORD.findall(residue)}


def check_case(tok, template: str, chat: list, tools, opts: dict, baseline: set | None, eots: tuple,
               record: list | None = None):
    """``(status, findings, residue words)``: status ``ok`` / ``refused`` / ``unplaceable`` /
    ``crash``; findings: a list of strings. ``record`` gets the spans (or the error's class)."""
    from chatdata.templates import TemplateError, UnplaceableTurnError, render_chats, render_chats_with_spans
    from chatdata.templates import tokenize_chats

    try:
        texts, spans = render_chats_with_spans([chat], template, tools=tools, tokenizer=tok, **opts)
    except UnplaceableTurnError as err:
        if record is not None:
            record.append("UnplaceableTurnError")
        msg = str(err)
        if "message" not in msg or "template" not in msg:
            return "crash", [f"unclear UnplaceableTurnError: {msg[:160]}"], set()
        return "unplaceable", [], set()
    except TemplateError:
        if record is not None:
            record.append("TemplateError")
        return "refused", [], set()
    except Exception as err:  # noqa: BLE001 - a crash is a finding
        return "crash", [f"{type(err).__name__}: {str(err)[:160]}"], set()
    text, spans = texts[0], spans[0]
    if record is not None:
        record.append([list(p) for p in spans])

    def render(c):
        return render_chats([c], template, tools=tools, tokenizer=tok)[0]

    own, other, words = regions(render, chat, text)
    trained = bytearray(len(text))
    for a, b in spans:
        trained[a:b] = b"\x01" * (b - a)
    findings = []
    enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
    mask = tokenize_chats([text], [spans], tok, return_assistant_tokens_mask=True)["assistant_masks"][0].tolist()
    for (ta, tb), m in zip(enc["offset_mapping"], mask):
        if m and ta < tb:
            for a, b, path in other:
                if ta < b and a < tb:
                    findings.append(f"foreign: trained token {text[ta:tb]!r} touches {path} {text[a:b][:40]!r}")
                    break
    for a, b, path in own:
        if path[1] == "reasoning_content" and opts.get("mask_reasoning") is False:
            continue
        if a < b and not all(trained[a:b]):
            findings.append(f"missed: {path} {text[a:b][:40]!r} not trained")
    res = residue_words(text, trained, own)
    if baseline is not None:
        extra = res - baseline - words - {"get", "weather", "city", "call", "abcd"}
        if extra:
            findings.append(f"stray: trained words {sorted(extra)[:8]}")
    return "ok" if not findings else "wrong", findings, res


def scan(names: list[str], toks: dict, verbose: bool = False) -> dict:
    from chatdata.templates.profile import template_profile
    from chatdata.templates.render import Renderer

    counts: Counter = Counter()
    findings, known, spans = [], [], {}
    for name in names:
        template = (DATA / "templates" / f"{name}.jinja").read_text(encoding="utf-8")
        for tok_name, tok in toks.items():
            try:
                profile = template_profile(Renderer(template, tokenizer=tok))
                header, eots = profile.header, tuple(profile.eots)
            except Exception:  # noqa: BLE001
                header, eots = "", ()
            baseline: set = set()
            for cname, (chat, tools) in clean_chats().items():
                for opts in OPTIONS:
                    _, _, res = check_case(tok, template, chat, tools, opts, None, eots)
                    baseline |= res
            for cname, (chat, tools) in adversarial_chats(header, eots).items():
                for opts in OPTIONS:
                    rec: list = []
                    status, found, _ = check_case(tok, template, chat, tools, opts, baseline, eots, rec)
                    spans[f"{name} [{tok_name}] {cname} {opts or ''}"] = rec[0] if rec else None
                    reasons = [known_reason(name, cname, f) for f in found]
                    if status == "wrong" and all(reasons):
                        status = "known"
                    counts[status] += 1
                    for f, why in zip(found, reasons):
                        line = f"{name} [{tok_name}] {cname} {opts or ''}: {f}"
                        if why:
                            known.append(f"{line} -- known: {why}")
                            if verbose:
                                print(known[-1], flush=True)
                            continue
                        findings.append(line)
                        if verbose:
                            print(line, flush=True)
    return {"counts": dict(counts), "findings": findings, "known": known, "spans": spans}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--templates", help="comma-separated template names (default: all of tests/data/templates)")
    ap.add_argument("--json", help="write the counts and findings here")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    names = args.templates.split(",") if args.templates else sorted(
        p.stem for p in (DATA / "templates").glob("*.jinja"))
    with tempfile.TemporaryDirectory() as tmp:
        toks = load_tokenizers(Path(tmp))
        out = scan(names, toks, args.verbose)
    if not args.verbose:
        for line in out["findings"]:
            print(line)
    print("counts:", out["counts"], "findings:", len(out["findings"]), "known (right as they are):", len(out["known"]))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
