"""Differential round trips of the io paths against the peers (derandomized, see tests/conftest.py):

* HF datasets' own way of making a chat table, ``datasets.Dataset.from_list(rows)``, then
  ``History.from_arrow`` gives the chats back (HF writes a missing key as null, which reads as absent);
* rows that are all empty conversations: pyarrow and HF infer ``list<null>`` for them, which reads
  as empty conversations (a null message in it still names its row);
* fields of Arrow's canonical JSON type (``arrow.json``, HF's ``Json()`` feature, kept by HF through
  ``map`` and Parquet) read as their JSON values, like a ``chatdata.encoding: json`` field;
* JSON text chatdata writes (values Arrow cannot type exactly) is typed ``arrow.json`` too, so the
  chats survive HF's table rewrites (``map``, ``save_to_disk``, ``to_parquet``), where HF drops
  field metadata, and HF shows their values;
* a sharded dataset cut at random points gives every slice, item and table back.

The wider value kinds (every Unicode plane, numbers, nested arguments) are drawn by
tests/io/test_round_trips_hypothesis.py; this file adds the peers and the random cuts."""
import io

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatdata
from chatdata import History
from chatdata.io.arrow_history import find_bad_rows
from chatdata.io.deps import arrow_json_type
from io_helpers import batch

datasets.disable_progress_bars()

_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)


@st.composite
def hf_message(draw):
    """A message of the one shape HF ``from_list`` can type over a whole table: every key has one
    value type, tool arguments have one key set (HF adds the missing keys of a struct as None)."""
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    m = {"role": role, "content": draw(text)}
    if role == "assistant" and draw(st.booleans()):
        m["tool_calls"] = draw(st.lists(st.fixed_dictionaries({
            "id": text, "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": text, "arguments": st.fixed_dictionaries(
                {"city": text, "days": st.integers(-2**40, 2**40)})})}), min_size=1, max_size=2))
        if draw(st.booleans()):
            m["content"] = None
    if role == "assistant" and draw(st.booleans()):
        m["reasoning_content"] = draw(text)
    if role == "tool" and draw(st.booleans()):
        m["tool_call_id"] = draw(text)
    if draw(st.integers(0, 3)) == 0:
        m["name"] = draw(text)
    return m


def _same_messages(want, got):
    """Equal chats, keys in any order: HF's table has one struct field order for every message and
    every tool's arguments, so ``from_list`` itself keeps no other order (``==`` of dicts ignores it)."""
    assert want == got


@settings(max_examples=15, **_SETTINGS)
@given(chats=st.lists(st.lists(hf_message(), max_size=4), min_size=1, max_size=4))
def test_hf_from_list_then_from_arrow_gives_the_chats(chats):
    ds = datasets.Dataset.from_list([{"messages": c} for c in chats])
    _same_messages(chats, History.from_arrow(ds).to_chats())
    _same_messages(chats, History.from_arrow(ds.data.table).to_chats())  # the table HF holds, as it is


@pytest.mark.parametrize("rows", [[[]], [[], []], [[]] * 5])
def test_rows_that_are_all_empty_conversations_read_as_them(rows):
    # pyarrow and HF infer list<null> when no row has a message: before, from_arrow refused the
    # table with a TypeError about its type, though every row is a valid (empty) conversation
    for table in (pa.table({"messages": rows}), datasets.Dataset.from_list([{"messages": r} for r in rows])):
        assert History.from_arrow(table).to_chats() == rows
        assert find_bad_rows(table) == []
    sliced = pa.table({"messages": rows * 2}).slice(1)
    assert History.from_arrow(sliced).to_chats() == (rows * 2)[1:]


def test_a_list_of_null_messages_names_its_row():
    table = pa.table({"messages": [[], [None]]})
    assert table.schema.field("messages").type == pa.list_(pa.null())
    assert find_bad_rows(table) == [(1, "message 0 is null")]
    with pytest.raises(ValueError, match=r"^row 1: message 0 is null$"):
        History.from_arrow(table)


_JSON_CHATS = [[{"role": "user", "content": "a", "meta": 1}, {"role": "user", "content": "b", "meta": "x"}],
               [{"role": "user", "content": "c", "meta": {"k": [1, None, 2.5]}}, {"role": "user", "content": "d"}]]


def _json_feature_dataset():
    feats = datasets.Features({"messages": datasets.List({"role": datasets.Value("string"),
                                                          "content": datasets.Value("string"),
                                                          "meta": datasets.Json()})})
    return datasets.Dataset.from_list([{"messages": c} for c in _JSON_CHATS], features=feats)


def test_fields_of_the_arrow_json_type_read_as_their_values():
    # HF's Json() feature stores a field as Arrow's canonical arrow.json type and keeps it through
    # map and Parquet; before, from_arrow read it as a field of an unknown type (no value came back right)
    ds = _json_feature_dataset()
    assert getattr(ds.data.table.schema.field("messages").type.value_type.field("meta").type,
                   "extension_name", None) == "arrow.json"
    buf = io.BytesIO()
    pq.write_table(ds.data.table, buf)
    buf.seek(0)
    for source in (ds, ds.map(lambda r: r), pq.read_table(buf)):
        assert History.from_arrow(source).to_chats() == _JSON_CHATS
    t = History.from_arrow(ds).to_arrow()  # and out again, as chatdata writes it
    assert History.from_arrow(t).to_chats() == _JSON_CHATS


def test_arrow_json_text_that_is_not_json_names_its_row():
    storage = pa.array(['"ok"', "{bad"], pa.string())
    meta = pa.ExtensionArray.from_storage(pa.json_(), storage)
    msgs = pa.StructArray.from_arrays([pa.array(["user", "user"]), pa.array(["a", "b"]), meta],
                                      names=["role", "content", "meta"])
    table = pa.table({"messages": pa.LargeListArray.from_arrays(pa.array([0, 1, 2], pa.int64()), msgs)})
    with pytest.raises(ValueError, match=r"^row 1, message 0: field 'meta' is tagged chatdata.encoding: json but "):
        History.from_arrow(table)


@st.composite
def small_message(draw):
    m = {"role": draw(st.sampled_from(["user", "assistant"])), "content": draw(text)}
    for k in draw(st.lists(st.sampled_from(["name", "meta", "reasoning_content"]), unique=True, max_size=2)):
        m[k] = draw(text | st.integers(-5, 5) | st.dictionaries(st.sampled_from(["b", "a"]), st.integers(0, 3)))
    if draw(st.integers(0, 3)) == 0:
        m["is_complete"] = draw(st.booleans())
    return m


@settings(max_examples=20, **_SETTINGS)
@given(chats=st.lists(st.lists(small_message(), max_size=3), max_size=6),
       cuts=st.lists(st.integers(0, 6), max_size=3), a=st.integers(-7, 7), b=st.integers(-7, 7))
def test_a_sharded_dataset_cut_anywhere_gives_every_slice_back(tmp_path_factory, chats, cuts, a, b):
    folder = tmp_path_factory.mktemp("cut") / "corpus"
    ds = chatdata.open_dataset(folder, mode="a")
    bounds = [0, *sorted(min(c, len(chats)) for c in cuts), len(chats)]
    for lo, hi in zip(bounds, bounds[1:]):
        ds.append(batch(chats[lo:hi]))
    back = chatdata.open_dataset(folder)
    assert len(back) == len(chats)
    assert back.to_chats() == chats
    assert back[a:b].to_chats() == chats[a:b]
    assert [back[i].to_chats() for i in range(-len(chats), len(chats))] == chats + chats
    got = History.from_arrow(back.to_arrow()).to_chats()
    assert got == chats  # a message's keys come in the table's field order (docs/scale.md)


def test_hf_json_inside_a_field_is_refused_with_the_way_to_read_it():
    # HF's from_list(..., on_mixed_types="use_json") stores tool arguments of mixed types as Json()
    # inside tool_calls; before, they came back as their JSON text ('{"a": 1}', '"{}"'), silently
    def call(arguments):
        return [{"type": "function", "function": {"name": "f", "arguments": arguments}}]

    chats = [[{"role": "assistant", "content": "c", "tool_calls": call({"a": 1})},
              {"role": "assistant", "content": "d", "tool_calls": call("{}")}]]
    ds = datasets.Dataset.from_list([{"messages": c} for c in chats], on_mixed_types="use_json")
    with pytest.raises(TypeError, match=r"field 'tool_calls' .* holds JSON text of HF datasets' Json\(\) feature.*"
                                        r"History.from_chats\(\[row\['messages'\] for row in dataset\]\)"):
        History.from_arrow(ds)
    whole = datasets.Dataset.from_list([{"messages": c} for c in [[{"role": "user", "content": "a"}], [1]]],
                                       on_mixed_types="use_json")  # each message one JSON text
    with pytest.raises(TypeError, match=r"column 'messages' has type .*arrow.json.* holds JSON text"):
        History.from_arrow(whole)
    assert History.from_chats([row["messages"] for row in ds]).to_chats()[0][0] == chats[0][0]  # the way it names
    # (HF's own Json() encoding turns the text "{}" into {}: the second message is HF's to keep)


def test_a_column_of_no_chunks_with_an_arrow_json_field_reads_as_no_conversations():
    # an empty ChunkedArray was rebuilt with pa.array([], type), which pyarrow refuses for extension types
    msg = pa.struct([pa.field("role", pa.string()), pa.field("content", pa.string()), pa.field("meta", pa.json_())])
    col = pa.chunked_array([], type=pa.list_(msg))
    assert History.from_arrow(col).to_chats() == []
    assert History.from_arrow(pa.Table.from_arrays([col], names=["messages"])).to_chats() == []


MIXED = [[{"role": "user", "content": "a", "meta": 1}, {"role": "user", "content": [{"type": "text", "text": "p"}]}],
         [{"role": "assistant", "content": None, "meta": {"big": 2**64, "neg": -0.0},
           "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"b": 1, "a": 2}}}]},
          {"role": "assistant", "content": "q",
           "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}]]


@pytest.mark.skipif(arrow_json_type() is None, reason="needs pyarrow >= 19 and datasets >= 4.7 (arrow.json)")
def test_json_text_fields_survive_hf_table_rewrites(tmp_path):
    # the chatdata.encoding tag is field metadata, which HF drops when it rewrites a table: before,
    # content came back as '"a"', meta as '1', and tool_calls were refused as a str
    h = History.from_chats(MIXED)
    h.memmap(tmp_path / "h")
    for source in (h, chatdata.load_memmap(tmp_path / "h")):
        ds = datasets.Dataset(source.to_arrow())
        assert History.from_arrow(ds).to_chats() == MIXED
        ds.save_to_disk(str(tmp_path / "saved"))
        ds.to_parquet(str(tmp_path / "x.parquet"))
        for rewritten in (ds.map(lambda r: r), ds.map(lambda b: b, batched=True),
                          datasets.load_from_disk(str(tmp_path / "saved")),
                          datasets.Dataset.from_parquet(str(tmp_path / "x.parquet"))):
            assert History.from_arrow(rewritten).to_chats() == MIXED
        assert History.from_arrow(ds.select([1, 0]).flatten_indices()).to_chats() == MIXED[::-1]
        first = ds[0]["messages"]  # HF shows the values, not their JSON text (and None for an absent key)
        assert (first[0]["content"], first[0]["meta"], first[1]["content"]) == ("a", 1, [{"type": "text", "text": "p"}])
        (tmp_path / "x.parquet").unlink()


def test_what_users_hand_to_from_arrow_by_mistake_is_named_with_what_to_pass():
    chats = [[{"role": "user", "content": "a"}]]
    ds = datasets.Dataset(History.from_chats(chats).to_arrow())
    for obj, hint in ((datasets.DatasetDict({"train": ds}), r"pass one split, e.g. dataset\['train'\]"),
                      (ds.to_iterable_dataset(), r"a streaming dataset has no table"),
                      (chats, r"History.from_chats\(chats\)"), ({"messages": chats}, r"pyarrow.table\(d\)"),
                      (History.from_chats(chats), r"pass obj.to_arrow\(\)"),
                      (ds.data.table.to_reader(), r"pass reader.read_all\(\)"),
                      (ds.to_pandas(), r"pyarrow.Table.from_pandas\(df\)"),
                      (ds["messages"], r"pass the Dataset itself, naming the column with column=")):
        with pytest.raises(TypeError, match=r"^from_arrow takes a pyarrow Table, .*got \w+ \(" + hint):
            History.from_arrow(obj)
