"""Edges of chatdata.io that gave a wrong answer or a bare error: HF datasets views, tampered
manifests, shards of differing schemas, token tables of the wrong types, failed writes."""
import json

import datasets
import pyarrow as pa
import pytest

import chatdata
from chatdata import History


def chats(*texts):
    return [[{"role": "user", "content": t}] for t in texts]


# -- a datasets.Dataset view (select / shuffle / filter) is read as its own rows ------------------------
@pytest.mark.parametrize("view", [lambda d: d.select([3, 1]), lambda d: d.shuffle(seed=1),
                                  lambda d: d.filter(lambda r: r["id"] % 2 == 0), lambda d: d.sort("id", reverse=True),
                                  lambda d: d.train_test_split(test_size=2, seed=0)["test"]])
def test_a_datasets_view_reads_its_own_rows_not_the_whole_source_table(view):
    source = datasets.Dataset.from_dict({"messages": chats("a", "b", "c", "d", "e"), "id": list(range(5))})
    ds = view(source)
    expected = [list(r["messages"]) for r in ds]
    assert History.from_arrow(ds).to_chats() == expected
    assert History.from_arrow(ds).to_chats() == History.from_arrow(ds.flatten_indices()).to_chats()


def test_a_datasets_dataset_without_the_column_names_its_columns():
    ds = datasets.Dataset.from_dict({"text": ["x"]}).select([0])
    with pytest.raises(ValueError, match=r"no column 'messages' \(columns: \['text'\]\)"):
        History.from_arrow(ds)
