"""Issue 17 items 3, 4, 10 and issue 15's content rule: History values are checked at the door
(``from_chats``) and a saved History's schema when it loads; nothing is changed silently."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatdata import FormatError, History

CHATS = [
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None,
                                         "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]}],
    [{"role": "tool", "content": "r", "name": "f"}, {"role": "assistant", "content": "ok"}],
]


def _saved(tmp_path) -> Path:
    path = tmp_path / "h"
    History.from_chats(CHATS).memmap(path)
    return path


def _values_meta(path: Path) -> Path:
    return path / "_storage" / "_values" / "meta.json"


def _edit(meta: Path, fn) -> None:
    m = json.loads(meta.read_text())
    fn(m)
    meta.write_text(json.dumps(m))


# -- item 3: schema checked at load ----------------------------------------------------------------
SCHEMA_BREAKS = {
    "tool_calls a plain value": lambda m: m["entries"].update(tool_calls={"kind": "value", "batch_size": [4], "value": 1234}),
    "role missing": lambda m: m["entries"].pop("role"),
    "no entries": lambda m: m.update(entries={}),
    "extra wrong type": lambda m: m["entries"].update(extra={"kind": "value", "batch_size": [4], "value": 5}),
    "role a tensor": lambda m: m["entries"].update(role=m["entries"]["_flags"]),
    "flags a str column": lambda m: m["entries"].update(_flags=m["entries"]["role"]),
    "flags uint8": lambda m: m["entries"]["_flags"].update(dtype="uint8"),  # a sharded save then failed
    "unknown column": lambda m: m["entries"].update(surprise={"kind": "value", "batch_size": [4], "value": 1}),
    "is_complete a str": lambda m: m["entries"].update(is_complete={"kind": "value", "batch_size": [4], "value": "yes"}),
}


@pytest.mark.parametrize("name", sorted(SCHEMA_BREAKS))
def test_broken_schema_is_a_format_error_naming_the_file(tmp_path, name):
    path = _saved(tmp_path)
    _edit(_values_meta(path), SCHEMA_BREAKS[name])
    with pytest.raises(FormatError, match=str(_values_meta(path))):
        History.load_memmap(path).to_chats()


@pytest.mark.parametrize("drop", [("extra",), ("tool_responses", "is_complete"), ("extra", "tool_responses", "is_complete")])
def test_a_folder_without_an_optional_column_reads_it_as_its_default(tmp_path, drop):
    """format.md lists is_complete, tool_calls, tool_responses and extra as optional: without
    one, to_chats worked but to_arrow() and export raised KeyError."""
    chats = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}], []]
    path = tmp_path / "h"
    History.from_chats(chats).memmap(path)
    _edit(_values_meta(path), lambda m: [m["entries"].pop(k) for k in drop])
    h = History.load_memmap(path)
    assert h.to_chats() == chats
    assert History.from_arrow(h.to_arrow()).to_chats() == chats
    h.memmap(tmp_path / "again", copy_existing=True)
    assert History.load_memmap(tmp_path / "again").to_chats() == chats


@pytest.mark.parametrize("flag", [0x40, -1, 16])
def test_odd_flag_bytes_are_a_format_error(tmp_path, flag):
    path = _saved(tmp_path)
    h = History.load_memmap(path)
    flags_file = Path(h.message_column("_flags").filename)
    raw = bytearray(flags_file.read_bytes())
    raw[0] = flag & 0xFF
    flags_file.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match=str(flags_file)):
        History.load_memmap(path).to_chats()


def test_content_absent_flag_on_a_message_with_content_is_named(tmp_path):
    path = _saved(tmp_path)
    flags_file = Path(History.load_memmap(path).message_column("_flags").filename)
    raw = bytearray(flags_file.read_bytes())
    raw[0] |= 1  # "no content key" on "hi": loading must not drop the content
    flags_file.write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="_flags"):
        History.load_memmap(path).to_chats()
    with pytest.raises(FormatError, match=rf"{flags_file}: .*flags 1 mark message 0 as without content"):
        History.load_memmap(path).to_arrow()  # it used to give a table from_arrow refused


def test_per_message_json_value_of_wrong_type_is_named(tmp_path):
    path = _saved(tmp_path)
    h = History.load_memmap(path)
    col = h.message_column("tool_calls")
    data_file = Path(col._pool._source.replace(".offsets.memmap", ".bytes.memmap"))
    off_file = Path(col._pool._source)
    values = [json.dumps(v).encode() for v in (None, 1234, None, None)]  # 1234: not a list
    offsets = [0]
    for v in values:
        offsets.append(offsets[-1] + len(v))
    data_file.write_bytes(b"".join(values))
    off_file.write_bytes(torch.tensor(offsets, dtype=torch.int64).numpy().tobytes())
    meta = _values_meta(path)
    _edit(meta, lambda m: m["entries"]["tool_calls"].update(nbytes=offsets[-1]))
    with pytest.raises(FormatError, match=str(off_file)):
        History.load_memmap(path).to_chats()


def test_intact_history_round_trips(tmp_path):
    assert History.load_memmap(_saved(tmp_path)).to_chats() == CHATS


# -- item 4: values a save would change are refused at the door, naming the key path -----------------
@pytest.mark.parametrize("msg,named", [
    ({"role": "user", "content": "x", "meta": {1: "a"}}, "'meta' has the key 1"),
    ({"role": "user", "content": "x", "pair": (1, 2)}, "'pair' is a tuple"),
    ({"role": "user", "content": "x", "flags": {True: 1}}, "key True"),
    ({"role": "user", "content": "x", "deep": {"a": [{"b": {None: 0}}]}}, "'deep'['a'][0]['b'] has the key None"),
    ({"role": "assistant", "content": None, "tool_calls": [{"id": "c", "args": {1, 2}}]}, "'tool_calls'[0]['args'] is a set"),
    ({"role": "user", "content": "x", 7: "seven"}, "message key 7"),
])
def test_unsaveable_values_are_refused_at_from_chats(msg, named):
    with pytest.raises(ValueError, match="chat 1, message 0") as err:
        History.from_chats([[{"role": "user", "content": "ok"}], [msg]])
    assert named in str(err.value)


_key = st.one_of(st.text(max_size=4), st.integers(-2, 2), st.booleans(), st.none())
_scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6))
_nested = st.recursive(
    _scalar,
    lambda c: st.lists(c, max_size=3) | st.tuples(c, c) | st.dictionaries(_key, c, max_size=3)
    | st.frozensets(st.integers(0, 3), max_size=2),
    max_leaves=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(extra=st.dictionaries(st.sampled_from(["meta", "name", "weight", "nested"]), _nested, min_size=1, max_size=3))
def test_random_nested_extra_keys_round_trip_exactly_or_are_refused_early(tmp_path_factory, extra):
    chats = [[{"role": "user", "content": "q", **extra}, {"role": "assistant", "content": "a"}]]
    try:
        h = History.from_chats(chats)
    except ValueError as err:
        assert "chat 0, message 0" in str(err)  # an early refusal, named
        return
    path = tmp_path_factory.mktemp("h") / "h"
    h.memmap(path)
    got = History.load_memmap(path).to_chats()
    assert got == chats and json.dumps(got) == json.dumps(chats)  # exact: same types, same key order


# -- item 10: lone surrogates refused at the door, naming chat, message and field ---------------------
@pytest.mark.parametrize("msg,field", [
    ({"role": "user", "content": "bad \ud800"}, "'content'"),
    ({"role": "us\udc00er", "content": "x"}, "'role'"),
    ({"role": "user", "content": [{"type": "text", "text": "\ud83d"}]}, "'content'[0]['text']"),
    ({"role": "user", "content": "x", "name": "n\ud800"}, "'name'"),
    ({"role": "user", "content": "x", "k\ud800": 1}, "message key"),
    ({"role": "assistant", "content": None, "tool_calls": [{"function": {"arguments": "\udfff"}}]}, "'tool_calls'[0]['function']['arguments']"),
])
def test_lone_surrogates_refused_at_the_door(msg, field):
    with pytest.raises(ValueError, match="surrogate") as err:
        History.from_chats([[{"role": "user", "content": "fine é"}, msg]])
    assert "chat 0, message 1" in str(err.value) and field in str(err.value)


def test_valid_non_ascii_text_is_kept():
    chats = [[{"role": "user", "content": "héllo 👋 日本"}, {"role": "assistant", "content": "ok", "name": "é"}]]
    assert History.from_chats(chats).to_chats() == chats


# -- issue 15: messages without content ------------------------------------------------------------
@pytest.mark.parametrize("msg", [{"role": "user"}, {"role": "system", "content": None}, {"role": "tool"},
                                 {"role": "assistant"}, {"role": "assistant", "content": None, "tool_calls": []}])
def test_message_without_content_is_named(msg):
    with pytest.raises(ValueError, match="chat 1, message 0.*content"):
        History.from_chats([[{"role": "user", "content": "ok"}], [msg]])


@pytest.mark.parametrize("msg", [
    {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    {"role": "assistant", "content": None, "reasoning_content": "thinking"},
    {"role": "user", "content": ""},
])
def test_assistant_may_lack_content_with_tool_calls_or_reasoning(msg):
    assert History.from_chats([[msg]]).to_chats() == [[msg]]


def test_floats_round_trip_exactly(tmp_path):
    chats = [[{"role": "user", "content": "x", "w": [0.1, 1e300, -0.0, math.pi]}]]
    History.from_chats(chats).memmap(tmp_path / "h")
    got = History.load_memmap(tmp_path / "h").to_chats()
    assert got == chats and math.copysign(1, got[0][0]["w"][2]) == -1


# -- issue 24: the bulk checks accept exactly what the per-value walk accepts -----------------------
_deep = st.recursive(
    st.one_of(_scalar, st.text(alphabet=st.sampled_from("a\u00e9\ud800\udc00\U0001f44b"), max_size=3),
              st.sampled_from([math.nan, math.inf, -math.inf, 1.7e308])),
    lambda c: st.lists(c, max_size=3) | st.tuples(c) | st.dictionaries(st.one_of(_key, st.just("k\udfff")), c, max_size=3),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(values=st.lists(_deep, max_size=4))
def test_bulk_json_check_agrees_with_the_walk(values):
    from chatdata.history.message_checks import json_value_error, json_values_ok

    assert json_values_ok(values) == all(json_value_error(v, "x") is None for v in values)


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.sampled_from("ab \u00e9\ud800\udbff\udc00\U0001f44b"), max_size=5), max_size=5))
def test_bulk_text_check_agrees_with_the_walk(texts):
    from chatdata.history.message_checks import text_error, texts_ok

    assert texts_ok(texts) == all(text_error(t, "x") is None for t in texts)


def test_bulk_checks_name_the_culprit_at_depth_and_scale():
    from chatdata.history.message_checks import MAX_DEPTH

    deep = [1]
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    chats = [[{"role": "user", "content": "fine é", "meta": {"a": [1, {"b": "ok"}]}}] for _ in range(500)]
    chats[321] = [{"role": "user", "content": "ok"}, {"role": "user", "content": "x", "meta": {"a": [{"b": "\ud800"}]}}]
    with pytest.raises(ValueError, match=r"chat 321, message 1: 'meta'\['a'\]\[0\]\['b'\] holds a lone surrogate"):
        History.from_chats(chats)
    chats[321] = [{"role": "user", "content": "x", "deep": deep}]
    with pytest.raises(ValueError, match="chat 321, message 0: 'deep' is nested more than"):
        History.from_chats(chats)
    chats[321] = [{"role": "user", "content": "x", "tool_calls": "no", "meta": (1,)}]
    with pytest.raises(ValueError, match="chat 321, message 0: 'tool_calls' must be a list"):
        History.from_chats(chats)
    chats[321] = [{"role": "user", "content": "x", "meta": (1,), "tool_calls": "no"}]
    with pytest.raises(ValueError, match=r"chat 321, message 0: 'meta' is a tuple"):
        History.from_chats(chats)


def test_an_old_folder_with_an_empty_json_column_saved_as_str_loads(tmp_path):
    """td's stream writer saved a JSON column of no value (only empty conversations) as a str
    column before it kept the kind; such a folder loads (no value can be wrong) and saves again."""
    path = tmp_path / "h"
    History.from_chats([[], [{"role": "user", "content": "x", "name": "n"}]])[0:1].memmap(path)
    _edit(_values_meta(path), lambda m: m["entries"]["extra"].update(encoding="str"))
    assert json.loads(_values_meta(path).read_text())["entries"]["extra"]["shape"] == [0]
    h = History.load_memmap(path)
    assert h.to_chats() == [[]]
    grown = h.extend(History.from_chats([[{"role": "user", "content": "y", "name": "m"}]]), inplace=False)
    grown.memmap(tmp_path / "again")
    assert History.load_memmap(tmp_path / "again").to_chats() == [[], [{"role": "user", "content": "y", "name": "m"}]]
    # a str column that holds values stays refused
    _edit(_values_meta(_saved(tmp_path / "full")), lambda m: m["entries"]["tool_calls"].update(encoding="str"))
    with pytest.raises(FormatError, match="'tool_calls' is a str column; it must be json"):
        History.load_memmap(tmp_path / "full" / "h").to_chats()
