"""state_dict / load_state_dict (flat, nested, legacy) and consolidate()."""
from __future__ import annotations

import pickle

import pytest
import torch

from chatdata import MemoryMappedTensor, TensorDict, tensorclass


def make_td():
    return TensorDict({"a": torch.arange(3.0), "b": TensorDict({"c": torch.ones(3, 1)}, [3, 1])}, [3])


class TestStateDict:
    def test_flat_default_with_metadata(self):
        td = make_td()
        sd = td.state_dict()
        assert list(sd.keys()) == ["a", "b.c"]
        assert sd._metadata == {"": {"batch_size": [3], "device": None}, "b": {"batch_size": [3, 1], "device": None}}
        assert not sd["a"].requires_grad

    def test_nested(self):
        sd = make_td().state_dict(flatten=False)
        assert list(sd.keys()) == ["a", "b"] and list(sd["b"].keys()) == ["c"]
        assert sd._metadata[""]["batch_size"] == [3]
        assert sd["b"]._metadata[""]["batch_size"] == [3, 1]

    def test_keep_vars_and_prefix(self):
        td = make_td()
        assert td.state_dict(keep_vars=True)["a"] is td["a"]
        assert list(td.state_dict(prefix="m.").keys()) == ["m.a", "m.b.c"]

    @pytest.mark.parametrize("fmt", ["flat", "nested", "legacy"])
    def test_load_each_format_auto_detected(self, fmt):
        src = make_td()
        if fmt == "flat":
            sd = src.state_dict()
        elif fmt == "nested":
            sd = src.state_dict(flatten=False)
        else:
            sd = {"a": src["a"].clone(), "__batch_size": torch.Size([3]), "__device": None,
                  "b": {"c": src["b", "c"].clone(), "__batch_size": torch.Size([3, 1]), "__device": None}}
        dest = make_td().zero_()
        ref = dest["a"]
        dest.load_state_dict(sd)
        assert (dest == src).all()
        assert dest["a"] is ref  # loaded in place
        assert dest["b"].batch_size == torch.Size([3, 1])

    def test_load_into_empty_builds_structure(self):
        dest = TensorDict()
        dest.load_state_dict(make_td().state_dict())
        assert dest.batch_size == torch.Size([3]) and dest["b"].batch_size == torch.Size([3, 1])
        assert (dest == make_td()).all()

    def test_strict(self):
        td = make_td()
        with pytest.raises(KeyError, match="missing"):
            td.load_state_dict({"a": torch.zeros(3)})
        td.load_state_dict({"a": torch.zeros(3)}, strict=False)
        assert td["a"].sum() == 0

    def test_non_tensor_entries_in_metadata(self):
        td = TensorDict({"a": torch.zeros(2), "s": "hi", "l": ["x", "y"], "d": {"k": torch.zeros(2)}}, [2])
        sd = td.state_dict()
        assert list(sd.keys()) == ["a", "d.k"]
        assert sd._metadata[""]["_non_tensor"] == {"s": "hi", "l": ["x", "y"]}
        dest = TensorDict({"a": torch.ones(2), "d": {"k": torch.ones(2)}}, [2])
        dest.load_state_dict(sd)
        assert dest["s"] == "hi" and dest["l"].tolist() == ["x", "y"]

    @pytest.mark.parametrize("flatten", [True, False])
    def test_round_trip_through_torch_save(self, tmp_path, flatten):
        # torch.load defaults to weights_only=True: the state dict must be a plain OrderedDict
        td = make_td()
        torch.save(td.state_dict(flatten=flatten), tmp_path / "sd.pt")
        sd = torch.load(tmp_path / "sd.pt")
        assert sd._metadata[""]["batch_size"] == [3]
        dest = make_td().zero_()
        dest.load_state_dict(sd)
        assert (dest == td).all()
        assert pickle.loads(pickle.dumps(td.state_dict()))._metadata == td.state_dict()._metadata


@tensorclass
class _TC:
    x: torch.Tensor
    s: str


class TestConsolidate:
    def big(self):
        return TensorDict(a=torch.randn(1000), b={"c": torch.randn(1000), "i": torch.arange(1000)},
                          t=_TC(x=torch.ones(1000, 2), s="hi", batch_size=[1000]), l=["q"] * 1000,
                          batch_size=[1000])

    def test_one_storage(self):
        td = self.big()
        c = td.consolidate()
        assert (c == td).all()
        leaves = [v for v in c.values(True, True) if isinstance(v, torch.Tensor)]
        assert len(leaves) == 4  # a, b.c, b.i and the tensorclass field t.x
        assert len({v.untyped_storage().data_ptr() for v in leaves}) == 1
        assert c["t"].s == "hi" and c["l"].tolist()[:2] == ["q", "q"]
        c["a"].zero_()
        assert td["a"].abs().sum() > 0  # a copy

    def test_pickle_size_is_about_the_data(self):
        td = TensorDict(a=torch.randn(10_000), b={"c": torch.randn(10_000)}, batch_size=[10_000])
        data_bytes = 2 * 10_000 * 4
        c = td.consolidate()
        blob = pickle.dumps(c)
        assert len(blob) < data_bytes * 1.05
        back = pickle.loads(blob)
        assert (back == td).all()
        assert back["a"].untyped_storage().data_ptr() == back["b", "c"].untyped_storage().data_ptr()

    def test_pickle_with_tensorclass_and_strings(self):
        td = self.big()
        back = pickle.loads(pickle.dumps(td.consolidate()))
        assert (back == td).all()
        assert back["t"].x.untyped_storage().data_ptr() == back["a"].untyped_storage().data_ptr()

    def test_file_backed(self, tmp_path):
        td = self.big()
        path = tmp_path / "storage.memmap"
        c = td.consolidate(str(path))
        assert path.exists() and path.stat().st_size >= 1000 * 4 * 2 + 1000 * 8 + 1000 * 2 * 4
        assert (c == td).all()
        blob = pickle.dumps(c)
        assert len(blob) < 40_000  # the file name, not the bytes (the string column still pickles)
        back = pickle.loads(blob)
        back["a"][0] = 123.0
        assert c["a"][0] == 123.0  # same file

    def test_accepts_options(self):
        td = self.big()
        c = td.consolidate(num_threads=2, device="cpu", pin_memory=True, share_memory=False)
        assert (c == td).all() and c.device == torch.device("cpu")
        shared = td.consolidate(share_memory=True)
        assert shared["a"].is_shared()

    def test_empty_and_scalar(self):
        c = TensorDict({"a": torch.tensor(1.0), "e": torch.zeros(0)}).consolidate()
        assert c["a"].item() == 1.0 and c["e"].shape == (0,)
        assert pickle.loads(pickle.dumps(c))["a"].item() == 1.0


def test_memory_mapped_tensor_basics(tmp_path):
    path = tmp_path / "x.memmap"
    t = MemoryMappedTensor.from_tensor(torch.arange(4.0), filename=path)
    assert MemoryMappedTensor.from_filename(path, torch.float32, (4,)).tolist() == [0.0, 1.0, 2.0, 3.0]
    back = pickle.loads(pickle.dumps(t))
    back[0] = 9.0
    assert t[0] == 9.0
    shm = MemoryMappedTensor.zeros(3, dtype=torch.int64)
    assert shm.is_shared() and shm.tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="truncated"):
        MemoryMappedTensor.from_filename(path, torch.float32, (100,))


def test_load_state_dict_into_leaves_that_require_grad():
    """Parameters load in place and stay parameters, as with tensordict and nn.Module (before: the
    in-place copy raised 'a leaf Variable that requires grad is being used in an in-place operation')."""
    @tensorclass
    class Params:
        w: torch.Tensor

    for make in (lambda: TensorDict({"w": torch.zeros(3, requires_grad=True)}, []),
                 lambda: Params(w=torch.zeros(3, requires_grad=True), batch_size=[])):
        obj = make()
        w = obj["w"] if isinstance(obj, TensorDict) else obj.w
        obj.load_state_dict({"w": torch.arange(3.0)})
        after = obj["w"] if isinstance(obj, TensorDict) else obj.w
        assert after is w and after.requires_grad and after.is_leaf and after.tolist() == [0.0, 1.0, 2.0]
        (after * 2).sum().backward()
        assert w.grad.tolist() == [2.0, 2.0, 2.0]
