"""chatdata.ray at its edges, on the session's real local Ray cluster (``ray_cluster``): an empty
shard, blocks of no rows, blocks whose schemas differ (a field null or absent in one), and bad rows,
which are named by their place in the whole dataset (not in the worker's batch) with the folder left
as it was."""
import pyarrow as pa
import pytest

import chatdata.ray as cray
from chatdata import History, open_dataset

GOOD = [[{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i} ü"}] for i in range(10)]


def _files(path):
    return sorted(p.relative_to(path) for p in path.rglob("*")) if path.exists() else None


def test_an_empty_shard_and_an_empty_dataset_read_and_write_through_ray(ray_cluster, tmp_path):
    src = open_dataset(tmp_path / "src", mode="a")
    src.append(History.from_chats(GOOD[:2]))
    src.append(History.from_chats([]))  # a shard of no conversations
    src.append(History.from_chats(GOOD[2:3]))
    rd = cray.read(tmp_path / "src")
    assert rd.count() == 3
    assert cray.write(rd, tmp_path / "copy", rows_per_shard=2).to_chats() == GOOD[:3]
    open_dataset(tmp_path / "empty", mode="a")
    assert cray.read(tmp_path / "empty").count() == 0
    out = cray.write(cray.read(tmp_path / "empty"), tmp_path / "copy_empty")
    assert (out.num_shards, len(out), out.manifest["kind"]) == (0, 0, "History")


def test_blocks_of_no_rows_write_no_shards(ray_cluster, tmp_path):
    one = History.from_chats(GOOD[:1]).to_arrow()
    none = one.slice(0, 0)
    out = cray.write(ray_cluster.data.from_arrow([none, one, none]), tmp_path / "a", rows_per_shard=4)
    assert out.to_chats() == GOOD[:1]
    out = cray.write(ray_cluster.data.from_arrow([none, none]), tmp_path / "b", rows_per_shard=4)
    assert len(out) == 0 and out.to_chats() == []


@pytest.mark.parametrize("rows_per_shard", [1, 2, 10])
def test_blocks_whose_schemas_differ_give_every_row_back(ray_cluster, tmp_path, rows_per_shard):
    named = pa.table({"messages": [[{"role": "user", "content": "a", "name": "n"}]]})
    null_name = pa.table({"messages": [[{"role": "user", "content": "b", "name": None}]]})  # the field all null
    no_name = pa.table({"messages": [[{"role": "user", "content": "c"}]]})
    tools = History.from_chats([[{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}]]).to_arrow()
    ds = ray_cluster.data.from_arrow([named, null_name, no_name, tools])
    out = cray.write(ds, tmp_path / f"o{rows_per_shard}", rows_per_shard=rows_per_shard)
    assert out.to_chats() == [[{"role": "user", "content": "a", "name": "n"}], [{"role": "user", "content": "b"}],
                              [{"role": "user", "content": "c"}], History.from_arrow(tools).to_chats()[0]]


@pytest.mark.parametrize("bad_row, table, match", [
    (7, lambda: pa.table({"messages": GOOD[:7] + [[{"role": None, "content": "x"}]] + GOOD[8:]}), "message 0 has no role"),
    (4, lambda: pa.table({"messages": GOOD[:4] + [None] + GOOD[5:]}), "messages is null"),
    (9, lambda: pa.table({"messages": GOOD[:9] + [[{"role": "user"}]]}), "message 0: a 'user' message needs 'content'"),
])
def test_a_bad_row_is_named_by_its_place_in_the_dataset_and_nothing_is_written(ray_cluster, tmp_path, bad_row,
                                                                               table, match):
    out = tmp_path / "out"
    cray.write(ray_cluster.data.from_arrow(pa.table({"messages": GOOD[:2]})), out, rows_per_shard=2)
    before = _files(out)
    # batches of 3 rows: the bad row is row 1, 0 or 0 of its batch; the error names it in the whole dataset
    with pytest.raises(ValueError, match=rf"^row {bad_row}: {match}"):
        cray.write(ray_cluster.data.from_arrow(table()), out, rows_per_shard=3)
    assert _files(out) == before and open_dataset(out).to_chats() == GOOD[:2]


def test_rows_ray_could_only_pickle_are_refused_with_what_to_fix_and_never_unpickled(ray_cluster, tmp_path):
    rows = [{"messages": [{"role": "user", "content": "ok"}]}, {"messages": [{"role": "user", "content": "a\ud800"}]}]
    ds = ray_cluster.data.from_items(rows)  # Arrow cannot hold the lone surrogate: Ray pickles the column
    with pytest.raises(ValueError, match=r"^rows 0 to 1: .*pickled Python objects.*lone surrogate"):
        cray.write(ds, tmp_path / "out", rows_per_shard=10)
    assert not (tmp_path / "out").exists()


def test_token_rows_of_unequal_lengths_name_the_row(ray_cluster, tmp_path):
    ds = ray_cluster.data.from_arrow(pa.table({"input_ids": [[1, 2], [3, 4, 5]], "assistant_masks": [[True, False],
                                                                                                    [True]]}))
    with pytest.raises(ValueError, match=r"^row 1: 'assistant_masks' holds 1 values but 'input_ids' 3"):
        cray.write(ds, tmp_path / "tok", rows_per_shard=10)


def test_a_ray_write_into_the_folder_of_a_killed_write_writes_the_dataset(ray_cluster, tmp_path):
    out = tmp_path / "out"
    leftover = out / "shards" / "shard-00000000000000000001-0123456789abcdef0123456789abcdef"
    History.from_chats(GOOD[:1]).memmap(leftover)  # a shard a killed write left, no manifest
    assert cray.write(ray_cluster.data.from_arrow(pa.table({"messages": GOOD[1:3]})), out,
                      rows_per_shard=2).to_chats() == GOOD[1:3]
    assert leftover.exists()  # another writer's shard: not ours to delete
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        cray.write(ray_cluster.data.from_arrow(pa.table({"messages": GOOD[:1]})), tmp_path / "file")
