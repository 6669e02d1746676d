"""Values a History holds that an Arrow table (and so Parquet, HF datasets, a sharded dataset's
to_arrow) changed silently: each now round-trips exactly or is refused, naming the key."""
import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import chatdata
from chatdata import History, load_memmap
from chatdata.io.tables import export_parquet

TOOL = "weather"


def _call(arguments, **more):
    return {"role": "assistant", "content": "", "tool_calls": [
        {**more, "type": "function", "function": {"name": TOOL, "arguments": arguments}}]}


# the second call's arguments hold a key the first lacks, first: one struct has one field order
REORDERED = [[{"role": "user", "content": "a"}, _call({"city": "Paris"})],
             [{"role": "user", "content": "b"}, _call({"unit": "C", "city": "Rome"})]]


def _both(h, tmp_path):
    """The History in memory and as saved and loaded (the typed-copy / JSON-reader path)."""
    h.memmap(tmp_path / "h")
    return {"memory": h, "loaded": load_memmap(tmp_path / "h")}


@pytest.mark.parametrize("json", ["typed", "text"])
def test_tool_arguments_keep_their_key_order_through_arrow(tmp_path, json):
    """{"unit", "city"} after {"city"} read back as {"city", "unit"}: the template rendered other
    text (other tokens) than the original for the same conversation."""
    for where, h in _both(History.from_chats(REORDERED), tmp_path).items():
        back = History.from_arrow(h.to_arrow(json=json))
        args = back.to_chats()[1][1]["tool_calls"][0]["function"]["arguments"]
        assert list(args) == ["unit", "city"], where
        assert back.apply_chat_template(chat_template_name="qwen") == \
            History.from_chats(REORDERED).apply_chat_template(chat_template_name="qwen")


def test_tool_call_keys_in_another_order_keep_it_through_hf_datasets(tmp_path):
    chats = [[_call({"x": 1}, id="c1")], [{"role": "assistant", "content": "", "tool_calls": [
        {"function": {"arguments": {"x": 2}, "name": TOOL}, "type": "function", "id": "c2"}]}]]
    for where, h in _both(History.from_chats(chats), tmp_path).items():
        got = History.from_arrow(datasets.Dataset(h.to_arrow())).to_chats()
        assert got == chats and [list(c[0]["tool_calls"][0]) for c in got] == [["id", "type", "function"],
                                                                               ["function", "type", "id"]], where


def test_same_key_order_everywhere_stays_typed(tmp_path):
    """The check costs nothing in types: consistent data keeps Arrow's own struct types."""
    chats = [[_call({"city": "Paris", "unit": "C"})], [_call({"city": "Rome"})]]
    for where, h in _both(History.from_chats(chats), tmp_path).items():
        t = h.to_arrow()
        calls = t.schema.field("messages").type.value_type.field("tool_calls").type
        assert pa.types.is_list(calls) and pa.types.is_struct(calls.value_type), where
        assert History.from_arrow(t).to_chats() == chats


def test_a_nested_key_holding_nul_goes_as_json_text_and_survives_hf_datasets(tmp_path):
    """HF datasets cut the struct field name at NUL ('a\\x00b' -> 'a') and, recasting the table,
    dropped every field's chatdata.encoding tag: the value was lost and other JSON-text fields
    came back as their JSON text ('"x"' for "x")."""
    chats = [[{"role": "user", "content": "a", "weight": "x", "meta": {"a\x00b": 1}},
              {"role": "user", "content": "b", "weight": 1}]]
    for where, h in _both(History.from_chats(chats), tmp_path).items():
        assert History.from_arrow(datasets.Dataset(h.to_arrow())).to_chats() == chats, where


@pytest.mark.parametrize("json", ["typed", "text"])
def test_a_message_key_holding_nul_is_refused_by_to_arrow(tmp_path, json):
    chats = [[{"role": "user", "content": "a", "weight": "x", "a\x00b": 1}, {"role": "user", "content": "b"}]]
    for h in _both(History.from_chats(chats), tmp_path).values():
        with pytest.raises(ValueError, match=r"message 0: the key 'a\\x00b' holds a NUL character.*rename the key"):
            h.to_arrow(json=json)


def _sharded(tmp_path, chats):
    ds = chatdata.open_dataset(tmp_path / "corpus", mode="a")
    for chat in chats:  # one shard each: each shard's table has its own schema
        ds.append(History.from_chats([chat]))
    return tmp_path / "corpus"


MIXED = [[{"role": "user", "content": "a", "meta": 1}], [{"role": "user", "content": "b", "meta": "x"}],
         [_call({"city": "Paris"})], [_call("{}")]]


def test_shards_or_chunks_with_other_value_types_export_to_parquet_exactly(tmp_path):
    """An int in one chunk and a str in another (or dict and str tool arguments) made the Parquet
    export refuse the dataset ("incompatible types across chunks"), though one History's table
    holds them (as JSON text); such fields are now JSON text in every chunk."""
    folder = _sharded(tmp_path, MIXED)
    assert History.from_arrow(chatdata.open_dataset(folder).to_arrow()).to_chats() == MIXED
    assert export_parquet(folder, tmp_path / "out.parquet", chunk_size=1) == len(MIXED)
    assert History.from_arrow(pq.read_table(tmp_path / "out.parquet")).to_chats() == MIXED
    History.from_chats(MIXED).memmap(tmp_path / "ds")
    for size in (1, 2, 8):
        export_parquet(tmp_path / "ds", tmp_path / f"out{size}.parquet", chunk_size=size)
        assert History.from_arrow(pq.read_table(tmp_path / f"out{size}.parquet")).to_chats() == MIXED


def test_one_type_per_field_in_every_chunk_stays_typed(tmp_path):
    chats = [[_call({"city": "Paris"})], [_call({"city": "Rome", "unit": "C"})]]
    folder = _sharded(tmp_path, chats)
    export_parquet(folder, tmp_path / "out.parquet", chunk_size=1)
    calls = pq.read_schema(tmp_path / "out.parquet").field("messages").type.value_type.field("tool_calls").type
    assert pa.types.is_list(calls) and History.from_arrow(pq.read_table(tmp_path / "out.parquet")).to_chats() == chats


def test_shards_joined_into_one_table_keep_the_key_order_of_tool_arguments(tmp_path):
    """Shard tables were joined under the first shard's struct (Arrow's permissive promotion):
    {"unit", "city"} in the second shard read back {"city", "unit"} from to_arrow() and from
    the Parquet export, so templates rendered other text. Keys that never come together (other
    tools' arguments) keep the typed join."""
    folder = _sharded(tmp_path, REORDERED)
    for back in (History.from_arrow(chatdata.open_dataset(folder).to_arrow()),
                 (export_parquet(folder, tmp_path / "o.parquet", chunk_size=1),
                  History.from_arrow(pq.read_table(tmp_path / "o.parquet")))[1]):
        assert back.to_chats() == REORDERED
        assert list(back.to_chats()[1][1]["tool_calls"][0]["function"]["arguments"]) == ["unit", "city"]
    other_tools = [[_call({"city": "Paris"})], [_call({"origin": "a", "destination": "b"})], [_call({"city": "Rome"})]]
    folder = _sharded(tmp_path / "o", other_tools)
    t = chatdata.open_dataset(folder).to_arrow()
    assert pa.types.is_list(t.schema.field("messages").type.value_type.field("tool_calls").type)
    assert History.from_arrow(t).to_chats() == other_tools
