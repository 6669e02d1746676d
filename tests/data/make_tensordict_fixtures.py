#!/usr/bin/env python
"""Regenerate the tensordict / torchrl reference fixtures in ``tensordict_fixtures/``.

THIS SCRIPT DOES NOT RUN IN THE PROJECT'S OWN ENVIRONMENT. It needs the real
``tensordict`` and ``torchrl`` packages, which chatdata never depends on. It is
meant for the separate reference venv described in ``benchmarks/reference_env.md``:

    python3 -m venv .refvenv
    .refvenv/bin/pip install torch==2.13.0          # CPU wheel; pin it
    .refvenv/bin/pip install tensordict==0.14.3 torchrl==0.14.1 \
        transformers tokenizers jinja2
    .refvenv/bin/python tests/data/make_tensordict_fixtures.py

Each fixture is a folder ``tensordict_fixtures/<name>/`` holding

* ``data/``  -- exactly what tensordict/torchrl wrote with ``.memmap(path)``
  (for the archive fixture: ``data.tdz``, a single zip file);
* ``expected.json`` -- plain JSON that says what a reader must find there, so
  chatdata's tests can check ``chatdata.load_memmap`` without tensordict.

``expected.json`` schema (``root`` is a node; nodes nest):

    {"fixture", "description", "generated_with": {package: version},
     "data": "data",                       # folder (or file) to load, relative
     "must_refuse": bool,                  # True: a safe loader must refuse
     "pickle_files": [relpath, ...],       # files that hold pickles (if any)
     "files": {relpath: size_in_bytes},    # every file under data/, sorted
     "root": node, ...extra per fixture (e.g. "chats" for History)}

    node kinds (every node has "kind" and "path" = folder/file relative to data/):
      {"kind": "tensor", "dtype": "float32", "shape": [..], "file": relpath|null,
       "nbytes": n, "values": nested list}           # complex: "real"/"imag" lists
      {"kind": "nested_tensor", "dtype", "file", "shape_file",
       "component_shapes": [[..], ..], "values": [nested list per component]}
      {"kind": "TensorDict", "batch_size": [..], "type_string": "<class ...>",
       "entries": {key: node}}
      {"kind": "LazyStackedTensorDict", "stack_dim": d, "batch_size": [..],
       "type_string", "tensordicts": [node, ...]}       # sub-folders 0, 1, ...
      {"kind": "NonTensorData", "batch_size": [..], "data": json_value}
      {"kind": "NonTensorData", "pickled": true, "pickle_file": relpath,
       "python_type": "module.Qualname"}
      {"kind": "NonTensorStack", "batch_size": [..], "data": nested list}
      {"kind": "NonTensorStack", "pickled": true, "pickle_file": relpath, ...}
      {"kind": "tensorclass", "type_string": "<class '__main__.MyClass'>",
       "batch_size": [..], "non_tensor": {field: json_value},
       "tensordict": node}                               # the _tensordict/ folder

``batch_size`` values are what tensordict itself reports after ``load_memmap``
(a ragged lazy-stack dimension is reported as -1).

The fixtures are deterministic (no random tensors) and tiny. Run the script
again after a tensordict upgrade and diff the result.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as md
import json
import os
import shutil
import sys
import warnings
from decimal import Decimal
from pathlib import Path

try:
    import torch
    import tensordict
    from tensordict import (
        LazyStackedTensorDict,
        NonTensorData,
        NonTensorStack,
        TensorDict,
        is_tensorclass,
        set_list_to_stack,
        tensorclass,
    )
    from torchrl.data.llm import History
except ImportError as exc:  # pragma: no cover - only in the wrong venv
    sys.exit(
        f"make_tensordict_fixtures.py needs tensordict and torchrl ({exc}); "
        "run it with .refvenv/bin/python (see the docstring)."
    )

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "tensordict_fixtures"


# --------------------------------------------------------------------------
# classes defined here end up recorded as "__main__.<name>" in the fixtures
# --------------------------------------------------------------------------
@tensorclass
class MyClass:
    data: torch.Tensor
    metadata: str


@tensorclass
class WithObject:
    x: torch.Tensor
    obj: object


class Opaque:
    """A harmless custom object: not JSON-serialisable, so tensordict pickles it."""

    def __init__(self, value=10):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, Opaque) and other.value == self.value


# --------------------------------------------------------------------------
# describing what tensordict loads back
# --------------------------------------------------------------------------
_PICKLE_NAMES = ("other.pickle", "pickle.pkl")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _tensor_values(t: torch.Tensor):
    t = t.detach().cpu().contiguous()
    if t.is_complex():
        return {"real": t.real.tolist(), "imag": t.imag.tolist()}
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.float().tolist()  # exact: every half/bfloat16 is a float32
    return t.tolist()


def _jsonable(value):
    try:
        json.dumps(value)
        return True
    except (TypeError, ValueError):
        return False


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix()


def _find_child(folder: Path, key: str, suffix: str = "") -> Path:
    """Locate the on-disk name of `key` without re-implementing the encoder."""
    from tensordict.utils import _encode_key_for_filesystem

    cand = folder / (_encode_key_for_filesystem(key) + suffix)
    if cand.exists():
        return cand
    raise FileNotFoundError(f"no file for key {key!r} in {folder}")


def describe(obj, folder: Path, root: Path) -> dict:
    """JSON description of a loaded tensordict object stored in `folder`."""
    if isinstance(obj, NonTensorStack):
        node = {"kind": "NonTensorStack", "path": _rel(folder, root),
                "batch_size": list(obj.batch_size)}
        pk = folder / "pickle.pkl"
        if pk.exists():
            node.update(pickled=True, pickle_file=_rel(pk, root),
                        python_types=sorted({f"{type(x).__module__}.{type(x).__qualname__}"
                                             for x in _flatten(obj.tolist())}))
        else:
            node["data"] = obj.tolist()
        return node
    if isinstance(obj, NonTensorData):
        node = {"kind": "NonTensorData", "path": _rel(folder, root),
                "batch_size": list(obj.batch_size)}
        pk = folder / "other.pickle"
        if pk.exists():
            node.update(pickled=True, pickle_file=_rel(pk, root),
                        python_type=f"{type(obj.data).__module__}.{type(obj.data).__qualname__}")
        else:
            node["data"] = obj.data
        return node
    if is_tensorclass(obj):
        non_tensor = {k: v for k, v in obj._non_tensordict.items()}
        assert all(_jsonable(v) for v in non_tensor.values()), non_tensor
        return {"kind": "tensorclass", "path": _rel(folder, root),
                "type_string": str(type(obj)), "batch_size": list(obj.batch_size),
                "non_tensor": non_tensor,
                "tensordict": describe(obj._tensordict, folder / "_tensordict", root)}
    if isinstance(obj, LazyStackedTensorDict):
        return {"kind": "LazyStackedTensorDict", "path": _rel(folder, root),
                "type_string": str(type(obj)), "stack_dim": obj.stack_dim,
                "batch_size": list(obj.batch_size),
                "tensordicts": [describe(td, folder / str(i), root)
                                for i, td in enumerate(obj.tensordicts)]}
    if isinstance(obj, TensorDict):
        entries = {}
        for key, value in obj.items():
            if isinstance(value, torch.Tensor) and not is_tensorclass(value) \
                    and not isinstance(value, tensordict.TensorDictBase):
                entries[key] = describe_tensor(key, value, folder, root)
            else:
                entries[key] = describe(value, _find_child(folder, key), root)
        return {"kind": "TensorDict", "path": _rel(folder, root),
                "type_string": str(type(obj)), "batch_size": list(obj.batch_size),
                "entries": entries}
    raise TypeError(f"cannot describe {type(obj)}")


def describe_tensor(key, t: torch.Tensor, folder: Path, root: Path) -> dict:
    if t.is_nested:
        f = _find_child(folder, key, ".memmap")
        sf = _find_child(folder, key, ".shape.memmap")
        comps = t.unbind(0)
        return {"kind": "nested_tensor", "path": _rel(f, root), "file": _rel(f, root),
                "shape_file": _rel(sf, root), "dtype": _dtype_name(t.dtype),
                "component_shapes": [list(c.shape) for c in comps],
                "values": [_tensor_values(c) for c in comps]}
    try:
        f = _find_child(folder, key, ".memmap")
        rel = _rel(f, root)
    except FileNotFoundError:
        assert t.numel() == 0, (key, t.shape)  # empty tensors get no file
        rel = None
    return {"kind": "tensor", "path": rel, "file": rel, "dtype": _dtype_name(t.dtype),
            "shape": list(t.shape), "nbytes": t.numel() * t.element_size(),
            "values": _tensor_values(t)}


def _flatten(x):
    if isinstance(x, list):
        for y in x:
            yield from _flatten(y)
    else:
        yield x


def _as_lists(x):
    if isinstance(x, str):
        return x
    if hasattr(x, "tolist"):
        return x.tolist()
    return [_as_lists(y) for y in x]


def list_files(data: Path) -> dict:
    if data.is_file():
        return {data.name: data.stat().st_size}
    return {_rel(p, data): p.stat().st_size
            for p in sorted(data.rglob("*")) if p.is_file()}


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for pkg in ("torch", "tensordict", "torchrl", "orjson", "numpy"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    out["byteorder"] = sys.byteorder
    return out


# --------------------------------------------------------------------------
# fixtures
# --------------------------------------------------------------------------
FIXTURES: dict = {}


def fixture(name, description, must_refuse=False):
    def deco(fn):
        FIXTURES[name] = (fn, description, must_refuse)
        return fn
    return deco


@fixture("a_flat_dtypes", "flat TensorDict, batch_size [2], one leaf per dtype "
         "(float32/64, int8/16/32/64, uint8, bool, bfloat16, float16, complex64)")
def make_a(path):
    td = TensorDict(
        {
            "f32": torch.tensor([[0.0, 1.5, -2.25], [3.0, 1e-3, 65504.0]], dtype=torch.float32),
            "f64": torch.tensor([1.0 / 3.0, -0.0], dtype=torch.float64),
            "i8": torch.tensor([-128, 127], dtype=torch.int8),
            "i16": torch.tensor([-300, 300], dtype=torch.int16),
            "i32": torch.tensor([[-(2**31), 2**31 - 1]] * 2, dtype=torch.int32),
            "i64": torch.tensor([-(2**62), 2**40 + 7], dtype=torch.int64),
            "u8": torch.tensor([0, 255], dtype=torch.uint8),
            "bool": torch.tensor([[True, False, True], [False, False, True]]),
            "bf16": torch.tensor([1.5, -2.5], dtype=torch.bfloat16),
            "f16": torch.tensor([0.099975586, -65504.0], dtype=torch.float16),
            "c64": torch.tensor([1 + 2j, -3.5 - 0.25j], dtype=torch.complex64),
        },
        batch_size=[2],
    )
    td.memmap(path)
    return {}


@fixture("b_nested", "nested TensorDicts three levels deep, batch_size [2, 3] at the "
         "root and [2, 3, 1] in a sub-dict (sub-dicts may have longer batch sizes)")
def make_b(path):
    td = TensorDict(
        {
            "obs": torch.arange(6, dtype=torch.float32).reshape(2, 3),
            "agent": TensorDict(
                {
                    "pos": torch.arange(12, dtype=torch.int64).reshape(2, 3, 2),
                    "deep": TensorDict({"flag": torch.ones(2, 3, 1, dtype=torch.bool)},
                                       batch_size=[2, 3, 1]),
                },
                batch_size=[2, 3],
            ),
            "empty_sub": TensorDict({}, batch_size=[2, 3]),
        },
        batch_size=[2, 3],
    )
    td.memmap(path)
    return {}


@fixture("c_nontensor_data", "NonTensorData: a unicode string, a dict/list JSON value, "
         "an int, a float, a bool, None and a tuple (stored as a JSON list), in a "
         "TensorDict of batch_size [2] beside a tensor")
def make_c(path):
    td = TensorDict(
        {
            "text": NonTensorData("héllo wörld ✓ 🚀"),
            "cfg": NonTensorData({"lr": 0.001, "layers": [64, 64], "name": "mlp",
                                  "extra": {"on": True, "none": None}}),
            "count": NonTensorData(3),
            "ratio": NonTensorData(0.5),
            "flag": NonTensorData(False),
            "nothing": NonTensorData(None),
            "pair": NonTensorData((1, "a")),
            "reward": torch.tensor([1.0, -1.0]),
        },
        batch_size=[2],
    )
    td.memmap(path)
    return {}


@fixture("d_nontensor_stack", "NonTensorStack of strings via set_list_to_stack(True): "
         "a 1-d stack [3] and a 2-d stack [2, 2] (one JSON list in meta.json each), "
         "plus a tensor")
def make_d(path):
    with set_list_to_stack(True):
        td = TensorDict(
            {
                "words": ["alpha", "βeta", "日本語"],
                "ids": torch.tensor([10, 20, 30]),
            },
            batch_size=[3],
        )
        td2 = TensorDict({"grid": [["a", "b"], ["c", ""]]}, batch_size=[2, 2])
        root = TensorDict({"flat": td, "grid": td2}, batch_size=[])
    root.memmap(path)
    return {}


@fixture("e_lazy_stack", "heterogeneous lazy stack (LazyStackedTensorDict.lazy_stack "
         "of two TensorDicts whose 'y' shapes differ, stack_dim 0) -> numbered sub-folders")
def make_e(path):
    a = TensorDict({"x": torch.tensor([0.0, 1.0]), "y": torch.arange(6.0).reshape(2, 3),
                    "only_a": torch.tensor(1)}, batch_size=[])
    b = TensorDict({"x": torch.tensor([2.0, 3.0]), "y": torch.arange(8.0).reshape(2, 4)},
                   batch_size=[])
    LazyStackedTensorDict.lazy_stack([a, b], dim=0).memmap(path)
    return {}


@fixture("e2_lazy_stack_dim1", "lazy stack along dim 1 of three TensorDicts of "
         "batch_size [2] (result batch_size [2, 3], stack_dim 1)")
def make_e2(path):
    tds = [TensorDict({"v": torch.full((2, i + 1), float(i))}, batch_size=[2])
           for i in range(3)]
    LazyStackedTensorDict.lazy_stack(tds, dim=1).memmap(path)
    return {}


@fixture("f_tensorclass", "root tensorclass '@tensorclass class MyClass: data: "
         "torch.Tensor; metadata: str' defined in this script (so recorded as "
         "__main__.MyClass)")
def make_f(path):
    tc = MyClass(data=torch.tensor([0.5, 1.5, 2.5]), metadata="some text", batch_size=[])
    tc.memmap(path)
    return {}


@fixture("f2_tensorclass_in_td", "the seed doc's example: TensorDict with 'td_list' "
         "(torch.stack of 4 TensorDicts {'item': i}) and 'tensorclass' (MyClass)")
def make_f2(path):
    td_list = [TensorDict({"item": i}, batch_size=[]) for i in range(4)]
    tc = MyClass(torch.tensor([1.0, 2.0, 3.0]), metadata="some text", batch_size=[])
    data = TensorDict({"td_list": torch.stack(td_list), "tensorclass": tc}, [])
    data.memmap(path)
    return {}


CHATS_3 = [
    [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
    ],
    [
        {"role": "user", "content": "Héllo wörld 👋 — ça va?"},
        {"role": "assistant", "content": "こんにちは! Ça va bien."},
    ],
    [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Name a prime."},
        {"role": "assistant", "content": "7"},
        {"role": "user", "content": "Another, with \"quotes\" and a\nnewline?"},
    ],
]


def _history_extra(chats):
    return {"chats": [[{"role": m["role"], "content": m["content"], "is_complete": True}
                       for m in chat] for chat in chats]}


@fixture("g_history_3chats", "torchrl History.from_chats of 3 conversations with 3, 2 "
         "and 4 messages (unicode), saved with history.memmap(path)")
def make_g(path):
    History.from_chats(CHATS_3).memmap(path)
    return _history_extra(CHATS_3)


@fixture("g2_history_1chat", "torchrl History.from_chats of a single 2-message "
         "conversation (batch_size [1, 2]), saved with history.memmap(path)")
def make_g2(path):
    chats = [CHATS_3[1]]
    History.from_chats(chats).memmap(path)
    return _history_extra(chats)


@fixture("g3_history_dense", "torchrl History built directly (set_list_to_stack(True), "
         "History(role=[...], content=[...], batch_size=(3,))): one conversation "
         "as a dense TensorDict whose columns are NonTensorStacks")
def make_g3(path):
    with set_list_to_stack(True):
        h = History(role=["system", "user", "assistant"],
                    content=["Be brief.", "Ünïcödé?", "Yes ✓"], batch_size=(3,))
    h.memmap(path)
    return {"chats": [[{"role": r, "content": c, "is_complete": True}
                       for r, c in zip(["system", "user", "assistant"],
                                       ["Be brief.", "Ünïcödé?", "Yes ✓"])]]}


@fixture("h_pickle_nontensordata", "NonTensorData holding a custom class instance "
         "(__main__.Opaque): tensordict writes its data to other.pickle. A safe "
         "loader MUST REFUSE this folder", must_refuse=True)
def make_h(path):
    td = TensorDict({"obj": NonTensorData(Opaque(10)), "ok": torch.tensor([1, 2])},
                    batch_size=[2])
    td.memmap(path)
    return {}


@fixture("h2_pickle_nontensorstack", "NonTensorStack of decimal.Decimal values: "
         "meta.json says \"data\": \"pickle.pkl\" and the list is in pickle.pkl. "
         "A safe loader MUST REFUSE this folder", must_refuse=True)
def make_h2(path):
    st = NonTensorStack(NonTensorData(Decimal("1.5")), NonTensorData(Decimal("2")))
    TensorDict({"dec": st}, batch_size=[2]).memmap(path)
    return {}


@fixture("h3_pickle_tensorclass_field", "tensorclass WithObject(x: Tensor, obj: object) "
         "with obj=Opaque(): the field goes to _tensordict/obj/other.pickle. "
         "A safe loader MUST REFUSE this folder", must_refuse=True)
def make_h3(path):
    WithObject(x=torch.zeros(2), obj=Opaque(3), batch_size=[2]).memmap(path)
    return {}


@fixture("i_fromkeys_seed", "the seed example TensorDict.fromkeys(['a','b','c',"
         "('nested','e')], 0): int64 scalars, batch_size []")
def make_i(path):
    TensorDict.fromkeys(["a", "b", "c", ("nested", "e")], 0).memmap(path)
    return {}


@fixture("j_edge_keys_shapes", "edge cases: keys needing filename encoding "
         "('a b/c', '', '..', '100%', 'ünï'), a 0-d tensor, a zero-element tensor "
         "(no file is written), a non-contiguous (transposed) source tensor")
def make_j(path):
    td = TensorDict(
        {
            "a b/c": torch.tensor([1.0]),
            "": torch.tensor([2.0]),
            "..": TensorDict({"k": torch.tensor([3])}, batch_size=[]),
            "100%": torch.tensor([4], dtype=torch.int16),
            "ünï": torch.tensor([5], dtype=torch.int8),
            "scalar": torch.tensor(7),
            "empty": torch.zeros(0, 3),
            "transposed": torch.arange(6).reshape(2, 3).t(),
        },
        batch_size=[],
    )
    td.memmap(path)
    return {}


@fixture("k_nested_tensor", "a torch.nested (strided layout) tensor leaf: is_nested "
         "true, flat data in <key>.memmap, per-component shapes in <key>.shape.memmap")
def make_k(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nt = torch.nested.nested_tensor([torch.tensor([1.0, 2.0]),
                                         torch.tensor([3.0, 4.0, 5.0])])
    TensorDict({"nt": nt}, batch_size=[2]).memmap(path)
    return {}


@fixture("z_archive_tdz", "tensordict 0.14's single-file archive: memmap('data.tdz') "
         "writes a zip of the same tree (meta.json first, STORED, 64-byte aligned)")
def make_z(path):
    TensorDict({"x": torch.arange(4, dtype=torch.float32),
                "sub": {"s": NonTensorData("zip ✓")}}, batch_size=[4]).memmap(path)
    return {}


def build(name, out_root: Path):
    fn, description, must_refuse = FIXTURES[name]
    fdir = out_root / name
    if fdir.exists():
        shutil.rmtree(fdir)
    fdir.mkdir(parents=True)
    data = fdir / ("data.tdz" if name.startswith("z_") else "data")
    extra = fn(data)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # pickle load warning
        loaded = tensordict.TensorDict.load_memmap(data, allow_pickle=True) \
            if name.startswith("h") else tensordict.TensorDict.load_memmap(data)
        if name.startswith("g"):
            loaded_h = History.load_memmap(data)
            want_content = [[m["content"] for m in c] for c in extra["chats"]]
            want_role = [[m["role"] for m in c] for c in extra["chats"]]
            if loaded_h.ndim == 1:  # a dense History is one conversation
                want_content, want_role = want_content[0], want_role[0]
            assert _as_lists(loaded_h.content) == want_content, loaded_h.content
            assert _as_lists(loaded_h.role) == want_role, loaded_h.role
    if name.startswith("z_"):
        # describe the archive through its unzipped twin, then drop the twin
        import zipfile
        twin = fdir / "_unzipped"
        with zipfile.ZipFile(data) as zf:
            zf.extractall(twin)
        root = describe(loaded, twin, twin)
        shutil.rmtree(twin)
    else:
        root = describe(loaded, data, data)
    files = list_files(data)
    pickles = sorted(p for p in files if p.rsplit("/", 1)[-1] in _PICKLE_NAMES)
    assert bool(pickles) == must_refuse, (name, pickles)
    expected = {
        "fixture": name,
        "description": description,
        "generated_with": versions(),
        "data": data.name,
        "must_refuse": must_refuse,
        "pickle_files": pickles,
        "files": files,
        "root": root,
        **extra,
    }
    with open(fdir / "expected.json", "w", encoding="utf-8") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False, sort_keys=False)
        f.write("\n")
    return sum(files.values()), len(files)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("names", nargs="*", help="fixtures to build (default: all)")
    args = ap.parse_args(argv)
    os.umask(0o022)
    names = args.names or list(FIXTURES)
    for name in names:
        size, n = build(name, args.out)
        print(f"{name:32s} {n:4d} files {size:7d} bytes")


if __name__ == "__main__":
    main()
