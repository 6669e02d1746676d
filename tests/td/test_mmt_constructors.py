"""MemoryMappedTensor constructors and views as tensordict code uses them (what issue 11 taught us)."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch

from chatdata import MemoryMappedTensor


@pytest.mark.parametrize("ctor", ["empty", "zeros", "ones", "full"])
@pytest.mark.parametrize("form", ["args", "tuple", "kwarg"])
@pytest.mark.parametrize("on_disk", [True, False])
def test_shape_forms(tmp_path, ctor, form, on_disk):
    filename = tmp_path / "sub" / "t.memmap" if on_disk else None
    extra = {"fill_value": 7} if ctor == "full" else {}
    make = getattr(MemoryMappedTensor, ctor)
    if form == "args":
        t = make(2, 3, dtype=torch.int32, filename=filename, **extra)
    elif form == "tuple":
        t = make((2, 3), dtype=torch.int32, filename=filename, **extra)
    else:
        t = make(shape=(2, 3), dtype=torch.int32, filename=filename, **extra)
    assert isinstance(t, MemoryMappedTensor) and t.shape == (2, 3) and t.dtype == torch.int32
    want = {"zeros": 0, "ones": 1, "full": 7}.get(ctor)
    if want is not None:
        assert (t == want).all()
    if on_disk:
        assert t.filename == str(filename.absolute()) and filename.stat().st_size == 24
    else:
        assert t.filename is None and t._handler is not None


def test_scalar_shape_and_missing_shape():
    assert MemoryMappedTensor.zeros(()).shape == ()
    assert MemoryMappedTensor.full((), fill_value=3.0).item() == 3.0
    with pytest.raises(TypeError, match="needs a shape"):
        MemoryMappedTensor.zeros()
    with pytest.raises(RuntimeError, match="CPU"):
        MemoryMappedTensor.zeros(2, device="meta")


@pytest.mark.parametrize("name,value", [("zeros_like", 0), ("ones_like", 1), ("empty_like", None)])
def test_like_constructors(tmp_path, name, value):
    src = -torch.ones(3, 2, dtype=torch.float64)
    t = getattr(MemoryMappedTensor, name)(src, filename=tmp_path / "x.memmap")
    assert t.shape == src.shape and t.dtype == src.dtype
    if value is not None:
        assert (t == value).all()
    f = MemoryMappedTensor.full_like(src, 2.5)
    assert (f == 2.5).all() and f.filename is None


def test_views_stay_memory_mapped_and_pickle_with_their_offset(tmp_path):
    t = MemoryMappedTensor.from_tensor(torch.arange(20.0).reshape(4, 5), filename=tmp_path / "x.memmap")
    view = t[1:3, 2:]
    assert isinstance(view, MemoryMappedTensor) and view.filename == t.filename
    again = pickle.loads(pickle.dumps(view))
    assert isinstance(again, MemoryMappedTensor) and torch.equal(again, view)
    again.fill_(-1)  # same file: the write is seen by the original
    assert t[1, 2] == -1 and t[0, 2] == 2
    shared = MemoryMappedTensor.from_tensor(torch.zeros(10))
    assert shared[:2]._handler is shared._handler


def test_from_tensor_identity_and_copy_existing(tmp_path):
    mt = MemoryMappedTensor.from_tensor(torch.zeros(3), filename=tmp_path / "a.memmap")
    assert MemoryMappedTensor.from_tensor(mt) is mt
    assert MemoryMappedTensor.from_tensor(mt, filename=tmp_path / "a.memmap") is mt
    with pytest.raises(RuntimeError, match="copy_existing"):
        MemoryMappedTensor.from_tensor(mt, filename=tmp_path / "b.memmap")
    mt2 = MemoryMappedTensor.from_tensor(mt, filename=tmp_path / "b.memmap", copy_existing=True)
    assert mt2 is not mt and Path(mt2.filename).name == "b.memmap"
    with pytest.raises(RuntimeError, match="already exists"):
        MemoryMappedTensor.from_tensor(torch.zeros(3), filename=tmp_path / "a.memmap")


def test_symlink_is_refused_and_target_untouched(tmp_path):
    target = tmp_path / "target"
    target.write_bytes(b"keep me")
    link = tmp_path / "link.memmap"
    link.symlink_to(target)
    with pytest.raises(RuntimeError, match="through symlink"):
        MemoryMappedTensor.from_tensor(torch.zeros(4), filename=link, existsok=True)
    with pytest.raises(RuntimeError, match="through symlink"):
        MemoryMappedTensor.zeros(4, filename=link)
    assert target.read_bytes() == b"keep me"


def test_from_filename_creates_a_missing_file(tmp_path):
    f = tmp_path / "new.memmap"
    t = MemoryMappedTensor.from_filename(f, dtype=torch.float64, shape=[2, 3])  # missing: created
    assert f.stat().st_size == 48 and (t == 0).all()
    t.copy_(torch.arange(6.0).view(2, 3))
    again = MemoryMappedTensor.from_filename(f, dtype=torch.float64, shape=(2, 3))
    assert again.reshape(-1).tolist() == [0, 1, 2, 3, 4, 5]


def test_storage_and_handler_views():
    a = MemoryMappedTensor.from_tensor(torch.arange(10, dtype=torch.float64))
    b = MemoryMappedTensor.from_storage(a.untyped_storage(), dtype=torch.float64, shape=(2, 5))
    assert b[1].tolist() == [5, 6, 7, 8, 9]
    c = MemoryMappedTensor.from_handler(a._handler, dtype=torch.float64, shape=(10,))
    c[0] = 42
    assert a[0] == 42
    with pytest.raises(TypeError, match="_handler"):
        MemoryMappedTensor.from_handler(object(), dtype=torch.float64, shape=(10,))


def test_nested_shapes(tmp_path):
    sizes = torch.tensor([[2, 3], [1, 4]])
    t = MemoryMappedTensor.ones(sizes, dtype=torch.int32, filename=tmp_path / "n.memmap")
    assert t.is_nested and t[1].shape == (1, 4) and (t[0] == 1).all()
    back = MemoryMappedTensor.from_filename(tmp_path / "n.memmap", dtype=torch.int32, shape=sizes)
    assert back[1].tolist() == [[1, 1, 1, 1]]
