"""chatdata.ray.hygiene on a real local Ray cluster (ray.init(num_cpus=2)): the same kept set,
flagged rows and problems as the local functions on the same rows, over several blocks. The
cluster is the session's (``ray_cluster`` in tests/conftest.py)."""
import numpy as np
import pytest

from chatdata import History, hygiene
from chatdata.data import load_sample_chats, sample_tools
from hygiene_data import planted

@pytest.fixture(scope="module")
def data():
    roles, contents, offsets, truth = planted(2_000, messages=(3, 5), words=(20, 60), seed=3)
    h = History.from_message_columns({"role": roles, "content": contents}, offsets)
    tools = History.from_chats([c for c in load_sample_chats() if any(m.get("tool_calls") for m in c)])
    return h, tools, contents, offsets


def _dataset(ray, h, blocks):
    return ray.data.from_arrow([h[a:b].to_arrow() for a, b in blocks])


def test_ray_dedup_keeps_the_local_set(ray_cluster, data):
    import chatdata.ray.hygiene as rh

    h, *_ = data
    ds = _dataset(ray_cluster, h, [(0, 700), (700, 1_100), (1_100, 2_000)])
    for mode in ("exact", "near"):
        local = hygiene.dedup(h, mode)
        assert len(local) < 2_000
        assert np.array_equal(rh.dedup(ds, mode, batch_size=350), local), mode
    kept = rh.dedup(ds, "near", batch_size=350)
    assert rh.select(ds, kept).count() == len(kept)
    for mode in ("exact", "near"):  # why each row goes: the kept row it repeats, and how alike
        dup, sim = rh.find_duplicates(ds, mode, batch_size=350)
        local_dup, local_sim = hygiene.find_duplicates(h, mode)
        assert np.array_equal(dup, local_dup) and np.array_equal(sim, local_sim, equal_nan=True), mode


def test_ray_decontaminate_and_tool_checks_match_local(ray_cluster, data):
    import chatdata.ray.hygiene as rh

    h, tools, contents, offsets = data
    prompts = [contents[offsets[i]] for i in (5, 1_700, 1_999)]
    ds = _dataset(ray_cluster, h, [(0, 1_000), (1_000, 2_000)])
    local = hygiene.decontaminate(h, prompts)
    assert {5, 1_700, 1_999} <= set(local.tolist())
    assert np.array_equal(rh.decontaminate(ds, prompts, batch_size=450), local)
    broken = tools.to_chats()
    first_call = next(m for m in broken[4] if m.get("tool_calls"))
    first_call["tool_calls"][0]["function"]["arguments"] = "{oops"
    broken[9].append({"role": "tool", "content": "?"})
    t = History.from_chats(broken)
    tds = _dataset(ray_cluster, t, [(0, 30), (30, len(broken))])
    expected = hygiene.check_tool_calls(t, sample_tools())
    assert [p["conversation"] for p in expected] == [4, 9]
    assert rh.check_tool_calls(tds, sample_tools(), batch_size=16) == expected


def test_ray_select_refuses_what_is_not_increasing_row_numbers(ray_cluster, data):
    import chatdata.ray.hygiene as rh

    h, *_ = data
    ds = _dataset(ray_cluster, h, [(0, 3), (3, 5)])
    mask = np.zeros(5, dtype=bool)
    mask[[1, 4]] = True
    assert [r["messages"] for r in rh.select(ds, mask).take_all()] == \
        [r["messages"] for r in rh.select(ds, [1, 4]).take_all()]  # a mask was rows 0 and 1 (repeated)
    with pytest.raises(IndexError, match="index 9 is out of range for a dataset of 5 items"):
        rh.select(ds, [0, 9])  # was: row 9 dropped without a word
    with pytest.raises(IndexError, match="ints, slices, or a 1-D list"):
        rh.select(ds, [0.5, 2.7])  # was: rows 0 and 2
    with pytest.raises(ValueError, match="increasing row numbers"):
        rh.select(ds, [3, 1])  # was: rows in block order, not the order asked


def test_ray_decontaminate_reads_tool_arguments_reasoning_and_across_messages(ray_cluster, data):
    """What the local scan reads (scanned_texts) the workers read too: an item in a call's
    arguments, in the reasoning, or split over two messages is flagged on Ray as locally."""
    import chatdata.ray.hygiene as rh

    _, tools, *_ = data
    item = "a benchmark question of well over thirteen words that should never be trained on by anyone here"
    words = item.split()
    chats = tools.to_chats()
    call = next(m for m in chats[2] if m.get("tool_calls"))["tool_calls"][0]["function"]
    call["arguments"] = {**call["arguments"], "query": item}
    chats[5][0]["reasoning_content"] = "thinking: " + item
    chats[8][0]["content"] += " " + " ".join(words[:9])
    chats[8].insert(1, {"role": "user", "content": " ".join(words[9:])})
    h = History.from_chats(chats)
    assert hygiene.decontaminate(h, [item]).tolist() == [2, 5, 8]
    ds = _dataset(ray_cluster, h, [(0, 4), (4, len(chats))])
    assert rh.decontaminate(ds, [item], batch_size=3).tolist() == [2, 5, 8]
