"""`chatdata import` / `export` with Parquet, Arrow IPC and save_to_disk folders; sharded output."""
import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import chatdata
from chatdata import History, load_memmap, open_dataset
from chatdata.data import load_sample_chats
from chatdata.io.tables import export_parquet, import_tables
from io_helpers import batch

ROOT = Path(__file__).resolve().parents[2]
CHATS = load_sample_chats()  # tool calls with dict arguments, unicode


def run_cli(*args):
    """The command as a user runs it (a new process)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "chatdata", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


class _Result:
    def __init__(self, code, out, err):
        self.returncode, self.stdout, self.stderr = code, out, err


@pytest.fixture
def cli(capsys):
    """The same command line, parsed and run in this process (saves a Python start per call)."""
    from chatdata.cli import main

    def run(*args):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return _Result(code, out, err)

    return run


def _parquet(path, chats, **extra_columns):
    table = History.from_chats(chats).to_arrow()
    for k, v in extra_columns.items():
        table = table.append_column(k, pa.array(v))
    pq.write_table(table, path, row_group_size=64)
    return path


def test_cli_parquet_import_export_roundtrip(tmp_path, cli):
    src = _parquet(tmp_path / "chats.parquet", CHATS)
    res = run_cli("import", src, tmp_path / "ds", "--chunk-size", "50")  # once as a real process
    assert res.returncode == 0, res.stderr
    assert "imported 300 conversations" in res.stdout
    assert load_memmap(tmp_path / "ds").to_chats() == CHATS
    res = cli("export", tmp_path / "ds", tmp_path / "out.parquet")
    assert res.returncode == 0, res.stderr
    assert History.from_arrow(pq.read_table(tmp_path / "out.parquet")).to_chats() == CHATS
    # --format parquet whatever the extension; a sharded import of the exported file
    res = cli("export", tmp_path / "ds", tmp_path / "out.bin", "--format", "parquet")
    assert res.returncode == 0, res.stderr
    assert pq.read_table(tmp_path / "out.bin").num_rows == 300
    res = cli("import", tmp_path / "out.parquet", tmp_path / "sharded", "--shard-size", "128", "-q")
    assert res.returncode == 0, res.stderr
    ds = open_dataset(tmp_path / "sharded")
    assert ds.num_shards == 3 and [ds.shard(k).batch_size[0] for k in range(3)] == [128, 128, 44]
    assert ds.to_chats() == CHATS
    res = cli("import", tmp_path / "out.parquet", tmp_path / "sharded", "--shard-size", "128", "-q")
    assert res.returncode == 1 and "--overwrite" in res.stderr


def test_folders_ipc_and_save_to_disk(tmp_path):
    # a Hub-style folder of Parquet files, with an extra column and a custom column name
    hub = tmp_path / "hub" / "data"
    hub.mkdir(parents=True)
    for k in range(3):
        t = History.from_chats(CHATS[k * 100:(k + 1) * 100]).to_arrow(column="conversation")
        pq.write_table(t.append_column("id", pa.array(range(100))), hub / f"train-{k:05d}-of-00003.parquet")
    stats = import_tables(tmp_path / "hub", tmp_path / "a", column="conversation", chunk_size=64)
    assert stats.conversations == 300 and stats.bad == 0
    assert load_memmap(tmp_path / "a").to_chats() == CHATS
    # HF datasets save_to_disk (Arrow IPC stream files + state.json), built by HF's own from_list
    hf = datasets.Dataset.from_list([{"messages": c} for c in CHATS])
    hf.save_to_disk(str(tmp_path / "saved"), max_shard_size="20KB")
    assert len(list((tmp_path / "saved").glob("*.arrow"))) > 1
    stats = import_tables(tmp_path / "saved", tmp_path / "b", chunk_size=64)
    assert stats.conversations == 300
    assert load_memmap(tmp_path / "b").to_chats() == CHATS
    # an Arrow IPC file
    with pa.OSFile(str(tmp_path / "x.arrow"), "wb") as f, pa.ipc.new_file(f, History.from_chats(CHATS).to_arrow().schema) as w:
        w.write_table(History.from_chats(CHATS).to_arrow())
    import_tables(tmp_path / "x.arrow", tmp_path / "c")
    assert load_memmap(tmp_path / "c").to_chats() == CHATS
    # a DatasetDict folder: the user picks the split
    datasets.DatasetDict({"train": hf, "test": hf}).save_to_disk(str(tmp_path / "dd"))
    with pytest.raises(ValueError, match=r"several splits \(test, train\); give one split folder"):
        import_tables(tmp_path / "dd", tmp_path / "d")


def test_bad_rows_are_reported_and_skipped(tmp_path, cli):
    rows = [[{"role": "user", "content": f"hi {i}"}] for i in range(10)]
    rows[3] = None
    rows[6] = [{"role": None, "content": "x"}]
    rows[8] = [{"role": "user", "content": "y", "is_complete": 5}]  # not a bool
    typ = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string()), ("is_complete", pa.int64())]))
    pq.write_table(pa.table({"messages": pa.array(rows, typ)}), tmp_path / "bad.parquet")
    seen = []
    stats = import_tables(tmp_path / "bad.parquet", tmp_path / "ds", chunk_size=4, report=seen.append)
    assert stats.conversations == 7 and stats.bad == 3
    assert seen[0] == "bad.parquet:row 3: messages is null"
    assert seen[1] == "bad.parquet:row 6: message 0 has no role"
    assert seen[2].startswith("bad.parquet:row 8: message 0: 'is_complete' must be a bool")
    assert [c[0]["content"] for c in load_memmap(tmp_path / "ds").to_chats()] == \
        [f"hi {i}" for i in (0, 1, 2, 4, 5, 7, 9)]
    res = cli("import", tmp_path / "bad.parquet", tmp_path / "strict", "--strict")
    assert res.returncode == 1 and "bad.parquet:row 3: messages is null (--strict: nothing written)" in res.stderr
    assert not (tmp_path / "strict").exists()


def test_bad_sources_name_the_file(tmp_path, cli):
    pq.write_table(pa.table({"text": ["a"]}), tmp_path / "nocol.parquet")
    res = cli("import", tmp_path / "nocol.parquet", tmp_path / "o1")
    assert res.returncode == 1
    assert "nocol.parquet: no column 'messages' (columns: ['text']); name the messages column with --column" in res.stderr
    pq.write_table(pa.table({"messages": ["a"]}), tmp_path / "wrong.parquet")
    with pytest.raises(ValueError, match=r"wrong.parquet: column 'messages' has type string; expected list<struct"):
        import_tables(tmp_path / "wrong.parquet", tmp_path / "o2")
    (tmp_path / "garbage.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match=r"garbage.parquet: cannot read it as Parquet"):
        import_tables(tmp_path / "garbage.parquet", tmp_path / "o3")
    assert not any((tmp_path / o).exists() for o in ("o1", "o2", "o3"))
    pq.write_table(batch([]).to_arrow(), tmp_path / "empty.parquet")
    res = cli("import", tmp_path / "empty.parquet", tmp_path / "o4")
    assert res.returncode == 1 and "holds no conversation; pass --allow-empty" in res.stderr
    assert cli("import", tmp_path / "empty.parquet", tmp_path / "o4", "--allow-empty", "-q").returncode == 0
    assert len(load_memmap(tmp_path / "o4")) == 0
    with pytest.raises(ValueError, match="is a folder; give a .parquet file name"):
        export_parquet(History.from_chats(CHATS[:2]), tmp_path)


def test_export_parquet_with_changing_fields_and_sharded_source(tmp_path):
    # the first chunks have no tool calls, later ones do: one schema for the whole file
    plain = [[{"role": "user", "content": "a"}]] * 5
    chats = plain + CHATS[:40]
    ds = open_dataset(tmp_path / "c", mode="a")
    ds.append(History.from_chats(plain))
    ds.append(History.from_chats(CHATS[:40]))
    n = export_parquet(tmp_path / "c", tmp_path / "o.parquet", chunk_size=4)
    assert n == 45
    assert History.from_arrow(pq.read_table(tmp_path / "o.parquet")).to_chats() == chats
    assert datasets.Dataset.from_parquet(str(tmp_path / "o.parquet")).num_rows == 45


def test_jsonl_import_with_shard_size(tmp_path, cli):
    src = tmp_path / "chats.jsonl"
    src.write_text("".join(json.dumps({"messages": c}, ensure_ascii=False) + "\n" for c in CHATS[:25])
                   + "not json\n", encoding="utf-8")
    res = cli("import", src, tmp_path / "sh", "--shard-size", "10", "--chunk-size", "4")
    assert res.returncode == 0, res.stderr
    assert "chats.jsonl:line 26" in res.stderr  # the bad line is reported, the rest imported
    ds = open_dataset(tmp_path / "sh")
    assert [ds.shard(k).batch_size[0] for k in range(ds.num_shards)] == [10, 10, 5]
    assert ds.to_chats() == CHATS[:25]
    res = cli("import", src, tmp_path / "sh", "--shard-size", "10", "--overwrite", "-q")
    assert res.returncode == 0, res.stderr
    assert open_dataset(tmp_path / "sh").num_shards == 3
    assert len(list((tmp_path / "sh" / "shards").iterdir())) == 3  # the replaced shards are gone


def test_a_folder_of_saved_histories_is_not_a_table_source(tmp_path):
    """A History's typed copies are Arrow files (*.typed.arrow) inside its dataset folder; a
    folder holding saved datasets is still no Parquet/Arrow source for `chatdata import`."""
    from chatdata.cli import main
    from chatdata.io.tables import is_table_source

    chats = [[{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}]]
    chatdata.History.from_chats(chats).memmap(tmp_path / "runs" / "h")
    assert list((tmp_path / "runs").rglob("*.typed.arrow"))
    assert not is_table_source(tmp_path / "runs") and not is_table_source(tmp_path)
    assert main(["import", str(tmp_path / "runs"), str(tmp_path / "out")]) == 1


@pytest.mark.parametrize("column", ["role", "content"])
def test_export_refuses_strings_that_are_not_utf8_and_leaves_no_file(tmp_path, column):
    """A loaded History hands its role/content bytes to Arrow unread: one flipped byte went
    into the Parquet file (readers elsewhere fail on it later)."""
    History.from_chats([[{"role": "user", "content": "héllo"}], [{"role": "user", "content": "b"}]]).memmap(tmp_path / "h")
    data_file = tmp_path / "h" / "_storage" / "_values" / f"{column}.bytes.memmap"
    raw = bytearray(data_file.read_bytes())
    raw[1] = 0xF3  # "user" -> b"u\xf3er", "héllo" -> b"h\xf3\xa9llo"
    data_file.write_bytes(bytes(raw))
    with pytest.raises(chatdata.FormatError, match=rf"the {column} of conversations 0..1 is corrupt .*UTF8.*chatdata verify"):
        export_parquet(tmp_path / "h", tmp_path / "out.parquet")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h"]


def test_import_of_a_corrupt_arrow_file_is_an_error_naming_it_not_a_crash(tmp_path):
    """An Arrow IPC input is memory-mapped as it is: a list offset past the data made the import
    read outside the file (a bus error killed the process)."""
    import numpy as np

    msgs = [{"role": "user", "content": "hi"}]
    table = pa.table({"messages": [msgs, None, msgs, msgs]})
    src = tmp_path / "bad.arrow"
    with pa.ipc.new_file(str(src), table.schema) as w:
        w.write_table(table)
    raw = bytearray(src.read_bytes())
    at = raw.find(np.array([0, 1, 1, 2, 3], np.int32).tobytes())
    assert at > 0
    raw[at + 16:at + 20] = np.array([1 << 28], np.int32).tobytes()  # the last list offset
    src.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=rf"{src}: corrupt Arrow IPC data \(.*out of bounds"):
        import_tables(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_import_applies_the_content_rule_as_from_chats_does(tmp_path):
    """A user message with null content came in from Parquet (the column's other rows had
    strings), though from_chats refuses it; exported to JSON Lines and imported again, the row
    was then dropped: the round trip lost it."""
    msgs = [[{"role": "user", "content": "a"}], [{"role": "user", "content": None}], [{"role": "tool", "content": "ok"}]]
    pq.write_table(pa.table({"messages": msgs}), tmp_path / "in.parquet")
    stats = import_tables(tmp_path / "in.parquet", tmp_path / "ds")
    assert stats.bad == 1 and "row 1: message 0: a 'user' message needs 'content'" in stats.first_bad
    assert load_memmap(tmp_path / "ds").to_chats() == [msgs[0], msgs[2]]
    with pytest.raises(ValueError, match="row 1: message 0: a 'user' message needs 'content'"):
        History.from_arrow(pa.table({"messages": msgs}))


def test_a_folder_import_takes_every_table_and_refuses_to_skip_json_lines(tmp_path):
    """A Parquet file beside a Hub repository's meta.json was skipped, and JSON Lines files
    beside the tables were dropped without a word."""
    a, b = [[{"role": "user", "content": "a"}]], [[{"role": "user", "content": "b"}]]
    repo = tmp_path / "repo"
    (repo / "data").mkdir(parents=True)
    pq.write_table(pa.table({"messages": a}), repo / "a.parquet")
    pq.write_table(pa.table({"messages": b}), repo / "data" / "train.parquet")
    (repo / "data" / "meta.json").write_text('{"license": "mit"}')
    import_tables(repo, tmp_path / "ds")
    assert load_memmap(tmp_path / "ds").to_chats() == a + b
    (repo / "extra.jsonl").write_text(json.dumps({"messages": b[0]}) + "\n")
    with pytest.raises(ValueError, match=r"holds JSON Lines files \(extra.jsonl\) beside its 2 table file\(s\)"):
        import_tables(repo, tmp_path / "ds2")
    History.from_chats(a).memmap(tmp_path / "saved")  # a saved History's typed copies are no tables
    assert not chatdata.io.tables.is_table_source(tmp_path / "saved")
