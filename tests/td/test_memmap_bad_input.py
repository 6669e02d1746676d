"""Tensors the writer used to choke on or mis-store, and MemoryMappedTensor shapes that were
silently truncated: a clear error before any file is made, or the right bytes on disk."""
import pytest
import torch

from chatdata.td import MemoryMappedTensor, RaggedTensorDict, TensorDict, load_memmap
from chatdata.td.storage import StreamWriter


def _roundtrip(td, path):
    td.memmap(path)
    return load_memmap(path)


def test_a_one_item_slice_with_a_non_unit_stride_saves(tmp_path):
    col = torch.arange(15.0).reshape(5, 3)[:, 0]  # stride 3
    td = TensorDict(a=col, batch_size=[5])[:1]   # shape (1,), stride (3,): "contiguous" yet not viewable as bytes
    assert _roundtrip(td, tmp_path / "one")["a"].tolist() == [0.0]


def test_lazy_conj_and_neg_views_save_their_values(tmp_path):
    z = torch.tensor([1 + 2j, 3 - 4j])
    td = TensorDict(c=z.conj(), n=z.conj().imag, batch_size=[2])
    out = _roundtrip(td, tmp_path / "conj")
    assert out["c"].tolist() == [1 - 2j, 3 + 4j] and out["n"].tolist() == [-2.0, 4.0]


def test_stream_writer_takes_a_one_item_strided_column(tmp_path):
    col = torch.arange(6).reshape(3, 2)[:, 1][:1]  # shape (1,), stride (2,)
    with StreamWriter(tmp_path / "s") as w:
        w.append(RaggedTensorDict(TensorDict(x=col, batch_size=[1]), torch.tensor([0, 1])))
    assert load_memmap(tmp_path / "s").values["x"].tolist() == [1]


def test_a_sparse_tensor_is_refused_by_name_and_nothing_is_written(tmp_path):
    td = TensorDict(dense=torch.zeros(3), sp=torch.eye(3).to_sparse(), batch_size=[3])
    with pytest.raises(TypeError, match=r"entry 'sp'.*sparse_coo.*to_dense\(\)"):
        td.memmap(tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_a_meta_tensor_is_refused_by_memmap_but_allocated_by_memmap_like(tmp_path):
    td = TensorDict(a=torch.empty(2, 3, device="meta"), batch_size=[2])
    with pytest.raises(ValueError, match=r"entry 'a'.*meta device.*memmap_like"):
        td.memmap(tmp_path / "x")
    assert not (tmp_path / "x").exists()
    like = td.memmap_like(tmp_path / "y")
    assert like["a"].shape == (2, 3) and like["a"].sum() == 0


def test_a_refused_save_over_an_existing_folder_keeps_the_old_data(tmp_path):
    TensorDict(a=torch.arange(3), batch_size=[3]).memmap(tmp_path / "x")
    with pytest.raises(TypeError, match="sparse"):
        TensorDict(a=torch.eye(3).to_sparse(), batch_size=[3]).memmap(tmp_path / "x")
    assert load_memmap(tmp_path / "x")["a"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("shape, err", [((2.5,), TypeError), ((True, 2), TypeError), ((-1, 2), ValueError)])
def test_memory_mapped_tensor_shapes_are_ints_not_truncated(tmp_path, shape, err):
    with pytest.raises(err, match="MemoryMappedTensor.zeros: the shape"):
        MemoryMappedTensor.zeros(shape, filename=tmp_path / "t")
    with pytest.raises(err, match="MemoryMappedTensor.empty: the shape"):
        MemoryMappedTensor.empty(*shape)
    assert not (tmp_path / "t").exists()
    assert MemoryMappedTensor.zeros(torch.tensor([2, 3])).shape == (2, 3)


def test_from_tensor_with_another_shape_is_refused_before_a_file_is_made(tmp_path):
    with pytest.raises(ValueError, match=r"shape \(5,\) differs from the input's \(3,\); pass copy_data=False"):
        MemoryMappedTensor.from_tensor(torch.arange(3.0), shape=(5,), filename=tmp_path / "a")
    with pytest.raises(ValueError, match="negative size"):
        MemoryMappedTensor.from_tensor(torch.arange(3.0), shape=(-3,), copy_data=False)
    assert not (tmp_path / "a").exists()
    assert MemoryMappedTensor.from_tensor(torch.arange(3.0), shape=(5,), copy_data=False).shape == (5,)


def test_a_tensorclass_load_memmap_of_a_folder_with_other_keys_is_refused(tmp_path):
    from chatdata.td import tensorclass

    @tensorclass
    class Pair:
        a: torch.Tensor
        b: str = "x"

    TensorDict(zz=torch.zeros(2), batch_size=[2]).memmap(tmp_path / "t")
    with pytest.raises(ValueError, match=r"holds \['zz'\], which are not fields of Pair"):
        Pair.load_memmap(tmp_path / "t")  # was a Pair whose a is None, with zz hidden inside
    TensorDict(a=torch.ones(2), batch_size=[2]).memmap(tmp_path / "ok")
    assert Pair.load_memmap(tmp_path / "ok").a.tolist() == [1.0, 1.0]
