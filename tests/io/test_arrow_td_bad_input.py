"""TensorDict / NonTensorStack <-> Arrow keep what they hold, or refuse it before writing.

Before: a NonTensorStack whose values Arrow cannot type exactly (``["a", 1, None]``, ``{}``) went
out as a plain string column of their JSON text and read back as those texts (``'"a"'``, ``'1'``);
a non-tensor entry of dicts read back as a nested TensorDict, one of ints or bools as a tensor; a
nested TensorDict without entries came back as a column of None; a tensor or stack with an inner
dimension of size 0 failed inside pyarrow (``ArrowInvalid: list_size needs to be a strict
positive integer``), naming no entry."""
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import chatdata.io  # noqa: F401 - attaches to_arrow / from_arrow
from chatdata import NonTensorStack, TensorDict
from chatdata.td import NonTensorData


def _parquet(table):
    buf = io.BytesIO()
    pq.write_table(table, buf)
    buf.seek(0)
    return pq.read_table(buf)


VALUES = {"mixed": ["a", 1, None], "dicts": [{"a": 1}, {"a": 2}, {"b": [1]}], "ints": [1, 2, 3],
          "bools": [True, False, True], "empty dicts": [{}, {"k": {}}, {}], "rows": [["a", 1], ["b", 2], ["c", {}]]}


@pytest.mark.parametrize("name", list(VALUES))
def test_non_tensor_entries_read_back_as_the_values_they_were(name):
    values = VALUES[name]
    td = TensorDict({"v": NonTensorStack.from_list(values), "x": torch.arange(3),
                     "n": TensorDict({"v": NonTensorStack.from_list(values)}, [3])}, [3])
    table = td.to_arrow()
    sources = [table] if name == "empty dicts" else [table, _parquet(table)]  # Parquet has no struct without fields
    for source in sources:
        back = TensorDict.from_arrow(source)
        assert back["v"].tolist() == values and back["n", "v"].tolist() == values
        assert torch.equal(back["x"], td["x"])
    assert NonTensorStack.from_arrow(NonTensorStack.from_list(values).to_arrow()).tolist() == values


def test_a_constant_entry_and_a_nested_tensordict_without_entries_come_back():
    td = TensorDict({"c": NonTensorData({"k": [1, 2]}, batch_size=[2]), "e": TensorDict({}, [2]),
                     "ee": TensorDict({"e": TensorDict({}, [2])}, [2])}, [2])
    back = TensorDict.from_arrow(td.to_arrow())
    assert back["c"].tolist() == [{"k": [1, 2]}] * 2
    assert isinstance(back["e"], TensorDict) and back["e"].batch_size == (2,) and not list(back["e"].keys())
    assert isinstance(back["ee", "e"], TensorDict)


def test_a_table_from_elsewhere_is_still_read_by_its_types():
    t = pa.table({"x": [1, 2], "s": ["a", "b"], "st": [{"y": 1.0}, {"y": 2.0}]})
    back = TensorDict.from_arrow(t)
    assert back["x"].dtype == torch.int64 and back["s"].tolist() == ["a", "b"] and back["st", "y"].dtype == torch.float64


@pytest.mark.parametrize("entry, match", [
    (torch.zeros(2, 0), r"entry 'v': a tensor of inner shape \(0,\) .* size 0"),
    (torch.zeros(2, 3, 0), r"entry 'v': a tensor of inner shape \(3, 0\)"),
    (TensorDict({"w": torch.zeros(2, 0)}, [2]), r"entry 'v.w': a tensor of inner shape \(0,\)"),
])
def test_an_inner_dimension_of_size_0_is_named(entry, match):
    with pytest.raises(ValueError, match=match):
        TensorDict({"v": entry}, [2]).to_arrow()


def test_nan_stays_a_typed_double_and_is_refused_where_it_would_be_json_text():
    # before: [nan, 1.0] went as JSON text ("NaN", which is not JSON) since NaN != NaN failed the
    # typed round-trip check; a NaN among values of mixed types was written as that text
    for values in ([float("nan"), 1.0], [{"x": float("nan")}, {"x": 1.0}]):
        arr = NonTensorStack.from_list(values).to_arrow()
        back = NonTensorStack.from_arrow(arr).tolist()
        assert repr(back) == repr(values) and "json" not in str(arr.type)
    with pytest.raises(ValueError, match=r"entry 'm': row 1 holds NaN or an infinity .* use None or a finite number"):
        TensorDict({"m": NonTensorStack.from_list(["a", float("inf")])}, [2]).to_arrow()
