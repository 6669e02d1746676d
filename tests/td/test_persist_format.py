"""The on-disk format: layout, meta.json, hostile keys, string columns, refusals, no pickle."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import torch

import chatdata.td.storage.persist as persist
from chatdata import FormatError, NonTensorData, NonTensorStack, RaggedTensorDict, TensorDict, load_memmap

TD_PKG = Path(persist.__file__).parent.parent  # chatdata/td

HOSTILE_KEYS = [
    "shape", "_type", "entries", "meta", "meta.json", "..", ".", "/", "a/../../x", "/etc/passwd",
    "C:\\Windows", "", "\x00", "\x01\n\t\r\x7f", "😀", "é", "_storage", "_offsets", "_values", "%",
    "%2E", "%25", "a.memmap", "x.bytes.memmap", "x.offsets", "CON", " ", "~", "$HOME", "*", "?",
]


def _walk(root: Path) -> set:
    return {str(p) for p in root.rglob("*")}


def test_layout_and_meta_json(tmp_path):
    td = TensorDict({"a": torch.zeros(2, 3), "b": {"c": torch.ones(2, dtype=torch.int8)}, "s": ["x", "yy"]}, [2])
    td.memmap(tmp_path / "td")
    root = tmp_path / "td"
    assert sorted(os.listdir(root)) == ["a.memmap", "b", "meta.json", "s.bytes.memmap", "s.offsets.memmap"]
    meta = json.loads((root / "meta.json").read_text())
    assert meta["format"] == "chatdata" and meta["version"] == persist.FORMAT_VERSION == 1
    assert meta["_type"] == "TensorDict" and meta["batch_size"] == [2]
    assert meta["entries"]["a"] == {"kind": "tensor", "dtype": "float32", "shape": [2, 3], "file": "a.memmap"}
    assert meta["entries"]["b"] == {"kind": "collection", "dir": "b"}
    s = meta["entries"]["s"]
    assert s["kind"] == "strings" and s["shape"] == [2] and s["encoding"] == "str" and s["nbytes"] == 3
    assert (root / "a.memmap").stat().st_size == 24
    assert torch.frombuffer(bytearray((root / "s.offsets.memmap").read_bytes()), dtype=torch.int64).tolist() == [0, 1, 3]
    assert (root / "s.bytes.memmap").read_bytes() == b"xyy"
    sub = json.loads((root / "b" / "meta.json").read_text())
    assert sub["entries"]["c"]["dtype"] == "int8" and sub["version"] == 1


def test_little_endian_c_order(tmp_path):
    t = torch.arange(6, dtype=torch.int32).reshape(2, 3).t()  # not contiguous
    TensorDict({"t": t}, []).memmap(tmp_path / "x")
    raw = (tmp_path / "x" / "t.memmap").read_bytes()
    assert raw == b"".join(int(v).to_bytes(4, "little") for v in t.reshape(-1))


@pytest.mark.parametrize("strings", [False, True])
def test_hostile_keys_round_trip_and_stay_inside(tmp_path, strings):
    base = tmp_path / "inside"
    base.mkdir()
    (tmp_path / "sentinel").write_text("keep")
    before = _walk(tmp_path)
    values = {k: ([f"v{i}{k}"] if strings else torch.tensor([i])) for i, k in enumerate(HOSTILE_KEYS)}
    values.pop("/")
    td = TensorDict({**values, "nested..": TensorDict(dict(values), [1])}, [1])
    td[("/", "..")] = torch.ones(1)  # "/" is a nested TensorDict with a ".." entry
    out = base / "data"
    td.memmap(out)
    after = _walk(tmp_path)
    created = after - before
    assert all(Path(p).is_relative_to(out) for p in created), sorted(p for p in created if not Path(p).is_relative_to(out))
    assert (tmp_path / "sentinel").read_text() == "keep"
    for p in out.rglob("*"):
        assert p.resolve().is_relative_to(out.resolve())
    back = load_memmap(out)
    assert set(back.keys()) == set(td.keys())
    for i, k in enumerate(HOSTILE_KEYS):
        if k == "/":
            continue  # a nested TensorDict, checked below
        got = back[k].tolist()
        assert got == ([f"v{i}{k}"] if strings else [i]), k
        assert back["nested..", k].tolist() == got
    assert back["/", ".."].tolist() == [1.0]


def test_key_filenames_are_reversible_and_plain():
    from chatdata.td.core.keys import filename_to_key, key_to_filename

    names = set()
    for k in HOSTILE_KEYS + ["a" * 60, "x" * 199]:
        name = key_to_filename(k)
        assert name and "/" not in name and "\\" not in name and "." not in name and "\x00" not in name
        assert not name.startswith("_") and name.isprintable() and name.isascii()
        assert filename_to_key(name) == k
        names.add(name)
    assert len(names) == len(HOSTILE_KEYS) + 2


def test_too_long_key_refused_cleanly(tmp_path):
    td = TensorDict({"😀" * 100: torch.zeros(1)}, [1])
    with pytest.raises(ValueError, match="too long"):
        td.memmap(tmp_path / "x")
    assert os.listdir(tmp_path) == []  # no folder, no temp leftovers


def test_string_stack_file_count_constant(tmp_path):
    def count(n):
        vals = [f"message {i} é" * (i % 5) for i in range(n)]
        td = TensorDict({"content": vals, "role": ["user", "assistant"] * (n // 2), "x": torch.arange(n)}, [n])
        td.memmap(tmp_path / str(n))
        back = load_memmap(tmp_path / str(n))
        assert back["content"][n - 1] == vals[n - 1] and back["role"].tolist()[:2] == ["user", "assistant"]
        return sum(1 for _ in (tmp_path / str(n)).rglob("*"))

    assert count(10) == count(100_000) == 6


def test_ragged_string_stack_layout(tmp_path):
    convs = [[("user", "hi"), ("assistant", "hello 😀")], [("user", "")], [("system", "s"), ("user", "a\x00b"), ("assistant", "c")]]
    r = torch.stack([TensorDict({"role": [m[0] for m in c], "content": [m[1] for m in c]}, [len(c)]) for c in convs])
    assert isinstance(r, RaggedTensorDict)
    r.memmap(tmp_path / "r")
    root = tmp_path / "r"
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == [
        "_offsets.memmap", "_values", "_values/content.bytes.memmap", "_values/content.offsets.memmap",
        "_values/meta.json", "_values/role.bytes.memmap", "_values/role.offsets.memmap", "meta.json",
    ]
    meta = json.loads((root / "meta.json").read_text())
    assert meta["_type"] == "ragged" and meta["offsets"]["file"] == "_offsets.memmap"
    assert meta["values"] == {"kind": "collection", "dir": "_values"}
    back = load_memmap(root)
    assert isinstance(back, RaggedTensorDict) and back.offsets.tolist() == [0, 2, 3, 6]
    assert back[2]["content"].tolist() == ["s", "a\x00b", "c"]
    assert back[0]["content"].tolist() == ["hi", "hello 😀"]


def test_strings_decoded_lazily(tmp_path):
    TensorDict({"s": [f"v{i}" for i in range(1000)]}, [1000]).memmap(tmp_path / "x")
    back = load_memmap(tmp_path / "x")
    pool = back.get("s")._pool
    assert pool._list is None and pool.is_packed  # mapped bytes + offsets, no Python strings
    assert isinstance(pool._data, torch.Tensor) and pool._data.untyped_storage().nbytes() == 3890
    assert back["s"][999] == "v999"
    assert pool._list is None  # reading one value decodes that value only
    meta = load_memmap(tmp_path / "x", device="meta")
    assert meta.get("s")._pool._data is None  # on "meta" no file is even opened


def test_non_tensor_values(tmp_path):
    td = TensorDict({
        "d": NonTensorData({"a": [1, None, 2.5], "b": "x"}),
        "n": NonTensorData(float("nan")),
        "s": NonTensorData("text"),
    }, [])
    td["j"] = TensorDict({"v": NonTensorStack.from_list([{"k": 1}, [1, 2], None])}, [3])
    td.memmap(tmp_path / "x")
    back = load_memmap(tmp_path / "x")
    assert back["d"] == {"a": [1, None, 2.5], "b": "x"}
    assert back["s"] == "text"
    n = back["n"]
    assert n != n
    assert back["j", "v"].tolist() == [{"k": 1}, [1, 2], None]
    meta = json.loads((tmp_path / "x" / "j" / "meta.json").read_text())
    assert meta["entries"]["v"]["encoding"] == "json"


class Custom:
    pass


@pytest.mark.parametrize("bad", [{1, 2}, Custom(), b"bytes", object()], ids=["set", "custom", "bytes", "object"])
def test_non_json_refused_naming_key(tmp_path, bad):
    (tmp_path / "x").mkdir()
    TensorDict({"a": torch.zeros(1)}, [1]).memmap(tmp_path / "x")
    before = _walk(tmp_path)
    for td in (
        TensorDict({"the_key": NonTensorData(bad)}, []),
        TensorDict({"the_key": NonTensorStack.from_list(["ok", bad])}, [2]),
        TensorDict({"outer": {"the_key": NonTensorData(bad)}}, []),
    ):
        with pytest.raises(TypeError, match="the_key") as err:
            td.memmap(tmp_path / "x")
        assert "pickle" in str(err.value) or "JSON" in str(err.value)
        assert _walk(tmp_path) == before  # no temp folder left, old data untouched
    assert load_memmap(tmp_path / "x")["a"].tolist() == [0.0]


def test_persist_modules_never_import_pickle():
    storage = sorted(p.relative_to(TD_PKG).as_posix() for p in (TD_PKG / "storage").glob("*.py"))
    assert "storage/reader.py" in storage and "storage/writer.py" in storage
    for name in storage + ["nontensor/pool.py", "core/keys.py"]:
        src = (TD_PKG / name).read_text()
        assert not re.search(r"^\s*(import|from)\s+(c?pickle|dill|cloudpickle|marshal)\b", src, re.M), name
        assert "torch.load" not in src and "pickle.load" not in src and "eval(" not in src, name


def test_meta_json_pointing_to_pickle_refused(tmp_path):
    import pickle

    root = tmp_path / "x"
    root.mkdir()
    sentinel = tmp_path / "pwned"
    payload = pickle.dumps(Custom())
    (root / "obj.pkl").write_bytes(payload)
    (root / "obj.pickle").write_bytes(payload)
    for entry in (
        {"kind": "pickle", "file": "obj.pkl"},
        {"kind": "object", "file": "obj.pickle"},
        {"kind": "torch", "file": "obj.pkl"},
    ):
        meta = {"format": "chatdata", "version": 1, "_type": "TensorDict", "batch_size": [], "device": None,
                "entries": {"obj": entry}}
        (root / "meta.json").write_text(json.dumps(meta))
        with pytest.raises(FormatError, match="meta.json"):
            load_memmap(root)
    assert not sentinel.exists()
    # a class path in a tensorclass folder is never imported
    meta = {"format": "chatdata", "version": 1, "_type": "tensorclass", "class": "os.system",
            "storage": "_storage"}
    (root / "meta.json").write_text(json.dumps(meta))
    TensorDict({"a": torch.zeros(1)}, [1]).memmap(root / "_storage")
    with pytest.warns(UserWarning):
        back = load_memmap(root)
    assert isinstance(back, TensorDict)
    meta["class"] = "some_module_never_imported_xyz.Cls"
    (root / "meta.json").write_text(json.dumps(meta))
    with pytest.warns(UserWarning):
        load_memmap(root)
    import sys

    assert "some_module_never_imported_xyz" not in sys.modules


def test_device_and_batch_size_kept(tmp_path):
    td = TensorDict({"a": torch.zeros(2, 3)}, [2, 3], device="cpu")
    td.memmap(tmp_path / "x")
    back = load_memmap(tmp_path / "x")
    assert back.batch_size == (2, 3) and back.device == torch.device("cpu")
    assert load_memmap(tmp_path / "x", device="cpu")["a"].device.type == "cpu"


def test_empty_things(tmp_path):
    td = TensorDict({"e": torch.zeros(0, 3), "s": NonTensorStack.from_list([]), "n": {}}, [0])
    td.memmap(tmp_path / "x")
    back = load_memmap(tmp_path / "x")
    assert back["e"].shape == (0, 3) and back["s"].tolist() == [] and back.batch_size == (0,)
    TensorDict({}, []).memmap(tmp_path / "y")
    assert len(load_memmap(tmp_path / "y").keys()) == 0
