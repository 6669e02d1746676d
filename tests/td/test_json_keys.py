"""Dict keys JSON would turn into strings (``{2: 0.5}`` -> ``{"2": 0.5}``) are refused wherever a
non-tensor value becomes JSON -- a packed stack, a save, a stream, an update of a saved value --
with the value and key path named, and nothing on disk changed; str keys round-trip exactly."""
from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from chatdata import NonTensorData, NonTensorStack, RaggedTensorDict, TensorDict, load_memmap
from chatdata.td.storage.stream import StreamWriter

TOPK = {"top": [{151643: -0.1, 13: -2.5}]}  # vLLM-style top-k logprobs keyed by token id


@pytest.mark.parametrize("value, key, path, shown", [
    ({2: 3}, "2", "the top", "'2'"), ({"a": [{"b": {True: 1}}]}, "True", "['a'][0]['b']", "'true'"),
    ({None: 1}, "None", "the top", "'null'"), ([{1.5: 0}], "1.5", "[0]", "'1.5'"),
    (({"ok": {7: 0}},), "7", "[0]['ok']", "'7'"), (TOPK, "151643", "['top'][0]", "'151643'"),
])
def test_a_stack_of_values_with_other_keys_is_refused_when_packed(value, key, path, shown):
    stack = NonTensorStack.from_list(["plain", value])
    with pytest.raises(TypeError) as err:
        stack.packed()
    msg = str(err.value)
    assert f"value #1: its key {key} " in msg and f"at {path} " in msg and f"the string {shown}" in msg
    assert "use str keys" in msg


def test_saving_a_value_with_an_int_key_is_refused_and_the_old_save_stays(tmp_path):
    TensorDict({"lp": NonTensorData({"151643": -0.1})}, []).memmap(tmp_path / "d")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(TypeError, match=r"cannot store the value of .*its key 151643 \(int\)"):
        TensorDict({"lp": NonTensorData({151643: -0.1})}, []).memmap(tmp_path / "d", existsok=True)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # no temp folder left, the old save whole
    assert load_memmap(tmp_path / "d")["lp"] == {"151643": -0.1}


def test_saving_a_stack_with_an_int_key_names_the_row(tmp_path):
    td = TensorDict({"lp": NonTensorStack.from_list([{"a": 1}, {"a": 2}, TOPK])}, [3])
    with pytest.raises(TypeError, match=r"value #2.*its key 151643 \(int\) at \['top'\]\[0\]"):
        td.memmap(tmp_path / "d")
    assert not (tmp_path / "d").exists() and list(tmp_path.iterdir()) == []


def test_a_stream_refuses_an_int_key_in_a_later_chunk(tmp_path):
    def chunk(v):
        vals = TensorDict({"x": torch.arange(2), "lp": NonTensorStack.from_list([{"a": 0}, v])}, [2])
        return RaggedTensorDict(vals, torch.tensor([0, 2]))
    with pytest.raises(TypeError, match="its key 5 \\(int\\)"):
        with StreamWriter(tmp_path / "s") as w:
            w.append(chunk({"b": 1}))
            w.append(chunk({5: 1}))
    assert list(tmp_path.iterdir()) == []  # the stream's temporary folder went with the error


def test_a_stream_refuses_an_int_key_in_a_constant_column(tmp_path):
    """A value the same in every chunk is kept as one meta.json value: checked as a save checks it."""
    vals = TensorDict({"x": torch.arange(3), "meta": NonTensorData({151643: -0.1})}, [3])
    with pytest.raises(TypeError, match="its key 151643 \\(int\\)"):
        with StreamWriter(tmp_path / "s") as w:
            w.append(RaggedTensorDict(vals, torch.tensor([0, 1, 3])))
    assert list(tmp_path.iterdir()) == []


def test_sizes_and_counts_of_values_with_int_keys_still_work():
    """Reading sizes and counts stores nothing: no refusal there."""
    s = NonTensorStack.from_list([{1: 0.5}, {"a": 1}, {1: 0.5}])
    assert s.value_nbytes().tolist() == [10, 8, 10]
    assert sorted(s.value_counts().values()) == [1, 2]


def test_updating_a_saved_value_with_an_int_key_is_refused(tmp_path):
    td = TensorDict({"lp": NonTensorData({"1": 0.0})}, []).memmap(tmp_path / "d")
    with pytest.raises(TypeError, match="its key 1 \\(int\\)"):
        td["lp"] = {1: 0.0}
    assert load_memmap(tmp_path / "d")["lp"] == {"1": 0.0}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=60, deadline=None)
@given(st.lists(json_values, min_size=1, max_size=6))
def test_values_with_str_keys_round_trip_a_save_exactly(tmp_path_factory, values):
    path = tmp_path_factory.mktemp("rt") / "d"
    TensorDict({"v": NonTensorStack.from_list(values)}, [len(values)]).memmap(path)
    got = load_memmap(path)["v"].tolist()
    assert json.dumps(got, sort_keys=True) == json.dumps(values, sort_keys=True)
