"""Values a History holds that an Arrow table (and so Parquet, HF datasets, a sharded dataset's
to_arrow) changed silently: each now round-trips exactly or is refused, naming the key."""
import datasets
import pyarrow as pa
import pytest

from chatdata import History, load_memmap

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
