"""Edges of chatdata.io that gave a wrong answer or a bare error: HF datasets views, tampered
manifests, shards of differing schemas, token tables of the wrong types, failed writes."""
import json

import datasets
import pyarrow as pa
import pytest

import chatdata
from chatdata import History
from io_helpers import batch


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


# -- a tampered manifest ---------------------------------------------------------------------------------
def corpus(tmp_path, *parts):
    w = chatdata.open_dataset(tmp_path / "c", mode="a")
    for texts in parts:
        w.append(batch(chats(*texts)))
    return tmp_path / "c"


def edit_manifest(path, edit):
    m = json.loads((path / "manifest.json").read_text())
    edit(m)
    (path / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("alias", ["{}", "./{}", "{}/", "shards//{}"])
def test_a_shard_named_twice_is_refused_not_read_twice(tmp_path, alias):
    path = corpus(tmp_path, ["a", "b"], ["c"])

    def twice(m):
        first = m["shards"][0]["path"]
        m["shards"].append({"path": alias.format(first) if alias != "shards//{}" else
                            "shards//" + first.split("/", 1)[1], "items": 2})
        m["items"] = 5
    edit_manifest(path, twice)
    with pytest.raises(chatdata.td.FormatError, match=r"shards 0 and 2 are both .*items twice"):
        chatdata.open_dataset(path)
    with pytest.raises(chatdata.td.FormatError, match="twice"):
        chatdata.open_dataset(path, mode="a")
    report = chatdata.io.verify_dataset(path)
    assert not report.ok and any("twice" in p.message for p in report.problems)


# -- shards whose messages have differing schemas ------------------------------------------------------
PARTS = [[{"role": "user", "content": [{"type": "text", "text": "yo"}]}]]
TOOLS = [[{"role": "user", "content": "hi"},
          {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
                                                               "function": {"name": "f", "arguments": {"x": 1}}}]}]]
EXTRA = [[{"role": "user", "content": "x", "score": 5}], [{"role": "user", "content": "y", "score": "high"}]]


MIXED = [PARTS[0] + [{"role": "assistant", "content": "ok"}]]  # its content is JSON text, tagged in the schema


@pytest.mark.parametrize("batches", [[TOOLS, PARTS], [PARTS, chats("a")], [EXTRA[:1], EXTRA[1:]], [TOOLS, PARTS, EXTRA],
                                     [chats("a"), MIXED], [MIXED, chats('"b"')]])
def test_shards_of_incompatible_message_types_give_one_table_that_reads_back(tmp_path, batches):
    w = chatdata.open_dataset(tmp_path / "c", mode="a")
    for b in batches:
        w.append(History.from_chats(b))
    ds = chatdata.open_dataset(tmp_path / "c")
    table = ds.to_arrow()
    expected = [c for b in batches for c in b]
    assert table.num_rows == len(expected)
    assert History.from_arrow(table).to_chats() == expected == ds.to_chats()


# -- token tables (what chatdata.ray.write turns into token shards) ----------------------------------------
@pytest.mark.parametrize("name, column, match", [
    ("input_ids", pa.array([["a", "b"], ["c"]]), r"column 'input_ids' holds string values; token ids are integers"),
    ("input_ids", pa.array([[1.5, 2.0], [3.0]]), r"column 'input_ids' holds double values; token ids are integers"),
    ("assistant_masks", pa.array([["a", "b"], ["c"]]), r"column 'assistant_masks': a column of string values"),
    ("assistant_masks", pa.array([[[1], [2]], [[3]]]), r"column 'assistant_masks': a column of list<item: int64> values"),
])
def test_a_token_table_of_other_values_is_a_type_error_naming_the_column_and_writes_nothing(tmp_path, name, column,
                                                                                            match):
    from chatdata.io.shard_writer import write_shard_from_arrow

    table = pa.table({"input_ids": [[1, 2], [3]], name: column}) if name != "input_ids" else pa.table({name: column})
    with pytest.raises(TypeError, match=match):
        write_shard_from_arrow(table, tmp_path)
    assert not any(tmp_path.iterdir())


def test_message_rows_with_other_columns_are_refused_not_dropped(tmp_path):
    from chatdata.io.shard_writer import write_shard_from_arrow

    table = pa.table({"messages": chats("a"), "score": [0.9]})
    with pytest.raises(ValueError, match=r"columns \['score'\] besides 'messages'.*select_columns"):
        write_shard_from_arrow(table, tmp_path)  # was: a shard of the messages, the scores gone
    assert not any(tmp_path.iterdir())
    write_shard_from_arrow(table.select(["messages"]), tmp_path)


def test_null_token_values_are_a_value_error_naming_the_column():
    from chatdata.io.shard_tables import ragged_from_arrow

    with pytest.raises(ValueError, match=r"column 'assistant_masks': .* with nulls"):
        ragged_from_arrow(pa.table({"input_ids": [[1, 2]], "assistant_masks": [[True, None]]}))



# -- an overwrite removes the replaced shards, and nothing else ---------------------------------------
def test_an_overwrite_never_deletes_through_a_tampered_manifest(tmp_path):
    import os

    import pyarrow.parquet as pq

    from chatdata.io.tables import import_tables

    victim = tmp_path / "victim"  # someone's dataset beside the corpus
    History.from_chats(chats("precious")).memmap(victim)
    path = corpus(tmp_path, ["a"])
    os.symlink(tmp_path, path / "link")
    edit_manifest(path, lambda m: m["shards"].append({"path": "link/victim", "items": 1}))
    pq.write_table(pa.table({"messages": chats("new", "newer")}), tmp_path / "n.parquet")
    import_tables(tmp_path / "n.parquet", path, shard_size=1, overwrite=True)
    assert load(victim) == chats("precious")
    assert chatdata.open_dataset(path).to_chats() == chats("new", "newer")
    assert not [p for p in (path / "shards").iterdir() if p.name not in
                {s["path"].split("/")[1] for s in chatdata.open_dataset(path).manifest["shards"]}]  # "a" is gone


def test_an_overwrite_keeps_the_new_shards_when_the_old_manifest_names_the_shards_folder(tmp_path):
    import pyarrow.parquet as pq

    from chatdata.io.tables import import_tables

    path = corpus(tmp_path, ["a"])
    edit_manifest(path, lambda m: m["shards"].append({"path": "shards", "items": 0}))
    pq.write_table(pa.table({"messages": chats("new")}), tmp_path / "n.parquet")
    import_tables(tmp_path / "n.parquet", path, shard_size=1, overwrite=True)
    assert chatdata.open_dataset(path).to_chats() == chats("new")


def load(path):
    return chatdata.load_memmap(path).to_chats()


# -- counts -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, err", [(0, ValueError), (-1, ValueError), (2.5, TypeError), ("3", TypeError),
                                        (True, TypeError), (None, TypeError)])
def test_a_chunk_or_shard_size_that_is_not_a_count_is_refused_before_anything_is_written(tmp_path, value, err):
    import pyarrow.parquet as pq

    from chatdata.io.sharded import ShardedWriter
    from chatdata.io.tables import export_parquet, import_tables

    pq.write_table(pa.table({"messages": chats("a", "b", "c")}), tmp_path / "n.parquet")
    path = corpus(tmp_path, ["a", "b", "c"])
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(err, match=r"chunk_size must be an integer >= 1"):
        export_parquet(path, tmp_path / "e.parquet", chunk_size=value)  # -1 wrote an empty file, said 0
    with pytest.raises(err, match=r"chunk_size must be an integer >= 1"):
        import_tables(tmp_path / "n.parquet", tmp_path / "o", chunk_size=value)
    with pytest.raises(err, match=r"shard_size .*must be an integer >= 1"):
        ShardedWriter(tmp_path / "w", value)
    with pytest.raises(err, match=r"size must be an integer >= 1"):
        next(chatdata.open_dataset(path).iter_chunks(value))
    if value is not None:
        with pytest.raises(err, match=r"shard_size \(None for a plain dataset\) must be an integer >= 1"):
            import_tables(tmp_path / "n.parquet", tmp_path / "o", shard_size=value)
    assert sorted(tmp_path.rglob("*")) == before


# -- appending a sharded dataset ----------------------------------------------------------------------
def test_a_sharded_dataset_appends_its_shards_in_one_commit(tmp_path):
    src = corpus(tmp_path, ["a", "b"], [], ["c"])
    w = chatdata.open_dataset(tmp_path / "dst", mode="a")
    w.append(History.from_chats(chats("z")))
    w.append(chatdata.open_dataset(src))  # was: TypeError LazyShards.memmap() got an unexpected keyword argument
    assert w.to_chats() == chats("z", "a", "b", "c") and w.num_shards == 4
    w.append(w)  # itself: the shards it had when the call began
    assert chatdata.open_dataset(tmp_path / "dst").to_chats() == chats("z", "a", "b", "c") * 2


def test_a_sharded_dataset_of_the_other_kind_is_refused_and_leaves_nothing(tmp_path):
    import torch

    from chatdata.td import RaggedTensorDict, TensorDict

    toks = chatdata.open_dataset(tmp_path / "toks", mode="a")
    toks.append(RaggedTensorDict(TensorDict({"input_ids": torch.arange(3)}, [3]), torch.tensor([0, 1, 3])))
    path = corpus(tmp_path, ["a"])
    before = sorted(path.rglob("*"))
    with pytest.raises(ValueError, match="cannot add tokens shards to a dataset of History shards"):
        chatdata.open_dataset(path, mode="a").append(toks)
    assert sorted(path.rglob("*")) == before


def test_appending_a_batch_of_no_chats_adds_no_conversation(tmp_path):
    w = chatdata.open_dataset(tmp_path / "c", mode="a")
    w.append(batch([]))  # batch (0, -1)
    w.append(History.from_chats(chats("a")))
    assert len(w) == 1 and chatdata.open_dataset(tmp_path / "c").to_chats() == chats("a")
    w.append(History.from_chats(chats("b"))[0])  # one conversation (batch (n_messages,)) is still one
    assert chatdata.open_dataset(tmp_path / "c").to_chats() == chats("a", "b")


@pytest.mark.parametrize("max_length, err", [(-1, ValueError), (2.5, TypeError), ("4", TypeError)])
def test_tokenize_batch_refuses_a_max_length_that_is_not_a_length(max_length, err):
    from chatdata.ray import tokenize_batch

    table = History.from_chats([[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]]).to_arrow()
    with pytest.raises(err, match=r"max_length \(None for no limit\) must be an integer >= 0"):
        tokenize_batch(table, chat_template_name="chatml_format", max_length=max_length)


# -- TensorDict.from_arrow -------------------------------------------------------------------------------
def test_tensordict_from_arrow_refuses_a_null_struct_row_instead_of_reading_a_zero():
    from chatdata.td import TensorDict

    with pytest.raises(ValueError, match=r"column 's.a': .* with nulls"):
        TensorDict.from_arrow(pa.table({"s": pa.array([{"a": 1}, None])}))  # was: s.a == [1, 0]
    with pytest.raises(ValueError, match=r"column 'x': .* with nulls"):
        TensorDict.from_arrow(pa.table({"x": [1, None]}))
    sliced = pa.table({"s": pa.array([{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, {"a": 3, "b": "z"}])}).slice(1)
    td = TensorDict.from_arrow(sliced)
    assert td["s", "a"].tolist() == [2, 3] and td["s", "b"].tolist() == ["y", "z"]


def test_tensordict_from_arrow_refuses_two_columns_of_one_name_and_what_is_not_a_table():
    from chatdata.td import TensorDict

    with pytest.raises(ValueError, match="two columns are named 'x'"):  # was: the first one dropped
        TensorDict.from_arrow(pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["x", "x"]))
    struct = pa.StructArray.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    with pytest.raises(ValueError, match="two columns are named 's.a'"):
        TensorDict.from_arrow(pa.table({"s": struct}))
    with pytest.raises(TypeError, match="takes a pyarrow Table or RecordBatch, got list"):
        TensorDict.from_arrow([1, 2])


def test_as_json_text_keeps_rows_nulls_and_slices():
    from chatdata.io.arrow_check import encoding_clash
    from chatdata.io.arrow_json import as_json_text

    rows = [[{"role": "user", "content": "a"}], None, [{"role": "assistant", "content": None}, {"role": "user",
                                                                                                 "content": 'x"\n\\'}]]
    table = pa.concat_tables([pa.table({"messages": rows[:1]}), pa.table({"messages": rows[1:]})]).slice(0)
    out = as_json_text(table, "messages", {"content"})
    assert encoding_clash([out.schema, History.from_chats(MIXED).to_arrow().schema]) is None
    assert encoding_clash([table.schema, History.from_chats(MIXED).to_arrow().schema]) == \
        "field 'content': JSON text in table 1, plain in table 0"
    back = out.column(0).to_pylist()
    assert back[1] is None and back[2][0]["content"] is None
    assert json.loads(back[2][1]["content"]) == 'x"\n\\'
    sliced = as_json_text(pa.table({"messages": chats("a", 'x"\n\\')}).slice(1), "messages", {"content"})
    assert History.from_arrow(sliced).to_chats() == chats('x"\n\\')


@pytest.mark.parametrize("sharded", [True, False])
@pytest.mark.parametrize("first", ["plain", "mixed"])
def test_export_parquet_of_chunks_with_json_and_plain_content_reads_back_exactly(tmp_path, sharded, first):
    import pyarrow.parquet as pq

    from chatdata.io.tables import export_parquet

    plain = chats("hi", '"quoted"')
    parts = [plain, MIXED] if first == "plain" else [MIXED, plain]
    if sharded:
        w = chatdata.open_dataset(tmp_path / "ds", mode="a")
        for p in parts:
            w.append(History.from_chats(p))
    else:
        History.from_chats(parts[0] + parts[1]).memmap(tmp_path / "ds")
    # chunks of 1: the plain and the JSON chunks (was: '"ok"' for 'ok', or a refusal to read the file back)
    assert export_parquet(tmp_path / "ds", tmp_path / "e.parquet", chunk_size=1) == 3
    assert History.from_arrow(pq.read_table(tmp_path / "e.parquet")).to_chats() == parts[0] + parts[1]


def test_a_sharded_dataset_is_not_created_inside_a_saved_one(tmp_path):
    History.from_chats(chats("a")).memmap(tmp_path / "plain")
    for where in (tmp_path / "plain" / "sub", tmp_path / "plain" / "a" / "b"):
        with pytest.raises(ValueError, match=r"is inside the saved dataset .*plain; create the sharded dataset elsewhere"):
            chatdata.open_dataset(where, mode="a")
    assert sorted(p.name for p in (tmp_path / "plain").iterdir()) == sorted(
        p.name for p in (tmp_path / "plain").iterdir() if p.name != "sub")  # nothing made in it
    History.from_chats(chats("c")).memmap(tmp_path / "plain")  # its save still replaces it
    assert chatdata.load_memmap(tmp_path / "plain").to_chats() == chats("c")
    companion = chatdata.open_dataset(corpus(tmp_path, ["x"]) / "tokens", mode="a")  # beside a sharded one: fine
    assert len(companion) == 0


@pytest.mark.parametrize("column", [5, None, ""])
def test_to_arrow_column_must_be_a_name(column):
    # was pyarrow's bare 'expected bytes, int found'
    with pytest.raises(TypeError, match="column must be a non-empty str"):
        History.from_chats([[{"role": "user", "content": "hi"}]]).to_arrow(column=column)
