"""``assert_allclose_td`` and ``print_directory_tree``; a saved tensorclass loads back as its class."""
from __future__ import annotations

import pytest
import torch

from chatdata import TensorDict, tensorclass
from chatdata.td import assert_allclose_td, print_directory_tree


@tensorclass
class Sample:
    x: torch.Tensor
    label: str


def test_assert_allclose_td_accepts_close_values_and_nested_entries():
    a = TensorDict({"x": torch.zeros(3), "n": {"y": torch.ones(2)}, "s": "hi"}, [])
    b = TensorDict({"x": torch.zeros(3) + 1e-9, "n": {"y": torch.ones(2)}, "s": "hi"}, [])
    assert assert_allclose_td(a, b) is True
    s = Sample(x=torch.ones(2), label=["a", "b"], batch_size=[2])
    assert assert_allclose_td(s, s.clone())


def test_assert_allclose_td_names_what_differs():
    a = TensorDict({"x": torch.zeros(3), "s": "hi"}, [])
    with pytest.raises(AssertionError, match="only in actual \\['x'\\], only in expected \\['z'\\]"):
        assert_allclose_td(a.exclude("s"), TensorDict({"z": torch.zeros(3)}, []))
    with pytest.raises(AssertionError, match="entry 'x'"):
        assert_allclose_td(a, TensorDict({"x": torch.ones(3), "s": "hi"}, []))
    with pytest.raises(AssertionError, match="checkpoint: entry 's': 'hi' != 'ho'"):
        assert_allclose_td(a, TensorDict({"x": torch.zeros(3), "s": "ho"}, []), msg="checkpoint")
    assert_allclose_td(a, TensorDict({"x": torch.full((3,), 0.01), "s": "hi"}, []), atol=0.1, rtol=0)


def test_print_directory_tree_lists_the_saved_files(tmp_path, capsys):
    Sample(x=torch.arange(4.0), label=list("abcd"), batch_size=[4]).save(tmp_path / "saved")
    text = print_directory_tree(tmp_path / "saved")
    assert text.splitlines()[0].startswith("Directory size: ")
    assert "saved/" in text and " B)" in text
    assert capsys.readouterr().out.strip() == text.strip()


def test_a_saved_tensorclass_loads_back_as_its_class(tmp_path):
    s = Sample(x=torch.rand(2, 3), label="same", batch_size=[2])
    s.save(tmp_path)
    back = TensorDict.load(tmp_path)
    assert type(back) is Sample and back.label == "same" and (back == s).all()
