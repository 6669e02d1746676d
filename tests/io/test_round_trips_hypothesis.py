"""Every way a History leaves and comes back gives the same chats: hostile-but-valid messages
(every Unicode plane, NUL, U+2028, combining marks, RTL, empty and long strings; content as str,
None, absent or text parts; tool calls with nested arguments holding big ints, 1e-300, -0.0,
bools and null; tool responses, reasoning, extra keys, is_complete; empty conversations)
through memmap, Arrow (typed and JSON text), Parquet, HF datasets, a sharded dataset and the
CLI's import / export. Equal means equal types too (1 is not 1.0 nor True, -0.0 is not 0.0) and
the same key order inside every value. The documented limit: an Arrow table has one field order
for all messages, so a message's own extra keys come back in the table's order there
(docs/scale.md); History.to_chats itself gives fields first, then the extra keys in input order.

The narrower property tests of tests/io/test_io_arrow.py and tests/history/test_history_core.py
stay; this file adds the paths and value kinds they do not draw."""
import io
import json
import math

import datasets
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatdata
from chatdata import History, load_memmap
from chatdata.cli.export import export_dataset
from chatdata.cli.import_ import import_file
from chatdata.io.tables import export_parquet
from io_helpers import batch

_FIELDS = ("role", "content", "is_complete", "tool_calls", "tool_responses")
_odd = st.sampled_from(["\x00", "\u2028", "\u2029", "\u0301", "e\u0301", "\u202e", "\u200f", "ש", "\U0001F600",
                        "\U00020000", "\U0010FFFD", "\ufeff", "\r\n", "\\", '"', "null", "\x7f", "\x1b"])
text = st.lists(st.characters(blacklist_categories=("Cs",)) | _odd, max_size=10).map("".join)
long_text = st.integers(2_000, 6_000).map(lambda n: "é🙂\u2028" * n)
number = st.one_of(st.integers(-2**70, 2**70), st.sampled_from([0, -1, 2**63 - 1, -2**63, 2**63, 2**64]),
                   st.floats(allow_nan=False, allow_infinity=False),
                   st.sampled_from([1e-300, 5e-324, -0.0, 0.0, 1.0, 1.7976931348623157e308]), st.booleans(), st.none())
key = text | st.sampled_from(["a", "b", "", "type", "role", "content", "_null_keys", "null"])
json_value = st.recursive(number | text, lambda c: st.lists(c, max_size=3) | st.dictionaries(key, c, max_size=3),
                          max_leaves=8)
tool_call = st.fixed_dictionaries(
    {"type": st.just("function"),
     "function": st.fixed_dictionaries({"name": text, "arguments": text | st.dictionaries(key, json_value, max_size=4)})},
    optional={"id": text, "index": st.integers(0, 3)})
parts = st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": text}), max_size=3)
extra_key = st.sampled_from(["name", "tool_call_id", "reasoning_content", "weight", "meta", "x-é", "🙂", ""])


@st.composite
def message(draw):
    m = {"role": draw(st.sampled_from(["system", "user", "assistant", "tool"]))}
    kind = draw(st.sampled_from(["str", "str", "long", "none", "absent", "parts"]))
    if kind in ("str", "long"):
        m["content"] = draw(text if kind == "str" else long_text)
    elif kind == "none":
        m["content"] = None
    elif kind == "parts":
        m["content"] = draw(parts)
    if draw(st.integers(0, 2)) == 0:
        m["is_complete"] = draw(st.booleans())
    if draw(st.integers(0, 2)) == 0:
        m["tool_calls"] = draw(st.none() | st.lists(tool_call, max_size=2))
    if draw(st.integers(0, 4)) == 0:
        m["tool_responses"] = draw(st.none() | st.lists(text, max_size=2))
    for k in draw(st.lists(extra_key, max_size=3, unique=True)):
        m[k] = draw(text | st.none()) if k == "reasoning_content" else draw(text | json_value)
    if m.get("content") is None:  # the content rule: only an assistant turn with tool calls or reasoning lacks it
        m["role"] = "assistant"
        if not (m.get("tool_calls") or m.get("reasoning_content")):
            m["reasoning_content"] = "r" + draw(text)
    return m


def _canonical(chats):
    """The chats as to_chats documents them: fields first, then the extra keys in input order."""
    return [[{**{k: m[k] for k in _FIELDS if k in m}, **{k: v for k, v in m.items() if k not in _FIELDS}}
             for m in c] for c in chats]


chats_st = st.lists(st.lists(message(), max_size=4), max_size=4).map(_canonical)


def _diff(want, got, path="$", top_order=True):
    """Where ``got`` differs from ``want`` (types, -0.0 and nested key order included), or None.
    ``top_order=False``: a message's own keys may come in another order (an Arrow table's)."""
    if type(want) is not type(got):
        return f"{path}: {type(want).__name__} {want!r:.60} became {type(got).__name__} {got!r:.60}"
    if type(want) is dict:
        message_level = path.count("[") == 2
        if (list(want) != list(got)) if (top_order or not message_level) else (set(want) != set(got)):
            return f"{path}: keys {list(want)} became {list(got)}"
        return next((d for k in want if (d := _diff(want[k], got[k], f"{path}[{k!r}]", top_order))), None)
    if type(want) is list:
        if len(want) != len(got):
            return f"{path}: {len(want)} items became {len(got)}"
        return next((d for i, (a, b) in enumerate(zip(want, got)) if (d := _diff(a, b, f"{path}[{i}]", top_order))),
                    None)
    if type(want) is float and math.copysign(1, want) != math.copysign(1, got):
        return f"{path}: {want!r} became {got!r}"
    return None if want == got else f"{path}: {want!r:.60} became {got!r:.60}"


def _same(want, got, top_order=True):
    d = _diff(want, got, top_order=top_order)
    assert d is None, d


def _parquet(table):
    buf = io.BytesIO()
    pq.write_table(table, buf)
    buf.seek(0)
    return pq.read_table(buf)


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                       HealthCheck.data_too_large])


@settings(max_examples=60, **_SETTINGS)
@given(chats=chats_st)
def test_memory_memmap_arrow_parquet_and_hf_give_the_chats_back(tmp_path_factory, chats):
    h = batch(chats)
    _same(chats, h.to_chats())
    path = tmp_path_factory.mktemp("h") / "h"
    h.memmap(path)
    loaded = load_memmap(path)
    _same(chats, loaded.to_chats())
    for source in (h, loaded):
        for encoding in ("typed", "text"):
            table = source.to_arrow(json=encoding)
            _same(chats, History.from_arrow(table).to_chats(), top_order=False)
            _same(chats, History.from_arrow(_parquet(table)).to_chats(), top_order=False)
        _same(chats, History.from_arrow(datasets.Dataset(source.to_arrow())).to_chats(), top_order=False)


@settings(max_examples=20, **_SETTINGS)
@given(chats=chats_st.filter(len))
def test_sharded_dataset_gives_the_chats_back(tmp_path_factory, chats):
    folder = tmp_path_factory.mktemp("s") / "corpus"
    ds = chatdata.open_dataset(folder, mode="a")
    ds.append(History.from_chats(chats))
    ds.append(History.from_chats(chats[::-1]))
    both = chats + chats[::-1]
    back = chatdata.open_dataset(folder)
    _same(both, back[:].to_chats())
    _same(both, back.to_chats())
    _same(both, History.from_arrow(back.to_arrow()).to_chats(), top_order=False)


def _no_weight(chats):  # import checks "weight" as a training weight (a number >= 0): see test_cli_bad_input
    return [[{k: v for k, v in m.items() if k != "weight"} for m in c] for c in chats]


@settings(max_examples=15, **_SETTINGS)
@given(chats=chats_st.filter(len).map(_no_weight))
def test_cli_import_then_export_gives_the_chats_back(tmp_path_factory, chats):
    tmp = tmp_path_factory.mktemp("cli")
    src = tmp / "in.jsonl"
    src.write_text("".join(json.dumps({"messages": c}, ensure_ascii=False) + "\n" for c in chats), encoding="utf-8")
    reported = []
    import_file(src, tmp / "ds", report=reported.append, progress=False)
    assert not reported
    export_dataset(tmp / "ds", tmp / "out.jsonl")
    lines = (tmp / "out.jsonl").read_text(encoding="utf-8").split("\n")
    assert lines[-1] == ""
    _same(chats, [json.loads(line)["messages"] for line in lines[:-1]])  # same keys, same order
    export_parquet(tmp / "ds", tmp / "out.parquet")
    import_file(tmp / "out.parquet", tmp / "ds2", report=reported.append, progress=False)
    assert not reported
    _same(chats, load_memmap(tmp / "ds2").to_chats(), top_order=False)


def test_an_empty_conversation_batch_round_trips_everywhere(tmp_path):
    for chats in ([], [[]], [[], []]):
        h = batch(chats)
        assert History.from_arrow(_parquet(h.to_arrow())).to_chats() == chats
        assert History.from_arrow(datasets.Dataset(h.to_arrow())).to_chats() == chats
        h.memmap(tmp_path / f"e{len(chats)}")
        assert load_memmap(tmp_path / f"e{len(chats)}").to_chats() == chats


@pytest.mark.parametrize("value", [1, 1.0, True, -0.0, 0.0, 2**64, -2**63, 1e-300, None, "1"])
def test_a_number_keeps_its_type_through_every_table_path(tmp_path, value):
    chats = [[{"role": "user", "content": "a", "meta": {"v": value}}, {"role": "user", "content": "b", "meta": {"v": 2}}]]
    h = History.from_chats(chats)
    h.memmap(tmp_path / "h")
    for source in (h, load_memmap(tmp_path / "h")):
        for table in (source.to_arrow(), _parquet(source.to_arrow()), datasets.Dataset(source.to_arrow())):
            _same(chats, History.from_arrow(table).to_chats())
