"""State dicts of tensorclasses: ``tc.state_dict()`` / ``tc.load_state_dict(sd)``.

Layout (as tensordict's tensorclasses write it):

- flat (default): tensor fields by dot-separated key (``"x"``, ``"y.x"`` for a nested
  tensorclass ``y``); ``sd._metadata[path]`` holds, for the root (``""``) and every nested
  collection, its ``batch_size``, ``device``, the class name (``_type``) and the non-tensor
  fields (``_non_tensor``: ``{"label": "cat"}``).
- ``flatten=False``: a nested collection is a nested state dict (with its own ``_metadata``).
- legacy (older tensordict): ``{"_tensordict": {..., "__batch_size", "__device"},
  "_non_tensordict": {...}}`` loads too.

Loading checks every key against the class's fields, every in-place copy's shape, every node's
``batch_size`` (a list of ints >= 0, a prefix of its tensors' shapes and starting with its
parent's) and that no non-tensor value replaces a tensor or a collection (unless ``assign=True``)
before it changes anything: a bad state dict raises ``KeyError`` / ``RuntimeError`` /
``TypeError`` / ``BatchSizeError`` and leaves the object as it was. ``_type`` is informational; it is resolved through the tensorclass registry
only (no import, no unpickling).

Example:
    >>> @tensorclass
    ... class Node:
    ...     x: torch.Tensor
    ...     z: str
    ...     y: "Node" = None
    >>> tc = Node(x=torch.zeros(2), z="cat", y=Node(x=torch.ones(2), z="dog"))
    >>> sd = tc.state_dict()
    >>> sorted(sd), sd._metadata[""]["_non_tensor"]
    (['x', 'y.x'], {'z': 'cat'})
    >>> tc.x = torch.full((2,), 7.0)  # a new tensor: sd's tensors share memory with the fields
    >>> tc.load_state_dict(sd).x
    tensor([0., 0.])
"""
from __future__ import annotations

from collections.abc import Mapping

import torch

from ..core import TensorDict, check_batch
from ..core.state import _StateDict, _non_tensor_entry
from ..nontensor import BatchSizeError, NonTensorData, is_non_tensor
from .base import TensorClass
from .options import _resolve
from .registry import registered_tensorclass

__all__ = ["tensorclass_state_dict", "tensorclass_load_state_dict", "install"]


def _is_tc(obj) -> bool:
    return isinstance(obj, TensorClass)


def _storage(obj):
    return obj._storage if _is_tc(obj) else obj


def _node_meta(obj) -> dict:
    st = _storage(obj)
    meta = {"batch_size": list(st.batch_size), "device": None if st.device is None else str(st.device)}
    if _is_tc(obj):
        meta["_type"] = f"{type(obj).__module__}.{type(obj).__qualname__}"
    return meta


def _nt_value(v):
    return v.data if isinstance(v, NonTensorData) else v.tolist()


def tensorclass_state_dict(tc, destination=None, prefix: str = "", keep_vars: bool = False, flatten: bool = True):
    """The state dict of tensorclass ``tc`` (see the module docstring).

    Example:
        >>> @tensorclass
        ... class Pair:
        ...     a: torch.Tensor
        ...     b: torch.Tensor
        >>> list(Pair(a=torch.zeros(2), b=torch.ones(2), batch_size=[2]).state_dict())
        ['a', 'b']
    """
    out = _StateDict() if destination is None else destination
    metadata = dict(getattr(out, "_metadata", None) or {})
    _write(tc, out, metadata, prefix, keep_vars, flatten)
    out._metadata = metadata
    return out


def _write(obj, out, metadata, prefix, keep_vars, flatten):
    name = prefix[:-1] if prefix.endswith(".") else prefix
    meta = metadata.setdefault(name, {})
    meta.update(_node_meta(obj))
    for k, v in _storage(obj)._tensordict.items():
        if isinstance(v, torch.Tensor):
            out[prefix + k] = v if keep_vars else v.detach()
        elif is_non_tensor(v):
            meta.setdefault("_non_tensor", {})[k] = _nt_value(v)
        elif flatten:
            _write(v, out, metadata, prefix + k + ".", keep_vars, flatten)
        else:
            out[prefix + k] = tensorclass_state_dict(v, keep_vars=keep_vars, flatten=False)


# -- loading --------------------------------------------------------------------------------
class _Node:
    """One collection of a state dict: its tensors, non-tensor values, children and metadata."""

    def __init__(self, meta=None, where: str = ""):
        if meta is not None and not isinstance(meta, Mapping):
            raise TypeError(f"state-dict metadata of {where or '<root>'!r} is a {type(meta).__name__}, expected a mapping")
        self.meta = dict(meta or {})
        self.tensors: dict = {}
        self.children: dict = {}
        non_tensor = self.meta.pop("_non_tensor", None) or {}
        if not isinstance(non_tensor, Mapping):
            raise TypeError(f"state-dict metadata '_non_tensor' of {where or '<root>'!r} is a "
                            f"{type(non_tensor).__name__}, expected a mapping")
        self.non_tensor = dict(non_tensor)


def _parse_nested(sd, meta) -> _Node:
    node = _Node(meta)
    for k, v in sd.items():
        if k in ("__batch_size", "__device"):
            node.meta["batch_size" if k == "__batch_size" else "device"] = list(v) if k == "__batch_size" else v
        elif isinstance(v, Mapping):
            node.children[k] = _parse_nested(v, (getattr(v, "_metadata", None) or {}).get(""))
        else:
            node.tensors[k] = v
    return node


def _parse(sd) -> _Node:
    if isinstance(sd.get("_tensordict"), Mapping) and "_non_tensordict" in sd:  # legacy layout
        node = _parse_nested(sd["_tensordict"], None)
        if not isinstance(sd["_non_tensordict"] or {}, Mapping):
            raise TypeError(f"state-dict entry '_non_tensordict' is a {type(sd['_non_tensordict']).__name__}, "
                            "expected a mapping (legacy layout)")
        node.non_tensor.update(sd["_non_tensordict"] or {})
        extra = set(sd) - {"_tensordict", "_non_tensordict"}
        if extra:
            raise KeyError(f"Key {sorted(extra)[0]!r} wasn't expected in the state-dict (legacy layout: "
                           "'_tensordict' and '_non_tensordict' only)")
        return node
    metadata = getattr(sd, "_metadata", None) or {}
    if any(isinstance(v, Mapping) for v in sd.values()):
        return _parse_nested(sd, metadata.get(""))
    root = _Node(metadata.get(""))
    nodes = {"": root}
    for path in sorted((p for p in metadata if p), key=lambda p: p.count(".")):
        parent = nodes.get(path.rpartition(".")[0], root)
        nodes[path] = parent.children.setdefault(path.rpartition(".")[2], _Node(metadata[path], path))
    for key, value in sd.items():
        node, parts = root, key.split(".")
        for i, p in enumerate(parts[:-1]):
            node = node.children.setdefault(p, nodes.get(".".join(parts[: i + 1])) or _Node())
        node.tensors[parts[-1]] = value
    return root


def _fields_of(target):
    """Allowed keys: a tensorclass's fields (and the other keys it stores); None (anything) for a TensorDict."""
    cls = target if isinstance(target, type) else type(target)
    return (*cls._field_names, *cls._storage_keys) if issubclass(cls, TensorClass) else None


def _child_class(target, key, node):
    """The class to create for a missing nested collection ``key`` of ``target``."""
    cls = target if isinstance(target, type) else type(target)
    if issubclass(cls, TensorClass):
        hinted = _resolve(cls, key, unions=True)
        if isinstance(hinted, type) and issubclass(hinted, (TensorClass, TensorDict)):
            return hinted
    saved = registered_tensorclass(node.meta.get("_type", "")) if node.meta.get("_type") else None
    return saved or TensorDict


def _new_batch_size(target, node, where: str, parent_bs):
    """The batch size ``node`` gives ``target`` once loaded, checked against the metadata's form,
    the entries ``target`` holds (the setter checks them before any copy) and the parent's."""
    bs = node.meta.get("batch_size")
    path = where[:-1] or "<root>"
    if bs is not None:
        if not isinstance(bs, (list, tuple)) or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in bs):
            raise BatchSizeError(f"state-dict metadata of {path!r}: batch_size must be a list of ints >= 0, got {bs!r}")
        bs = torch.Size(bs)
        if not isinstance(target, type):
            for k, v in _storage(target)._tensordict.items():
                check_batch(where + k, v, bs)
    elif not isinstance(target, type):
        bs = _storage(target).batch_size
    else:
        bs = parent_bs
    if parent_bs is not None and tuple(bs[: len(parent_bs)]) != tuple(parent_bs):
        raise BatchSizeError(f"state-dict entry {path!r} has batch size {tuple(bs)}, which does not start with its "
                             f"parent's {tuple(parent_bs)}")
    return bs


def _check(target, node, strict: bool, assign: bool, where: str, parent_bs=None) -> None:
    """Raise before anything changes when ``node`` does not fit ``target`` (an object or, for a
    collection still to be created, its class)."""
    fields = _fields_of(target)
    name = (target if isinstance(target, type) else type(target)).__name__
    for key in [*node.tensors, *node.non_tensor, *node.children]:
        if fields is not None and key not in fields:
            raise KeyError(f"Key {where + key!r} wasn't expected in the state-dict: {name} has the fields {list(fields)}")
    entries = {} if isinstance(target, type) else _storage(target)._tensordict
    bs = _new_batch_size(target, node, where, parent_bs)
    for key in node.non_tensor:
        current = entries.get(key)
        if current is not None and not is_non_tensor(current) and not assign:
            what = "a tensor" if isinstance(current, torch.Tensor) else "a collection"
            raise RuntimeError(f"state-dict non-tensor entry {where + key!r} would replace {name}.{key}, which is "
                               f"{what} (pass assign=True to replace it)")
    for key, value in node.tensors.items():
        if value is not None and not isinstance(value, torch.Tensor):
            raise TypeError(f"state-dict entry {where + key!r} is a {type(value).__name__}, expected a tensor")
        current = entries.get(key)
        if isinstance(current, torch.Tensor) and value is not None and not assign and current.shape != value.shape:
            raise RuntimeError(f"state-dict entry {where + key!r} has shape {tuple(value.shape)}, the "
                               f"{name} field has {tuple(current.shape)} (pass assign=True to replace it)")
        if current is not None and not isinstance(current, torch.Tensor) and not is_non_tensor(current):
            raise RuntimeError(f"state-dict entry {where + key!r} is a tensor, {name}.{key} is a collection")
        if value is not None:
            check_batch(where + key, value, bs)
    for key, child in node.children.items():
        current = entries.get(key)
        if current is not None and (isinstance(current, torch.Tensor) or is_non_tensor(current)):
            raise RuntimeError(f"state-dict entry {where + key!r} is a collection, {name}.{key} is not")
        _check(current if current is not None else _child_class(target, key, child), child, strict, assign,
               where + key + ".", bs)
    if strict and not isinstance(target, type):
        missing = [k for k, v in entries.items() if isinstance(v, torch.Tensor) and k not in node.tensors]
        if missing:
            raise KeyError(f"load_state_dict: {name} entries {[where + k for k in missing]} are missing from the "
                           "state-dict (strict=True)")


def _load(obj, node, assign: bool) -> None:
    st = _storage(obj)
    bs = node.meta.get("batch_size")
    if bs is not None and list(st.batch_size) != list(bs):
        st.batch_size = bs
    for key, value in node.non_tensor.items():
        if _is_tc(obj):
            obj.set(key, value)
        else:
            st.set(key, _non_tensor_entry(value, st.batch_size))
    for key, value in node.tensors.items():
        current = st._tensordict.get(key)
        if isinstance(current, torch.Tensor) and value is not None and not assign:
            with torch.no_grad():  # a parameter (a leaf requiring grad) is loaded in place, as nn.Module does
                current.copy_(value)
        else:
            obj.set(key, value)
    for key, child in node.children.items():
        current = st._tensordict.get(key)
        if current is None:
            cls = _child_class(obj, key, child)
            batch = child.meta.get("batch_size", list(st.batch_size))
            current = cls(batch_size=batch) if cls is TensorDict else cls._from_storage(TensorDict(batch_size=batch))
            obj.set(key, current)
            current = st._tensordict.get(key)
        _load(current, child, assign)


def tensorclass_load_state_dict(tc, state_dict, strict: bool = True, assign: bool = False):
    """Load a flat, nested or legacy state dict into ``tc`` in place (``assign=True``: replace the
    tensors instead of copying into them); all checks run before the first change.

    Example:
        >>> @tensorclass
        ... class One:
        ...     a: torch.Tensor
        >>> tensorclass_load_state_dict(One(a=torch.zeros(1)), {"a": torch.ones(1)}).a
        tensor([1.])
    """
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"load_state_dict expects a mapping, got a {type(state_dict).__name__}")
    node = _parse(state_dict)
    _check(tc, node, strict, assign, "")
    _load(tc, node, assign)
    return tc


# -- the methods TensorClass gets from this module (they check classes against TensorClass,
#    so they live above tensorclass/base.py, which cannot import them) ----------------------
def _state_dict_method(self, destination=None, prefix: str = "", keep_vars: bool = False, flatten: bool = True):
    """Tensor fields by dot-separated key; class, batch size and non-tensor fields in
    ``_metadata`` (``flatten=False``: nested dicts). See :mod:`chatdata.td.tensorclass.state`."""
    return tensorclass_state_dict(self, destination, prefix, keep_vars, flatten)


def _load_state_dict_method(self, state_dict, strict: bool = True, assign: bool = False, from_flatten: bool = False):
    """Load a flat, nested or legacy state dict in place; checked before anything changes."""
    return tensorclass_load_state_dict(self, state_dict, strict, assign)


def install() -> None:
    """Give TensorClass ``state_dict`` and ``load_state_dict``; the room's face calls it once.

    Example: ``install()``
    """
    TensorClass.state_dict = _state_dict_method
    TensorClass.load_state_dict = _load_state_dict_method
