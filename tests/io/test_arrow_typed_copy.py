"""A History's JSON columns saved as typed Arrow copies: to_arrow() of a loaded History parses
nothing, and gives exactly the table the parse gives (chatdata.io.arrow_typed_copy)."""
import json

import pyarrow as pa
import pyarrow.json as pj
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatdata
from chatdata import History, load_memmap
from chatdata.data import load_sample_chats
from chatdata.io.sharded import ShardedWriter
from chatdata.td.storage import StreamWriter, verify

CHATS = [
    [{"role": "user", "content": "Réserve 2 billets ✈️", "name": "ana"},
     {"role": "assistant", "content": None, "tool_calls": [
         {"id": "c1", "type": "function", "function": {"name": "book", "arguments": {
             "trip": {"from": "Zürich", "to": "東京", "legs": [{"day": "2024-05-01", "seats": 2}]},
             "at": "12:30:00", "tags": ["a", "b"], "ok": True}}}]},
     {"role": "tool", "content": "ok", "tool_call_id": "c1", "name": "book"}],
    [],
    [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "reasoning_content": "ζ"}],
]


def _values_dir(path):
    return path / "_storage" / "_values"


def _entry(path, key="tool_calls"):
    return json.loads((_values_dir(path) / "meta.json").read_text())["entries"][key]


def _drop_copies(path):
    """The same folder as an older chatdata wrote it: no typed copies (the parse path)."""
    meta_path = _values_dir(path) / "meta.json"
    meta = json.loads(meta_path.read_text())
    for m in meta["entries"].values():
        if "typed" in m:
            (_values_dir(path) / m.pop("typed")["file"]).unlink()
    meta_path.write_text(json.dumps(meta))


@pytest.fixture
def no_json_parse(monkeypatch):
    """``no_json_parse()`` makes Arrow's JSON reader fail from then on (the save parses to make
    the copies; what to_arrow() of the loaded History reads must come from them)."""
    def refuse(*args, **kwargs):
        raise AssertionError("to_arrow() parsed JSON although the column has a typed copy")
    return lambda: monkeypatch.setattr(pj, "read_json", refuse)


def test_memmap_writes_typed_copies_that_to_arrow_reads_without_parsing(tmp_path, no_json_parse):
    h = History.from_chats(CHATS * 4)
    want = h.to_arrow()  # in memory: Arrow's conversion of the Python values, no JSON reader
    h.memmap(tmp_path / "h")
    assert verify(tmp_path / "h").ok  # verify parses each column to compare it with its copy
    no_json_parse()
    for key in ("tool_calls", "extra"):
        m = _entry(tmp_path / "h", key)
        assert m["typed"] == {"format": "arrow-ipc", "file": f"{key}.typed.arrow"}
        assert m["typed"]["file"] in json.loads((_values_dir(tmp_path / "h") / "meta.json").read_text())["checksums"]
    loaded = load_memmap(tmp_path / "h")
    got = loaded.to_arrow()
    assert got.schema == want.schema and got.equals(want)
    args = got.column("messages")[0].as_py()[1]["tool_calls"][0]["function"]["arguments"]
    assert args["trip"]["legs"][0]["day"] == "2024-05-01" and args["at"] == "12:30:00"  # strings, not dates
    part = loaded[3:6].to_arrow()  # a slice of the copy: the column's type, whatever the rows hold
    assert History.from_arrow(part).to_chats() == CHATS and part.equals(got.slice(3, 3))
    assert History.from_arrow(got).to_chats() == CHATS * 4


_json_value = st.recursive(
    st.one_of(st.booleans(), st.integers(-2**40, 2**40), st.text(max_size=4),
              st.sampled_from(["2024-05-01", "12:30:00", "2024-05-01T12:30:00", "x\ny", "🙂"])),
    lambda c: st.lists(c, max_size=2) | st.dictionaries(st.sampled_from(["a", "b", "date"]), c, max_size=2),
    max_leaves=5,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"]), "content": st.text(max_size=3)},
    optional={
        "tool_calls": st.none() | st.lists(st.fixed_dictionaries(  # None given: the _null_keys path
            {"type": st.just("function"), "function": st.fixed_dictionaries(
                {"name": st.sampled_from(["f", "g"]), "arguments": st.one_of(_json_value, st.text(max_size=4))})}),
            max_size=2),
        "meta": _json_value,
        "name": st.text(max_size=3),
    })


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(chats=st.lists(st.lists(_message, max_size=4), min_size=1, max_size=5), cut=st.integers(0, 5))
def test_the_copy_gives_the_table_the_parse_gives(tmp_path_factory, chats, cut):
    """Loaded with its copies, loaded without them (as an older folder: the JSON is parsed), and
    in memory: the same table, and the chats back, whole and sliced. A slice read from the
    copies keeps the whole column's types (its table is a slice of the whole one); parsed, a
    slice's types are inferred from its own rows."""
    h = History.from_chats(chats)
    path = tmp_path_factory.mktemp("c") / "h"
    h.memmap(path)
    assert verify(path).ok
    entries = json.loads((_values_dir(path) / "meta.json").read_text())["entries"]
    copies = {"typed" in m for m in entries.values() if m.get("encoding") == "json"}
    with_copy = load_memmap(path).to_arrow()
    sliced = load_memmap(path)[cut:].to_arrow()
    _drop_copies(path)
    parsed = load_memmap(path)
    assert with_copy.equals(parsed.to_arrow()) and with_copy.equals(h.to_arrow())
    # a key given as None takes the per-message path, whose types come from the rows it reads
    # (a slice can take the copies' path where the whole did not): only the chats are compared
    given_none = any(m.get("tool_calls", 0) is None for c in chats for m in c)
    if copies == {True} and not given_none:  # every JSON column from its copy
        assert sliced.equals(with_copy.slice(cut))
    elif copies == {False} and not given_none:  # every one parsed
        assert sliced.equals(parsed[cut:].to_arrow())
    assert History.from_arrow(with_copy).to_chats() == chats
    assert History.from_arrow(sliced).to_chats() == chats[cut:]


@pytest.mark.parametrize("tool_calls", [
    [{"type": "function", "function": {"name": "f", "arguments": {"x": 1.5}}}],  # a float: 1 could read back 1.0
    [{"type": "function", "function": {"name": "f", "arguments": {"x": None}}}],  # null inside: absent or None?
], ids=["float", "null-inside"])
def test_no_copy_when_arrow_cannot_type_the_values_exactly(tmp_path, tool_calls):
    chats = [[{"role": "assistant", "content": "", "tool_calls": tool_calls}]]
    History.from_chats(chats).memmap(tmp_path / "h")
    assert "typed" not in _entry(tmp_path / "h")
    assert not list(_values_dir(tmp_path / "h").glob("*.typed.*"))
    assert History.from_arrow(load_memmap(tmp_path / "h").to_arrow()).to_chats() == chats


def test_values_added_in_memory_are_read_not_only_the_copy_and_a_new_save_rewrites_it(tmp_path):
    chats = [c for c in CHATS if c]
    History.from_chats(chats).memmap(tmp_path / "h")
    loaded = load_memmap(tmp_path / "h")
    loaded.to_arrow()  # memoised from the copy
    new_call = [{"type": "function", "function": {"name": "cancel", "arguments": {"id": 7}}}]
    longer = loaded.append(History(role=["assistant"] * 2, content=["", ""], tool_calls=[new_call] * 2,
                                   batch_size=(2,)))
    want = [c + [{"role": "assistant", "content": "", "tool_calls": new_call}] for c in chats]
    assert History.from_arrow(longer.to_arrow()).to_chats() == want
    longer.memmap(tmp_path / "again", copy_existing=True)
    assert _entry(tmp_path / "again")["typed"]["file"] == "tool_calls.typed.arrow"
    again = load_memmap(tmp_path / "again")
    assert History.from_arrow(again.to_arrow()).to_chats() == want and verify(tmp_path / "again").ok


def test_saving_an_unchanged_loaded_history_keeps_the_same_copy(tmp_path):
    History.from_chats(load_sample_chats()[:40]).memmap(tmp_path / "a")
    load_memmap(tmp_path / "a").memmap(tmp_path / "b", copy_existing=True)
    name = "tool_calls.typed.arrow"
    assert (_values_dir(tmp_path / "a") / name).read_bytes() == (_values_dir(tmp_path / "b") / name).read_bytes()
    assert verify(tmp_path / "b").ok


def test_a_broken_copy_is_not_used_and_verify_names_it(tmp_path):
    chats = load_sample_chats()[:30]
    History.from_chats(chats).memmap(tmp_path / "h")
    copy = _values_dir(tmp_path / "h") / "tool_calls.typed.arrow"
    copy.write_bytes(copy.read_bytes()[: copy.stat().st_size // 2])  # truncated
    with pytest.warns(UserWarning, match=r"tool_calls\.typed\.arrow is not used .*parsed instead"):
        got = load_memmap(tmp_path / "h").to_arrow()
    assert History.from_arrow(got).to_chats() == chats  # the column itself is whole
    report = verify(tmp_path / "h")
    assert [p.path for p in report.problems] == [str(copy)] and "checksum mismatch" in report.problems[0].message
    unchecked = verify(tmp_path / "h", checksums=False)  # no checksum to compare: the parse is compared
    assert "typed copy is unreadable" in unchecked.problems[0].message


def test_verify_finds_a_valid_copy_of_other_values(tmp_path):
    from chatdata.io.arrow_typed_copy import make_copy
    import numpy as np

    History.from_chats(CHATS).memmap(tmp_path / "h")
    History.from_chats([[m if "tool_calls" not in m else {**m, "tool_calls": [
        {"id": "c9", "type": "function", "function": {"name": "other", "arguments": {"x": 2}}}]} for m in c]
        for c in CHATS]).memmap(tmp_path / "other")
    names = ("tool_calls.bytes.memmap", "tool_calls.offsets.memmap")
    data, offsets = (np.fromfile(_values_dir(tmp_path / "other") / n, dtype=d) for n, d in zip(names, ("u1", "<i8")))
    (_values_dir(tmp_path / "h") / "tool_calls.typed.arrow").write_bytes(make_copy(data, offsets).to_pybytes())
    report = verify(tmp_path / "h", checksums=False)
    assert not report.ok and "typed copy" in report.problems[0].message
    assert "save the collection again" in report.problems[0].message


def test_streamed_and_sharded_histories_get_copies(tmp_path, no_json_parse):
    chats = load_sample_chats()[:50]
    with StreamWriter(tmp_path / "s", tensorclass=History) as w:
        w.append(History.from_chats(chats[:20]))
        w.append(History.from_chats(chats[20:]))
    w = ShardedWriter(tmp_path / "d", shard_size=20)
    w.append(History.from_chats(chats))
    w.close()
    assert _entry(tmp_path / "s")["typed"]["file"] == "tool_calls.typed.arrow" and verify(tmp_path / "s").ok
    no_json_parse()
    assert History.from_arrow(load_memmap(tmp_path / "s").to_arrow()).to_chats() == chats
    ds = chatdata.open_dataset(tmp_path / "d")
    assert History.from_arrow(ds.to_arrow()).to_chats() == chats


def test_memmap_like_writes_no_copy(tmp_path):
    like = History.from_chats(CHATS).memmap_like(tmp_path / "h")
    assert not list(_values_dir(tmp_path / "h").glob("*.typed.*")) and like.batch_size[0] == len(CHATS)


def test_a_folder_with_copies_can_be_saved_over(tmp_path):
    History.from_chats(CHATS).memmap(tmp_path / "h")
    other = [[{"role": "user", "content": "new"}]]
    History.from_chats(other).memmap(tmp_path / "h", existsok=True)
    assert load_memmap(tmp_path / "h").to_chats() == other and verify(tmp_path / "h").ok


def _deep(depth):
    v = 1
    for _ in range(depth):
        v = [v]
    return v


def test_a_copy_that_cannot_be_made_never_fails_the_save(tmp_path):
    """Arrow's IPC writer refuses values nested ~62 deep; the column is saved without its copy."""
    chats = [[{"role": "assistant", "content": "a", "meta": {"x": _deep(70)}}]] + CHATS
    with pytest.warns(UserWarning, match=r"'extra': saved without its typed copy \(ArrowInvalid"):
        History.from_chats(chats).memmap(tmp_path / "h")
    assert "typed" not in _entry(tmp_path / "h", "extra") and "typed" in _entry(tmp_path / "h")
    assert History.from_arrow(load_memmap(tmp_path / "h").to_arrow()).to_chats() == chats
    with pytest.warns(UserWarning, match=r"column 'extra': saved without its typed copy"):
        with StreamWriter(tmp_path / "s", tensorclass=History) as w:
            w.append(History.from_chats(chats))
    assert load_memmap(tmp_path / "s").to_chats() == chats  # nothing the writer accepted is lost


def test_saving_again_makes_a_new_copy_when_the_loaded_one_is_damaged(tmp_path):
    History.from_chats(CHATS).memmap(tmp_path / "h")
    copy = _values_dir(tmp_path / "h") / "tool_calls.typed.arrow"
    blob = bytearray(copy.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    copy.write_bytes(bytes(blob))
    assert not verify(tmp_path / "h").ok
    load_memmap(tmp_path / "h").memmap(tmp_path / "again", copy_existing=True)  # no to_arrow() before
    assert verify(tmp_path / "again").ok  # the copy was made anew from the column, not carried over


def test_a_copy_of_type_null_is_not_used(tmp_path):
    History.from_chats(CHATS).memmap(tmp_path / "h")
    sink = pa.BufferOutputStream()
    n = _entry(tmp_path / "h")["shape"][0]
    with pa.ipc.new_file(sink, pa.schema([("v", pa.null())])) as w:
        w.write_batch(pa.record_batch([pa.nulls(n)], names=["v"]))
    (_values_dir(tmp_path / "h") / "tool_calls.typed.arrow").write_bytes(sink.getvalue().to_pybytes())
    with pytest.warns(UserWarning, match=r"type 'null' is not one that reads back"):
        got = load_memmap(tmp_path / "h").to_arrow()
    assert History.from_arrow(got).to_chats() == CHATS


def test_a_copy_with_a_field_name_that_is_not_utf8_is_not_used(tmp_path):
    History.from_chats(CHATS).memmap(tmp_path / "h")
    copy = _values_dir(tmp_path / "h") / "tool_calls.typed.arrow"
    blob = copy.read_bytes()
    assert blob.count(b"legs") >= 1  # a key of the arguments: a field name in the schema only
    copy.write_bytes(blob.replace(b"legs", b"\xff\xfegs"))
    with pytest.warns(UserWarning, match=r"field names in UTF-8.*parsed instead"):
        got = load_memmap(tmp_path / "h").to_arrow()
    assert History.from_arrow(got).to_chats() == CHATS
    assert "typed copy is unreadable" in verify(tmp_path / "h", checksums=False).problems[0].message


@pytest.mark.parametrize("start", [0, 3, 8, 16])
def test_a_key_given_as_none_is_found_through_the_copys_bitmap_in_any_slice(tmp_path, start):
    """Whether a message has tool_calls given as None is read from the copy's validity bitmap
    (8 messages a byte; a slice starting inside a byte reads the null mask instead)."""
    call = [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]
    chats = [[{"role": "user", "content": str(i)}, {"role": "assistant", "content": "", "tool_calls": call}]
             for i in range(12)]
    chats[9][1]["tool_calls"] = None  # message 19 of the column
    History.from_chats(chats).memmap(tmp_path / "h")
    assert "typed" in _entry(tmp_path / "h")
    for stop in (9, 12):  # without the message given None, then with it
        got = load_memmap(tmp_path / "h")[start // 2:stop].to_arrow()
        assert History.from_arrow(got).to_chats() == chats[start // 2:stop]
        names = got.schema.field("messages").type.value_type.names
        assert ("_null_keys" in names) == (stop == 12)
