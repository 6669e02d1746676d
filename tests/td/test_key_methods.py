"""split_keys with default / strict / reproduce_struct / inplace / renaming key sets, separates
and filter_empty_, on TensorDicts holding text columns, constants and nested TensorDicts
(tensordict 0.14.3's results, checked side by side)."""
from __future__ import annotations

import pytest
import torch

from chatdata import TensorDict, tensorclass
from chatdata.td import LockedError


def _td():
    return TensorDict({"x": torch.zeros(2), "y": torch.ones(2), "s": ["a", "b"], "c": "k",
                       "n": {"z": torch.ones(2), "w": torch.zeros(2), "t": ["p", "q"], "m": {"u": torch.ones(2)}}}, [2])


def _keys(td):
    return sorted(map(str, td.keys(True)))


def test_default_fills_missing_keys_with_strict_false():
    part, rest = _td().split_keys(["x", "missing", ("n", "gone"), ("new", "deep")], strict=False,
                                  default=torch.full((2,), 7.0))
    assert part["missing"].tolist() == [7.0, 7.0] and part["n", "gone"].tolist() == [7.0, 7.0]
    assert part["new", "deep"].tolist() == [7.0, 7.0] and "x" in part.keys()
    assert "x" not in rest.keys() and ("n", "z") in rest.keys(True)


def test_default_text_and_none():
    part, _ = _td().split_keys(["x", "missing"], strict=False, default="txt")
    assert part["missing"] == "txt"
    part, _ = _td().split_keys(["x", "missing"], strict=False, default=None)
    assert list(part.keys()) == ["x"]
    part, _ = _td().split_keys(["x", "missing"], strict=False)  # no default: skipped
    assert list(part.keys()) == ["x"]


def test_a_missing_key_each_set_gets_the_default():
    a, b, _ = _td().split_keys(["missing"], ["missing"], strict=False, default=torch.ones(2))
    assert a["missing"].tolist() == b["missing"].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("kwargs,words", [
    ({}, "strict=False"),
    ({"default": 0}, "default= applies with strict=False"),
])
def test_strict_missing_key_names_it_and_changes_nothing(kwargs, words):
    td = _td()
    before = _keys(td)
    with pytest.raises(KeyError) as err:
        td.split_keys(["x", "missing"], inplace=True, **kwargs)
    assert "'missing'" in str(err.value) and words in str(err.value)
    assert _keys(td) == before


def test_a_key_in_two_sets_goes_to_the_first():
    with pytest.raises(KeyError, match="earlier key set"):
        _td().split_keys(["x"], ["x"])
    a, b, _ = _td().split_keys(["x"], ["x"], strict=False)
    assert list(a.keys()) == ["x"] and list(b.keys()) == []


def test_default_that_does_not_fit_the_batch_is_refused():
    with pytest.raises(RuntimeError, match="missing"):
        _td().split_keys(["missing"], strict=False, default=0.5)


def test_reproduce_struct_keeps_nested_tds_and_text_leaves_in_every_part():
    part, rest = _td().split_keys([("n", "z")], reproduce_struct=True)
    assert _keys(part) == sorted(["s", "c", "n", "('n', 't')", "('n', 'm')", "('n', 'z')"])
    assert part["n", "m"].is_empty() and part["s"] == ["a", "b"]
    assert ("n", "m") in rest.keys(True) and ("n", "z") not in rest.keys(True)
    # without it, parts hold only their keys, and nested TensorDicts left empty leave the rest
    part, rest = _td().split_keys([("n", "m", "u")])
    assert _keys(part) == sorted(["n", "('n', 'm')", "('n', 'm', 'u')"])
    assert ("n", "m") not in rest.keys(True) and ("n", "z") in rest.keys(True)
    _, rest = _td().split_keys([("n", "m", "u")], reproduce_struct=True)
    assert rest["n", "m"].is_empty()


def test_inplace_moves_keys_out_and_prunes_empty_nested():
    td = _td()
    part, rest = td.split_keys([("n", "z"), ("n", "w"), ("n", "t"), ("n", "m", "u"), "s"], inplace=True)
    assert rest is td and _keys(td) == ["c", "x", "y"]
    assert part["n", "t"] == ["p", "q"] and part["s"] == ["a", "b"]


def test_not_inplace_leaves_self_whole():
    td = _td()
    before = _keys(td)
    td.split_keys([("n", "m", "u"), "s"], ["x"])
    assert _keys(td) == before


def test_inplace_on_a_locked_td_is_refused_before_anything_moves():
    td = _td().lock_()
    with pytest.raises(LockedError):
        td.split_keys(["x"], inplace=True)
    assert "x" in td.keys()


def test_a_dict_key_set_renames():
    obs, rest = _td().split_keys({"x": "obs", ("n", "z"): ("o", "z"), "s": "text"})
    assert _keys(obs) == sorted(["obs", "o", "('o', 'z')", "text"]) and obs["text"] == ["a", "b"]
    assert "x" not in rest.keys()


def test_bad_key_sets():
    with pytest.raises(TypeError, match="lists of keys"):
        _td().split_keys("x")
    with pytest.raises(TypeError):
        _td().split_keys([1])


def test_split_a_tensorclass_field_leaves_self_whole():
    @tensorclass
    class Pair:
        x: torch.Tensor
        y: torch.Tensor

    td = TensorDict({"p": Pair(x=torch.ones(2), y=torch.zeros(2), batch_size=[2])}, [2])
    part, rest = td.split_keys([("p", "x")])
    assert part["p", "x"].tolist() == [1.0, 1.0] and td["p"].x.tolist() == [1.0, 1.0]


def test_separates():
    td = _td()
    out = td.separates("x", ("n", "z"))
    assert _keys(out) == sorted(["x", "n", "('n', 'z')"])  # tensordict also copies every text leaf in
    assert "x" not in td.keys() and ("n", "z") not in td.keys(True) and td["s"] == ["a", "b"]
    assert list(td.separates("missing", strict=False).keys()) == []
    assert td.separates("missing", default=torch.ones(2))["missing"].tolist() == [1.0, 1.0]
    td = _td()
    td.separates(("n", "m", "u"), filter_empty=False)
    assert td["n", "m"].is_empty()
    with pytest.raises(KeyError, match="missing"):
        _td().separates("missing")


def test_filter_empty_():
    td = TensorDict({"x": torch.zeros(2), "e": {}, "n": {"m": {}, "t": ["a", "b"]}, "o": {"m": {"k": {}}},
                     "c": {"k": "const"}}, [2])
    assert td.filter_empty_() is td
    assert _keys(td) == sorted(["x", "n", "('n', 't')", "c", "('c', 'k')"])
    locked = TensorDict({"e": {}}, []).lock_()
    with pytest.raises(LockedError):
        locked.filter_empty_()
    assert "e" in locked.keys()
