"""Bad or edge-case input to chatdata.hygiene: empty and wordless conversations, Unicode that
hides a copy (NFKC forms, zero-width characters, case), tool schemas that are no schemas,
arguments that are not standard JSON, out-of-range parameters, and benchmark files that are
empty, missing, not UTF-8 or not what their name says. Each ends in the right answer or a
clear error."""
from __future__ import annotations

import gzip
import json
import re
import unicodedata

import numpy as np
import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st

from chatdata import History
from chatdata.hygiene import (ContaminationIndex, check_tool_calls, decode_arguments, decontaminate, dedup, find_duplicates,
                              load_prompts)
from chatdata.hygiene.normalize import conversation_hashes, normalize_text
from chatdata.hygiene.words import word_hashes, words_of

PROMPT = "what is the capital city of the small european country of luxembourg today"
SENTENCE = "Q: What is the capital city of the small European country of Luxembourg today? A: Luxembourg."


def users(*texts):
    return History.from_chats([[{"role": "user", "content": t}] for t in texts])


# -- words: what near dedup and decontamination compare -------------------------------------------
HIDDEN = ["\u200b", "\u00ad", "\u200d", "\u2060", "\ufeff", "\u202e"]  # zero-width space, soft hyphen, ...


@pytest.mark.parametrize("disguise", [
    lambda s: s.replace("capital", "capi\u200btal").replace("small", "sm\u00adall"),  # zero-width, soft hyphen
    lambda s: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in s),  # full-width letters
    lambda s: s.replace("fi", "\ufb01").upper(),  # a ligature, upper case
    lambda s: "\ufeff" + s.replace(" ", "\u00a0"),  # a byte-order mark, no-break spaces
])
def test_a_disguised_benchmark_prompt_is_still_found(disguise):
    """Before: NFC and lower() only, so each of these was missed (a zero-width character split a
    word in two, full-width letters and ligatures were other words)."""
    h = users(disguise(SENTENCE), "hello")
    assert decontaminate(h, [PROMPT]).tolist() == [0]


def test_case_folding_and_compatibility_forms():
    assert words_of("STRASSE") == words_of("Straße") == ["strasse"]
    assert words_of("ＧＳＭ８Ｋ x²") == ["gsm8k", "x2"]
    assert words_of("Cafe\u0301 CAFÉ") == ["café", "café"]
    assert decontaminate(users("DIE STRASSE IST DIE HAUPTSTADT VOM KLEINEN LAND LUXEMBURG HEUTE NOCH SO"),
                         ["die straße ist die hauptstadt vom kleinen land luxemburg heute noch so"]).tolist() == [0]


words_text = st.lists(st.one_of(st.sampled_from(["Straße", "ＡＢ", "ﬁne", "Café", "x²", "ς", "İ", "e\u0301", "\x00",
                                                 "काम", "東京", "ภาษา", "฿", "ー", "\u0301", "\ufe0f"]),
                                st.sampled_from(HIDDEN + [" ", "\n", ",", "\u3000"]),
                                st.text(st.characters(blacklist_categories=("Cs",)), max_size=4)), max_size=8).map("".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(words_text, min_size=1, max_size=5))
def test_bulk_word_hashes_match_the_reference_words(texts):
    h, off = word_hashes(texts)
    for i, t in enumerate(texts):
        expected = [xxhash.xxh3_64_intdigest(w.replace("\x00", " ").encode("utf-8", "surrogatepass")) for w in words_of(t)]
        assert h[off[i]:off[i + 1]].tolist() == expected, t


@settings(max_examples=100, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=30), st.data())
def test_hidden_characters_and_forms_never_change_the_words(text, data):
    pos = data.draw(st.integers(0, len(text)))
    mark = data.draw(st.sampled_from(HIDDEN))
    hidden = text[:pos] + mark + text[pos:]
    assert words_of(hidden) == words_of(text)
    assert words_of(unicodedata.normalize("NFKD", text)) == words_of(text)


# -- near duplicates --------------------------------------------------------------------------------
def test_conversations_without_words_are_near_duplicates_only_when_equal():
    """Before: every wordless conversation had the same signature, so all but the first were
    dropped as near duplicates of it ("!!!", "???", "👍", "", a tool call alone)."""
    h = users("!!!", "???", "...", " !!! ", "", "", "😀", "👍")
    assert dedup(h, "near").tolist() == [0, 1, 2, 4, 6, 7]
    assert dedup(h, "exact").tolist() == [0, 1, 2, 4, 6, 7]
    dup, sim = find_duplicates(h, "near")
    assert dup.tolist() == [-1, -1, -1, 0, -1, 4, -1, -1] and sim[3] == 1.0


def call(args, content="please send the weekly report to the whole team right now", reasoning=None):
    msg = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "send", "arguments": args}}]}
    if reasoning:
        msg["reasoning_content"] = reasoning
    return [{"role": "user", "content": content}, msg]


def test_near_dedup_reads_tool_calls_and_reasoning_like_exact_dedup():
    """Before: only the message texts, so conversations that differ in their tool calls (or
    consist of nothing else) were near duplicates."""
    h = History.from_chats([call({"to": "alice@example.com"}), call({"to": "bob@corp.org", "cc": "finance team"}),
                            call('{"to": "alice@example.com"}'), [call({"x": 1})[1]], [call({"y": 2})[1]]])
    assert dedup(h, "near").tolist() == [0, 1, 3, 4]
    assert dedup(h, "exact").tolist() == [0, 1, 3, 4]


@pytest.mark.parametrize("threshold", [0, 1, -0.5, 1.5, float("nan"), float("inf")])
def test_near_threshold_out_of_range(threshold):
    with pytest.raises(ValueError, match="threshold must be in"):
        dedup(users("a b c", "a b c"), "near", threshold)


def test_empty_inputs():
    empty = History.from_chats([[], []])
    assert dedup(empty).tolist() == [0] and dedup(empty, "near").tolist() == [0]  # two empty conversations: equal
    assert decontaminate(empty, [PROMPT]).tolist() == [] and check_tool_calls(empty, []) == []
    assert decontaminate(users(SENTENCE), []).tolist() == [] and decontaminate(users(SENTENCE), {}).tolist() == []


def test_huge_and_whitespace_only_texts():
    big = "word " * 1_000_000
    h = users(big, " " + big + "\n", "\u3000\t\n", " ")
    assert dedup(h).tolist() == [0, 2]
    assert dedup(h, "near").tolist() == [0, 2]


# -- decontamination: parameters and files ---------------------------------------------------------
@pytest.mark.parametrize("n", [0, -3, 1.5, True, "13"])
def test_ngram_size_must_be_a_positive_int(n):
    with pytest.raises(ValueError, match="n must be an integer >= 1, got"):
        decontaminate(users(SENTENCE), [PROMPT], n=n)
    assert decontaminate(users(SENTENCE), [PROMPT], n=np.int64(13)).tolist() == [0]
    assert decontaminate(users(SENTENCE), [PROMPT], n=None).tolist() == [0]  # None: the default, 13


def test_an_index_keeps_its_n_and_a_different_n_is_refused():
    # was: decontaminate(h, index, n=3) silently scanned with the index's 13-grams
    index = ContaminationIndex({"quiz": [PROMPT]}, n=13)
    assert decontaminate(users(SENTENCE), index).tolist() == [0]
    assert decontaminate(users(SENTENCE), index, n=13).tolist() == [0]
    with pytest.raises(ValueError, match="n=3 differs from the ContaminationIndex's n=13: build the index with n=3"):
        decontaminate(users(SENTENCE), index, n=3)


@pytest.mark.parametrize("prompts, error, match", [
    ([PROMPT, None], TypeError, "benchmark 'prompts': prompt 1 is a NoneType, not a string"),
    ({"quiz": PROMPT}, TypeError, "benchmark 'quiz' must be a list of prompt strings, got str"),  # was: its characters
    ({"quiz": 5}, TypeError, "benchmark 'quiz' must be a list of prompt strings, got int"),
    (PROMPT, ValueError, "no such benchmark file \\(pass prompts as a list of strings\\)"),
])
def test_prompts_that_are_not_lists_of_strings(prompts, error, match):
    with pytest.raises(error, match=match):
        decontaminate(users(SENTENCE), prompts)


def test_benchmark_files_that_are_empty_missing_or_not_utf8(tmp_path):
    def write(name, data):
        p = tmp_path / name
        p.write_bytes(data)
        return p

    cases = [
        (write("empty.jsonl", b""), "the file holds no records"),
        (write("blank.jsonl", b"\n  \n"), "the file holds no records"),
        (write("latin1.jsonl", b'{"question": "ok"}\n{"question": "caf\xe9"}\n'), r"latin1.jsonl:line 2: not UTF-8 \(byte 0xe9\); re-encode"),
        (write("fake.jsonl.gz", b"not gzip"), "fake.jsonl.gz: cannot be read as gzip"),
        (write("cut.jsonl.gz", gzip.compress(b'{"question": "x"}\n' * 50)[:30]), "cut.jsonl.gz: cannot be read as gzip"),
        (write("fake.parquet", b"PAR1"), "fake.parquet: not a readable Parquet file"),
        (tmp_path, "is a folder, not a benchmark file"),
        (tmp_path / "missing.jsonl", "no such benchmark file"),
    ]
    for path, match in cases:
        with pytest.raises(ValueError, match=match):
            load_prompts(path)
        with pytest.raises(ValueError, match=match):
            decontaminate(users(SENTENCE), path)


def test_benchmark_files_with_a_bom_or_plain_strings(tmp_path):
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps({"question": PROMPT}).encode() + b"\n")  # was: invalid JSON
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps([PROMPT, "another prompt"]))  # was: "none of the columns"
    lines = tmp_path / "lines.jsonl.gz"
    lines.write_bytes(gzip.compress("\n".join(json.dumps(p) for p in [PROMPT, "x"]).encode("utf-8-sig")))
    for path in (bom, plain, lines):
        assert load_prompts(path)[0] == PROMPT
        assert decontaminate(users(SENTENCE, "hello"), path).tolist() == [0]
    huge = tmp_path / "huge.jsonl"
    huge.write_text(json.dumps({"question": "zebra " * 1_000_000}) + "\n" + json.dumps({"question": PROMPT}) + "\n")
    assert decontaminate(users(SENTENCE, "zebra " * 20), huge).tolist() == [0, 1]


# -- tool calls ------------------------------------------------------------------------------------
def one_call(args, name="f"):
    return History.from_chats([[{"role": "assistant", "content": "",
                                 "tool_calls": [{"type": "function", "function": {"name": name, "arguments": args}}]}]])


def tools(parameters):
    return [{"type": "function", "function": {"name": "f", "parameters": parameters}}]


BACKENDS = ["py", "rs"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("parameters, problem, detail", [
    (["a"], "bad_tool_schema", "its parameters schema must be an object \\(or true/false\\), got list"),  # was: unchecked
    ("object", "bad_tool_schema", "got str"),
    (5, "bad_tool_schema", "got int"),
    (False, "schema_mismatch", "False schema does not allow"),  # a boolean schema that allows nothing: was unchecked
    ({"type": "nonsense"}, "bad_tool_schema", "invalid parameters schema"),
    ({"$ref": "#/$defs/nope"}, "bad_tool_schema", "invalid parameters schema"),  # py: was a raw referencing error
    ({"type": "object", "properties": {"x": {"type": "string", "pattern": "("}}}, "bad_tool_schema", "regex"),
])
def test_tool_schemas_that_are_not_schemas(backend, parameters, problem, detail):
    got = check_tool_calls(one_call({"x": "a"}), tools(parameters), backend=backend)
    assert [p["problem"] for p in got] == [problem]
    assert re.search(detail, got[0]["detail"]), got[0]["detail"]


def test_a_ref_cycle_is_a_bad_schema_not_a_recursion_error():
    cycle = {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
    got = check_tool_calls(one_call({"x": 1}), tools(cycle), backend="py")  # was: RecursionError
    assert [p["problem"] for p in got] == ["bad_tool_schema"] and "a cycle" in got[0]["detail"]
    assert check_tool_calls(one_call({"x": 1}), tools(True), backend="py") == []  # true allows everything
    with pytest.raises(ValueError, match="backend must be 'rs' .* or 'py' .*, got 'nope'"):
        check_tool_calls(one_call({"x": 1}), tools({}), backend="nope")  # was: silently the python backend


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("args, why", [
    ('{"x": NaN}', "NaN is not JSON"),  # json.loads takes it; the rs backend read it as null, py as a number
    ('{"x": -Infinity}', "-Infinity is not JSON"),
    ('{"x": "\\ud800"}', "lone surrogate escape"),  # not text: a History cannot store it as UTF-8
    ('{"x": 1', "Expecting"),
    ("", "Expecting value"),
    ('{"x":' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ('{"x": 1e400}', "too large for a double"),  # was: decoded to inf, which no JSON writer writes back
    ('{"x": 1, "x": "one"}', "appears twice"),  # was: decoded to {"x": "one"}, the 1 lost
    ('{"y": {"x": 1, "x": 1}}', "appears twice"),
])
def test_arguments_that_are_not_standard_json(backend, args, why):
    schema = {"type": "object", "properties": {"x": {}}}
    got = check_tool_calls(one_call(args), tools(schema), backend=backend)
    assert [p["problem"] for p in got] == ["arguments_not_json"] and why in got[0]["detail"]
    h = one_call(args)
    assert decode_arguments(h) is h  # left as the string it was


def test_decode_arguments_still_decodes_standard_json():
    h = one_call('{"x": "caf\\u00e9 \\ud83d\\ude00"}')  # an escaped surrogate pair is text
    args = decode_arguments(h).to_chats()[0][0]["tool_calls"][0]["function"]["arguments"]
    assert args == {"x": "café 😀"}


# -- exact duplicates --------------------------------------------------------------------------------
def test_invisible_characters_do_not_make_an_exact_copy_distinct():
    """Before: "Hello\\u200b world" and "Hello world" had other keys (a copy kept)."""
    h = users("Hello world", "Hel\u200blo\u00ad world\ufeff", "\u200bHello \u2060world", "Hello  world!", "x²", "x2")
    assert dedup(h).tolist() == [0, 3, 4, 5]  # NFKC is not exact: x² and x2 stay apart


exact_text = st.lists(st.sampled_from(list("ab \t\n\u00a0\u3000\u00e9Z\x00") + HIDDEN + ["e\u0301", "e\u200d\u0301"]),
                      max_size=10).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(exact_text, max_size=3), min_size=1, max_size=6))
def test_bulk_keys_match_the_reference_with_invisible_characters(convs):
    keys = conversation_hashes(History.from_chats([[{"role": "user", "content": t} for t in c] for c in convs])).tolist()
    norm = [tuple(normalize_text(t) for t in c) for c in convs]
    for i in range(len(convs)):
        for j in range(len(convs)):
            assert (keys[i] == keys[j]) == (norm[i] == norm[j]), (convs[i], convs[j])


@pytest.mark.parametrize("chunk", [0, -1, 1.5, True])
def test_find_duplicates_chunk_must_be_a_positive_int(chunk):
    """chunk=-1 returned no decision at all (dedup then kept nothing); 0 and 1.5 raised from range()."""
    h = users("a b c d e f", "a b c d e f", "g h")
    with pytest.raises(ValueError, match="chunk must be an integer >= 1"):
        find_duplicates(h, "near", chunk=chunk)
    assert find_duplicates(h, "near", chunk=1)[0].tolist() == [-1, 0, -1]


def test_screen_refuses_an_unknown_dedup_mode():
    """Screen(dedup="fuzzy") deduplicated nothing, silently."""
    from chatdata.hygiene import Screen

    with pytest.raises(ValueError, match="Screen: dedup must be None, 'exact' or 'near', got 'fuzzy'"):
        Screen(dedup="fuzzy")
    with pytest.raises(ValueError, match="threshold must be in"):
        Screen(dedup="near", threshold=1.0)


def test_contamination_index_checks_its_prompts():
    from chatdata.hygiene import ContaminationIndex

    with pytest.raises(TypeError, match="benchmark 'quiz' must be a list of prompt strings, got str"):
        ContaminationIndex({"quiz": PROMPT})  # was: an index of its characters, which found nothing
    with pytest.raises(TypeError, match=r"ContaminationIndex takes \{benchmark name: \[prompt, ...\]\}, got list"):
        ContaminationIndex([PROMPT])
    index = ContaminationIndex({"quiz": (p for p in [PROMPT])})
    assert decontaminate(users(SENTENCE, "hi"), index).tolist() == [0]


def test_two_tools_of_one_name_with_different_schemas_are_refused():
    # was: the later schema won silently, so a call valid for the first was judged against the second
    def tool(props):
        return {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": props}}}
    h = History.from_chats([[{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}]])
    with pytest.raises(ValueError, match="two tools are named 'f', with different parameters"):
        check_tool_calls(h, [tool({"x": {"type": "integer"}}), tool({"y": {"type": "string"}})])
    assert check_tool_calls(h, [tool({"x": {"type": "integer"}})] * 2) == []  # the same tool twice is fine
    per_chat = check_tool_calls(h, [[tool({"x": {"type": "integer"}}), tool({})]])  # a conversation's own tools
    assert [p["problem"] for p in per_chat] == ["bad_tool_schema"] and "two tools are named 'f'" in per_chat[0]["detail"]


wordless = st.lists(st.tuples(st.sampled_from(["user", "assistant", "system"]),
                              st.text(st.sampled_from(list("!? .\n\u200b😀👍-")), max_size=4)), max_size=3)


@settings(max_examples=60, deadline=None)
@given(st.lists(wordless, min_size=1, max_size=6))
def test_wordless_conversations_are_near_duplicates_exactly_when_exact_ones(convs):
    """Before: roles were left out of a wordless conversation's one word, so [] , [user: ""] and
    [assistant: ""] were near duplicates of each other though exact dedup kept them apart."""
    h = History.from_chats([[{"role": r, "content": t} for r, t in c] for c in convs])
    assert dedup(h, "near").tolist() == dedup(h, "exact").tolist()
