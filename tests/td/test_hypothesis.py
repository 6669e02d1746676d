"""Property tests: random nested TensorDicts (random dtypes/shapes, string entries, nesting)
survive index / stack / cat / unbind / split / clone / pickle round trips."""
from __future__ import annotations

import pickle

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatdata import NonTensorStack, TensorDict

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8, torch.bool, torch.float16]
text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)


def _tensor(draw, batch):
    dtype = draw(st.sampled_from(DTYPES))
    feat = draw(st.lists(st.integers(0, 3), max_size=2))
    shape = tuple(batch) + tuple(feat)
    t = torch.randint(0, 5, shape) if shape else torch.randint(0, 5, ())
    return t.to(dtype)


@st.composite
def tensordicts(draw, batch=None, depth=2):
    if batch is None:
        batch = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    entries = {}
    n = draw(st.integers(1, 4))
    for i in range(n):
        kind = draw(st.sampled_from(["tensor", "tensor", "strings", "const", "nested"] if depth else ["tensor", "strings", "const"]))
        key = f"k{i}"
        if kind == "tensor":
            entries[key] = _tensor(draw, batch)
        elif kind == "strings":
            numel = 1
            for s in batch:
                numel *= s
            flat = draw(st.lists(text, min_size=numel, max_size=numel))
            entries[key] = NonTensorStack.from_list(flat).reshape(*batch)
        elif kind == "const":
            entries[key] = draw(text)
        else:
            entries[key] = draw(tensordicts(batch=batch, depth=depth - 1))
    return TensorDict(entries, batch_size=batch)


def leaves_equal(a, b) -> bool:
    return (a == b).all()


def check_leaf_index(td, out, index):
    """Each leaf of td[index] equals the leaf indexed directly."""
    for key in td.keys(True, True):
        src, got = td.get(key), out.get(key)
        if isinstance(src, torch.Tensor):
            assert torch.equal(got, src[index]), key
        elif isinstance(src, NonTensorStack):
            want = src[index]
            want = want.tolist() if hasattr(want, "tolist") else want.data
            got = got.tolist() if hasattr(got, "tolist") else got
            assert got == want, key
        else:  # a NonTensorData: the same value
            assert got.data == src.data, key


@SETTINGS
@given(tensordicts())
def test_clone_and_pickle_round_trip(td):
    assert leaves_equal(td.clone(), td)
    back = pickle.loads(pickle.dumps(td))
    assert back.batch_size == td.batch_size and leaves_equal(back, td)
    assert set(back.keys(True, True)) == set(td.keys(True, True))


@SETTINGS
@given(tensordicts(), st.data())
def test_unbind_then_stack(td, data):
    dim = data.draw(st.integers(0, td.batch_dims - 1))
    again = torch.stack(td.unbind(dim), dim)
    assert again.batch_size == td.batch_size
    assert leaves_equal(again, td)


@SETTINGS
@given(tensordicts(), st.data())
def test_split_then_cat(td, data):
    dim = data.draw(st.integers(0, td.batch_dims - 1))
    k = data.draw(st.integers(1, max(td.batch_size[dim], 1)))
    parts = td.split(k, dim)
    assert sum(p.batch_size[dim] for p in parts) == td.batch_size[dim]
    again = torch.cat(parts, dim)
    assert again.batch_size == td.batch_size and leaves_equal(again, td)


@SETTINGS
@given(tensordicts(), st.data())
def test_indexing_matches_leaves(td, data):
    n0 = td.batch_size[0]
    index = data.draw(
        st.one_of(
            st.integers(-n0, n0 - 1),
            st.builds(slice, st.integers(0, n0), st.integers(0, n0), st.integers(1, 2)),
            st.lists(st.integers(-n0, n0 - 1), max_size=5),
            st.lists(st.booleans(), min_size=n0, max_size=n0).map(torch.tensor),
            st.lists(st.integers(0, n0 - 1), min_size=1, max_size=5).map(torch.tensor),
        )
    )
    out = td[index]
    norm = torch.tensor(index) if isinstance(index, list) and index else index
    if isinstance(index, list) and not index:
        norm = torch.zeros(0, dtype=torch.long)
    assert out.batch_size == torch.zeros(tuple(td.batch_size))[norm].shape
    check_leaf_index(td, out, norm)


@SETTINGS
@given(tensordicts(), st.data())
def test_shape_ops_round_trip(td, data):
    nb = td.batch_dims
    perm = data.draw(st.permutations(range(nb)))
    inv = [perm.index(i) for i in range(nb)]
    assert leaves_equal(td.permute(*perm).permute(*inv), td)
    assert leaves_equal(td.reshape(-1).reshape(td.batch_size), td)
    assert leaves_equal(td.flip(0).flip(0), td)
    assert leaves_equal(td.unsqueeze(0).squeeze(0), td)
    e = td.expand(2, *td.batch_size)
    assert leaves_equal(e[1], td)
