"""Specs refuse bad input clearly and leave themselves unchanged when they refuse."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from chatdata.specs import Binary, Bounded, Categorical, Composite, Unbounded


def test_a_refused_nested_set_leaves_no_empty_sub_composites():
    spec = Composite(a=Unbounded(shape=(2, 3)), shape=(2,))
    with pytest.raises(ValueError, match="does not start with the Composite's shape"):
        spec.set(("q", "r", "x"), Unbounded(shape=(3,)))
    with pytest.raises(TypeError, match="must be specs"):
        spec[("q", "x")] = 5
    assert list(spec.keys(True)) == ["a"]
    spec.set(("q", "r", "x"), Unbounded(shape=(2, 3)))  # an accepted one still creates them
    assert list(spec.keys(True)) == ["a", "q", ("q", "r"), ("q", "r", "x")]
    with pytest.raises(ValueError, match="does not start"):
        spec.set(("q", "s", "y"), Unbounded(shape=(4,)))
    assert list(spec.keys(True)) == ["a", "q", ("q", "r"), ("q", "r", "x")]


@pytest.mark.parametrize("dtype, n", [(torch.float16, 2050), (torch.bfloat16, 258)])
def test_float_categorical_whose_categories_are_not_exact_is_refused(dtype, n):
    # before: float16 with n=5000 sampled 5000 (4999 rounds up), a value its own is_in refused
    with pytest.raises(ValueError, match="not all exact"):
        Categorical(n, dtype=dtype)
    spec = Categorical(n - 1, shape=(4000,), dtype=dtype)  # the largest exact one still works
    assert spec.is_in(spec.rand())


def test_complex_dtype_given_by_name_is_refused_like_the_dtype():
    for dtype in ("complex64", "torch.complex128"):
        with pytest.raises(TypeError, match="complex dtypes are not supported"):
            Unbounded(shape=(2,), dtype=dtype)


@pytest.mark.parametrize("low", ["a", ["a"], [None], 1j])
def test_bounds_that_are_not_numbers_say_so(low):
    with pytest.raises(TypeError, match="low must"):
        Bounded(low, 1.0, shape=(1,))


def test_bounds_beyond_int64_are_numbers():
    assert Bounded(2**70, 2**71, shape=(1,), dtype=torch.float64).low.item() == 2.0**70
    assert Bounded(-(2**70), 5, shape=(1,), dtype=torch.int64).low.item() == torch.iinfo(torch.int64).min


def test_project_of_a_non_number_names_the_value():
    for spec in (Bounded(0, 1, shape=(2,)), Unbounded(shape=(2,)), Categorical(3, shape=(2,))):
        with pytest.raises(TypeError, match="the value to project must be a real number"):
            spec.project("ab")


@pytest.mark.parametrize("index", ["a", 1.5, slice(None, None, 0), slice(None, None, -1)])
def test_bad_indices_are_index_errors_naming_the_spec(index):
    for spec in (Bounded(0, 1, shape=(2,)), Unbounded(shape=(-1,)), Composite(a=Unbounded(shape=(2,)), shape=(2,))):
        if isinstance(index, (str, float)) and (-1 in spec.shape or isinstance(spec, Composite)):
            continue  # 'any length' dims refuse non-basic indices with their own message; a str is a key
        with pytest.raises(IndexError, match=r"cannot index a spec of shape|slice step must be > 0"):
            spec[index]


def test_python_float_bounds_and_values_keep_float64_precision():
    # before: 0.1 went through float32 first, so low was 0.10000000149 and 0.1 itself was "out of bounds"
    spec = Bounded(0.1, 0.3, shape=(1,), dtype=torch.float64)
    assert spec.low.item() == 0.1 and spec.is_in(torch.tensor([0.1], dtype=torch.float64))
    assert Bounded([0.1, 0.2], 1e300, dtype=torch.float64).high.tolist() == [1e300, 1e300]  # was inf
    assert Unbounded(shape=(), dtype=torch.float64).project(0.1).item() == 0.1


@pytest.mark.parametrize("low, high, dtype", [(2**40, 2**41, torch.int32), (300, 400, torch.uint8), (2, 3, torch.bool),
                                              (1e300, 1e301, torch.float32), (-1e300, -1e299, torch.float16)])
def test_bounds_outside_the_dtype_are_refused(low, high, dtype):
    # before: clamped to one extreme value (int32 max, uint8 255, True) or to inf: a box nothing finite is in
    with pytest.raises(ValueError, match="lie outside what .* holds"):
        Bounded(low, high, shape=(1,), dtype=dtype)
    widened = Bounded(-(2**40), 2**41, shape=(1,), dtype=torch.int32)  # partly inside: clamped as before
    assert widened.low.item() == torch.iinfo(torch.int32).min and widened.high.item() == torch.iinfo(torch.int32).max


def test_a_list_holding_itself_is_refused_not_a_hang():
    from chatdata.specs import NonTensor

    loop = []
    loop.append(loop)
    with pytest.raises(ValueError, match="contains itself"):
        NonTensor(shape=(2,)).is_in(loop)


@pytest.mark.parametrize("n", [np.int64(3), np.int32(3), torch.tensor(3), torch.tensor([3])])
def test_categorical_and_binary_take_integer_n_of_any_integer_type(n):
    # Categorical(np.int64(3)) was refused ("needs an int n >= 1 ..., got np.int64(3)") and
    # Binary(np.int64(3)) said "the last dim of the shape (3,) must be n=np.int64(3)"
    cat, binary = Categorical(n, shape=(2,)), Binary(n)
    assert type(cat.n) is int and cat.n == 3 and cat.is_in(torch.tensor([0, 2]))
    assert binary.shape == torch.Size([3]) and binary.is_in(binary.rand())


@pytest.mark.parametrize("n", [torch.tensor(2.7), 2.7, torch.tensor(True), True, "3"])
def test_categorical_n_that_is_not_an_integer_is_refused(n):
    # torch.tensor(2.7) was truncated to 2 categories without a word
    with pytest.raises(ValueError, match="Categorical needs an int n >= 1"):
        Categorical(n)


@pytest.mark.parametrize("n", [2.0, torch.tensor(2.5), torch.tensor(True), -1])
def test_binary_n_that_is_not_a_length_is_named_as_such(n):
    with pytest.raises(ValueError, match=r"Binary needs an int n >= 0 \(the length of the last dim\)"):
        Binary(n)
    with pytest.raises(ValueError, match="the last dim of the shape"):  # a real length that disagrees
        Binary(3, shape=(2,))


@pytest.mark.parametrize("low, span", [(2**62, 10), (-(2**63), 3), (2**63 - 4, 3), (2**53 + 1, 5)])
def test_integer_rand_covers_bounds_far_from_zero(low, span):
    # before: rand() went through float64, where 2**62 and 2**62 + 10 are the same number, so every
    # sample was low (or one float step away): a "random" spec that never varied
    spec = Bounded(low, low + span, shape=(4000,), dtype=torch.int64)
    v = spec.rand()
    assert spec.is_in(v) and set((v - low).unique().tolist()) == set(range(span + 1))
    wide = Bounded(-(2**63), 2**63 - 1, shape=(1000,), dtype=torch.int64)
    assert wide.is_in(wide.rand()) and len(wide.rand().unique()) > 900


def test_bounded_on_the_meta_device_says_why():
    # before: "Tensor.item() cannot be called on meta tensors", from deep inside the bounds checks
    for make in (lambda: Bounded(0.0, 1.0, shape=(2,), device="meta"), lambda: Bounded(0.0, 1.0, shape=(2,)).to("meta")):
        with pytest.raises(ValueError, match="meta device holds no values"):
            make()
    assert Unbounded((2,), device="meta").zero().device.type == "meta"  # specs without bounds still work there


@pytest.mark.parametrize("index", [0, -1, (..., 0)])
def test_indexing_a_binary_spec_down_to_no_dim_is_an_index_error(index):
    # before: "a Binary spec needs at least one dim" as a ValueError, from inside the rebuild
    with pytest.raises(IndexError, match="no dim would be left"):
        Binary(3)[index]
    assert Binary(shape=(2, 3))[index if index != (..., 0) else 0].shape == (3,)
