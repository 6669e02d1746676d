"""Bad input to TensorDict's stack / cat / split / chunk / rename / unflatten / update_:
a clear error, and a refused call leaves the TensorDict as it was."""
import pytest
import torch

from chatdata.td import NonTensorData, NonTensorStack, TensorDict


def _td(**entries):
    return TensorDict(entries, batch_size=[2])


# -- cat / stack ---------------------------------------------------------------------------
def test_cat_with_an_extra_key_in_a_later_item_is_refused_not_dropped():
    a, b = _td(x=torch.zeros(2)), _td(x=torch.ones(2), y=torch.ones(2))
    with pytest.raises(KeyError, match=r"item 1 has extra keys \['y'\]"):
        torch.cat([a, b])
    with pytest.raises(KeyError, match=r"item 1 lacks \['y'\]"):
        torch.cat([b, a])


@pytest.mark.parametrize("dim", [1, 5, -2])
def test_cat_dim_out_of_range_is_refused_not_wrapped(dim):
    a = _td(x=torch.zeros(2, 3))
    with pytest.raises(IndexError, match=f"cat dim {dim} out of range"):
        torch.cat([a, a], dim=dim)
    assert torch.cat([a, a], dim=-1).batch_size == (4,)


@pytest.mark.parametrize("op", [torch.cat, torch.stack])
@pytest.mark.parametrize("second", [{"n": torch.zeros(2)}, "text", torch.zeros(2)])
def test_an_entry_of_different_kinds_across_items_names_the_key(op, second):
    first = {"n": torch.zeros(2)} if not isinstance(second, dict) else torch.zeros(2)
    with pytest.raises(TypeError, match=r"entry 'v': it is .* in item 0 but .* in item 1"):
        op([_td(v=first), _td(v=second)])


def test_cat_of_a_tensordict_and_a_tensor_is_a_type_error():
    with pytest.raises(TypeError, match="cannot cat"):
        torch.cat([_td(x=torch.zeros(2)), torch.zeros(2)])


# -- split / chunk -------------------------------------------------------------------------
def test_split_sizes_with_a_negative_entry_are_refused():
    td = TensorDict(x=torch.arange(4), batch_size=[4])
    with pytest.raises(ValueError, match="non-negative ints"):
        td.split([5, -1])  # sums to 4, but used to give a first piece of 4 items, not 5
    assert [p.batch_size[0] for p in td.split([0, 4])] == [0, 4]


@pytest.mark.parametrize("bad", [1.5, True, "2"])
def test_split_size_of_a_wrong_type_is_a_type_error(bad):
    with pytest.raises(TypeError, match="split_size must be an int or a list of ints"):
        _td(x=torch.arange(2)).split(bad)


@pytest.mark.parametrize("bad, err", [(0, ValueError), (-1, ValueError), (1.5, TypeError)])
def test_chunk_count_must_be_a_positive_int(bad, err):
    with pytest.raises(err, match="chunks must be a positive int"):
        _td(x=torch.arange(2)).chunk(bad)
    assert [p["x"].tolist() for p in _td(x=torch.arange(2)).chunk(torch.tensor(2))] == [[0], [1]]


# -- rename_key_ / unflatten_keys / update_ ----------------------------------------------
@pytest.mark.parametrize("new", [("y", 3), ("x", "y")])
def test_a_refused_rename_keeps_the_entry(new):
    td = _td(a=torch.arange(2), x=torch.ones(2))  # ("x", "y") runs through the leaf x
    with pytest.raises((TypeError, KeyError)):
        td.rename_key_("a", new)
    assert set(td.keys()) == {"a", "x"} and td["a"].tolist() == [0, 1]


def test_unflatten_keys_refuses_two_keys_that_name_one_entry():
    td = TensorDict({"a.b": torch.ones(2), "a": torch.zeros(2)}, batch_size=[2])
    with pytest.raises(KeyError, match="collides"):
        td.unflatten_keys()  # "a" used to silently replace the sub-TensorDict holding "b"
    with pytest.raises(KeyError, match="collides"):
        td.unflatten_keys(inplace=True)
    assert set(td.keys()) == {"a.b", "a"}
    ok = TensorDict({"a.b": 1, "a.c": 2}).unflatten_keys()
    assert set(ok.keys(include_nested=True)) == {"a", ("a", "b"), ("a", "c")}


def test_update_inplace_with_a_missing_key_writes_nothing():
    td = _td(a=torch.zeros(2), b=torch.zeros(2))
    with pytest.raises(KeyError, match=r"keys \['c'\] are not in the destination"):
        td.update_({"a": torch.ones(2), "c": torch.ones(2)})
    assert td["a"].tolist() == [0.0, 0.0]


# -- td[index] = value -------------------------------------------------------------------
def _two():
    return TensorDict(a=torch.zeros(4, 3), b=torch.zeros(4), n={"x": torch.zeros(4, 2)}, batch_size=[4])


@pytest.mark.parametrize("value", [torch.ones(3), TensorDict(a=torch.ones(3), b=torch.ones(5)),
                                   TensorDict(c=torch.ones(2), b=torch.ones(5)), {"n": {"x": torch.ones(7)}}])
def test_setitem_that_one_entry_refuses_writes_nothing(value):
    td = _two()
    with pytest.raises(ValueError, match=r"cannot set td\[0\]: entry .* does not broadcast to it"):
        td[0] = value
    assert td["a"].abs().sum() == 0 and td["b"].abs().sum() == 0 and set(td.keys()) == {"a", "b", "n"}


def test_setitem_names_a_nested_entry_and_a_non_number_value():
    td = _two()
    with pytest.raises(ValueError, match=r"entry \('n', 'x'\) has shape \(2, 2\)"):
        td[0:2] = TensorDict(n={"x": torch.ones(2, 3)}, batch_size=[2])
    with pytest.raises(TypeError, match=r"entry 'a' is a tensor and the value for it is a str"):
        td[0] = TensorDict(a="text")
    assert td["a"].abs().sum() == 0


def test_setitem_still_broadcasts_what_torch_broadcasts():
    td = _two()
    td[1] = 2.0
    td[0] = TensorDict(a=torch.ones(1), b=torch.tensor(3.0), n={"x": [4.0, 5.0]})
    td[2:4] = TensorDict(a=torch.full((2, 3), 6.0), batch_size=[2])
    assert td["a"][:, 0].tolist() == [1.0, 2.0, 6.0, 6.0] and td["b"].tolist() == [3.0, 2.0, 0.0, 0.0]
    assert td["n", "x"][0].tolist() == [4.0, 5.0]


# -- update / update_ / set(inplace=True) ------------------------------------------------
@pytest.mark.parametrize("src", [{"a": torch.ones(4, 3), "z": torch.ones(7)},
                                 {"a": torch.ones(4, 3), "n": {"x": torch.ones(5)}},
                                 {"b": torch.ones(4), "new": {"deep": torch.ones(3)}}])
def test_a_refused_update_changes_nothing(src):
    td = _two()
    with pytest.raises(ValueError, match="batch dimension mismatch"):
        td.update(src)
    assert td["a"].abs().sum() == 0 and td["b"].abs().sum() == 0 and set(td.keys()) == {"a", "b", "n"}
    assert set(td["n"].keys()) == {"x"}


@pytest.mark.parametrize("src, err, match", [
    ({"a": torch.ones(4, 3), ("n", "x"): torch.ones(5)}, ValueError, "batch dimension mismatch for key 'x'"),
    ({"a": torch.ones(4, 3), ("new", "deep"): torch.ones(7)}, ValueError, "batch dimension mismatch for key 'deep'"),
    ({"a": torch.ones(4, 3), ("b", "x"): torch.ones(4)}, KeyError, "'b' is a leaf, not a TensorDict"),
    ({"a": torch.ones(4, 3), ("n", 5): torch.ones(4)}, TypeError, "keys must be str or tuples of str"),
])
def test_a_refused_update_with_nested_keys_changes_nothing(src, err, match):
    # was: 'a' written before the tuple key failed
    td = _two()
    with pytest.raises(err, match=match):
        td.update(src)
    assert td["a"].abs().sum() == 0 and set(td.keys()) == {"a", "b", "n"} and set(td["n"].keys()) == {"x"}


def test_update_with_nested_keys():
    td = _two()
    td.update({("n", "x"): torch.ones(4, 2), ("m", "k", "v"): torch.ones(4), ("b",): torch.full((4,), 2.0)})
    assert td["n", "x"].sum() == 8 and td["m", "k", "v"].shape == (4,) and td["b"].tolist() == [2.0] * 4
    td.update({("n", "x"): torch.zeros(4, 2), ("n", "y"): torch.ones(4)}, keys_to_update=[("n", "x")])
    assert td["n", "x"].sum() == 0 and "y" not in td["n"].keys()


@pytest.mark.parametrize("how", ["update_", "update-inplace"])
def test_a_refused_in_place_update_writes_nothing(how):
    td = _two()
    src = {"b": torch.ones(4), "n": {"x": torch.ones(4, 5)}}
    with pytest.raises(ValueError, match=r"cannot write in place: entry \('n', 'x'\) has shape \(4, 2\)"):
        td.update_(src) if how == "update_" else td.update(src, inplace=True)
    assert td["b"].abs().sum() == 0
    with pytest.raises(KeyError, match=r"keys \['y'\] of 'n' are not in the destination"):
        td.update_({"b": torch.ones(4), "n": {"y": torch.ones(4)}})
    assert td["b"].abs().sum() == 0


def test_set_inplace_with_a_wrong_shape_names_the_entry():
    td = _two()
    with pytest.raises(ValueError, match=r"cannot write entry 'b' of shape \(4,\) in place with a value of shape \(3,\)"):
        td.set("b", torch.ones(3), inplace=True)
    td.set("b", torch.ones(1), inplace=True)  # broadcasting still works
    assert td["b"].tolist() == [1.0] * 4


def test_a_key_tuple_with_a_non_str_part_is_a_key_error_not_an_index_error():
    td = _two()
    with pytest.raises(TypeError, match=r"keys must be str or tuples of str, got int \(1\)"):
        td["a", 1]
    with pytest.raises(TypeError, match=r"keys must be str or tuples of str"):
        td["n", 0] = torch.ones(4)
    assert set(td["n"].keys()) == {"x"} and td[0, ...].batch_size == ()


# -- batch sizes of non-tensor leaves, from_dict(auto_batch_size=True) --------------------
@pytest.mark.parametrize("make", [lambda bs: NonTensorData("a", batch_size=bs),
                                  lambda bs: NonTensorStack.from_list(["a"], batch_size=bs)])
def test_non_tensor_batch_sizes_are_checked_like_tensordicts(make):
    with pytest.raises(ValueError, match=r"batch_size \(-1,\) has negative dims"):
        make([-1])
    with pytest.raises(TypeError, match="batch_size must be a sequence of ints"):
        make([1.5])


def test_to_dict_from_dict_auto_batch_size_round_trip_keeps_the_batch():
    td = TensorDict(a=torch.arange(3), s=["x", "y", "z"], c="const", n={"b": torch.ones(3, 2)}, batch_size=[3])
    back = TensorDict.from_dict(td.to_dict(), auto_batch_size=True, batch_dims=1)
    assert back.batch_size == (3,) and back.get("c").batch_size == (3,) and back[1]["c"] == "const"
    with pytest.raises(ValueError, match="batch_dims must be a non-negative int"):
        TensorDict.from_dict(td.to_dict(), batch_dims=-1)


@pytest.mark.parametrize("value", [0, 7.5, torch.tensor(7.0)])
def test_setitem_of_a_number_leaves_text_columns_alone(value):
    td = TensorDict(a=torch.ones(3), s=["x", "y", "z"], c="const", batch_size=[3])
    td[0] = value  # used to write the number into "s" and "c" as well
    assert td["a"][0].item() == float(value) and td["s"].tolist() == ["x", "y", "z"] and td["c"] == "const"
    td[1] = TensorDict(s="w", batch_size=[])  # a collection still writes text
    assert td["s"].tolist() == ["x", "w", "z"]


# -- numpy indices (np.argmax, np.random.permutation ...) ----------------------------------
def test_numpy_indices_work_as_torch_ones_and_float_arrays_are_refused():
    import numpy as np

    from chatdata.td import RaggedTensorDict

    td = TensorDict(a=torch.arange(6).reshape(2, 3), s=[["a", "b", "c"], ["d", "e", "f"]], batch_size=[2, 3])
    assert td[np.int64(1)]["s"].tolist() == ["d", "e", "f"]
    assert td[np.array([1, 0])]["a"][:, 0].tolist() == [3, 0]
    assert td[np.array([True, False])].batch_size == (1, 3)
    assert td[np.int32(1), np.array([2, 0])]["a"].tolist() == [5, 3]
    with pytest.raises(IndexError, match="numpy indices must hold ints or bools"):
        td[np.array([0.5])]
    r = RaggedTensorDict(TensorDict(x=torch.arange(5), batch_size=[5]), torch.tensor([0, 2, 5]))
    assert r[np.int64(1)]["x"].tolist() == [2, 3, 4]  # was "a ragged stack takes 1-D selections of items"


def test_where_with_one_number_or_tensor_for_every_leaf():
    td = TensorDict(a=torch.arange(6.0).reshape(2, 3), b=torch.ones(2, 3, 4), batch_size=[2, 3])
    cond = torch.tensor([[True, False, True], [False, True, False]])
    assert td.where(cond, 0)["a"].tolist() == [[0.0, 0.0, 2.0], [0.0, 4.0, 0.0]]  # was "'int' object has no attribute 'get'"
    assert td.where(cond, torch.tensor(-1.0))["b"][0, 1].tolist() == [-1.0] * 4
