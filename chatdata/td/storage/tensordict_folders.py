"""Reading folders written by tensordict (0.10 and later) and torchrl.

Their layout (``docs/tensordict_format_notes.md``): every collection is a folder whose
``meta.json`` names its class in ``_type`` and mixes its fields with its entries; tensor leaves
are ``<key>.memmap`` files described in the parent's JSON; NonTensorData / NonTensorStack keep
their values as JSON in their own ``meta.json``; lazy stacks are numbered sub-folders;
tensorclasses keep their fields in ``_tensordict/``.

What we refuse, with an error naming the file: anything pickled (``other.pickle``,
``pickle.pkl``, a NonTensorData without ``data``), torch.nested tensors, and lazy stacks whose
members have different keys (chatdata's collections need one set of keys). Nothing is ever
unpickled or imported.

Example:
    >>> td = load_memmap("tests/data/tensordict_fixtures/i_fromkeys_seed/data")  # doctest: +SKIP
"""
from __future__ import annotations

import warnings
from pathlib import Path

import torch

from ..core import TensorDict, check_batch, stack
from ..nontensor import NonTensorData, NonTensorStack
from ..tensorclass.registry import resolve_tensorclass
from .dtypes import parse_dtype
from .fsops import FormatError

__all__ = ["load_foreign", "td_encode_key"]

_TD = "<class 'tensordict._td.TensorDict'>"
_LAZY = "<class 'tensordict._lazy.LazyStackedTensorDict'>"
_NTD = "<class 'tensordict.tensorclass.NonTensorData'>"
_NTS = "<class 'tensordict.tensorclass.NonTensorStack'>"
_FIELDS = ("_type", "shape", "device", "stack_dim", "_is_non_tensor", "_metadata", "batch_size", "names")
_ENCODED = set(' /<>:"|?*\\%') | {chr(c) for c in range(0x20)} | {"\x7f"}


def td_encode_key(key: str) -> str:
    """The file name tensordict 0.14 ("robust keys") gives a key."""
    if key == "":
        return "%"
    if key in (".", ".."):
        return "%2E" * len(key)
    return "".join(f"%{ord(c):02X}" if c in _ENCODED else c for c in key)


def _raw_key_ok(key: str, is_dir: bool) -> bool:
    if "/" in key or "\\" in key or "\x00" in key or (len(key) >= 2 and key[1] == ":"):
        return False
    return not (is_dir and key in ("", ".", ".."))


def _member_name(folder, key: str, suffix: str, is_dir: bool) -> str:
    enc = td_encode_key(key) + suffix
    if folder.exists(enc) or not _raw_key_ok(key, is_dir):
        return enc
    raw = key + suffix  # older tensordict wrote raw keys
    return raw if folder.exists(raw) else enc


def _refuse_pickles(folder, meta: dict) -> None:
    for name in ("other.pickle", "pickle.pkl"):
        if folder.exists(name):
            raise FormatError(
                f"{folder.path / name}: this entry was pickled by tensordict; chatdata never unpickles "
                "(loading a pickle can run arbitrary code). Re-save it from tensordict with "
                "JSON-serialisable values"
            )
    if meta.get("data") == "pickle.pkl":
        raise FormatError(f"{folder.path / 'meta.json'}: its data points to a pickle; chatdata never unpickles")


def _class_path(type_str, where) -> str:
    if not isinstance(type_str, str) or not type_str.startswith("<class '") or not type_str.endswith("'>"):
        raise FormatError(
            f"{where}: unrecognised _type {type_str!r}: not a chatdata folder (its 'format' field is "
            "missing or wrong) and not a tensordict one"
        )
    return type_str[len("<class '") : -2]


def load_foreign(folder, meta: dict, reader):
    """Load a tensordict/torchrl folder (see the module docstring); ``folder`` is an opened
    :class:`~chatdata.td.storage.folder.Folder`."""
    where = folder.path / "meta.json"
    typ = meta.get("_type")
    if typ is None:
        raise FormatError(f"{where}: neither a chatdata folder (no 'format') nor a tensordict one (no '_type')")
    _refuse_pickles(folder, meta)
    if typ == _TD:
        return _load_td(folder, meta, reader)
    if typ == _LAZY:
        return _load_lazy(folder, meta, reader)
    if typ == _NTD:
        if "data" not in meta:
            raise FormatError(f"{where}: NonTensorData without 'data' (its value was pickled); chatdata never unpickles")
        return NonTensorData(meta["data"])
    if typ == _NTS:
        data = meta.get("data")
        if not isinstance(data, list):
            raise FormatError(f"{where}: NonTensorStack 'data' must be a JSON list")
        return NonTensorStack.from_list(data)
    return _load_tensorclass(folder, meta, reader, _class_path(typ, where))


def _load_td(folder, meta: dict, reader):
    where = folder.path / "meta.json"
    try:
        bs = torch.Size([int(s) for s in meta.get("shape", [])])
    except (TypeError, ValueError):
        raise FormatError(f"{where}: 'shape' must be a list of ints") from None
    device = meta.get("device")
    device = None if device in (None, "None") or reader.fake else torch.device("cpu") if not reader.meta_device else reader.device
    td = TensorDict._new_unsafe({}, bs, device)
    for key, m in meta.items():
        if key in _FIELDS or not isinstance(m, dict):
            continue
        if "type" in m:
            sub = _member_name(folder, key, "", True)
            value = reader.collection(folder.sub(sub)) if folder.is_dir(sub) else _missing(folder.path / sub)
            if isinstance(value, NonTensorData) and not value.batch_size and bs:
                value = NonTensorData(value.data, batch_size=bs)
        elif "dtype" in m and "shape" in m:
            if m.get("is_nested"):
                raise FormatError(f"{where}: entry {key!r} is a torch.nested tensor, which chatdata does not read")
            name = _member_name(folder, key, ".memmap", False)
            n = 1
            try:
                for s in m["shape"]:
                    n *= int(s)
            except (TypeError, ValueError):
                raise FormatError(f"{where}: entry {key!r} has a bad shape {m['shape']!r}") from None
            if n == 0 and not folder.exists(name):
                value = torch.empty([int(s) for s in m["shape"]], dtype=parse_dtype(m["dtype"], where))
            else:
                value = reader.tensor(folder, {"dtype": m["dtype"], "shape": m["shape"], "file": name}, f"{where} entry {key!r}")
        else:
            continue
        try:
            check_batch(key, value, bs)
        except ValueError as err:
            raise FormatError(f"{where}: {err}") from None
        td._tensordict[key] = value
    return td


def _missing(path: Path):
    raise FormatError(f"{path / 'meta.json'} is missing (the parent folder names this entry)")


def _load_lazy(folder, meta: dict, reader):
    dim = meta.get("stack_dim", 0)
    members = []
    i = 0
    while folder.is_dir(str(i)):
        members.append(reader.collection(folder.sub(str(i))))
        i += 1
    if not members:
        raise FormatError(f"{folder.path / 'meta.json'}: an empty lazy stack has no shape to rebuild")
    try:
        return stack(members, dim)
    except (KeyError, ValueError, TypeError) as err:
        raise FormatError(
            f"{folder.path / 'meta.json'}: cannot rebuild this lazy stack ({err}); chatdata stacks need "
            "members with the same keys and shapes (or differing only in their first dim)"
        ) from None


def _load_tensorclass(folder, meta: dict, reader, class_path: str):
    if not folder.is_dir("_tensordict"):
        raise FormatError(f"{folder.path / 'meta.json'}: tensorclass {class_path} without its _tensordict/ folder")
    storage = reader.collection(folder.sub("_tensordict"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cls = resolve_tensorclass(class_path)  # torchrl's History is registered by chatdata.history
    if cls is None:
        warnings.warn(
            f"{folder.path / 'meta.json'}: tensorclass {class_path} is not defined in this process; "
            "loading its fields as a TensorDict",
            stacklevel=4,
        )
        return storage
    obj = cls._from_storage(storage)
    for key, value in meta.items():
        if key not in _FIELDS and value is not None and key in getattr(cls, "_field_names", ()):
            obj.set(key, value)
    return obj
