"""NonTensorData and NonTensorStack: every method of seed 001, and the column layout."""
from __future__ import annotations

import pickle

import pytest
import torch

from chatdata import NonTensorData, NonTensorStack, TensorDict


class TestNonTensorData:
    def test_data_batch_size_device_names(self):
        d = NonTensorData("foo", batch_size=[3])
        assert d.data == "foo"
        assert d.batch_size == torch.Size([3])
        assert d.device is None and NonTensorData("x", batch_size=[], device="cpu").device == torch.device("cpu")
        assert d.names == [None]

    def test_get_set(self):
        d = NonTensorData("foo", batch_size=[2])
        assert d.get("data") == "foo" and d.get(("data",)) == "foo"
        assert d.get("zz", 1) == 1
        with pytest.raises(KeyError, match="zz"):
            d.get("zz")
        assert d.set("data", "bar") is d and d.data == "bar"
        d.set("data", NonTensorData("baz"))
        assert d.data == "baz"
        with pytest.raises(KeyError, match="zz"):
            d.set("zz", 1)
        assert d["data"] == "baz"

    def test_tolist(self):
        assert NonTensorData("x").tolist() == "x"
        assert NonTensorData("x", batch_size=[2, 2]).tolist() == [["x", "x"], ["x", "x"]]

    def test_maybe_to_stack(self):
        s = NonTensorData("x", batch_size=[3]).maybe_to_stack()
        assert isinstance(s, NonTensorStack) and s.tolist() == ["x", "x", "x"]
        zero_d = NonTensorData("x")
        assert zero_d.maybe_to_stack() is zero_d

    def test_unbind_and_index(self):
        d = NonTensorData({"k": 1}, batch_size=[3])
        parts = d.unbind(0)
        assert len(parts) == 3 and all(p.data == {"k": 1} and p.batch_size == torch.Size([]) for p in parts)
        assert d[1:].batch_size == torch.Size([2])
        with pytest.raises(IndexError):
            d[5]
        with pytest.raises(RuntimeError, match="maybe_to_stack"):
            d[0] = "y"

    def test_state_dict(self):
        d = NonTensorData("foo", batch_size=[3])
        sd = d.state_dict()
        assert list(sd.keys()) == []
        assert sd._metadata[""]["_non_tensor"] == {"data": "foo"}
        other = NonTensorData("q", batch_size=[3]).load_state_dict(sd)
        assert other.data == "foo"

    def test_from_tensordict_and_fields(self):
        d = NonTensorData.from_tensordict(TensorDict(data=NonTensorData("z", batch_size=[2]), batch_size=[2]))
        assert d.data == "z" and d.batch_size == torch.Size([2])
        d2 = NonTensorData.from_tensordict(TensorDict(), {"data": "w"})
        assert d2.data == "w"
        assert [f.name for f in NonTensorData.fields()] == ["data"]

    def test_eq_clone_to_pickle_repr(self):
        d = NonTensorData("foo", batch_size=[2])
        assert (d == "foo").all() and not (d != "foo").any()
        assert (d == NonTensorData("foo", batch_size=[2])).all()
        c = NonTensorData({"k": [1]}, batch_size=[])
        c2 = c.clone()
        c2.data["k"].append(2)
        assert c.data == {"k": [1]}
        assert d.to("meta").device == torch.device("meta") and d.cpu().device == torch.device("cpu")
        back = pickle.loads(pickle.dumps(d))
        assert back.data == "foo" and back.batch_size == d.batch_size
        assert repr(d) == "NonTensorData(data=foo, batch_size=torch.Size([2]), device=None)"
        assert d.expand(4, 2).batch_size == torch.Size([4, 2])

    def test_stack(self):
        same = torch.stack([NonTensorData("a"), NonTensorData("a")])
        assert isinstance(same, NonTensorData) and same.batch_size == torch.Size([2])
        diff = torch.stack([NonTensorData("a"), NonTensorData("b")])
        assert isinstance(diff, NonTensorStack) and diff.tolist() == ["a", "b"]
        with pytest.raises(ValueError, match="different batch sizes"):
            torch.stack([NonTensorData("a", batch_size=[1]), NonTensorData("a", batch_size=[2])])


class TestNonTensorStack:
    def test_construct(self):
        s = NonTensorStack(NonTensorData("x"), NonTensorData("y"))
        assert s.tolist() == ["x", "y"] and s.batch_size == torch.Size([2])
        assert NonTensorStack("x", "y").tolist() == ["x", "y"]
        assert NonTensorStack(["x", "y"]).tolist() == ["x", "y"]
        grid = NonTensorStack.from_list([["a", "b"], ["c", "d"]])
        assert grid.batch_size == torch.Size([2, 2])
        assert NonTensorStack.from_list([["a", "b"], ["c"]]).batch_size == torch.Size([2])  # ragged: values
        assert NonTensorStack().batch_size == torch.Size([0])
        assert NonTensorStack.lazy_stack([NonTensorData("a"), NonTensorData("b")]).tolist() == ["a", "b"]
        with pytest.raises(ValueError, match="batch size"):
            NonTensorStack.from_list(["a"], batch_size=[2])

    def test_data_tolist_get_set(self):
        s = NonTensorStack.from_list([["a", "b"], ["c", "d"]])
        assert s.data == s.tolist() == s.get("data") == [["a", "b"], ["c", "d"]]
        s.set("data", [["1", "2"], ["3", "4"]])
        assert s.tolist() == [["1", "2"], ["3", "4"]]
        with pytest.raises(KeyError, match="zz"):
            s.get("zz")
        with pytest.raises(KeyError, match="zz"):
            s.set("zz", 1)
        assert s.maybe_to_stack() is s

    def test_index_and_setitem(self):
        s = NonTensorStack.from_list([["a", "b"], ["c", "d"]])
        assert s[0, 1].data == "b"
        assert s[:, 1].tolist() == ["b", "d"]
        assert s[[1, 0]].tolist() == [["c", "d"], ["a", "b"]]
        s[0, 1] = "Z"
        s[1] = ["p", "q"]
        assert s.tolist() == [["a", "Z"], ["p", "q"]]
        s[:, 0] = NonTensorStack.from_list(["m", "n"])
        assert s.tolist() == [["m", "Z"], ["n", "q"]]
        s[...] = NonTensorData("all")
        assert s.tolist() == [["all", "all"], ["all", "all"]]
        with pytest.raises(IndexError):
            s[2]

    def test_unbind(self):
        s = NonTensorStack.from_list([["a", "b"], ["c", "d"]])
        assert [u.tolist() for u in s.unbind(0)] == [["a", "b"], ["c", "d"]]
        assert [u.tolist() for u in s.unbind(1)] == [["a", "c"], ["b", "d"]]

    def test_state_dict_and_from_tensordict(self):
        s = NonTensorStack.from_list([["a", "b"], ["c", "d"]])
        sd = s.state_dict()
        assert sd._metadata[""]["_non_tensor"]["data"] == [["a", "b"], ["c", "d"]]
        t = NonTensorStack.from_list([["x", "y"], ["z", "w"]]).load_state_dict(sd)
        assert t.tolist() == [["a", "b"], ["c", "d"]]
        assert NonTensorStack.from_tensordict(TensorDict(data=["p", "q"], batch_size=[2])).tolist() == ["p", "q"]
        assert [f.name for f in NonTensorStack.fields()] == ["data"]

    def test_eq_clone_pickle(self):
        s = NonTensorStack.from_list(["a", "b", "c"])
        assert (s == s.clone()).all()
        assert (s == "b").tolist() == [False, True, False]
        assert (s != NonTensorData("b")).tolist() == [True, False, True]
        c = s.clone()
        c[0] = "Z"
        assert s.tolist() == ["a", "b", "c"]
        with pytest.raises(ValueError, match="shapes"):
            s == NonTensorStack.from_list(["a"])
        assert pickle.loads(pickle.dumps(s[[2, 0]])).tolist() == ["c", "a"]

    def test_mixed_values_and_unicode(self):
        vals = [1, "é", None, {"x": [2]}, "😀"]
        s = NonTensorStack.from_list(vals)
        assert s.tolist() == vals
        assert pickle.loads(pickle.dumps(s)).tolist() == vals
        assert s.packed().tolist() == vals
        obj = object()
        assert pickle.loads(pickle.dumps(NonTensorStack.from_list(["a", 1])))[1].data == 1
        assert NonTensorStack.from_list([obj, "a"])[0].data is obj

    def test_packed_column(self):
        s = NonTensorStack.from_list(["ab", "", "é", "xyz"])
        p = s.packed()
        assert p._pool.is_packed and p.tolist() == ["ab", "", "é", "xyz"]
        assert p[[3, 1]].tolist() == ["xyz", ""]
        assert p[1:3].tolist() == ["", "é"]
        assert p.flip(0).packed().tolist() == ["xyz", "é", "", "ab"]
        p[0] = "new"  # appended after packing: ids of the others unchanged
        assert p.tolist() == ["new", "", "é", "xyz"]

    def test_million_strings_are_cheap(self):
        vals = [f"s{i}" for i in range(1_000_000)]
        s = NonTensorStack.from_list(vals)
        assert s.batch_size == torch.Size([1_000_000])
        assert s[123_456].data == "s123456"
        assert s[999_990:].tolist()[-1] == "s999999"
        idx = torch.tensor([5, 999_999, 0])
        assert s[idx].tolist() == ["s5", "s999999", "s0"]
        assert s.reshape(1000, 1000)[3, 7].data == "s3007"

    def test_repr(self):
        assert repr(NonTensorStack.from_list(["x", "y"])) == (
            "NonTensorStack(\n    ['x', 'y'],\n    batch_size=torch.Size([2]),\n    device=None)"
        )


def test_value_nbytes_and_value_counts_packed_and_unpacked(tmp_path):
    values = ["user", "assistant", "user", "système", "", "user"]
    stack = NonTensorStack.from_list(values)
    want_sizes = [len(v.encode()) for v in values]
    assert stack.value_nbytes().tolist() == want_sizes
    assert stack.value_counts() == {"user": 3, "assistant": 1, "système": 1, "": 1}
    packed = stack.packed()
    assert packed._pool.is_packed
    assert packed.value_nbytes().tolist() == want_sizes
    assert packed.value_counts() == {"user": 3, "assistant": 1, "système": 1, "": 1}
    # a fancy-indexed view of a packed column counts only its own elements
    sub = packed[torch.tensor([1, 3, 3])]
    assert sub.value_nbytes().tolist() == [9, 8, 8]
    assert sub.value_counts() == {"système": 2, "assistant": 1}


def test_value_counts_of_a_packed_column_tells_trailing_nuls_apart():
    # the packed count pads short values with zero bytes: "a" and "a\x00" were one row, counted as "a"
    values = ["a", "a\x00", "a", "", "\x00", "", "b\x00\x00"]
    want = {"a": 2, "": 2, "a\x00": 1, "\x00": 1, "b\x00\x00": 1}
    assert NonTensorStack.from_list(values).value_counts() == want
    assert NonTensorStack.from_list(values).packed().value_counts() == want


def test_value_counts_of_unhashable_values_counts_their_json():
    stack = NonTensorStack.from_list([{"a": 1}, None, {"a": 1}])
    assert stack.value_counts() == {'{"a": 1}': 2, "null": 1}
    assert stack.value_nbytes().tolist() == [8, 0, 8]  # None has no text


def test_a_view_of_consecutive_values_packs_without_a_copy_and_checks_its_offsets():
    """h[i]'s message columns are tensor-indexed views of consecutive values: packing them gave a
    byte gather; now they are views of the pool's bytes, like a range, with its offsets checked."""
    p = NonTensorStack.from_list(["ab", "", "é", "xyz", "q"]).packed()
    view = p[torch.tensor([1, 2, 3])].unsqueeze(0)  # a tensor index, 2-D: not a range
    data, off, kind = view.packed_column()
    assert data.data_ptr() == p.packed_column()[0].data_ptr() and kind == "str"
    assert [bytes(data[a:b].numpy()).decode() for a, b in zip(off[:-1].tolist(), off[1:].tolist())] == ["", "é", "xyz"]
    assert view.to_arrow().to_pylist() == [["", "é", "xyz"]]
    assert p[torch.tensor([3, 1])].packed_column()[1].tolist() == [0, 3, 3]  # out of order: gathered
    bad = NonTensorStack.from_packed(torch.tensor(list(b"abcd"), dtype=torch.uint8), torch.tensor([0, 1, 3, 2, 4]))
    with pytest.raises(ValueError, match="corrupt offsets: offset 3 is 2, after 3"):
        bad[torch.tensor([1, 2, 3])].packed_column()
