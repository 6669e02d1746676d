"""Property tests: every spec accepts what it makes, and projection always lands in the spec."""
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatdata.specs import Binary, Bounded, Categorical, Composite, NonTensor, TensorSpec, Unbounded

SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
DTYPES = FLOATS + INTS + [torch.bool]

dims = st.lists(st.sampled_from([-1, 0, 1, 2, 3]), max_size=3).map(tuple)
leading = st.lists(st.integers(0, 3), max_size=2).map(tuple)


def _range(dtype):
    if dtype == torch.bool:
        return 0, 1
    if dtype.is_floating_point:
        return -1e4, 1e4
    info = torch.iinfo(dtype)
    return info.min, info.max


@st.composite
def bounds(draw, dtype, shape):
    lo, hi = _range(dtype)
    if dtype.is_floating_point:
        num = st.floats(lo, hi, allow_nan=False, width=16 if dtype == torch.float16 else 32) | st.sampled_from(
            [float("-inf"), float("inf")]
        )
    else:
        num = st.integers(lo, hi)
    safe = tuple(1 if d == -1 else d for d in shape)
    if draw(st.booleans()) or not safe:
        a, b = sorted([draw(num), draw(num)])
        return a, b
    n = 1
    for d in safe:
        n *= d
    pairs = [sorted([draw(num), draw(num)]) for _ in range(n)]
    t = torch.tensor(pairs, dtype=torch.float64 if dtype.is_floating_point else torch.int64).reshape(*safe, 2)
    return t[..., 0], t[..., 1]


@st.composite
def masks(draw, shape, n):
    """A Categorical mask: one row of n for every position, or one row per position; at least
    one category allowed everywhere (a position with none allowed has no value)."""
    safe = tuple(1 if d == -1 else d for d in shape)
    rows = safe if draw(st.booleans()) else ()
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    mask = torch.rand(*rows, n, generator=gen) < draw(st.sampled_from([0.2, 0.5, 0.9]))
    keep = torch.randint(0, n, rows, generator=gen)
    return mask | torch.nn.functional.one_hot(keep, n).bool()


@st.composite
def leaf_specs(draw, shape=None):
    shape = draw(dims) if shape is None else shape
    kind = draw(st.sampled_from(["unbounded", "bounded", "categorical", "binary", "nontensor"]))
    if kind == "unbounded":
        return Unbounded(shape=shape, dtype=draw(st.sampled_from(DTYPES)))
    if kind == "bounded":
        dtype = draw(st.sampled_from(DTYPES))
        low, high = draw(bounds(dtype, shape))
        if dtype.is_floating_point and (isinstance(low, float) and low == float("inf") or isinstance(high, float) and high == float("-inf")):
            low, high = -1.0, 1.0
        return Bounded(low=low, high=high, shape=shape, dtype=dtype)
    if kind == "categorical":
        dtype = draw(st.sampled_from([torch.int64, torch.int32, torch.uint8, torch.int8, torch.float32, torch.bool]))
        n = draw(st.integers(1, 2 if dtype == torch.bool else 20))
        return Categorical(n, shape=shape, dtype=dtype, mask=draw(st.none() | masks(shape, n)))
    if kind == "binary":
        last = draw(st.integers(0, 4))
        return Binary(shape=tuple(shape) + (last,), dtype=draw(st.sampled_from([torch.int8, torch.int64, torch.bool, torch.uint8])))
    data = draw(st.none() | st.text(max_size=5) | st.integers() | st.lists(st.text(max_size=3), max_size=3))
    return NonTensor(shape=shape, example_data=data)


@st.composite
def composite_specs(draw, shape=None, depth=0):
    shape = draw(dims) if shape is None else shape
    entries = {}
    for i in range(draw(st.integers(0, 4))):
        extra = draw(st.lists(st.sampled_from([-1, 1, 2]), max_size=2).map(tuple))
        if depth < 2 and draw(st.integers(0, 3)) == 0:
            entries[f"k{i}"] = draw(composite_specs(shape=shape + extra, depth=depth + 1))
        else:
            entries[f"k{i}"] = draw(leaf_specs(shape=shape + extra))
    return Composite(entries, shape=shape)


any_spec = st.one_of(leaf_specs(), composite_specs())


@SETTINGS
@given(any_spec, leading)
def test_is_in_rand_zero_one(spec, lead):
    for value in (spec.rand(), spec.zero(), spec.one(), spec.rand(lead), spec.zero(lead)):
        assert spec.is_in(value), spec._check(value)


@SETTINGS
@given(any_spec, leading)
def test_is_in_never_changes_the_spec(spec, lead):
    before_repr, before = repr(spec), spec.clone()
    assert before == spec
    spec.is_in(spec.rand(lead))
    spec.is_in(torch.zeros(2))
    spec.is_in("text")
    assert repr(spec) == before_repr and spec == before


@SETTINGS
@given(any_spec, leading)
def test_expand_keeps_values_in(spec, lead):
    big = spec.expand(lead + tuple(spec.shape))
    assert big.shape == torch.Size(lead + tuple(spec.shape))
    value = big.rand()
    assert big.is_in(value) and spec.is_in(value)


@st.composite
def value_for(draw, spec):
    """A tensor of a shape that fits ``spec``, of any dtype, with wild values."""
    shape = [draw(st.integers(0, 3)) if d == -1 else d for d in spec.shape]
    shape = list(draw(leading)) + shape
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    scale = draw(st.sampled_from([0.5, 10.0, 1e3, 1e6, 1e20]))
    x = torch.randn(shape, generator=gen, dtype=torch.float64) * scale
    if x.numel() and draw(st.booleans()):
        special = torch.tensor([float("nan"), float("inf"), float("-inf")], dtype=torch.float64)
        x.view(-1)[0] = special[draw(st.integers(0, 2))]
    dtype = draw(st.sampled_from([torch.float64, torch.float32, torch.float16, torch.int64, torch.int32, torch.uint8, torch.bool]))
    if not dtype.is_floating_point and dtype != torch.bool:
        lo, hi = _range(dtype)
        x = torch.nan_to_num(x, nan=0.0).clamp(lo, hi).round()
    return x.to(dtype)


@SETTINGS
@given(st.data())
def test_project_lands_in_the_spec(data):
    spec = data.draw(leaf_specs().filter(lambda s: not isinstance(s, NonTensor)))
    assert isinstance(spec, TensorSpec)
    x = data.draw(value_for(spec))
    out = spec.project(x)
    assert out.shape == x.shape
    assert spec.is_in(out), (spec, x, out, spec._check(out))
    inside = spec.rand()
    assert torch.equal(spec.project(inside), inside)
