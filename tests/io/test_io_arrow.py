"""History / NonTensorStack / TensorDict <-> Arrow, Parquet and HF datasets: exact round trips."""
import gc
import io
import json

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatdata
from chatdata import History, NonTensorStack, TensorDict, load_memmap
from chatdata.data import load_sample_chats
from io_helpers import batch

TOOL_CHATS = [
    [
        {"role": "system", "content": "Tu es bref. 🙂"},
        {"role": "user", "content": "Météo à Zürich ? 天气"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Zürich"}'}}]},
        {"role": "tool", "content": "12°C", "tool_call_id": "c1", "name": "weather"},
        {"role": "assistant", "content": "12°C.", "reasoning_content": "easy"},
    ],
    [],
    [{"role": "user", "content": ""}, {"role": "assistant", "content": "partial", "is_complete": False}],
]

# things HF datasets cannot hold, but chatdata must round-trip through Arrow exactly
ODD_CHATS = [
    [{"role": "assistant", "reasoning_content": "r"},  # no content key at all (allowed with reasoning)
     {"role": "assistant", "content": "x", "tool_calls": None, "is_complete": True},  # explicit defaults
     {"role": "assistant", "content": "y", "tool_calls": [
         {"type": "function", "function": {"name": "f", "arguments": {"a": 1}}},
         {"type": "function", "function": {"name": "g", "arguments": '{"a": 1}'}}]},  # str and dict arguments
     {"role": "tool", "content": "z", "name": None, "tool_responses": ["ok"]}],
    [{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image"}]}],
]


def _parquet_roundtrip(table):
    buf = io.BytesIO()
    pq.write_table(table, buf)
    buf.seek(0)
    return pq.read_table(buf)


@pytest.mark.parametrize("chats", [TOOL_CHATS, ODD_CHATS, load_sample_chats()], ids=["tools", "odd", "sample"])
def test_history_arrow_and_parquet_roundtrip_exact(chats):
    h = History.from_chats(chats)
    t = h.to_arrow()
    assert t.num_rows == len(chats) and t.column_names == ["messages"]
    assert pa.types.is_large_list(t.schema.field("messages").type)
    assert History.from_arrow(t).to_chats() == chats
    assert History.from_arrow(_parquet_roundtrip(t)).to_chats() == chats
    assert History.from_arrow(t.column("messages")).to_chats() == chats  # a ChunkedArray works too


@pytest.mark.parametrize("chats", [TOOL_CHATS, load_sample_chats()[:60]], ids=["tools", "sample"])
def test_hf_dataset_roundtrip_and_from_list_import(chats):
    t = History.from_chats(chats).to_arrow()
    ds = datasets.Dataset(t)  # as it is
    assert ds.num_rows == len(chats)
    assert History.from_arrow(ds.data.table).to_chats() == chats
    assert [m["content"] for m in ds[0]["messages"]] == [m["content"] for m in chats[0]]
    # HF's own from_list fills missing keys with None: they read back as absent keys
    hf = datasets.Dataset.from_list([{"messages": c, "id": i} for i, c in enumerate(chats)])
    assert hf[0]["messages"][0]["tool_calls"] is None  # what HF stores
    assert History.from_arrow(hf.data.table).to_chats() == chats
    assert History.from_arrow(hf).to_chats() == chats
    # through HF's Parquet files too
    buf = io.BytesIO()
    hf.to_parquet(buf)
    buf.seek(0)
    assert History.from_arrow(pq.read_table(buf)).to_chats() == chats



def test_reading_a_loaded_history_keeps_its_zero_copy_paths(tmp_path):
    """to_chats() (or a comparison) turned each column's range into an index tensor, after which
    to_arrow() gathered every string and parsed the tool calls again (300 ms instead of 0.1 ms
    for 10k chats) and a save no longer saw the column whole."""
    chats = load_sample_chats()
    History.from_chats(chats).memmap(tmp_path / "ds")
    h = load_memmap(tmp_path / "ds")
    assert h.to_chats() == chats and h[3].to_chats() == chats[3]
    _ = h.message_column("role") == "user"
    t = h.to_arrow()
    msgs = t.column("messages").chunk(0).values
    data, offsets, _kind = h.message_column("content").packed_column()
    assert msgs.field("content").buffers()[2].address == data.data_ptr()
    assert msgs.field("tool_calls").buffers()[1].address != 0 and History.from_arrow(t).to_chats() == chats

def test_memmapped_history_to_arrow_is_zero_copy(tmp_path):
    chats = load_sample_chats()
    simple = [[{"role": m["role"], "content": m["content"] or ""} for m in c] for c in chats]
    History.from_chats(simple).memmap(tmp_path / "ds")
    h = load_memmap(tmp_path / "ds")
    t = h.to_arrow()
    msgs = t.column("messages").chunk(0).values
    for name in ("role", "content"):
        data, offsets, kind = h.message_column(name).packed_column()
        bufs = msgs.field(name).buffers()
        assert bufs[1].address == offsets.data_ptr() and bufs[2].address == data.data_ptr()
        assert pa.types.is_large_string(msgs.field(name).type)
    del h, data, offsets
    gc.collect()
    assert t.to_pylist()[7]["messages"] == simple[7]  # the mapping outlives the History
    back = History.from_arrow(t)
    assert back.to_chats() == simple


def _content_rule(m):
    """from_chats' content rule: only an assistant turn with tool calls or reasoning lacks content."""
    if m.get("content") is None:
        m["role"] = "assistant"
        if not (m.get("tool_calls") or m.get("reasoning_content")):
            m["reasoning_content"] = "r"
    return m


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system"])},
    optional={
        "content": st.one_of(st.none(), st.text()),
        "is_complete": st.booleans(),
        "tool_calls": st.one_of(st.none(), st.lists(st.fixed_dictionaries(
            {"type": st.just("function"),
             "function": st.fixed_dictionaries({"name": st.text(max_size=5), "arguments": st.text(max_size=10)})}),
            max_size=2)),
        "name": st.one_of(st.none(), st.text(max_size=5)),
        "reasoning_content": st.text(max_size=5),
    }).map(_content_rule), max_size=4), max_size=5))
def test_roundtrip_property(chats):
    h = batch(chats)
    assert History.from_arrow(h.to_arrow()).to_chats() == chats
    assert History.from_arrow(_parquet_roundtrip(h.to_arrow())).to_chats() == chats


def test_nontensorstack_and_tensordict_roundtrip(tmp_path):
    s = NonTensorStack.from_list(["a", "é", "", "🙂"])
    arr = s.to_arrow()
    assert arr.type == pa.large_string() and arr.to_pylist() == s.tolist()
    assert NonTensorStack.from_arrow(arr).tolist() == s.tolist()
    assert NonTensorStack.from_arrow(pa.array(["x", None])).tolist() == ["x", None]
    js = NonTensorStack.from_list([{"a": 1}, {"a": 2}])
    assert NonTensorStack.from_arrow(js.to_arrow()).tolist() == js.tolist()

    td = TensorDict({"x": torch.arange(12.0).reshape(4, 3), "i": torch.arange(4, dtype=torch.int32),
                     "m": torch.tensor([True, False, True, True]), "s": ["a", "b", "c", "ü"],
                     "n": {"y": torch.arange(8).reshape(4, 2)}}, [4])
    table = td.to_arrow()
    assert pa.types.is_fixed_size_list(table.schema.field("x").type)
    back = TensorDict.from_arrow(_parquet_roundtrip(table))
    for key in ("x", "i", "m", ("n", "y")):
        assert back[key].dtype == td[key].dtype and torch.equal(back[key], td[key])
    assert back["s"].tolist() == ["a", "b", "c", "ü"]
    td.memmap(tmp_path / "td")
    mm = load_memmap(tmp_path / "td")
    x = mm.to_arrow().column("x").chunk(0).values
    assert x.buffers()[1].address == mm["x"].data_ptr()  # zero-copy tensor


def test_from_arrow_bad_input_names_the_row():
    with pytest.raises(ValueError, match=r"no column 'messages' \(columns: \['text'\]\)"):
        History.from_arrow(pa.table({"text": ["hi"]}))
    with pytest.raises(TypeError, match=r"column 'messages' has type string; expected list<struct<role"):
        History.from_arrow(pa.table({"messages": ["hi"]}))
    rows = [[{"role": "user", "content": "a"}], None, [{"role": None, "content": "b"}]]
    t = pa.table({"messages": pa.array(rows, pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])))})
    with pytest.raises(ValueError, match=r"row 1: messages is null \(and 1 more bad rows\)"):
        History.from_arrow(t)
    with pytest.raises(ValueError, match=r"row 0: message 0 has no role"):
        History.from_arrow(t.slice(2))
    bad_flag = pa.table({"messages": [[{"role": "user", "content": "a", "is_complete": 3}]]})
    with pytest.raises(ValueError, match=r"row 0, message 0: 'is_complete' must be a bool"):
        History.from_arrow(bad_flag)
    assert History.from_arrow(t.slice(0, 1), column="messages").to_chats() == [[{"role": "user", "content": "a"}]]


def test_other_column_name_and_empty():
    h = History.from_chats(TOOL_CHATS)
    t = h.to_arrow(column="conversation")
    assert History.from_arrow(t, column="conversation").to_chats() == TOOL_CHATS
    assert History.from_arrow(batch([]).to_arrow()).to_chats() == []  # no conversations: no rows
    assert History.from_arrow(History.from_chats([[]])[0].to_arrow()).to_chats() == [[]]  # one, without messages
    one = History.from_chats(TOOL_CHATS[0])  # a single conversation is one row
    assert History.from_arrow(one.to_arrow()).to_chats() == [TOOL_CHATS[0]]



@pytest.mark.parametrize("module, extra, call", [
    ("pyarrow", "arrow", lambda: History.from_chats(TOOL_CHATS).to_arrow()),
    ("datasets", "hf", lambda: chatdata.io.deps.require_datasets()),
    ("ray", "ray", lambda: __import__("chatdata.ray", fromlist=["read"]).read("nowhere")),
])
def test_missing_optional_package_says_what_to_install(monkeypatch, module, extra, call):
    monkeypatch.setitem(__import__("sys").modules, module, None)  # what Python does for a missing package
    with pytest.raises(ImportError, match=rf'pip install "chatdata\[{extra}\]"'):
        call()


# -- issue 24: a memory-mapped History's JSON columns go to Arrow over whole columns -----------------
_json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=False, allow_infinity=False, width=32),
              st.text(max_size=4), st.sampled_from(["2024-05-01", "12:30:00", "null", "x\ny"])),
    lambda c: st.lists(c, max_size=2) | st.dictionaries(st.sampled_from(["a", "b", "date"]), c, max_size=2),
    max_leaves=5,
)
_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"]), "content": st.text(max_size=3)},
    optional={
        "is_complete": st.booleans(),
        "tool_calls": st.one_of(st.none(), st.lists(st.fixed_dictionaries(
            {"type": st.just("function"), "function": st.fixed_dictionaries(
                {"name": st.sampled_from(["f", "g"]), "arguments": st.one_of(_json_value, st.text(max_size=4))})}),
            max_size=2)),
        "name": st.one_of(st.none(), st.text(max_size=3)),
        "meta": _json_value,
        "tool_call_id": st.text(max_size=3),
    })


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(chats=st.lists(st.lists(_message, max_size=4), min_size=1, max_size=5))
def test_loaded_history_to_arrow_equals_the_per_message_conversion(tmp_path_factory, chats):
    """The column-wise path (a memory-mapped History) gives the very table of the per-message path
    (the same History in memory), and JSON text reads back exactly too."""
    h = History.from_chats(chats)
    path = tmp_path_factory.mktemp("a") / "h"
    h.memmap(path)
    loaded = load_memmap(path)
    want = h.to_arrow()
    got = loaded.to_arrow()
    assert got.schema == want.schema and got.equals(want)
    assert History.from_arrow(got).to_chats() == chats
    text = loaded.to_arrow(json="text")
    assert History.from_arrow(text).to_chats() == chats
    # again: what was parsed from the packed columns is reused, and must give the same tables;
    # a slice reads other spans of the same columns, a picked order none of them
    assert loaded.to_arrow().equals(want) and loaded.to_arrow(json="text").equals(text)
    assert History.from_arrow(loaded[1:].to_arrow()).to_chats() == chats[1:]
    picked = list(range(len(chats)))[::-1]
    assert History.from_arrow(loaded[picked].to_arrow()).to_chats() == [chats[i] for i in picked]


NESTED_CHATS = [
    [{"role": "user", "content": "Réserve 2 billets ✈️"},
     {"role": "assistant", "content": None, "tool_calls": [
         {"type": "function", "function": {"name": "book", "arguments": {
             "trip": {"from": "Zürich", "to": "東京", "legs": [{"day": "2024-05-01", "seats": 2}]},
             "note": "fenêtre 🙂", "tags": ["a", "b"]}}}]},
     {"role": "tool", "content": "ok", "tool_call_id": "c1", "name": "book"}],
    [],
    [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y", "reasoning_content": "ζ"}],
]


def test_second_to_arrow_of_a_loaded_history_reuses_the_parse_and_frees_it(tmp_path):
    from chatdata.io import arrow_memo

    History.from_chats(NESTED_CHATS * 3).memmap(tmp_path / "n")
    loaded = load_memmap(tmp_path / "n")
    before = len(arrow_memo._ENTRIES)
    first = loaded.to_arrow()
    assert len(arrow_memo._ENTRIES) > before  # the tool_calls / extra columns were parsed once
    args = first.column("messages")[0].as_py()[1]["tool_calls"][0]["function"]["arguments"]
    assert args["trip"]["to"] == "東京" and args["trip"]["legs"][0]["day"] == "2024-05-01"  # no timestamp
    assert loaded.to_arrow().equals(first) and first.equals(History.from_chats(NESTED_CHATS * 3).to_arrow())
    assert History.from_arrow(loaded[3:6].to_arrow()).to_chats() == NESTED_CHATS
    assert History.from_arrow(loaded.to_arrow(json="text")).to_chats() == NESTED_CHATS * 3
    del loaded, first
    gc.collect()
    assert len(arrow_memo._ENTRIES) == before  # nothing outlives the columns


def test_memo_keys_name_the_exact_packed_bytes():
    from chatdata.io.arrow_memo import column_key, memo

    data = torch.tensor(list(b"12"), dtype=torch.uint8)
    one, two = (NonTensorStack.from_packed(data, torch.tensor(o), "json") for o in ([0, 1], [0, 2]))
    assert (one.tolist(), two.tolist()) == ([1], [12])
    assert memo(column_key(one), "v", lambda: one.tolist()) == [1]
    assert memo(column_key(two), "v", lambda: two.tolist()) == [12]  # same bytes, other offsets
    assert memo(column_key(two[0:1]), "v", lambda: "recomputed") == [12]  # the same span
    assert column_key(NonTensorStack.from_list([1, 2])) is None  # Python objects: never memoised
    assert memo(None, "v", lambda: "fresh") == "fresh"


def test_loaded_sample_chats_keep_their_arrow_types(tmp_path):
    chats = load_sample_chats()
    History.from_chats(chats).memmap(tmp_path / "s")
    loaded = load_memmap(tmp_path / "s")
    from chatdata.io.arrow_json import json_array

    assert json_array(loaded.message_column("tool_calls"), "typed") is not None  # parsed by Arrow, not per message
    typed, text = loaded.to_arrow(), loaded.to_arrow(json="text")
    assert typed.equals(History.from_chats(chats).to_arrow())
    calls = typed.schema.field("messages").type.value_type.field("tool_calls")
    assert pa.types.is_list(calls.type) and pa.types.is_struct(calls.type.value_type)
    field = text.schema.field("messages").type.value_type.field("tool_calls")
    assert field.type == pa.large_string() and field.metadata == {b"chatdata.encoding": b"json"}
    assert History.from_arrow(text).to_chats() == chats == History.from_arrow(_parquet_roundtrip(text)).to_chats()
    with pytest.raises(ValueError, match="json must be"):
        loaded.to_arrow(json="yaml")


def _call(arguments):
    return [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": arguments}}]}]


@pytest.mark.parametrize("chats", [
    [_call({"x": 1}), _call({"x": 1.5})],  # 1 read back as 1.0: the template rendered another text
    [_call({}), _call({})],  # a struct without fields: Parquet cannot write it
    [_call({"a": {}}), _call([1, 2.5])],
], ids=["int-and-float", "empty-object", "nested-empty-and-mixed-list"])
def test_values_arrow_would_change_or_parquet_cannot_write_go_as_json_text(tmp_path, chats):
    for h in (History.from_chats(chats), History.from_chats(chats).memmap(tmp_path / "h")):
        t = h.to_arrow()
        pq.write_table(t, tmp_path / "x.parquet")
        back = History.from_arrow(pq.read_table(tmp_path / "x.parquet")).to_chats()
        assert back == chats
        assert json.dumps(back) == json.dumps(chats)  # 1 stays 1, not 1.0
