"""TensorDict: construction, batch sizes, devices, nested keys, whole-collection operations,
locking, sharing, pickling, and the errors for bad input."""
from __future__ import annotations

import pickle

import pytest
import torch
from torch import nn

from chatdata import (
    BatchSizeError,
    LockedError,
    NonTensorData,
    NonTensorStack,
    TensorDict,
    list_to_stack,
    set_list_to_stack,
)


def make_td():
    return TensorDict(
        {
            "a": torch.arange(3.0),
            "b": {"c": torch.ones(3, 2), "d": {"e": torch.zeros(3)}},
            "s": "txt",
            "l": ["x", "y", "z"],
        },
        [3],
    )


# -- construction ---------------------------------------------------------------------------
class TestConstruction:
    def test_dict_nesting(self):
        td = make_td()
        assert isinstance(td["b"], TensorDict)
        assert isinstance(td["b", "d"], TensorDict)
        assert td["b"].batch_size == td["b", "d"].batch_size == torch.Size([3])

    def test_kwargs_or_source(self):
        # entries come from a dict or from keywords; both together raise (as in tensordict), so a
        # misspelt option such as auto_batch_size=True never becomes an entry
        assert TensorDict(a=torch.zeros(2), b=torch.ones(2), batch_size=[2])["a"].shape == (2,)
        with pytest.raises(ValueError, match=r"not both.*\['b'\]"):
            TensorDict({"a": torch.zeros(2)}, batch_size=[2], b=torch.ones(2))

    def test_defaults(self):
        td = TensorDict()
        assert td.batch_size == torch.Size([]) and td.device is None and len(list(td.keys())) == 0
        assert TensorDict({"x": torch.zeros(4)}, 4).batch_size == torch.Size([4])  # int batch size

    def test_numbers_become_tensors(self):
        td = TensorDict(i=1, f=2.5, b=True, lst=[1, 2], nested=[[1.0, 2.0]])
        assert td["i"].dtype == torch.int64 and td["i"].item() == 1
        assert td["f"].dtype == torch.float32
        assert td["b"].dtype == torch.bool
        assert td["lst"].tolist() == [1, 2]
        assert td["nested"].shape == (1, 2)

    def test_strings_and_objects_become_non_tensor_data(self):
        td = TensorDict(s="hello", n=None, d={"k": 1}, o=("tuple", "of", "str"))
        assert isinstance(td._get_raw("s"), NonTensorData)
        assert td["s"] == "hello"
        assert td["n"] is None
        assert isinstance(td["d"], TensorDict)  # dicts nest, as tensordict does
        assert td["o"] == ("tuple", "of", "str")

    def test_non_tensor_data_takes_the_batch_size(self):
        td = TensorDict(s="hello", batch_size=[4])
        assert td._get_raw("s").batch_size == torch.Size([4])
        assert td[2]["s"] == "hello"

    def test_lists_become_stacks(self):
        assert list_to_stack() is True
        td = TensorDict(l=["x", "y"], batch_size=[2])
        assert isinstance(td.get("l"), NonTensorStack)
        assert td["l"] == ["x", "y"]
        nested = TensorDict(l=[["a", "b", "c"], ["d", "e", "f"]], batch_size=[2, 3])
        assert nested.get("l").batch_size == torch.Size([2, 3])
        assert nested[1, 2]["l"] == "f"

    def test_list_without_batch_size_infers_stack_shape(self):
        td = TensorDict(l=["x", "y"])
        assert td.get("l").batch_size == torch.Size([2])

    def test_set_list_to_stack_three_ways(self):
        with set_list_to_stack(False):
            assert list_to_stack() is False
            td = TensorDict(l=["x", "y"], batch_size=[2])
            assert isinstance(td._get_raw("l"), NonTensorData)
            assert td["l"] == ["x", "y"]
        assert list_to_stack() is True

        @set_list_to_stack(False)
        def build():
            return list_to_stack(), TensorDict(l=["p"])

        mode, td = build()
        assert mode is False and isinstance(td._get_raw("l"), NonTensorData)
        assert list_to_stack() is True

        set_list_to_stack(False).set()
        try:
            assert list_to_stack() is False
        finally:
            set_list_to_stack(True).set()
        assert list_to_stack() is True

    def test_set_list_to_stack_restores_on_error(self):
        with pytest.raises(ZeroDivisionError):
            with set_list_to_stack(False):
                1 / 0
        assert list_to_stack() is True

    def test_set_list_to_stack_bad_mode(self):
        with pytest.raises(TypeError, match="bool"):
            set_list_to_stack("yes")

    def test_fromkeys(self):
        td = TensorDict.fromkeys(["a", "b", ("nested", "e")], 0)
        assert td["nested", "e"].item() == 0
        t = torch.zeros(2)
        td2 = TensorDict.fromkeys(["a", "b"], t)
        td2["a"].add_(1)
        assert td2["b"].tolist() == [0.0, 0.0]  # each key gets its own copy

    def test_from_dict(self):
        d = {"a": torch.zeros(3, 4), "b": {"c": torch.zeros(3, 4, 5)}}
        assert TensorDict.from_dict(d).batch_size == torch.Size([])
        auto = TensorDict.from_dict(d, auto_batch_size=True)
        assert auto.batch_size == torch.Size([3, 4])
        assert auto["b"].batch_size == torch.Size([3, 4, 5])
        assert TensorDict.from_dict(d, batch_dims=1).batch_size == torch.Size([3])
        assert TensorDict.from_dict(d, batch_size=[3]).batch_size == torch.Size([3])
        with_strings = TensorDict.from_dict({"a": torch.zeros(3, 4), "s": ["x", "y", "z"]}, auto_batch_size=True)
        assert with_strings.batch_size == torch.Size([3])

    def test_from_module_linear(self):
        lin = nn.Linear(2, 3)
        td = TensorDict.from_module(lin)
        assert set(td.keys()) == {"weight", "bias"}
        assert td["weight"] is lin.weight

    def test_from_module_sequential_buffers(self):
        m = nn.Sequential(nn.Linear(2, 3), nn.BatchNorm1d(3), nn.Linear(3, 1))
        td = TensorDict.from_module(m)
        assert set(td.keys(True, True)) == {
            ("0", "weight"), ("0", "bias"), ("1", "weight"), ("1", "bias"), ("1", "running_mean"),
            ("1", "running_var"), ("1", "num_batches_tracked"), ("2", "weight"), ("2", "bias"),
        }

    def test_to_module_swap_and_restore(self):
        m = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
        params = TensorDict.from_module(m)
        before = params.clone()
        zeros = params.apply(torch.zeros_like)
        old = zeros.to_module(m)
        assert m[0].weight.abs().sum() == 0
        assert (old == before).all()
        old.to_module(m)
        assert torch.equal(m[0].weight, before["0", "weight"])

    def test_to_module_inplace(self):
        m = nn.Linear(2, 3)
        zeros = TensorDict.from_module(m).apply(torch.zeros_like)
        zeros.to_module(m, inplace=True)
        assert isinstance(m.weight, nn.Parameter)
        assert m.weight.abs().sum() == 0

    @pytest.mark.filterwarnings("ignore::UserWarning")
    def test_from_to_module_transformer(self):
        tr = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=16)
        w = TensorDict.from_module(tr)
        assert len(list(w.keys(True, True))) == len(list(tr.parameters()))
        w2 = w.apply(lambda t: torch.ones_like(t))
        w2.to_module(tr, inplace=True)
        assert all(bool((p == 1).all()) for p in tr.parameters())

    def test_to_module_unknown_key(self):
        with pytest.raises(KeyError, match="nope"):
            TensorDict(nope=torch.zeros(1)).to_module(nn.Linear(1, 1))


# -- batch size ---------------------------------------------------------------------------
class TestBatchSize:
    def test_mismatch_names_the_key(self):
        with pytest.raises(BatchSizeError, match="'b'"):
            TensorDict({"a": torch.zeros(3), "b": torch.zeros(4)}, [3])
        with pytest.raises(ValueError, match="'c'"):  # BatchSizeError is a ValueError
            TensorDict({"a": {"c": torch.zeros(4)}}, [3])
        td = TensorDict({"a": torch.zeros(3)}, [3])
        with pytest.raises(BatchSizeError, match="'x'"):
            td["x"] = torch.zeros(5)

    def test_scalar_with_batch_dims_is_refused(self):
        with pytest.raises(BatchSizeError, match="'n'"):
            TensorDict(n=3, batch_size=[2])

    def test_list_of_wrong_length(self):
        with pytest.raises(ValueError, match="batch size"):
            TensorDict({"l": ["x", "y"]}, [3])

    def test_setter_validates(self):
        td = TensorDict({"a": torch.zeros(3, 4)}, [3])
        td.batch_size = [3, 4]
        assert td.batch_size == torch.Size([3, 4])
        td.batch_size = []
        with pytest.raises(BatchSizeError, match="'a'"):
            td.batch_size = [4]

    def test_bad_batch_size_values(self):
        with pytest.raises(TypeError, match="batch_size"):
            TensorDict({}, batch_size="ab")
        with pytest.raises(ValueError, match="negative"):
            TensorDict({}, batch_size=[-1])

    def test_bad_source(self):
        with pytest.raises(TypeError, match="dict"):
            TensorDict([1, 2])

    def test_shape_accessors(self):
        td = make_td()
        assert td.shape == td.batch_size == torch.Size([3])
        assert td.dim() == td.ndim == td.batch_dims == 1
        assert td.numel() == 3 and len(td) == 3
        assert td.names == [None]


# -- devices ---------------------------------------------------------------------------------
class TestDevice:
    def test_entries_move_on_set(self):
        td = TensorDict({"a": torch.zeros(2)}, [2], device="meta")
        td["b"] = torch.ones(2)
        td["n", "c"] = torch.ones(2)
        assert td["b"].device.type == "meta" and td["n", "c"].device.type == "meta"
        assert td["n"].device == torch.device("meta")

    def test_to_cpu_clear_device(self):
        td = TensorDict({"a": torch.zeros(2), "s": "x"}, [2])
        assert td.to("cpu").device == torch.device("cpu")
        assert td.cpu()["a"].device.type == "cpu"
        moved = td.to("meta")
        assert moved["a"].device.type == "meta" and td["a"].device.type == "cpu"
        assert moved.clear_device() is moved and moved.device is None
        assert moved["a"].device.type == "meta"  # entries stay where they are

    def test_to_dtype(self):
        td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2)}}, [2])
        h = td.to(torch.float16)
        assert h["a"].dtype == h["n", "b"].dtype == torch.float16

    def test_device_attribute_is_read_only(self):
        with pytest.raises(RuntimeError, match="to\\(device\\)"):
            TensorDict().device = "cpu"

    @pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
    def test_cuda_unavailable(self):
        td = make_td()
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            td.cuda()
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            td.cuda(0)


# -- keys -------------------------------------------------------------------------------------
class TestKeys:
    def test_keys_variants(self):
        td = make_td()
        assert list(td.keys()) == ["a", "b", "s", "l"]
        assert list(td.keys(include_nested=True)) == ["a", "b", ("b", "c"), ("b", "d"), ("b", "d", "e"), "s", "l"]
        assert list(td.keys(True, True)) == ["a", ("b", "c"), ("b", "d", "e"), "s", "l"]
        assert list(td.keys(leaves_only=True)) == ["a", "s", "l"]
        assert td.keys(True, True, sort=True) == ["a", ("b", "c"), ("b", "d", "e"), "l", "s"]

    def test_contains(self):
        td = make_td()
        assert ("b", "c") in td.keys(True) and ("b", "c") not in td.keys()
        assert "b" not in td.keys(True, True)
        assert ("b", ("d", "e")) in td
        assert ("b", "zz") not in td
        assert 3 not in td.keys()

    def test_get_set_del_nested(self):
        td = make_td()
        assert torch.equal(td["b", "c"], td.get(("b", "c")))
        assert torch.equal(td["b", ("d", "e")], td["b"]["d"]["e"])
        td["x", "y", "z"] = torch.ones(3)
        assert isinstance(td["x", "y"], TensorDict) and td["x", "y"].batch_size == torch.Size([3])
        td.set(("b", "new"), torch.full((3,), 2.0))
        assert td["b", "new"].tolist() == [2.0, 2.0, 2.0]
        del td["b", "new"]
        assert ("b", "new") not in td
        td.del_(("x", "y", "z"))
        assert ("x", "y", "z") not in td
        assert td.pop("a").tolist() == [0.0, 1.0, 2.0] and "a" not in td
        assert td.pop("zz", None) is None

    def test_get_default(self):
        td = make_td()
        assert td.get("zz", None) is None
        assert td.get(("b", "zz"), 5) == 5

    def test_missing_key_errors_name_the_key(self):
        td = make_td()
        with pytest.raises(KeyError, match="zz"):
            td["zz"]
        with pytest.raises(KeyError, match="zz"):
            td["b", "zz"]
        assert td.get("zz") is None  # tensordict 0.14: get() of a missing key gives None
        with pytest.raises(KeyError, match="zz"):
            del td["zz"]
        with pytest.raises(KeyError, match="zz"):
            td.pop(("b", "zz"))
        with pytest.raises(KeyError):
            td["a", "b"]  # "a" is a leaf

    def test_wrong_key_types(self):
        td = make_td()
        for bad in (3, 1.5, None, b"a"):
            with pytest.raises(TypeError, match="keys must be str"):
                td.get(bad)
            with pytest.raises(TypeError, match="keys must be str"):
                td.set(bad, torch.zeros(3))
        with pytest.raises(TypeError, match="keys must be str"):
            TensorDict({1: torch.zeros(1)})
        with pytest.raises(TypeError):
            td.del_(3)
        with pytest.raises(TypeError):
            td.get(("b", 3))

    def test_items_values(self):
        td = make_td()
        items = dict(td.items(True, True))
        assert set(items) == {"a", ("b", "c"), ("b", "d", "e"), "s", "l"}
        assert items["s"].data == "txt" and td["s"] == "txt"
        assert len(list(td.values(True, True))) == 5

    def test_update(self):
        td = make_td()
        td.update({"b": {"c": torch.zeros(3, 2), "new": torch.ones(3)}, "z": torch.ones(3)})
        assert td["b", "c"].sum() == 0 and td["b", "new"].sum() == 3 and "z" in td
        assert ("b", "d", "e") in td  # nested merge keeps the others
        other = TensorDict({"a": torch.full((3,), 7.0)}, [3])
        td.update(other)
        assert td["a"].tolist() == [7.0] * 3
        td.update({"a": torch.zeros(3), "b": {"c": torch.ones(3, 2)}}, keys_to_update=[("b", "c")])
        assert td["a"].tolist() == [7.0] * 3 and td["b", "c"].sum() == 6

    def test_update_clone(self):
        src = torch.zeros(3)
        td = TensorDict({}, [3]).update({"a": src}, clone=True)
        td["a"].add_(1)
        assert src.sum() == 0

    def test_rename_key(self):
        td = make_td()
        td.rename_key_("a", "A")
        assert "A" in td and "a" not in td
        td.rename_key_(("b", "c"), ("b", "C"))
        assert ("b", "C") in td and ("b", "c") not in td
        with pytest.raises(KeyError, match="already exists"):
            td.rename_key_("A", "s", safe=True)
        with pytest.raises(KeyError, match="zz"):
            td.rename_key_("zz", "q")

    def test_exclude_select(self):
        td = make_td()
        ex = td.exclude("a", ("b", "d", "e"))
        assert set(ex.keys(True, True)) == {("b", "c"), "s", "l"}
        assert set(td.keys(True, True)) == {"a", ("b", "c"), ("b", "d", "e"), "s", "l"}  # untouched
        assert set(td.exclude("zz").keys()) == set(td.keys())  # unknown keys are ignored
        sel = td.select("a", ("b", "d", "e"))
        assert set(sel.keys(True, True)) == {"a", ("b", "d", "e")}
        assert sel["a"] is td["a"]
        with pytest.raises(KeyError, match="zz"):
            td.select("zz")
        assert list(td.select("zz", strict=False).keys()) == []
        td.exclude("s", inplace=True)
        assert "s" not in td
        td.select("a", inplace=True)
        assert list(td.keys()) == ["a"]

    def test_flatten_unflatten_keys(self):
        td = make_td()
        flat = td.flatten_keys()
        assert list(flat.keys()) == ["a", "b.c", "b.d.e", "s", "l"]
        assert flat["s"] == "txt" and flat["l"].tolist() == ["x", "y", "z"]
        assert list(td.flatten_keys("/").keys()) == ["a", "b/c", "b/d/e", "s", "l"]
        back = flat.unflatten_keys()
        assert (back == td).all()
        assert set(back.keys(True, True)) == set(td.keys(True, True))
        td.flatten_keys(inplace=True)
        assert "b.c" in td.keys()

    def test_flatten_keys_collision(self):
        td = TensorDict({"a.b": torch.zeros(()), "a": {"b": torch.ones(())}})
        with pytest.raises(KeyError, match="a.b"):
            td.flatten_keys()


# -- whole-collection operations ---------------------------------------------------------------
class TestOps:
    def test_apply(self):
        td = make_td()
        out = td.apply(lambda x: x + 1)
        assert out["b", "c"].sum() == 12 and out["s"] == "txt" and out["l"].tolist() == ["x", "y", "z"]
        assert td["b", "c"].sum() == 6
        assert td.apply(lambda x, y: x + y, td)["a"].tolist() == [0.0, 2.0, 4.0]
        dropped = td.apply(lambda x: None if x.ndim > 1 else x)
        assert ("b", "c") not in dropped and ("b", "d", "e") in dropped
        assert td.apply(lambda x: x[0], batch_size=[]).batch_size == torch.Size([])

    def test_apply_inplace(self):
        td = make_td()
        ref = td["a"]
        assert td.apply(lambda x: x.mul(2), inplace=True) is td
        assert td["a"] is ref and ref.tolist() == [0.0, 2.0, 4.0]

    def test_clone(self):
        td = make_td()
        c = td.clone()
        c["a"].add_(5)
        c["l"][0] = "changed"
        assert td["a"].tolist() == [0.0, 1.0, 2.0]
        assert td["l"].tolist() == ["x", "y", "z"]
        assert (td.clone() == td).all()
        assert td.clone(recurse=False)["a"] is td["a"]

    def test_zero_fill(self):
        td = make_td()
        assert td.zero_() is td
        assert td["a"].sum() == 0 and td["b", "c"].sum() == 0 and td["s"] == "txt"
        td.fill_("a", 7)
        assert td["a"].tolist() == [7.0] * 3
        td.fill_("b", 2)
        assert td["b", "c"].sum() == 12 and td["b", "d", "e"].sum() == 6
        with pytest.raises(TypeError, match="'s'"):
            td.fill_("s", 1)

    def test_copy_and_update_(self):
        td = make_td()
        ref = td["b", "c"]
        td.copy_(td.apply(lambda x: x * 0 + 3))
        assert td["b", "c"] is ref and ref.sum() == 18
        td.update_({"a": torch.full((3,), 9.0)})
        assert td["a"].tolist() == [9.0] * 3
        with pytest.raises(KeyError, match="zz"):
            td.update_({"zz": torch.zeros(3)})

    def test_set_inplace(self):
        td = make_td()
        ref = td["a"]
        td.set("a", torch.ones(3), inplace=True)
        assert td["a"] is ref and ref.sum() == 3
        td.set_("a", torch.zeros(3))
        assert ref.sum() == 0
        with pytest.raises(KeyError):
            td.set_("zz", torch.zeros(3))

    def test_eq_ne_all_any(self):
        td = make_td()
        eq = td == td.clone()
        assert isinstance(eq, TensorDict) and eq.batch_size == td.batch_size
        assert eq["a"].dtype == torch.bool and eq["s"].dtype == torch.bool and eq["l"].dtype == torch.bool
        assert eq.all() and eq.any()
        ne = td != td.clone()
        assert not ne.any()
        other = td.clone()
        other["l"][1] = "Q"
        assert (td == other)["l"].tolist() == [True, False, True]
        assert not (td == other).all()
        assert (td == 0)["a"].tolist() == [True, False, False]
        assert (td.select("a") == {"a": torch.arange(3.0)}).all()
        per_elem = (td.select("a", "b") == td.select("a", "b")).all(0)
        assert per_elem.batch_size == torch.Size([])
        with pytest.raises(KeyError, match="'s'"):
            td == td.exclude("s")

    def test_truth_value_is_ambiguous(self):
        with pytest.raises(ValueError, match="ambiguous"):
            bool(make_td())

    def test_iteration(self):
        td = make_td()
        assert [x["l"] for x in td] == ["x", "y", "z"]
        with pytest.raises(TypeError, match="empty batch size"):
            list(TensorDict())

    def test_to_dict_and_empty(self):
        td = TensorDict({"a": 1, "s": "x", "n": {"l": ["p"]}}, [])
        d = td.to_dict()
        assert d["s"] == "x" and d["n"] == {"l": ["p"]} and torch.equal(d["a"], torch.tensor(1))
        e = make_td().empty()
        assert e.batch_size == torch.Size([3]) and list(e.keys()) == []
        # tensordict 0.14 keeps the text leaves (the same objects) and drops the tensors
        src = make_td()
        kept = src.empty(recurse=True)
        assert list(kept.keys(True)) == ["b", ("b", "d"), "s", "l"]
        assert kept.get("l") is src.get("l") and kept["s"] == "txt"


# -- lock, share, pickle ------------------------------------------------------------------------
class TestLockSharePickle:
    def test_lock_refuses_new_keys(self):
        td = make_td().lock_()
        assert td.is_locked and td["b"].is_locked
        with pytest.raises(RuntimeError, match="locked"):
            td["new"] = torch.zeros(3)
        with pytest.raises(LockedError, match="locked"):
            td.set(("b", "new"), torch.zeros(3))
        with pytest.raises(RuntimeError, match="locked"):
            del td["a"]
        with pytest.raises(RuntimeError, match="locked"):
            td.rename_key_("a", "A")
        with pytest.raises(RuntimeError, match="locked"):
            td.update({"new": torch.zeros(3)})

    def test_locked_in_place_writes_are_fine(self):
        td = make_td().lock_()
        ref = td["a"]
        td["a"] = torch.ones(3)  # existing key: written in place
        assert td["a"] is ref and ref.sum() == 3
        td[0] = TensorDict({"a": 5.0, "b": {"c": torch.zeros(2), "d": {"e": 0.0}}, "s": "txt", "l": "w"}, [])
        assert ref.tolist() == [5.0, 1.0, 1.0] and td["l"].tolist() == ["w", "y", "z"]
        td.update_({"a": torch.zeros(3)})
        td.zero_()
        assert td["a"].sum() == 0

    def test_unlock(self):
        td = make_td().lock_()
        td.unlock_()
        assert not td.is_locked and not td["b"].is_locked
        td["new"] = torch.zeros(3)
        td.is_locked = True
        assert td.is_locked
        assert TensorDict(lock=True).is_locked

    def test_share_memory(self):
        td = make_td()
        assert not td.is_shared()
        out = td.share_memory_()
        assert out is td and td.is_shared() and td["a"].is_shared() and td["b", "c"].is_shared()
        assert td.is_locked  # as tensordict does
        assert td["l"].tolist() == ["x", "y", "z"] and td["s"] == "txt"
        assert "is_shared=True" in repr(td)

    def test_pickle_round_trip(self):
        td = make_td()
        back = pickle.loads(pickle.dumps(td))
        assert (back == td).all()
        assert back["l"].tolist() == ["x", "y", "z"] and back["s"] == "txt"
        assert back.batch_size == td.batch_size

    def test_pickle_fancy_indexed_and_packed_strings(self):
        td = make_td()[[2, 0]]
        back = pickle.loads(pickle.dumps(td))
        assert back["l"].tolist() == ["z", "x"]
        packed = TensorDict(l=NonTensorStack.from_list(["é", "b", "ccc"]).packed(), batch_size=[3])[1:]
        assert pickle.loads(pickle.dumps(packed))["l"].tolist() == ["b", "ccc"]

    def test_pickle_mixed_values(self):
        td = TensorDict(v=NonTensorStack.from_list([1, "a", None, {"x": 2}]), batch_size=[4])
        assert pickle.loads(pickle.dumps(td))["v"].tolist() == [1, "a", None, {"x": 2}]

    def test_pickle_locked(self):
        td = make_td().lock_()
        back = pickle.loads(pickle.dumps(td))
        assert back.is_locked


def test_repr_with_strings():
    td = TensorDict(a="s", l=["x", "y"], n=torch.arange(2), batch_size=[2])
    assert repr(td) == (
        "TensorDict(\n"
        "    fields={\n"
        "        a: NonTensorData(data=s, batch_size=torch.Size([2]), device=None),\n"
        "        l: NonTensorStack(\n"
        "            ['x', 'y'],\n"
        "            batch_size=torch.Size([2]),\n"
        "            device=None),\n"
        "        n: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.int64, is_shared=False)},\n"
        "    batch_size=torch.Size([2]),\n"
        "    device=None,\n"
        "    is_shared=False)"
    )
