"""Exact and near duplicates planted at known rates in generated conversations (made as columns),
found through the public API; the streaming Screen and chunked runs keep the same set."""
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from chatdata import History
from chatdata.hygiene import Screen, dedup, find_duplicates
from chatdata.hygiene.normalize import conversation_hashes, normalize_text
from hygiene_data import jaccard, planted, shingles

THRESHOLD = 0.8


@pytest.fixture(scope="module")
def exact_set():
    roles, contents, offsets, truth = planted(100_000, words=(5, 15))
    return History.from_message_columns({"role": roles, "content": contents}, offsets), truth


def test_exact_duplicates_at_100k_are_found_exactly(exact_set):
    h, truth = exact_set
    dup, _ = find_duplicates(h, "exact")
    dropped = set(np.flatnonzero(dup >= 0).tolist())
    assert dropped == set(truth["exact"])  # every planted copy, and nothing else
    # each copy points at the conversation it repeats (its source, or an earlier equal copy's source)
    for row, src in truth["exact"].items():
        assert dup[row] == src
    kept = dedup(h, "exact")
    assert len(kept) == 100_000 - len(truth["exact"]) and np.all(np.diff(kept) > 0)


def test_exact_dedup_streamed_in_chunks_keeps_the_same_set(exact_set):
    h, truth = exact_set
    sub = h[:20_000]
    screen = Screen(dedup="exact")
    kept_sizes = [screen(sub[a:a + 3_000], "gen", np.arange(a, min(a + 3_000, 20_000))).batch_size[0]
                  for a in range(0, 20_000, 3_000)]
    assert sum(kept_sizes) == len(dedup(sub, "exact"))
    clusters = screen.report.clusters
    assert sum(len(c["duplicates"]) for c in clusters.values()) == 20_000 - sum(kept_sizes)
    assert all(c["index"] is not None and c["index"] >= 0 for c in clusters.values())


@pytest.fixture(scope="module")
def near_set():
    # CI size: 20k conversations with the same planted rates as the 100k run of
    # benchmarks/bench_hygiene.py --quality (the recall/precision there are for 100k)
    roles, contents, offsets, truth = planted(20_000, messages=(3, 5), words=(20, 60), seed=1)
    return History.from_message_columns({"role": roles, "content": contents}, offsets), contents, offsets, truth


def near_quality(dup, contents, offsets, truth, threshold=THRESHOLD):
    """(recall, precision) of the dropped rows against the planted copies whose true word
    5-gram Jaccard with their source is >= threshold."""
    conv = lambda r: contents[offsets[r]:offsets[r + 1]]  # noqa: E731
    positives = set()
    for kind in ("exact", "near", "mid", "hard"):
        for row, src in truth[kind].items():
            if jaccard(shingles(conv(row)), shingles(conv(src))) >= threshold:
                positives.add(row)
    dropped = set(np.flatnonzero(dup >= 0).tolist())
    tp = len(dropped & positives)
    return tp / max(len(positives), 1), tp / max(len(dropped), 1), len(positives), len(dropped)


def test_near_duplicates_recall_and_precision(near_set):
    h, contents, offsets, truth = near_set
    dup, sim = find_duplicates(h, "near", THRESHOLD)
    recall, precision, positives, dropped = near_quality(dup, contents, offsets, truth)
    print(f"near-dup at 20k: recall {recall:.4f} precision {precision:.4f} ({positives} planted >= 0.8, {dropped} dropped)")
    assert recall >= 0.97 and precision >= 0.97
    # copies far below the threshold stay
    assert not any(dup[r] >= 0 for r in truth["hard"])
    assert np.all(sim[dup >= 0] >= THRESHOLD)
    # a dropped conversation points at a kept one before it
    rows = np.flatnonzero(dup >= 0)
    assert np.all(dup[rows] < rows) and np.all(dup[dup[rows]] == -1)


def test_near_dedup_in_chunks_equals_one_call(near_set):
    h, *_ = near_set
    sub = h[:3_000]
    whole = dedup(sub, "near")
    screen = Screen(dedup="near")
    kept = []
    for a in range(0, 3_000, 500):
        part = screen(sub[a:a + 500], "gen", np.arange(a, a + 500))
        kept.append(part.batch_size[0])
    assert sum(kept) == len(whole)
    chunked, _ = find_duplicates(sub, "near", chunk=777)
    assert len(whole) < 3_000
    assert np.array_equal(np.flatnonzero(chunked < 0), whole)


texts = st.lists(st.sampled_from(list("ab \t\n\u00a0\u3000\u00e9\x1f\x85Z") + ["e\u0301"]), max_size=12).map("".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(texts, min_size=0, max_size=3), min_size=1, max_size=6))
def test_bulk_keys_match_the_reference_normalization(convs):
    chats = [[{"role": "user", "content": t} for t in c] for c in convs]
    keys = conversation_hashes(History.from_chats(chats)).tolist()
    norm = [tuple(normalize_text(t) for t in c) for c in convs]
    for i in range(len(convs)):
        for j in range(len(convs)):
            assert (keys[i] == keys[j]) == (norm[i] == norm[j]), (convs[i], convs[j])


def test_exact_key_covers_roles_tool_calls_and_reasoning():
    base = [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}]
    same = [{"role": "user", "content": " weather? "},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "b", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}]
    other_args = [base[0], {**base[1], "tool_calls": [{"type": "function",
                                                       "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]}]
    other_role = [{"role": "system", "content": "weather?"}, base[1]]
    reasoning = [base[0], {**base[1], "reasoning_content": "think"}]
    h = History.from_chats([base, same, other_args, other_role, reasoning])
    assert dedup(h).tolist() == [0, 2, 3, 4]
    assert unicodedata.is_normalized("NFC", normalize_text("e\u0301"))


def test_dedup_rejects_bad_modes():
    h = History.from_chats([[{"role": "user", "content": "x"}]])
    with pytest.raises(ValueError, match="exact' or 'near"):
        dedup(h, "fuzzy")
    with pytest.raises(ValueError, match="threshold"):
        dedup(h, "near", threshold=1.5)


def test_whitespace_at_the_end_of_a_text_before_its_calls_or_reasoning_is_no_difference():
    """Before: the calls and reasoning were appended to the raw text, so "Sure. " before a call
    (or " think" as reasoning) made a copy distinct that "Sure." alone did not."""
    def conv(text, reasoning):
        return [{"role": "user", "content": "weather in Paris?"},
                {"role": "assistant", "content": text, "reasoning_content": reasoning,
                 "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}]
    h = History.from_chats([conv("Sure.", "look it up"), conv("Sure. ", " look it up\n"), conv("Sure!", "look it up")])
    assert dedup(h).tolist() == [0, 2]


def test_format_characters_and_whitespace_at_a_junction_are_no_difference():
    """Before: the junction before a call or reasoning was stripped of whitespace only, so in
    "Sure.\u200b " the bulk pass dropped the zero-width space but kept the space before it, and
    the copy stayed distinct from "Sure."; the same for reasoning starting "\ufeff \u00ad"."""
    def conv(text, reasoning):
        return [{"role": "user", "content": "weather in Paris?"},
                {"role": "assistant", "content": text, "reasoning_content": reasoning,
                 "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}]
    h = History.from_chats([conv("Sure.", "look it up"), conv("Sure.\u200b ", "look it up"),
                            conv("Sure. \u200b\u00a0\u2060", "\ufeff \u00adlook it up\u200d\n"),
                            conv("Sure. !", "look it up")])
    assert dedup(h).tolist() == [0, 3]
    assert normalize_text("Sure.\u200b ") == normalize_text("Sure.")
