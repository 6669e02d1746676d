"""A sharded dataset given what is not a batch of conversations, or losing a shard after it was
opened: a clear error naming what is wrong, never a dataset that reads back mixed up.

Before: ``append(History(role="user", content="b"))`` (one message) wrote a shard of batch ``()``
counted as one item; the dataset then read back ``to_chats() == [[...], 'role', 'content']`` and
every index into that shard raised EmptyBatchIndexError. ``append(dict / list / None)`` was an
AttributeError ('... has no attribute memmap')."""
import json
import shutil

import pytest
from hypothesis import given, settings, strategies as st

from chatdata import FormatError, History, open_dataset

CHATS = [[{"role": "user", "content": str(i)}] * (1 + i % 3) for i in range(5)]


def _write(path):
    w = open_dataset(path, mode="a")
    w.append(History.from_chats(CHATS[:2]))
    w.append(History.from_chats([[]])[0:0])  # an empty shard
    w.append(History.from_chats(CHATS[2:]))
    return w


@pytest.mark.parametrize("obj, err, match", [
    (History(role="user", content="b"), ValueError, r"got a History of batch \(\) \(one message: unsqueeze\(0\)"),
    (History(role="user", content="b", batch_size=(1, 1, 1)), ValueError, r"batch \(1, 1, 1\)"),
    ({"role": "user", "content": "b"}, TypeError, r"got dict \(History.from_chats"),
    ([[{"role": "user", "content": "b"}]], TypeError, r"got list \(History.from_chats"),
    (None, TypeError, "got NoneType"),
], ids=["one message", "3-D", "dict", "list of chats", "None"])
def test_append_refuses_what_is_not_conversations_and_writes_nothing(tmp_path, obj, err, match):
    w = _write(tmp_path / "c")
    with pytest.raises(err, match=match):
        w.append(obj)
    ds = open_dataset(tmp_path / "c")
    assert len(ds) == 5 and ds.num_shards == 3 and ds.to_chats() == CHATS
    assert len(list((tmp_path / "c" / "shards").iterdir())) == 3


def test_one_conversation_is_appended_as_one_item(tmp_path):
    w = _write(tmp_path / "c")
    w.append(History.from_chats(CHATS[0]))
    ds = open_dataset(tmp_path / "c")
    assert len(ds) == 6 and ds[-1].to_chats() == CHATS[0] and ds[5, 0].to_chats() == CHATS[0][0]


def test_a_shard_holding_one_message_is_a_format_error_naming_it(tmp_path):
    # a folder written by an older chatdata, which took a single message as a shard
    _write(tmp_path / "c")
    History(role="user", content="b").memmap(tmp_path / "c" / "shards" / "shard-single")
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    manifest["shards"].append({"path": "shards/shard-single", "items": 1})
    manifest["items"] += 1
    (tmp_path / "c" / "manifest.json").write_text(json.dumps(manifest))
    ds = open_dataset(tmp_path / "c")
    assert ds[4].to_chats() == CHATS[4]  # the other shards read as before
    for read in (lambda: ds[5], lambda: ds[-1], lambda: ds[3:], lambda: ds.to_chats(), lambda: list(ds)):
        with pytest.raises(FormatError, match=r"shard 3 \(shards/shard-single\) holds a History of batch \(\), not a batch of conversations"):
            read()


def test_a_shard_deleted_after_the_open_is_named_by_every_read_that_needs_it(tmp_path):
    _write(tmp_path / "c")
    ds = open_dataset(tmp_path / "c")
    gone = ds.shard_paths()[2]
    shutil.rmtree(gone)
    assert ds[1].to_chats() == CHATS[1] and ds[:2].to_chats() == CHATS[:2]  # reads of other shards still work
    for read in (lambda: ds[2], lambda: ds[1:3], lambda: ds[[0, 4]], lambda: ds.to_chats(), lambda: list(ds)):
        with pytest.raises(FileNotFoundError, match=str(gone)):
            read()


@pytest.mark.parametrize("i", [0, 1, 2, 4, -1, -3, -5])
def test_indices_at_shard_boundaries_with_an_empty_shard_between(tmp_path, i):
    _write(tmp_path / "c")
    ds = open_dataset(tmp_path / "c")
    assert ds[i].to_chats() == CHATS[i]
    assert ds[i:i + 2 if i != -1 else None].to_chats() == CHATS[i:i + 2 if i != -1 else None]


def test_deeply_nested_tool_calls_go_to_arrow_as_json_text(tmp_path):
    # from_chats takes values up to 512 levels deep; to_arrow was a bare RecursionError past ~500
    v = 1
    for _ in range(505):
        v = [v]
    chats = [[{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": v}}}]}]]
    h = History.from_chats(chats)
    assert History.from_arrow(h.to_arrow()).to_chats() == chats
    w = open_dataset(tmp_path / "c", mode="a")
    w.append(h)
    assert History.from_arrow(open_dataset(tmp_path / "c").to_arrow()).to_chats() == chats


_json = st.recursive(st.none() | st.integers() | st.text(max_size=2),
                     lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=2), c, max_size=3), max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_strip_nulls_past_the_recursion_limit_equals_the_shallow_walk(value):
    from chatdata.io.arrow_columns import strip_nulls

    deep, want = value, strip_nulls(value)
    for _ in range(1200):  # past Python's recursion limit: the walk without recursion
        deep, want = [deep], [want]
    assert strip_nulls(deep) == want


@pytest.mark.parametrize("k, err, match", [
    (3, IndexError, r"^shard 3 is out of range for a dataset of 3 shards$"),
    (-4, IndexError, r"^shard -4 is out of range"),
    ("0", TypeError, r"^a shard is named by its int position, got str '0'$"),
    (True, TypeError, r"got bool True"),
    (1.0, TypeError, r"got float 1.0"),
])
def test_shard_k_out_of_range_or_not_an_int_is_named(tmp_path, k, err, match):
    # before: IndexError 'list index out of range', TypeError 'list indices must be integers or slices'
    ds = open_dataset(_write(tmp_path / "c").path)
    with pytest.raises(err, match=match):
        ds.shard(k)
    assert ds.shard(-1) is ds.shard(2)  # one shard, one load, whichever way it is named
