"""Checksums at save, verify(), load_memmap(verify=True), durable saves, older folders."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings, strategies as st

from chatdata import FormatError, History, TensorDict, load_memmap
from chatdata.td.storage.checksum import checksum_file
from chatdata.td.storage.stream import StreamWriter
from chatdata.td.storage.utf8_check import _Utf8Check
from chatdata.td.storage.verify import verify

OLD = Path(__file__).resolve().parents[1] / "data" / "chatdata_v1_no_checksums"

CHATS = [
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2? café 日本 😀"},
     {"role": "assistant", "content": "4"}],
    [{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "general kenobi"}],
] * 20


def _flip_same_size(path: Path, old: bytes, new: bytes) -> None:
    """Replace the first ``old`` by ``new`` (same length) in the file, in place."""
    data = path.read_bytes()
    assert len(old) == len(new) and old in data
    path.write_bytes(data.replace(old, new, 1))


def _metas(root: Path) -> dict:
    return {str(p.relative_to(root)): json.loads(p.read_text()) for p in sorted(root.rglob("meta.json"))}


def test_every_data_file_has_its_checksum_in_meta(tmp_path):
    path = tmp_path / "ds"
    History.from_chats(CHATS).memmap(path)
    files = [p for p in path.rglob("*") if p.is_file() and p.name != "meta.json"]
    assert files
    for f in files:
        sums = json.loads((f.parent / "meta.json").read_text())["checksums"]
        assert sums[f.name] == checksum_file(f)


def test_verify_finds_a_same_size_valid_utf8_change_and_names_the_file(tmp_path):
    path = tmp_path / "ds"
    History.from_chats(CHATS).memmap(path)
    assert verify(path).ok
    content = path / "_storage" / "_values" / "content.bytes.memmap"
    _flip_same_size(content, b"kenobi", b"KENOBI")
    # loading does not notice (same size, valid UTF-8, offsets untouched) ...
    assert History.load_memmap(path)[1]["content"][1] == "general KENOBI"
    # ... verify does, and names that file only
    report = verify(path)
    assert not report.ok
    assert report.bad_files() == [str(content)]
    assert "checksum mismatch" in report.problems[0].message
    with pytest.raises(FormatError, match="content.bytes.memmap"):
        load_memmap(path, verify=True)
    with pytest.raises(FormatError, match="content.bytes.memmap"):
        History.load_memmap(path, verify=True)



def test_saving_a_damaged_loaded_column_again_stops_instead_of_blessing_it(tmp_path):
    """A loaded string column is never written in place, so saving it whole must write the
    bytes its folder recorded: a copy used to record the damage under a new, matching checksum
    (verify of the copy then passed)."""
    path = tmp_path / "ds"
    History.from_chats(CHATS).memmap(path)
    content = path / "_storage" / "_values" / "content.bytes.memmap"
    _flip_same_size(content, b"kenobi", b"KENOBI")
    h = History.load_memmap(path)
    assert h.to_chats()[1][1]["content"] == "general KENOBI"  # reading first must not hide the column
    for target in (tmp_path / "copy", path):  # a copy, and a save over the folder itself
        with pytest.raises(FormatError, match=rf"{content}: its bytes do not match the checksum its folder recorded"):
            h.memmap(target, copy_existing=True, existsok=True)
    assert not (tmp_path / "copy").exists() and not verify(path).ok  # the old folder is as it was
    h[:1].memmap(tmp_path / "part", copy_existing=True)  # a part is new bytes: checked by its own new checksums
    assert verify(tmp_path / "part").ok

def test_verify_finds_a_shifted_monotonic_offset(tmp_path):
    path = tmp_path / "ds"
    History.from_chats(CHATS).memmap(path)
    off = path / "_storage" / "_offsets.memmap"
    t = torch.from_file(str(off), size=off.stat().st_size // 8, dtype=torch.int64).clone()
    t[1] += 1  # still non-decreasing: loads without a word
    off.write_bytes(t.numpy().tobytes())
    load_memmap(path)
    report = verify(path)
    assert report.bad_files() == [str(off)]


@pytest.mark.parametrize("checksums", [True, False])
def test_verify_names_invalid_utf8_and_a_value_split_inside_a_character(tmp_path, checksums):
    path = tmp_path / "ds"
    History.from_chats(CHATS).memmap(path)
    content = path / "_storage" / "_values" / "content.bytes.memmap"
    _flip_same_size(content, "é".encode(), b"\xff\xfe")
    report = verify(path, checksums=checksums)
    assert str(content) in report.bad_files()
    assert any("invalid UTF-8" in p.message for p in report.problems)

    History.from_chats(CHATS).memmap(path)  # whole again
    offsets = path / "_storage" / "_values" / "content.offsets.memmap"
    t = torch.from_file(str(offsets), size=offsets.stat().st_size // 8, dtype=torch.int64).clone()
    raw = content.read_bytes()
    i = 2  # "2+2? café 日本 😀": move its end into the middle of the emoji
    t[i] -= 1
    assert raw[int(t[i])] & 0xC0 == 0x80
    offsets.write_bytes(t.numpy().tobytes())
    report = verify(path, checksums=checksums)
    assert str(offsets) in report.bad_files()
    assert any("inside a UTF-8 character" in p.message for p in report.problems)


def test_verify_names_missing_resized_and_symlinked_files(tmp_path):
    path = tmp_path / "ds"
    TensorDict({"a": torch.arange(4), "b": torch.zeros(4, 2), "s": ["w", "x", "y", "z"]}, [4]).memmap(path)
    (path / "a.memmap").unlink()
    with open(path / "b.memmap", "ab") as f:
        f.write(b"\0")
    elsewhere = tmp_path / "elsewhere"
    shutil.copy(path / "s.bytes.memmap", elsewhere)
    (path / "s.bytes.memmap").unlink()
    (path / "s.bytes.memmap").symlink_to(elsewhere)
    report = verify(path)
    assert sorted(report.bad_files()) == sorted(str(path / n) for n in ("a.memmap", "b.memmap", "s.bytes.memmap"))
    text = " ".join(str(p) for p in report.problems)
    assert "missing" in text and "expected 32" in text and "symlink" in text


def test_verify_of_a_missing_folder_or_a_file(tmp_path):
    assert verify(tmp_path / "nope").bad_files() == [str(tmp_path / "nope")]
    (tmp_path / "f").write_text("x")
    assert not verify(tmp_path / "f").ok
    (tmp_path / "d").mkdir()
    assert verify(tmp_path / "d").bad_files() == [str(tmp_path / "d" / "meta.json")]


def test_stream_writer_writes_the_same_checksums_as_memmap(tmp_path):
    h = History.from_chats(CHATS)
    h.memmap(tmp_path / "a")
    from chatdata.history.columns import FIELDS, FLAGS_KEY

    with StreamWriter(tmp_path / "b", tensorclass=History, columns=(*FIELDS, FLAGS_KEY), durable=True) as w:
        for lo in range(0, len(CHATS), 7):
            w.append(History.from_chats(CHATS[lo:lo + 7]))
    assert _metas(tmp_path / "a") == _metas(tmp_path / "b")
    assert verify(tmp_path / "b").ok


def test_stream_writer_checksums_survive_a_switch_to_json(tmp_path):
    from chatdata.td import RaggedTensorDict

    with StreamWriter(tmp_path / "ds") as w:
        w.append(RaggedTensorDict(TensorDict({"v": ["a", "b"]}, [2]), torch.tensor([0, 2])))
        w.append(RaggedTensorDict(TensorDict({"v": [{"k": 1}, 3]}, [2]), torch.tensor([0, 1, 2])))
    report = verify(tmp_path / "ds")
    assert report.ok, report.problems
    assert report.checksummed == report.files == 3
    assert load_memmap(tmp_path / "ds").values["v"].tolist() == ["a", "b", {"k": 1}, 3]


def test_durable_saves_round_trip(tmp_path):
    h = History.from_chats(CHATS)
    for _ in range(2):  # a new folder, then over an existing one
        out = h.memmap(tmp_path / "ds", durable=True)
        assert out.tolist() == h.tolist()
        assert History.load_memmap(tmp_path / "ds", verify=True).tolist() == h.tolist()
    td = TensorDict({"x": torch.arange(5), "n": {"y": torch.ones(5, 2)}}, [5])
    td.save(tmp_path / "td", durable=True)
    td.memmap_(tmp_path / "td2", durable=True)
    for p in ("td", "td2"):
        assert (load_memmap(tmp_path / p, verify=True) == td).all()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["ds", "td", "td2"]


def test_folders_of_the_previous_version_load_and_verify(tmp_path):
    shutil.copytree(OLD, tmp_path / "old")  # loaded tensors map the files writable: work on a copy
    for name in ("history", "tensordict"):
        src = tmp_path / "old" / name
        assert all("checksums" not in m for m in _metas(src).values())
        report = verify(src)
        assert report.ok, report.problems
        assert report.checksummed == 0 and len(report.unchecked) == report.files > 0
        load_memmap(src, verify=True)
    h = History.load_memmap(tmp_path / "old" / "history", verify=True)
    assert h[0]["content"][1] == "2+2? é日本😀"
    td = load_memmap(tmp_path / "old" / "tensordict")
    assert td["s"].tolist() == ["a", "bb", "ccc"] and td["nested", "y"].tolist() == [1, 2, 3]
    # saving it again adds the checksums
    td.memmap(tmp_path / "again", copy_existing=True)
    report = verify(tmp_path / "again")
    assert report.ok and report.checksummed == report.files and not report.unchecked


def test_memmap_like_records_no_checksum_for_files_filled_later(tmp_path):
    td = TensorDict({"x": torch.zeros(4)}, [4])
    like = td.memmap_like(tmp_path / "ds")
    like["x"][:] = 3  # fills the file in place
    report = verify(tmp_path / "ds")
    assert report.ok and report.unchecked == [str(tmp_path / "ds" / "x.memmap")]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="ab é日😀\ud800", max_size=12), max_size=8), st.integers(1, 9),
       st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.integers(0, 255))))
def test_utf8_check_agrees_with_python(values, piece, damage):
    data = bytearray("".join(values).encode("utf-8", "surrogatepass"))
    if damage is not None and data:
        data[damage[0] % len(data)] = damage[1]
    data = bytes(data)
    try:
        data.decode("utf-8", "surrogatepass")
        expected = True
    except UnicodeDecodeError:
        expected = False
    check = _Utf8Check()
    for a in range(0, len(data), piece):
        check.feed(memoryview(data)[a:a + piece], a)
    check.finish()
    assert (check.bad is None) == expected


@pytest.mark.parametrize("density", [0.0001, 0.01, 0.5])
def test_utf8_check_on_large_pieces(density):
    """Pieces of many 4 KB blocks: sparse and dense non-ASCII, valid and damaged."""
    import random

    rng = random.Random(int(density * 1e4))
    chars = [rng.choice("é日😀\ud800") if rng.random() < density else "a" for _ in range(300_000)]
    data = bytearray("".join(chars).encode("utf-8", "surrogatepass"))
    for damage in (None, 0x80, 0xC3, 0x41):
        buf = bytearray(data)
        if damage is not None:
            buf[rng.randrange(len(buf))] = damage
        buf = bytes(buf)
        try:
            buf.decode("utf-8", "surrogatepass")
            expected = None
        except UnicodeDecodeError as err:
            expected = err.start
        for piece in (4096 * 3 + 17, 1 << 16):
            check = _Utf8Check()
            for a in range(0, len(buf), piece):
                check.feed(memoryview(buf)[a:a + piece], a)
            check.finish()
            assert (check.bad is None) == (expected is None), (damage, piece)
            if expected is not None:
                assert abs(check.bad - expected) <= 4


def test_tensordict_folders_verify_by_loading(tmp_path):
    fixtures = Path(__file__).resolve().parents[1] / "data" / "tensordict_fixtures"
    shutil.copytree(fixtures / "a_flat_dtypes" / "data", tmp_path / "td")
    report = verify(tmp_path / "td")
    assert report.ok and report.unchecked == [str(tmp_path / "td")]
    shutil.copytree(fixtures / "h_pickle_nontensordata" / "data", tmp_path / "pickled")
    report = verify(tmp_path / "pickled")  # loading refuses pickles: so does verify
    assert report.bad_files() == [str(tmp_path / "pickled")] and "does not load" in report.problems[0].message


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(max_size=20), min_size=1, max_size=12), st.sampled_from([0, 2]),
       st.sampled_from(["float32", "int16", "bool"]))
def test_any_saved_folder_verifies_and_its_checksums_match_its_files(tmp_path_factory, strings, threads, dtype):
    n = len(strings)
    td = TensorDict({"s": strings, "j": [{"i": i} for i in range(n)], "t": torch.ones(n, 3, dtype=getattr(torch, dtype)),
                     "n": {"u": torch.arange(n)}}, [n])
    path = tmp_path_factory.mktemp("hyp") / "ds"
    td.memmap(path, num_threads=threads)
    report = verify(path)
    assert report.ok, report.problems
    assert report.checksummed == report.files == 6
    assert load_memmap(path, verify=True)["s"].tolist() == strings
