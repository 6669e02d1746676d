"""``History.from_arrow`` and ``chatdata import`` on hand-made or damaged Arrow tables: valid Arrow
is read (dictionary-encoded, large and view strings, large and fixed-size lists), anything else is
a clear error naming the column or field (TypeError for a type, ValueError for a value or a
name), never a KeyError / JSONDecodeError from inside, and never a silent misreading."""
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatdata import History, load_memmap
from chatdata.io.arrow_history import find_bad_rows
from io_helpers import batch

ROOT = Path(__file__).resolve().parents[2]
JSON = {b"chatdata.encoding": b"json"}
HAS_VIEWS = hasattr(pa, "string_view")


def table(fields, arrays, offsets=(0, 1), list_type=pa.ListArray):
    """A ``messages`` column of one struct per (name or field, array), cut into rows by ``offsets``
    (struct fields may repeat a name: ``pa.table`` from Python objects cannot make such tables)."""
    fields = [f if isinstance(f, pa.Field) else pa.field(f, a.type) for f, a in zip(fields, arrays)]
    msgs = pa.StructArray.from_arrays(arrays, fields=fields)
    off = pa.array(list(offsets), pa.int64() if list_type is pa.LargeListArray else pa.int32())
    return pa.table({"messages": list_type.from_arrays(off, msgs)})


def strings(*values, type=pa.string()):
    return pa.array(list(values), type)


# -- finding 1: duplicate names -------------------------------------------------------------------
def test_two_columns_of_the_messages_name_are_refused_not_a_key_error():
    col = History.from_chats([[{"role": "user", "content": "a"}]]).to_arrow().column(0)
    t = pa.Table.from_arrays([col, col], names=["messages", "messages"])
    with pytest.raises(ValueError, match=r"2 columns are named 'messages'; rename or drop"):
        History.from_arrow(t)
    with pytest.raises(ValueError, match=r"2 columns are named 'messages'"):
        History.from_arrow(t.to_batches()[0])
    assert History.from_arrow(t.select([0])).to_chats() == [[{"role": "user", "content": "a"}]]


@pytest.mark.parametrize("name", ["role", "content", "name"])
def test_two_message_fields_of_one_name_are_refused(name):
    fields = ["role", "content", "name", name]
    t = table(fields, [strings("user"), strings("a"), strings("n"), strings("x")])
    with pytest.raises(TypeError, match=rf"the message struct has two fields named '{name}'; .*rename or drop one"):
        History.from_arrow(t)


def test_two_fields_of_one_name_inside_a_list_of_structs_are_refused():
    call = pa.StructArray.from_arrays([strings("c1"), strings("c2")], names=["id", "id"])
    calls = pa.ListArray.from_arrays(pa.array([0, 1], pa.int32()), call)
    t = table(["role", "content", "tool_calls"], [strings("assistant"), strings(""), calls])
    with pytest.raises(TypeError, match=r"field 'tool_calls\[\]' of the messages has two fields named 'id'"):
        History.from_arrow(t)
    with pytest.raises(TypeError, match=r"two fields named 'id'"):
        find_bad_rows(t)


# -- finding 2: _null_keys ------------------------------------------------------------------------
@pytest.mark.parametrize("keys", [strings("xcontentx"), pa.array([3]), pa.array([[3]]), pa.array([{"k": "content"}])],
                         ids=["string", "int", "list<int>", "struct"])
def test_null_keys_of_another_type_is_refused_not_misread(keys):
    # a string used to be searched as text: 'content' in 'xcontentx' made the content None
    t = table(["role", "content", "name", "_null_keys"], [strings("user"), strings(None), strings(None), keys])
    with pytest.raises(TypeError, match=r"field '_null_keys' .* has type .*; _null_keys must be list<string>"):
        History.from_arrow(t)


def test_null_keys_of_any_string_list_type_are_read():
    want = [[{"role": "assistant", "content": "a", "name": None}]]
    for keys in (pa.array([["name"]], pa.large_list(pa.string())), pa.array([["name"]], pa.list_(pa.large_string())),
                 pa.array([["name"]], pa.list_(pa.dictionary(pa.int8(), pa.string())))):
        t = table(["role", "content", "name", "_null_keys"], [strings("assistant"), strings("a"), strings(None), keys])
        assert History.from_arrow(t).to_chats() == want
    t = table(["role", "content", "name", "_null_keys"],  # lists that are all empty: Arrow infers list<null>
              [strings("assistant"), strings("a"), strings("n"), pa.array([[]])])
    assert History.from_arrow(t).to_chats() == [[{"role": "assistant", "content": "a", "name": "n"}]]


def test_a_null_key_without_a_field_of_its_own_is_kept():
    t = table(["role", "content", "_null_keys"], [strings("assistant"), strings("a"), pa.array([["name", None]])])
    assert History.from_arrow(t).to_chats() == [[{"role": "assistant", "content": "a", "name": None}]]


# -- finding 3: JSON text -------------------------------------------------------------------------
def test_json_text_that_is_not_json_names_the_field_row_and_message():
    calls = pa.array(['[{"id": "c"}]', None, "{not json"], pa.large_string())
    t = table(["role", "content", pa.field("tool_calls", pa.large_string(), metadata=JSON)],
              [strings("assistant", "user", "assistant"), strings("a", "b", "c"), calls], offsets=(0, 1, 3))
    with pytest.raises(ValueError, match=r"^row 1, message 1: field 'tool_calls' is tagged chatdata.encoding: json "
                                         r"but its text is not JSON \(Expecting .*'\{not json'; fix the text"):
        History.from_arrow(t)
    assert History.from_arrow(t.slice(0, 1)).to_chats()[0][0]["tool_calls"] == [{"id": "c"}]


def test_json_text_nested_too_deeply_is_a_value_error_not_a_recursion_error():
    t = table(["role", pa.field("content", pa.large_string(), metadata=JSON)],
              [strings("user"), strings("[" * 100_000, type=pa.large_string())])
    with pytest.raises(ValueError, match=r"row 0, message 0: field 'content' .* not JSON \(nested too deeply\)"):
        History.from_arrow(t)


@pytest.mark.parametrize("field, array, message", [
    (pa.field("x", pa.int64(), metadata=JSON), pa.array([3]),
     r"field 'x' .* is tagged chatdata.encoding: json but has type int64; JSON text must be string"),
    (pa.field("x", pa.string(), metadata={b"chatdata.encoding": b"base64"}), strings("aGk="),
     r"field 'x' .* has metadata chatdata.encoding: 'base64'; the only encoding chatdata knows is 'json'"),
])
def test_a_json_tag_on_a_field_that_is_not_json_text_is_refused(field, array, message):
    with pytest.raises(TypeError, match=message):
        History.from_arrow(table(["role", "content", field], [strings("user"), strings("a"), array]))


def test_json_text_of_other_string_types_is_parsed():
    text = pa.array(['{"a": [1]}']).dictionary_encode()
    t = table(["role", "content", pa.field("x", text.type, metadata=JSON)], [strings("user"), strings("a"), text])
    assert History.from_arrow(t).to_chats() == [[{"role": "user", "content": "a", "x": {"a": [1]}}]]


# -- finding 4 and its siblings: types Arrow calls text and lists ----------------------------------
TEXT_TYPES = [pa.string(), pa.large_string(), pa.dictionary(pa.int32(), pa.string()),
              pa.dictionary(pa.int8(), pa.large_string())] + ([pa.string_view()] if HAS_VIEWS else [])


@pytest.mark.parametrize("text", TEXT_TYPES, ids=str)
@pytest.mark.parametrize("list_type", ["list", "large_list", "fixed_size_list"])
def test_roles_and_content_of_every_text_type_are_read(text, list_type):
    chats = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
             [{"role": "user", "content": "é"}, {"role": "assistant", "content": None}]]
    msg = pa.struct([("role", text), ("content", text)])
    outer = {"list": pa.list_(msg), "large_list": pa.large_list(msg), "fixed_size_list": pa.list_(msg, 2)}[list_type]
    t = pa.table({"messages": pa.array(chats, outer)})
    assert History.from_arrow(t).to_chats() == chats
    assert History.from_arrow(t.slice(1)).to_chats() == chats[1:]


def test_dictionary_roles_with_null_rows_report_the_rows():
    rows = [[{"role": "user", "content": "a"}], None, [{"role": None, "content": "b"}]]
    typ = pa.list_(pa.struct([("role", pa.dictionary(pa.int32(), pa.string())), ("content", pa.string())]))
    t = pa.table({"messages": pa.array(rows, typ)})
    assert find_bad_rows(t) == [(1, "messages is null"), (2, "message 0 has no role")]
    assert History.from_arrow(t.slice(0, 1)).to_chats() == rows[:1]


@given(st.lists(st.lists(st.tuples(st.sampled_from(["system", "user", "assistant"]), st.text(max_size=8)),
                         min_size=1, max_size=4), max_size=6))
@settings(max_examples=40, deadline=None)
def test_dictionary_encoded_tables_read_as_their_plain_tables(rows):
    chats = [[{"role": r, "content": c} for r, c in conv] for conv in rows]
    plain = batch(chats).to_arrow()
    enc = pa.large_list(pa.struct([("role", pa.dictionary(pa.int16(), pa.string())),
                                   ("content", pa.dictionary(pa.int32(), pa.large_string()))]))
    assert History.from_arrow(plain.cast(pa.schema([("messages", enc)]))).to_chats() == chats


@pytest.mark.parametrize("column, message", [
    (table(["role", "content"], [pa.array([1]), strings("a")]),
     r"field 'role' .* has type int64; a role must be text: string, large_string"),
    (table(["role", "content"], [pa.array([1.5]), strings("a")]), r"field 'role' .* has type double"),
    (table(["role", "content"], [strings("user"), pa.array([True])]),
     r"field 'content' .* has type bool; content must be text \(string, .*binary holding UTF-8.*\) or a list of parts"),
    (table(["role", "content"], [strings("user"), pa.array([5])]), r"field 'content' .* has type int64"),
    (table(["role", "content"], [strings("user"), pa.array([{"text": "a"}])]), r"field 'content' .* has type struct"),
    (table(["content"], [strings("a")]), r"its messages have no 'role' field"),
    (pa.table({"messages": pa.StructArray.from_arrays([strings("user"), strings("a")], names=["role", "content"])}),
     r"column 'messages' has type struct<role: string, content: string>; expected list<struct<role"),
    (pa.table({"messages": pa.array([["a"]])}), r"column 'messages' has type list<item: string>; expected"),
    (pa.table({"messages": pa.nulls(1)}), r"column 'messages' has type null; expected"),
], ids=["role int", "role float", "content bool", "content int", "content struct", "no role", "messages struct",
        "messages list<string>", "messages null"])
def test_fields_of_other_types_are_a_type_error_naming_them(column, message):
    with pytest.raises(TypeError, match=message):
        History.from_arrow(column)


@pytest.mark.parametrize("binary", [pa.binary(), pa.large_binary()], ids=str)
def test_binary_text_of_older_parquet_writers_is_read_as_utf8(binary, tmp_path):
    """Parquet files written without the UTF-8 annotation give binary columns: read as text."""
    t = table(["role", "content"], [pa.array([b"user"], binary), pa.array(["h\u00e9".encode()], binary)])
    assert History.from_arrow(t).to_chats() == [[{"role": "user", "content": "h\u00e9"}]]
    pq.write_table(t, tmp_path / "old.parquet")
    assert History.from_arrow(pq.read_table(tmp_path / "old.parquet")).to_chats() == [[{"role": "user", "content": "h\u00e9"}]]


def test_binary_that_is_not_utf8_is_a_value_error_naming_the_field():
    t = table(["role", "content"], [pa.array([b"user"]), pa.array([b"\xff\xfe"])])
    with pytest.raises(ValueError, match=r"column 'messages': field 'content' of the messages holds bytes that are not UTF-8"):
        History.from_arrow(t)


@pytest.mark.skipif(not hasattr(pa, "list_view"), reason="pyarrow < 16 has no list_view")
def test_a_list_view_of_messages_is_refused_naming_the_types_read():
    msg = pa.struct([("role", pa.string()), ("content", pa.string())])
    t = pa.table({"messages": pa.array([[{"role": "user", "content": "a"}]], pa.list_view(msg))})
    with pytest.raises(TypeError, match=r"has type list_view<.*; expected list<struct<role"):
        History.from_arrow(t)


def test_a_role_column_of_the_null_type_is_rows_without_a_role():
    t = table(["role", "content"], [pa.nulls(1), strings("a")])
    with pytest.raises(ValueError, match=r"row 0: message 0 has no role"):
        History.from_arrow(t)
    assert History.from_arrow(t.slice(0, 0)).to_chats() == []


def test_nulls_where_a_list_is_needed_are_row_errors():
    t = table(["role", "content"], [strings("user"), pa.array([[{"type": "text", "text": "hi"}, None]])])
    with pytest.raises(ValueError, match=r"row 0, message 0: content part 1 must be a dict"):
        History.from_arrow(t)
    t = table(["role", "content", "tool_calls"], [strings("assistant"), strings("a"), pa.array([{"id": "x"}])])
    with pytest.raises(ValueError, match=r"row 0, message 0: 'tool_calls' must be a list or None, got dict"):
        History.from_arrow(t)


# -- the same tables through `chatdata import` ----------------------------------------------------
def run_cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("CHATDATA_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "chatdata", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def _bad_json_table():
    calls = pa.array(["{not json", '[{"id": "c"}]'], pa.large_string())
    return table(["role", "content", pa.field("tool_calls", pa.large_string(), metadata=JSON)],
                 [strings("assistant", "assistant"), strings("a", "b"), calls], offsets=(0, 1, 2))


def test_import_of_bad_tables_is_one_line_per_file(tmp_path):
    col = History.from_chats([[{"role": "user", "content": "a"}]]).to_arrow().column(0)
    cases = {
        "dup_column": (pa.Table.from_arrays([col, col], names=["messages", "messages"]),
                       "2 columns are named 'messages'"),
        "dup_field": (table(["role", "content", "content"], [strings("user"), strings("a"), strings("b")]),
                      "two fields named 'content'"),
        "null_keys": (table(["role", "content", "_null_keys"], [strings("user"), strings("a"), pa.array([3])]),
                      "_null_keys must be list<string>"),
        "role_int": (table(["role", "content"], [pa.array([1]), strings("a")]), "a role must be text"),
        "not_utf8": (table(["role", "content"], [strings("user"), pa.array([b"\xff"])]),
                     "field 'content' of the messages holds bytes that are not UTF-8"),
    }
    for name, (t, message) in cases.items():
        for suffix in (".parquet", ".arrow"):
            src = tmp_path / f"{name}{suffix}"
            if suffix == ".parquet":
                pq.write_table(t, src)
            else:
                feather.write_feather(t, src, compression="uncompressed")
            res = run_cli("import", src, tmp_path / f"{name}{suffix}.ds")
            assert res.returncode == 1, (name, res.stderr)
            assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
            assert f"error: {src}: " in res.stderr and message in res.stderr, res.stderr


def test_import_skips_a_row_whose_json_text_is_not_json_and_reads_dictionary_roles(tmp_path):
    src = tmp_path / "bad_json.parquet"
    pq.write_table(_bad_json_table(), src)
    res = run_cli("import", src, tmp_path / "ds")
    assert res.returncode == 0, res.stderr
    assert "bad_json.parquet:row 0: message 0: field 'tool_calls' is tagged chatdata.encoding: json" in res.stderr
    assert "Traceback" not in res.stderr
    want = [[{"role": "assistant", "content": "b", "tool_calls": [{"id": "c"}]}]]
    assert load_memmap(tmp_path / "ds").to_chats() == want

    src = tmp_path / "dict.parquet"
    enc = pa.list_(pa.struct([("role", pa.dictionary(pa.int32(), pa.string())), ("content", pa.string())]))
    chats = [[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]] * 3
    pq.write_table(pa.table({"messages": pa.array(chats, enc)}), src)
    res = run_cli("import", src, tmp_path / "ds2")
    assert res.returncode == 0, res.stderr
    assert load_memmap(tmp_path / "ds2").to_chats() == chats
