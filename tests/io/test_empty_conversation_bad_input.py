"""A conversation is one row wherever it goes, also when it has no messages.

``h[i]`` of an empty conversation is a History of batch ``(0,)``, as is ``History.from_chats([])``
(an empty list of message dicts: a conversation without messages). ``to_arrow`` used to write no
row for it, a sharded dataset appended nothing and ``export_parquet`` nothing: the conversation
was lost, and every row after it shifted. ``export_parquet`` of a conversation (batch
``(n_messages,)``) cut it into ``chunk_size``-message rows. A batch of no conversations is batch
``(0, -1)`` (``History.from_chats([[]])[0:0]``, ``from_arrow`` of a table without rows)."""
import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import chatdata
from chatdata import History, load_memmap
from chatdata.io.tables import export_parquet
from io_helpers import batch

CHATS = [[], [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], [],
         [{"role": "user", "content": "c"}], []]
H = History.from_chats(CHATS)


@pytest.mark.parametrize("i", range(len(CHATS)))
def test_each_conversation_is_one_row_also_without_messages(i):
    t = H[i].to_arrow()
    assert t.num_rows == 1 and History.from_arrow(t).to_chats() == [CHATS[i]]
    assert History.from_arrow(datasets.Dataset(t)).to_chats() == [CHATS[i]]


def test_conversations_written_one_by_one_come_back_in_place(tmp_path):
    rows = pa.concat_tables([H[i].to_arrow() for i in range(len(CHATS))], promote_options="permissive")
    assert History.from_arrow(rows).to_chats() == CHATS
    ds = chatdata.open_dataset(tmp_path / "c", mode="a")
    for i in range(len(CHATS)):
        ds.append(H[i])
    back = chatdata.open_dataset(tmp_path / "c")
    assert len(back) == len(CHATS) and back.to_chats() == CHATS and back[2].to_chats() == []
    assert History.from_arrow(back.to_arrow()).to_chats() == CHATS


@pytest.mark.parametrize("chunk_size", [1, 2, 8192])
def test_export_parquet_of_one_conversation_is_one_row(tmp_path, chunk_size):
    for i in (1, 0):
        out = tmp_path / f"c{i}.parquet"
        assert export_parquet(H[i], out, chunk_size=chunk_size) == 1  # was: 0 rows, or 2 rows of 1 message
        assert History.from_arrow(pq.read_table(out)).to_chats() == [CHATS[i]]


def test_a_saved_empty_conversation_exports_and_imports_as_one_row(tmp_path):
    H[0].memmap(tmp_path / "one")
    assert export_parquet(tmp_path / "one", tmp_path / "one.parquet") == 1
    chatdata.io.tables.import_tables(tmp_path / "one.parquet", tmp_path / "back")
    assert load_memmap(tmp_path / "back").to_chats() == [[]]


def test_no_conversations_is_no_rows_on_every_route(tmp_path):
    assert batch([]).to_arrow().num_rows == 0
    parts = History.from_chats([[{"role": "user", "content": [{"type": "text", "text": "x"}]}]]).to_arrow()
    empty = History.from_arrow(parts.slice(0, 0))  # was batch (0,): one empty conversation on its way out
    assert empty.batch_size == (0, -1) and empty.to_arrow().num_rows == 0
    assert export_parquet(empty, tmp_path / "none.parquet") == 0
    ds = chatdata.open_dataset(tmp_path / "c", mode="a")
    ds.append(empty)
    assert len(ds) == 0 and ds.to_arrow().num_rows == 0


def test_from_chats_of_an_empty_list_is_no_chats_and_exports_no_rows(tmp_path):
    """A dataset filtered down to nothing must not export one phantom empty conversation."""
    h = History.from_chats([])
    assert h.batch_size == (0, -1) and h.to_arrow().num_rows == 0
    assert export_parquet(h, tmp_path / "none.parquet") == 0
    one = History.from_chats([[]])[0]  # a conversation without messages: one row
    assert History.from_arrow(one.to_arrow()).to_chats() == [[]]


@pytest.mark.parametrize("bad, match", [
    (History(role="user", content="b", batch_size=(1, 1, 1)), r"export_parquet takes a conversation .* batch \(1, 1, 1\)"),
    (History(role="user", content="b"), r"batch \(\) \(one message: unsqueeze\(0\) makes it a conversation\)"),
])
def test_export_parquet_refuses_what_is_not_conversations_and_writes_nothing(tmp_path, bad, match):
    with pytest.raises(ValueError, match=match):
        export_parquet(bad, tmp_path / "x.parquet")
    assert list(tmp_path.iterdir()) == []


WITH_COLUMNS = [[], [{"role": "user", "content": [{"type": "text", "text": "p"}], "meta": "s"}],
                [{"role": "assistant", "content": None, "is_complete": False,
                  "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]}], []]


@pytest.mark.parametrize("shard_size", [1, 2])
def test_a_shard_of_only_empty_conversations_is_readable(tmp_path, shard_size):
    # a shard cut from a batch with JSON columns (extra, tool_calls, is_complete) that held only empty
    # conversations was written with those columns as str columns: `chatdata import --shard-size` said
    # it imported, and reading the dataset was a FormatError ("column 'extra' is a str column")
    from chatdata.io.sharded import ShardedWriter

    w = ShardedWriter(tmp_path / "w", shard_size=shard_size)
    w.append(History.from_chats(WITH_COLUMNS))
    assert w.close().to_chats() == WITH_COLUMNS
    export_parquet(History.from_chats(WITH_COLUMNS), tmp_path / "in.parquet")
    chatdata.io.tables.import_tables(tmp_path / "in.parquet", tmp_path / "imp", shard_size=shard_size)
    assert chatdata.open_dataset(tmp_path / "imp").to_chats() == WITH_COLUMNS


def test_an_import_that_keeps_only_empty_conversations_is_readable(tmp_path):
    # --decontaminate dropped the one conversation with an extra key; the empty one kept was a
    # selection of a batch with an 'extra' column, written as a str column: unreadable dataset
    import json

    from chatdata.cli import main

    (tmp_path / "in.jsonl").write_text(json.dumps({"messages": []}) + "\n" + json.dumps(
        {"messages": [{"role": "user", "content": "the quick brown fox jumps", "name": "a"}]}) + "\n")
    (tmp_path / "bench.jsonl").write_text(json.dumps({"question": "the quick brown fox jumps"}) + "\n")
    args = ["import", tmp_path / "in.jsonl", tmp_path / "ds", "--decontaminate", tmp_path / "bench.jsonl",
            "--decontaminate-column", "question", "--ngram", "3", "-q"]
    assert main([str(a) for a in args]) == 0
    assert load_memmap(tmp_path / "ds").to_chats() == [[]]
