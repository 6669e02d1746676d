"""torch.nested tensors inside a saved TensorDict: the `nested` entry (flat values + a sizes file),
loaded back as a memory-mapped nested tensor of the same layout (docs/format.md, section 3.3)."""
from __future__ import annotations

import json
import warnings

import pytest
import torch
from hypothesis import given, settings, strategies as st

from chatdata.td import MemoryMappedTensor, TensorDict, load_memmap
from chatdata.td.storage.fsops import FormatError
from chatdata.td.storage.verify import verify

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _strided():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.nested.nested_tensor([torch.arange(12, dtype=torch.float64).view(3, 4),
                                           torch.arange(15, dtype=torch.float64).view(3, 5)])


def _jagged():
    return torch.nested.nested_tensor([torch.ones(2, 3), torch.arange(12.0).view(4, 3)], layout=torch.jagged)


def _same(a, b):
    pa, pb = a.unbind(), b.unbind()
    return len(pa) == len(pb) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(pa, pb))


def test_strided_nested_round_trip_with_two_batch_dims(tmp_path):
    nt = _strided()
    td = TensorDict({"a": nt, "b": torch.zeros(2, 3)}, [2, 3])
    path = tmp_path / "ds"
    td.memmap(path)
    meta = json.loads((path / "meta.json").read_text())
    assert meta["entries"]["a"] == {"kind": "nested", "layout": "strided", "dtype": "float64", "count": 2,
                                    "ndim": 2, "file": "a.memmap", "sizes": "a.sizes.memmap"}
    assert set(meta["checksums"]) == {"a.memmap", "a.sizes.memmap", "b.memmap"}
    assert (path / "a.memmap").stat().st_size == 27 * 8
    loaded = load_memmap(path, verify=True)
    a = loaded.get("a")
    assert isinstance(a, MemoryMappedTensor) and a.is_nested and a.layout == torch.strided
    assert _same(a, nt)
    for i in range(2):
        for j in range(3):
            assert torch.equal(loaded[i, j]["a"], nt[i, j])
    assert verify(path).ok


def test_writes_into_a_loaded_nested_tensor_reach_the_file(tmp_path):
    path = tmp_path / "ds"
    TensorDict({"a": _strided()}, [2]).memmap(path)
    a = load_memmap(path)["a"]
    a.unbind()[1][0, 0] = -1.0
    assert load_memmap(path)["a"].unbind()[1][0, 0] == -1.0
    bad = verify(path)  # the file no longer holds what was saved: reported, as for tensors
    assert [p.path.endswith("a.memmap") for p in bad.problems] == [True]


def test_jagged_layout_round_trips_as_jagged_and_loads_on_meta(tmp_path):
    jt = _jagged()
    path = tmp_path / "ds"
    TensorDict({"j": jt}, [2]).memmap(path)
    j = load_memmap(path)["j"]
    assert j.layout == torch.jagged and _same(j, jt)
    m = load_memmap(path, device="meta")["j"]
    assert m.device.type == "meta" and m.layout == torch.jagged and m.size(0) == 2 and m.values().shape == (6, 3)


def test_strided_nested_on_meta_is_a_clear_error(tmp_path):
    path = tmp_path / "ds"
    TensorDict({"a": _strided()}, [2]).memmap(path)
    with pytest.raises(NotImplementedError, match="strided nested tensor cannot be loaded on the meta device"):
        load_memmap(path, device="meta")


def test_batch_size_must_match_the_regular_leading_dims():
    with pytest.raises(RuntimeError, match="batch dimension mismatch for key 'a'"):
        TensorDict({"a": _strided()}, [2, 4])
    with pytest.raises(RuntimeError, match="batch dimension mismatch for key 'a'"):
        TensorDict({"a": _strided()}, [2, 3, 4])  # dim 2 is irregular: never a batch dim


def _corrupt(tmp_path, edit):
    path = tmp_path / "ds"
    TensorDict({"a": _strided()}, [2]).memmap(path)
    edit(path)
    return path


def _edit_meta(**changes):
    def edit(path):
        meta = json.loads((path / "meta.json").read_text())
        meta["entries"]["a"].update(changes)
        (path / "meta.json").write_text(json.dumps(meta))
    return edit


@pytest.mark.parametrize("edit, match", [
    (lambda p: (p / "a.sizes.memmap").write_bytes(b"\0" * 8), "a.sizes.memmap has 8 bytes, expected 32"),
    (lambda p: (p / "a.sizes.memmap").write_bytes(torch.tensor([[3, 4], [3, -5]]).numpy().tobytes()),
     "sizes must be non-negative"),
    (lambda p: (p / "a.memmap").write_bytes(b"\0" * 8), "a.memmap has 8 bytes, expected 216"),
    (lambda p: (p / "a.sizes.memmap").unlink(), "sizes file .*a.sizes.memmap is missing"),
    (_edit_meta(layout="ragged"), "unknown nested layout 'ragged'"),
    (_edit_meta(sizes="../a.sizes.memmap"), "not a plain name"),
    (_edit_meta(count="2"), "must be non-negative integers"),
    (_edit_meta(dtype="float128"), "float128"),
])
def test_corrupt_nested_entries_are_format_errors_naming_the_file(tmp_path, edit, match):
    path = _corrupt(tmp_path, edit)
    with pytest.raises(FormatError, match=match):
        load_memmap(path)
    assert not verify(path).ok


@settings(max_examples=15, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 3)), min_size=1, max_size=5),
       st.sampled_from(["strided", "jagged"]))
def test_nested_round_trip_property(tmp_path_factory, shapes, layout):
    cols = shapes[0][1]
    if layout == "jagged":
        parts = [torch.randn(n, cols) for n, _ in shapes]
        nt = torch.nested.nested_tensor(parts, layout=torch.jagged)
    else:
        parts = [torch.randn(n, c) for n, c in shapes]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nt = torch.nested.nested_tensor(parts)
    path = tmp_path_factory.mktemp("nested") / "ds"
    TensorDict({"x": nt}, [len(parts)]).memmap(path)
    back = load_memmap(path, verify=True)["x"]
    assert back.layout == nt.layout and _same(back, nt)


def test_transposed_jagged_round_trips_and_save_keeps_a_loadable_folder(tmp_path):
    from chatdata.td.storage.persist import save

    base = torch.nested.nested_tensor([torch.arange(6.0).view(2, 3), torch.arange(3.0).view(1, 3)], layout=torch.jagged)
    nt = base.transpose(1, 2)  # ragged dim 2: components (3, 2) and (3, 1)
    path = tmp_path / "ds"
    TensorDict({"old": torch.ones(2)}, [2]).memmap(path)
    save(TensorDict({"a": nt}, [2]), path)  # replaces a good folder: the new one must load
    entry = json.loads((path / "meta.json").read_text())["entries"]["a"]
    assert entry["layout"] == "jagged_transposed" and entry["ragged_idx"] == 2
    a = load_memmap(path, verify=True)["a"]
    assert a.layout == torch.jagged and a._ragged_idx == 2 and _same(a, nt)
    assert verify(path).ok
    m = load_memmap(path, device="meta")["a"]
    assert m.device.type == "meta" and m._ragged_idx == 2
    nt4 = torch.nested.nested_tensor([torch.randn(2, 3, 4), torch.randn(1, 3, 4)], layout=torch.jagged)
    nt4 = nt4.transpose(1, 2).transpose(2, 3)  # (2, 3, 4, j): ragged dim 3
    TensorDict({"b": nt4}, [2, 3]).memmap(tmp_path / "ds4")
    b = load_memmap(tmp_path / "ds4")["b"]
    assert b._ragged_idx == 3 and b.shape[:3] == nt4.shape[:3] and _same(b, nt4)


@pytest.mark.parametrize("ragged_idx", [0, 3, "2", None])
def test_bad_ragged_idx_is_a_format_error(tmp_path, ragged_idx):
    path = tmp_path / "ds"
    TensorDict({"a": _jagged().transpose(1, 2)}, [2]).memmap(path)
    _edit_meta(ragged_idx=ragged_idx)(path)
    with pytest.raises(FormatError, match="ragged_idx"):
        load_memmap(path)
    assert not verify(path).ok


def _write_sizes(path, rows, data_bytes):
    meta = json.loads((path / "meta.json").read_text())
    meta.pop("checksums", None)  # only the sizes are at fault
    meta["entries"]["a"].update(count=len(rows), ndim=len(rows[0]))
    (path / "meta.json").write_text(json.dumps(meta))
    (path / "a.sizes.memmap").write_bytes(torch.tensor(rows, dtype=torch.int64).numpy().astype("<i8").tobytes())
    (path / "a.memmap").write_bytes(b"\0" * data_bytes)


@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
@pytest.mark.parametrize("rows, data_bytes, match", [
    ([[2 ** 62]] * 4, 0, "more than 2\\*\\*62"),             # the int64 total wraps to 0: an empty file
    ([[2 ** 32, 2 ** 32], [0, 3]], 0, "more than 2\\*\\*62"),  # a product wraps to 0
    ([[2 ** 62 + 1, 4], [3, 3]], 13, "exceeds 2\\*\\*62"),     # wraps to 13 elements: the file's size
    ([[2 ** 63 - 1], [2 ** 63 - 1], [4], [1]], 3, "exceeds 2\\*\\*62"),
])
def test_overflowing_sizes_are_format_errors_and_verify_reports_them(tmp_path, layout, rows, data_bytes, match):
    path = tmp_path / "ds"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = torch.nested.nested_tensor([torch.ones(2, dtype=torch.uint8)] * len(rows), layout=layout)
    TensorDict({"a": nt}, [len(rows)]).memmap(path)
    _write_sizes(path, rows, data_bytes)
    with pytest.raises(FormatError, match=f"a.sizes.memmap: .*{match}"):
        load_memmap(path)
    report = verify(path)  # reports, never raises
    assert [p.path.endswith("a.sizes.memmap") for p in report.problems] == [True]


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
def test_repr_of_a_strided_nested_tensor_marks_its_ragged_dims():
    """A strided nested tensor has no .shape (torch raises RuntimeError): repr() of a
    TensorDict holding one raised it."""
    nt = torch.nested.nested_tensor([torch.zeros(2, 3), torch.zeros(4, 3)])
    assert "x: Tensor(shape=torch.Size([2, -1, 3]), device=cpu, dtype=torch.float32" in repr(TensorDict({"x": nt}, [2]))
