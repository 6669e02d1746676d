"""Sources that are not what they claim: a Parquet file whose text bytes are damaged (Parquet
readers hand string bytes over unchecked, so the import used to save text that is not UTF-8 and
the dataset failed `verify` and `to_chats` later), truncated files, files that are not chatdata's,
and a `save_to_disk` state file naming files outside its folder."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chatdata import History, load_memmap
from chatdata.cli import main
from chatdata.io import verify_dataset
from chatdata.io.arrow_history import find_bad_rows
from chatdata.io.tables import import_tables

CHATS = [[{"role": "user", "content": f"question {i:03d} " + "x" * 50}, {"role": "assistant", "content": "ok"}]
         for i in range(40)]


def _damaged_parquet(path, row: int):
    """CHATS as Parquet (plain encoding, no compression), with the text of ``row`` damaged on disk."""
    pq.write_table(pa.table({"messages": CHATS}), path, compression="none", use_dictionary=False)
    data = bytearray(path.read_bytes())
    marker = f"question {row:03d} ".encode()
    at = data.index(marker)
    assert data.count(marker) == 1
    data[at + 3:at + 5] = b"\xff\xfe"  # a byte no UTF-8 text holds
    path.write_bytes(bytes(data))


def test_damaged_text_in_a_parquet_file_names_its_row_and_is_never_saved(tmp_path, capsys):
    src = tmp_path / "damaged.parquet"
    _damaged_parquet(src, row=23)
    table = pq.read_table(src)  # pyarrow reads it without a word
    with pytest.raises(ValueError, match=r"^row 23: text that is not UTF-8: the file it came from is damaged"):
        History.from_arrow(table)
    assert [r for r, _ in find_bad_rows(table)] == [23]
    # the import skips and reports the row, like any bad row; what it writes verifies and reads
    assert main(["import", str(src), str(tmp_path / "ds"), "-q"]) == 0
    assert "row 23: text that is not UTF-8" in capsys.readouterr().err
    assert verify_dataset(tmp_path / "ds").ok
    assert load_memmap(tmp_path / "ds").to_chats() == CHATS[:23] + CHATS[24:]
    assert main(["import", str(src), str(tmp_path / "strict"), "--strict", "-q"]) == 1
    assert not (tmp_path / "strict").exists()
    stats = import_tables(src, tmp_path / "sharded", shard_size=7, overwrite=False)
    assert stats.bad == 1 and verify_dataset(tmp_path / "sharded").ok


def test_text_arrays_that_are_not_utf8_are_refused_by_row(tmp_path):
    # a string array over bytes that are not UTF-8 (what a damaged file or a careless writer gives)
    data = "okhi".encode() + b"\xc3" + "yo".encode()
    offsets = pa.py_buffer(pa.array([0, 2, 5, 7], pa.int32()).buffers()[1])
    content = pa.Array.from_buffers(pa.string(), 3, [None, offsets, pa.py_buffer(data)])
    role = pa.array(["user"] * 3)
    msgs = pa.StructArray.from_arrays([role, content], names=["role", "content"])
    arr = pa.ListArray.from_arrays(pa.array([0, 1, 2, 3], pa.int32()), msgs)
    with pytest.raises(ValueError, match=r"^row 1: text that is not UTF-8"):
        History.from_arrow(pa.table({"messages": arr}))
    assert History.from_arrow(pa.table({"messages": arr.take([0, 2])})).to_chats() == [
        [{"role": "user", "content": "ok"}], [{"role": "user", "content": "yo"}]]


@pytest.mark.parametrize("cut", [0.5, 0.99])
def test_a_truncated_parquet_file_is_named_and_nothing_is_written(tmp_path, cut):
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"messages": CHATS}), good)
    data = good.read_bytes()
    src = tmp_path / "cut.parquet"
    src.write_bytes(data[:int(len(data) * cut)])
    with pytest.raises(ValueError, match=r"cut.parquet: cannot read it as Parquet"):
        import_tables(src, tmp_path / "out", overwrite=False)
    with pytest.raises(ValueError, match=r"cut.parquet: cannot read it as Parquet"):
        import_tables(src, tmp_path / "sharded", shard_size=5, overwrite=False)
    assert not (tmp_path / "out").exists() and not (tmp_path / "sharded").exists()


@pytest.mark.parametrize("table, match", [
    (pa.table({"prompt": ["a"], "completion": ["b"]}), r"no column 'messages' \(columns: \['prompt', 'completion'\]\)"),
    (pa.table({"messages": [[{"content": "no role"}]]}), r"role"),
    (pa.table({"messages": [[{"from": "human", "value": "hi"}]]}), r"role|ShareGPT"),
])
def test_a_parquet_file_that_is_not_chatdatas_says_what_is_missing(tmp_path, table, match):
    src = tmp_path / "other.parquet"
    pq.write_table(table, src)
    with pytest.raises((TypeError, ValueError), match=match):
        import_tables(src, tmp_path / "out", overwrite=False)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["../outside.arrow", "/etc/passwd", "sub/data.arrow", ".."])
def test_a_save_to_disk_state_file_naming_files_outside_its_folder_is_refused(tmp_path, name):
    folder = tmp_path / "saved"
    (folder / "sub").mkdir(parents=True)
    table = History.from_chats(CHATS[:2]).to_arrow()
    for f in (tmp_path / "outside.arrow", folder / "sub" / "data.arrow"):
        with pa.OSFile(str(f), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
            w.write_table(table)
    (folder / "state.json").write_text(json.dumps({"_data_files": [{"filename": name}]}))
    with pytest.raises(ValueError, match=r"state.json: data file .* (is not a file of|is missing)"):
        import_tables(folder, tmp_path / "out", overwrite=False)
    assert not (tmp_path / "out").exists()


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _texts_with_bad_bytes(texts, bad):
    """A string array of ``texts`` whose values at ``bad`` get a byte no UTF-8 text holds."""
    raw = [t.encode() + (b"\xff" if i in bad else b"") for i, t in enumerate(texts)]
    offsets = [0]
    for r in raw:
        offsets.append(offsets[-1] + len(r))
    return pa.Array.from_buffers(pa.large_string(), len(raw), [None, pa.py_buffer(pa.array(offsets, pa.int64())
                                                                                  .buffers()[1]),
                                                               pa.py_buffer(b"".join(raw))])


@settings(max_examples=40)
@given(lengths=st.lists(st.integers(0, 3), min_size=1, max_size=12), data=st.data())
def test_every_row_holding_text_that_is_not_utf8_is_named_and_no_other(lengths, data):
    n_msgs = sum(lengths)
    texts = [data.draw(st.sampled_from(["", "a", "é", "🙂x", "\x00", "中文"])) for _ in range(n_msgs)]
    bad_msgs = set(data.draw(st.lists(st.integers(0, max(n_msgs - 1, 0)), max_size=3))) if n_msgs else set()
    content = _texts_with_bad_bytes(texts, bad_msgs)
    msgs = pa.StructArray.from_arrays([pa.array(["user"] * n_msgs, pa.large_string()), content], names=["role", "content"])
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    arr = pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), msgs)
    row_of = [r for r, n in enumerate(lengths) for _ in range(n)]
    expected = sorted({row_of[m] for m in bad_msgs})
    got = find_bad_rows(pa.table({"messages": arr}))
    assert [r for r, _ in got] == expected and all("not UTF-8" in why for _, why in got)
    if not expected:
        assert History.from_arrow(pa.table({"messages": arr})).to_chats() == \
            [[{"role": "user", "content": texts[m]} for m in range(offsets[r], offsets[r + 1])]
             for r in range(len(lengths))]


def test_folders_that_are_not_datasets_say_what_they_are(tmp_path):
    from chatdata import FormatError, open_dataset

    pq.write_table(pa.table({"messages": CHATS[:1]}), tmp_path / "a.parquet")
    (tmp_path / "tables").mkdir()
    pq.write_table(pa.table({"messages": CHATS[:1]}), tmp_path / "tables" / "part-0.parquet")
    for src in (tmp_path / "a.parquet", tmp_path / "tables"):
        with pytest.raises(FormatError, match=r"holds Parquet / Arrow tables: `chatdata import .* OUT`"):
            open_dataset(src)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    with pytest.raises(FormatError, match=r"neither a chatdata dataset \(no meta.json\) nor a sharded one"
                                          r" \(no manifest.json\)$"):
        open_dataset(tmp_path / "notes")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "meta.json").write_text('{"model": "x"}')  # another program's meta.json
    with pytest.raises(FormatError, match=r"neither a chatdata folder \(no 'format'\) nor a tensordict one"):
        open_dataset(tmp_path / "other")
    with pytest.raises(ValueError, match="or another program's folder"):
        open_dataset(tmp_path / "other", mode="a")
    assert sorted(p.name for p in (tmp_path / "other").iterdir()) == ["meta.json"]  # nothing written


@pytest.mark.parametrize("how", ["link as shard", "link on the way"])
def test_a_manifest_entry_leading_out_of_the_folder_through_a_symlink_is_refused(tmp_path, how):
    from chatdata import FormatError, open_dataset

    corpus = tmp_path / "corpus"
    open_dataset(corpus, mode="a").append(History.from_chats(CHATS[:1]))
    History.from_chats([[{"role": "user", "content": "private"}]]).memmap(tmp_path / "private")
    if how == "link as shard":
        (corpus / "shards" / "shard-link").symlink_to(tmp_path / "private")
        entry = "shards/shard-link"
    else:
        (corpus / "shards" / "up").symlink_to(tmp_path)
        entry = "shards/up/private"
    m = json.loads((corpus / "manifest.json").read_text())
    m["shards"].append({"path": entry, "items": 1})
    m["items"] += 1
    (corpus / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(FormatError, match=rf"manifest.json: shard 1 \({entry}\) leads out of the dataset folder"):
        open_dataset(corpus)
    report = verify_dataset(corpus)
    assert not report.ok and "leads out of the dataset folder" in report.problems[0].message
    # a dataset whose own folder is reached through a link is inside itself
    (tmp_path / "alias").symlink_to(corpus)
    m["shards"].pop()
    m["items"] -= 1
    (corpus / "manifest.json").write_text(json.dumps(m))
    assert open_dataset(tmp_path / "alias").to_chats() == CHATS[:1] and verify_dataset(tmp_path / "alias").ok


def _chats_table_with_bad_text(n_rows: int, bad_row: int, field: str):
    """``n_rows`` conversations of two messages, the ``field`` text of row ``bad_row``'s first
    message holding a byte no UTF-8 text holds (one table, one chunk: slices of it share its children)."""
    texts = [f"row {r} msg {m}" for r in range(n_rows) for m in range(2)]
    bad_text = _texts_with_bad_bytes(texts, {2 * bad_row})
    good_text = pa.array(texts, pa.large_string())
    role = pa.array(["user", "assistant"] * n_rows, pa.large_string())
    fields = {"role": role, "content": bad_text if field == "content" else good_text}
    if field != "content":
        fields[field] = bad_text
    msgs = pa.StructArray.from_arrays(list(fields.values()), names=list(fields))
    arr = pa.LargeListArray.from_arrays(pa.array(range(0, 2 * n_rows + 1, 2), pa.int64()), msgs)
    return pa.table({"messages": arr})


@pytest.mark.parametrize("field", ["content", "name"])
def test_a_slice_is_checked_on_its_own_rows_and_names_them_by_the_slice(field):
    from chatdata.io.arrow_valid import compact_view

    t = _chats_table_with_bad_text(1000, bad_row=700, field=field)
    # a bad row outside the slice is not the slice's: it reads
    assert History.from_arrow(t.slice(100, 50)).to_chats()[0][0]["content"] == "row 100 msg 0"
    # inside, it is named by its row in the slice
    with pytest.raises(ValueError, match=r"^row 5: text that is not UTF-8"):
        History.from_arrow(t.slice(695, 50))
    assert [r for r, _ in find_bad_rows(t.slice(695, 50))] == [5]
    # what Arrow validates for a slice holds the slice's messages, not the table's 2000
    view = compact_view(t.column("messages").chunk(0).slice(695, 50))
    assert len(view.values) == 100 and len(view.values.field("content")) == 100
    assert view.slice(0, 5).to_pylist() == t.column("messages").chunk(0).slice(695, 5).to_pylist()


def test_read_good_rows_gives_the_good_rows_their_numbers_and_the_bad_ones_their_reasons():
    from chatdata.io.arrow_read import read_good_rows

    t = _chats_table_with_bad_text(6, bad_row=2, field="content")
    h, rows, bad = read_good_rows(t)
    assert rows.tolist() == [0, 1, 3, 4, 5] and [r for r, _ in bad] == [2] and "not UTF-8" in bad[0][1]
    assert h.to_chats() == History.from_arrow(t.take([0, 1, 3, 4, 5])).to_chats()


def test_an_arrow_ipc_file_with_text_that_is_not_utf8_is_refused_whole(tmp_path):
    """docs/scale.md: IPC bytes are mapped as they are on disk and each batch validated whole before
    a row is read, so a bad byte refuses the file (no row named, nothing written)."""
    src = tmp_path / "bad.arrow"
    t = _chats_table_with_bad_text(20, bad_row=7, field="content")
    with pa.OSFile(str(src), "wb") as sink, pa.ipc.new_file(sink, t.schema) as w:
        w.write_table(t)
    with pytest.raises(ValueError, match=rf"{src}: corrupt Arrow IPC data \(.*UTF8"):
        import_tables(src, tmp_path / "ds")
    assert not (tmp_path / "ds").exists()
