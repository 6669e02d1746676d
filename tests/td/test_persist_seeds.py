"""The seeds' disk examples (000, 001, 002, 004) and the memmap API behaviour, as tests."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import torch

from chatdata import LockedError, MemoryMappedTensor, TensorDict, load_memmap, tensorclass
from chatdata.td.storage.memmap_api import TensorDictFuture
from chatdata.utils import print_directory_tree


@tensorclass
class MyClass:
    data: torch.Tensor
    metadata: str


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- seeds 000 / 001 / 004: load_memmap ----------------------------------------------------
def test_load_memmap_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    td = TensorDict.fromkeys(["a", "b", "c", ("nested", "e")], 0)
    td.memmap("./saved_td")
    td_load = TensorDict.load_memmap("./saved_td")
    assert (td == td_load).all()
    assert (load_memmap("./saved_td") == td).all()  # the function form
    nested = TensorDict.load_memmap("./saved_td/nested")
    assert nested["e"] == 0
    assert set(nested.keys()) == {"e"}  # the sub-folder is the nested TensorDict alone


META_PRINT = """\
meta: TensorDict(
    fields={
        a: Tensor(shape=torch.Size([]), device=meta, dtype=torch.float32, is_shared=False),
        b: TensorDict(
            fields={
                c: Tensor(shape=torch.Size([]), device=meta, dtype=torch.float32, is_shared=False)},
            batch_size=torch.Size([]),
            device=meta,
            is_shared=False)},
    batch_size=torch.Size([]),
    device=meta,
    is_shared=False)
fake: TensorDict(
    fields={
        a: FakeTensor(shape=torch.Size([]), device=cpu, dtype=torch.float32, is_shared=False),
        b: TensorDict(
            fields={
                c: FakeTensor(shape=torch.Size([]), device=cpu, dtype=torch.float32, is_shared=False)},
            batch_size=torch.Size([]),
            device=cpu,
            is_shared=False)},
    batch_size=torch.Size([]),
    device=cpu,
    is_shared=False)
"""


@pytest.mark.parametrize("form", ["function", "classmethod"])
def test_meta_and_fake_prints(tmp_path, capsys, form):
    from torch._subclasses import FakeTensorMode

    loader = load_memmap if form == "function" else TensorDict.load_memmap
    td = TensorDict({"a": torch.zeros(()), "b": {"c": torch.zeros(())}})
    path = tmp_path / "td"
    td.save(path)
    td_load = loader(path, device="meta")
    print("meta:", td_load)
    with FakeTensorMode():
        td_load = loader(path)
        print("fake:", td_load)
    assert capsys.readouterr().out == META_PRINT


def test_meta_load_opens_no_data_file(tmp_path):
    td = TensorDict({"a": torch.arange(6.0).reshape(2, 3), "s": ["x", "y"], "b": {"c": torch.ones(2)}}, [2])
    td.memmap(tmp_path / "td")
    removed = 0
    for p in (tmp_path / "td").rglob("*.memmap"):
        p.unlink()
        removed += 1
    assert removed >= 4
    meta = load_memmap(tmp_path / "td", device="meta")
    assert meta["a"].device.type == "meta" and meta["a"].shape == (2, 3)
    assert meta["b", "c"].device.type == "meta"
    with pytest.raises(ValueError):  # the real load does need the files (FormatError is a ValueError)
        load_memmap(tmp_path / "td")


# -- seed 002: saving TensorDict and tensorclass objects -------------------------------------
def test_memmap_prefix_directory_structure(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    td = TensorDict({"a": torch.rand(10), "b": {"c": torch.rand(10)}}, [10])
    assert td.memmap_(prefix="tensordict") is td
    root = tmp_path / "tensordict"
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    assert files == ["a.memmap", "b", "b/c.memmap", "b/meta.json", "meta.json"]
    print_directory_tree(root)
    assert capsys.readouterr().out == textwrap.dedent("""\
        tensordict/
            a.memmap
            b/
                c.memmap
                meta.json
            meta.json
        """)
    assert isinstance(td["a"], MemoryMappedTensor) and td.is_locked
    assert Path(td["a"].filename) == root / "a.memmap"


def test_memmap_weights_num_threads(tmp_path):
    weights = TensorDict.from_module(torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Linear(4, 2)))
    weights_disk = weights.memmap(tmp_path / "w", num_threads=4)
    new_weights = TensorDict.load_memmap(tmp_path / "w")
    assert (weights_disk == new_weights).all()
    assert (weights == new_weights).all()


def test_memmap_like_expanded_million_uses_no_memory(tmp_path):
    def make_datum():
        return TensorDict({"image": torch.randint(255, (3, 64, 64)), "label": 0}, batch_size=[])

    datum = make_datum()
    data = datum.expand(1_000_000)  # a view: no memory
    rss0 = _rss_bytes()
    data_disk = data.memmap_like(tmp_path / "data")
    grown = _rss_bytes() - rss0
    assert grown < 64 * 2**20, f"memmap_like grew RSS by {grown / 2**20:.0f} MiB"
    assert data_disk.batch_size == (1_000_000,)
    assert data_disk["image"].shape == (1_000_000, 3, 64, 64)
    assert isinstance(data_disk["image"], MemoryMappedTensor)
    st = os.stat(tmp_path / "data" / "image.memmap")
    assert st.st_size == 1_000_000 * 3 * 64 * 64 * 8
    assert st.st_blocks * 512 < 2**20  # sparse: nothing written
    assert int(data_disk["image"][123_456, 2, 5, 7]) == 0
    data_disk["image"][0] = datum["image"]  # fill in place through the map
    again = TensorDict.load_memmap(tmp_path / "data")
    assert torch.equal(again["image"][0], datum["image"])


def test_tensorclass_and_stacked_tensordicts_round_trip(tmp_path, capsys):
    td_list = [TensorDict({"item": i}, batch_size=[]) for i in range(4)]
    tc = MyClass(torch.randn(3), metadata="some text", batch_size=[])
    data = TensorDict({"td_list": torch.stack(td_list), "tensorclass": tc}, [])
    tempdir = tmp_path / "tmpzy1jcaoq"
    data.memmap_(tempdir)
    loaded_data = TensorDict.load_memmap(tempdir)
    assert (loaded_data == data).all()
    assert isinstance(loaded_data["tensorclass"], MyClass)
    assert loaded_data["tensorclass"].metadata == "some text"
    assert loaded_data["td_list"]["item"].tolist() == [0, 1, 2, 3]
    print_directory_tree(tempdir)
    assert capsys.readouterr().out == textwrap.dedent("""\
        tmpzy1jcaoq/
            meta.json
            td_list/
                item.memmap
                meta.json
            tensorclass/
                _storage/
                    data.memmap
                    meta.json
                meta.json
        """)
    # the tensorclass folder loads alone, as its class
    alone = MyClass.load_memmap(tempdir / "tensorclass")
    assert isinstance(alone, MyClass) and torch.equal(alone.data, tc.data)


# -- seed 002: handling existing MemoryMappedTensor -------------------------------------------
def test_memmap_twice_without_prefix_same_tensors():
    td = TensorDict({"a": 1}, [])
    td0 = td.memmap()
    td1 = td0.memmap()
    assert td0["a"] is td1["a"]
    assert td0["a"].filename is not None and os.path.exists(td0["a"].filename)


def test_same_prefix_overwrites_other_prefix_raises(tmp_path):
    td = TensorDict({"a": 1}, [])
    tmpdir_0, tmpdir_1 = tmp_path / "0", tmp_path / "1"
    td0 = td.memmap(tmpdir_0)
    td0 = td.memmap(tmpdir_0)  # works, results are just overwritten
    assert int(td0["a"]) == 1
    td2 = td0.memmap(tmpdir_0)  # the memmapped one over its own folder: fine too
    assert int(td2["a"]) == 1
    with pytest.raises(RuntimeError, match="copy_existing"):
        td0.memmap(tmpdir_1)
    assert not (tmpdir_1 / "meta.json").exists()
    td1 = td0.memmap(tmpdir_1, copy_existing=True)
    td_load = TensorDict.load_memmap(tmpdir_1)
    assert (td_load == td).all() and (td1 == td).all()
    assert Path(td1["a"].filename).parent == tmpdir_1.absolute()


def test_same_prefix_overwrite_new_values(tmp_path):
    td0 = TensorDict({"a": torch.zeros(3)}, [3]).memmap(tmp_path / "x")
    td1 = TensorDict({"a": torch.ones(3), "b": torch.ones(3)}, [3]).memmap(tmp_path / "x")
    assert td1["a"].tolist() == [1, 1, 1]
    assert td0["a"].tolist() == [0, 0, 0]  # the old map stays valid (the old inode)
    assert set(load_memmap(tmp_path / "x").keys()) == {"a", "b"}


def test_existsok_false_refuses(tmp_path):
    td = TensorDict({"a": torch.zeros(3)}, [3])
    td.memmap(tmp_path / "x")
    with pytest.raises((FileExistsError, RuntimeError)):
        td.memmap(tmp_path / "x", existsok=False)
    td.memmap(tmp_path / "y", existsok=False)  # a new folder is fine
    assert (load_memmap(tmp_path / "y") == td).all()


@pytest.mark.parametrize("method", ["memmap", "memmap_", "memmap_like"])
def test_return_early_future(tmp_path, method):
    td = TensorDict({"a": torch.randn(100), "b": {"c": torch.arange(100)}}, [100])
    fut = getattr(td, method)(tmp_path / "x", num_threads=2, return_early=True)
    assert isinstance(fut, TensorDictFuture)
    res = fut.result()
    assert isinstance(res, TensorDict) and res.is_locked
    assert isinstance(res["b", "c"], MemoryMappedTensor)
    if method != "memmap_like":
        assert (res == td).all()
    else:
        assert res["a"].abs().sum() == 0


def test_out_fills_existing(tmp_path):
    src = TensorDict({"a": torch.arange(4.0), "b": {"c": torch.ones(4, 2)}}, [4])
    src.memmap(tmp_path / "x")
    out = TensorDict({"a": torch.zeros(4), "b": {"c": torch.zeros(4, 2)}}, [4])
    a_before = out["a"]
    res = load_memmap(tmp_path / "x", out=out)
    assert res is out
    assert out["a"] is a_before and out["a"].tolist() == [0, 1, 2, 3]
    assert out["b", "c"].sum() == 8
    res2 = TensorDict.load_memmap(tmp_path / "x", out=TensorDict({"a": torch.zeros(4), "b": {"c": torch.zeros(4, 2)}}, [4]))
    assert res2["a"].tolist() == [0, 1, 2, 3]


def test_memmapped_is_locked(tmp_path):
    td = TensorDict({"a": torch.zeros(3)}, [3])
    mm = td.memmap(tmp_path / "x")
    assert mm.is_locked and not td.is_locked
    with pytest.raises(LockedError):
        mm["z"] = torch.zeros(3)
    mm["a"][:] = 5  # in-place writes are allowed and reach the file
    assert load_memmap(tmp_path / "x")["a"].tolist() == [5, 5, 5]
    assert load_memmap(tmp_path / "x").is_locked


def test_memmap_without_prefix_uses_temp_files():
    mm = TensorDict({"a": torch.arange(3)}, [3]).memmap()
    assert isinstance(mm["a"], MemoryMappedTensor) and os.path.isfile(mm["a"].filename)
    assert (load_memmap(Path(mm["a"].filename).parent) == mm).all()


# -- aliases and the other entry points --------------------------------------------------------
def test_save_dumps_aliases_and_load_classmethods(tmp_path):
    td = TensorDict({"a": torch.arange(3), "s": ["x", "y", "z"]}, [3])
    for i, name in enumerate(["save", "dumps", "memmap"]):
        out = getattr(td, name)(tmp_path / str(i))
        assert out.is_locked and isinstance(out["a"], MemoryMappedTensor)
        for loader in (TensorDict.load, TensorDict.load_memmap, load_memmap):
            back = loader(tmp_path / str(i))
            assert back["a"].tolist() == [0, 1, 2] and back["s"].tolist() == ["x", "y", "z"]


def test_load_memmap_in_place(tmp_path):
    TensorDict({"a": torch.arange(3.0), "b": {"c": torch.ones(3)}}, [3]).memmap(tmp_path / "x")
    for name in ("load_", "load_memmap_"):
        dest = TensorDict({"a": torch.zeros(3)}, [3])
        assert getattr(dest, name)(tmp_path / "x") is dest
        assert dest["a"].tolist() == [0, 1, 2] and dest["b", "c"].tolist() == [1, 1, 1]


def test_memmap_refresh(tmp_path):
    mm = TensorDict({"a": torch.zeros(3)}, [3]).memmap(tmp_path / "x")
    # another writer changes the folder
    TensorDict({"a": torch.ones(3), "b": torch.ones(3)}, [3]).memmap(tmp_path / "x")
    assert mm["a"].tolist() == [0, 0, 0]
    assert mm.memmap_refresh_() is mm
    assert mm["a"].tolist() == [1, 1, 1] and "b" in mm.keys()
    with pytest.raises(RuntimeError):
        TensorDict({"a": torch.zeros(3)}, [3]).memmap_refresh_()


def test_tensorclass_memmap_api(tmp_path):
    tc = MyClass(torch.arange(4.0), metadata="m", batch_size=[4])
    mm = tc.memmap(tmp_path / "tc")
    assert isinstance(mm, MyClass) and isinstance(mm.data, MemoryMappedTensor)
    back = MyClass.load_memmap(tmp_path / "tc")
    assert isinstance(back, MyClass) and back.data.tolist() == [0, 1, 2, 3] and back.metadata == "m"
    assert isinstance(load_memmap(tmp_path / "tc"), MyClass)
    tc.memmap_(tmp_path / "tc2")
    assert isinstance(tc.data, MemoryMappedTensor)
    like = MyClass(torch.arange(4.0), metadata="m", batch_size=[4]).memmap_like(tmp_path / "tc3")
    assert like.data.tolist() == [0, 0, 0, 0]


def test_print_directory_tree_sorted_and_nested(tmp_path, capsys):
    root = tmp_path / "root"
    (root / "z" / "y").mkdir(parents=True)
    (root / "z" / "y" / "f").touch()
    (root / "a").touch()
    print_directory_tree(root)
    assert capsys.readouterr().out == "root/\n    a\n    z/\n        y/\n            f\n"
