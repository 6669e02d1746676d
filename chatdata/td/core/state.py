"""``state_dict`` / ``load_state_dict`` (flat, nested and legacy formats) and ``consolidate``.

Example:
    >>> td = TensorDict({"a": 1, "b": {"c": 2}}, [])
    >>> state_dict(td)
    OrderedDict([('a', tensor(1)), ('b.c', tensor(2))])
"""
from __future__ import annotations

from collections import OrderedDict

import torch

from ..nontensor import NonTensorData, NonTensorStack, is_non_tensor
from .tensordict import TensorDict

__all__ = ["state_dict", "load_state_dict", "consolidate", "install"]

#: Makes the file-backed buffer of ``consolidate(filename=...)``: ``(nbytes, filename) -> a 1-D
#: uint8 MemoryMappedTensor``. The storage room sets it when it is imported (the core does not
#: import the on-disk format).
file_backed_buffer = None


class _StateDict(OrderedDict):
    """An OrderedDict that can carry a ``_metadata`` attribute (as nn.Module's does)."""

    def __repr__(self):
        return f"OrderedDict({list(self.items())!r})"

    def __reduce__(self):
        # pickle (torch.save) as a plain OrderedDict + _metadata, as nn.Module's state dicts are,
        # so that torch.load(weights_only=True) -- torch's default -- accepts it
        state = {"_metadata": self._metadata} if "_metadata" in self.__dict__ else None
        return (OrderedDict, (), state, None, iter(self.items()))


def _meta(td) -> dict:
    return {"batch_size": list(td.batch_size), "device": None if td.device is None else str(td.device)}


def state_dict(td, destination=None, prefix: str = "", keep_vars: bool = False, flatten: bool = True):
    """The TensorDict's tensors by dot-separated key (``flatten=False``: nested dicts), with
    batch sizes and devices in ``_metadata`` keyed by prefix (``""`` for the root)."""
    out = _StateDict() if destination is None else destination
    metadata = getattr(out, "_metadata", None) or {}
    if flatten:
        _flat_into(td, out, metadata, prefix, keep_vars)
        out._metadata = metadata
        return out
    for k, v in td._tensordict.items():
        if isinstance(v, torch.Tensor):
            out[prefix + k] = v if keep_vars else v.detach()
        elif is_non_tensor(v):
            metadata.setdefault("", _meta(td)).setdefault("_non_tensor", {})[k] = _nt_value(v)
        else:
            out[prefix + k] = state_dict(v._storage if hasattr(v, "_storage") else v, keep_vars=keep_vars, flatten=False)
    metadata.setdefault("", {}).update(_meta(td))
    out._metadata = metadata
    return out


def _nt_value(v):
    return v.data if isinstance(v, NonTensorData) else v.tolist()


def _flat_into(td, out, metadata, prefix, keep_vars):
    name = prefix[:-1] if prefix.endswith(".") else prefix
    metadata.setdefault(name, {}).update(_meta(td))
    for k, v in td._tensordict.items():
        if isinstance(v, torch.Tensor):
            out[prefix + k] = v if keep_vars else v.detach()
        elif is_non_tensor(v):
            metadata[name].setdefault("_non_tensor", {})[k] = _nt_value(v)
        else:
            _flat_into(v._storage if hasattr(v, "_storage") else v, out, metadata, prefix + k + ".", keep_vars)


def _to_nested(sd) -> tuple[dict, dict]:
    """Normalise any supported state-dict format into (nested values, metadata by path)."""
    meta: dict = {}
    if any(k in ("__batch_size", "__device") for k in sd) or any(isinstance(v, dict) for v in sd.values()):
        def walk(d, path):
            m = dict(getattr(d, "_metadata", {}).get("", {}))
            if "__batch_size" in d:
                m["batch_size"] = list(d["__batch_size"])
            if "__device" in d:
                m["device"] = None if d["__device"] is None else str(d["__device"])
            meta[path] = m
            nested = {}
            for k, v in d.items():
                if k in ("__batch_size", "__device"):
                    continue
                nested[k] = walk(v, path + (k,)) if isinstance(v, dict) else v
            return nested

        return walk(sd, ()), meta
    for prefix, m in getattr(sd, "_metadata", {}).items():
        meta[tuple(prefix.split(".")) if prefix else ()] = m
    nested: dict = {}
    for k, v in sd.items():
        node = nested
        parts = k.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = v
    return nested, meta


def load_state_dict(td, sd, strict: bool = True, assign: bool = False, from_flatten: bool = False):
    """Load a flat, nested or legacy state dict into ``td`` (in place unless ``assign``)."""
    nested, meta = _to_nested(sd)

    def load(node, values, path):
        m = meta.get(path, {})
        if "batch_size" in m and list(node.batch_size) != list(m["batch_size"]):
            node.batch_size = m["batch_size"]
        for k, v in (m.get("_non_tensor") or {}).items():
            node.set(k, _non_tensor_entry(v, node.batch_size))  # a dict stays a value, not a sub-td
        for k, v in values.items():
            if isinstance(v, dict):
                if k not in node._tensordict:
                    node._tensordict[k] = TensorDict(batch_size=meta.get(path + (k,), {}).get("batch_size", node.batch_size))
                child = node._tensordict[k]
                load(child._storage if hasattr(child, "_storage") else child, v, path + (k,))
            elif k in node._tensordict and not assign:
                with torch.no_grad():  # a parameter (a leaf requiring grad) is loaded in place, as nn.Module does
                    node._tensordict[k].copy_(v)
            else:
                node.set(k, v)
        if strict:
            missing = [k for k, e in node._tensordict.items() if k not in values and _has_tensor(e)]
            if missing:
                raise KeyError(f"load_state_dict: keys {missing} are missing from the state dict (strict=True)")

    load(td, nested, ())
    return td


def _non_tensor_entry(value, batch_size):
    """A state dict's non-tensor value as an entry: a stack when it is a list shaped like the batch."""
    if isinstance(value, list) and len(batch_size):
        try:
            return NonTensorStack.from_list(value, batch_size=batch_size)
        except ValueError:
            pass
    return NonTensorData(value, batch_size=batch_size)


def _has_tensor(entry) -> bool:
    if isinstance(entry, torch.Tensor):
        return True
    inner = getattr(entry, "_storage", entry)
    entries = getattr(inner, "_tensordict", None)
    return isinstance(entries, dict) and any(_has_tensor(x) for x in entries.values())


# -- consolidate ---------------------------------------------------------------------------
_ALIGN = 16


def consolidate(td, filename=None, *, num_threads=0, device=None, non_blocking=False, inplace=False,
                return_early=False, use_buffer=False, share_memory=False, pin_memory=False, metadata=False):
    """A copy whose tensor leaves are views into one flat storage (optionally a file).

    Example:
        >>> c = consolidate(TensorDict({"a": torch.ones(3), "b": {"c": torch.zeros(2)}}, []))
        >>> c["a"].untyped_storage().data_ptr() == c["b", "c"].untyped_storage().data_ptr()
        True
    """
    leaves = [(k, v) for k, v in td.items(include_nested=True, leaves_only=True) if isinstance(v, torch.Tensor)]
    layout, total = [], 0
    for k, v in leaves:
        total = -(-total // _ALIGN) * _ALIGN
        layout.append((k, v, total))
        total += v.numel() * v.element_size()
    total = max(total, 1)
    if filename is not None:
        if file_backed_buffer is None:
            raise RuntimeError("consolidate(filename=...) maps a file, which needs chatdata.td.storage: import chatdata.td")
        buf = file_backed_buffer(total, filename)
    else:
        buf = torch.empty(total, dtype=torch.uint8)
        if share_memory:
            buf.share_memory_()
        elif pin_memory and torch.cuda.is_available():
            buf = buf.pin_memory()
    out = td if inplace else td.apply(lambda t: t)  # same structure, entries to be replaced
    for k, v, off in layout:
        n = v.numel() * v.element_size()
        view = buf[off : off + n].view(v.dtype).view(v.shape) if n else torch.empty(v.shape, dtype=v.dtype)
        view.copy_(v.detach())
        parent, name = _parent_and_name(out, k)
        parent._tensordict[name] = view
    out.__dict__["_consolidated"] = buf
    if device is not None:
        out = out.to(device)
    return out


def _parent_and_name(td, key):
    parts = key if isinstance(key, tuple) else (key,)
    node = td
    for p in parts[:-1]:
        node = node._tensordict[p]
        node = getattr(node, "_storage", node)
    return node, parts[-1]


# -- pickling a consolidated TensorDict: its one storage once, then where each leaf lives ----
def _in_storage(t: torch.Tensor, storage) -> bool:
    return (
        t.device == storage.device
        and t.untyped_storage().data_ptr() == storage.data_ptr()
        and (t.data_ptr() - storage.data_ptr()) % t.element_size() == 0
    )


def _strip(node, storage, layout, path):
    entries = {}
    for k, v in node._tensordict.items():
        if isinstance(v, torch.Tensor) and not v.requires_grad and _in_storage(v, storage):
            offset = (v.data_ptr() - storage.data_ptr()) // v.element_size()
            layout.append((path + (k,), offset, v.dtype, tuple(v.shape), tuple(v.stride())))
            entries[k] = None
        elif isinstance(v, TensorDict):
            sub = TensorDict.__new__(TensorDict)
            sub.__dict__.update(v.__dict__)
            sub._tensordict = _strip(v, storage, layout, path + (k,))
            entries[k] = sub
        elif isinstance(getattr(v, "_storage", None), TensorDict) and hasattr(v, "_from_storage"):
            inner = v._storage
            sub = TensorDict.__new__(TensorDict)
            sub.__dict__.update(inner.__dict__)
            sub._tensordict = _strip(inner, storage, layout, path + (k,))
            entries[k] = type(v)._from_storage(sub)
        else:
            entries[k] = v
    return entries


def consolidated_getstate(td) -> dict:
    """Pickle state of a consolidated TensorDict: the buffer once (a file name when it is
    file-backed) and each leaf as (key, offset, dtype, shape, stride), so the pickle is about
    the size of the data and unpickling rebuilds views into one storage."""
    buf = td.__dict__["_consolidated"]
    layout: list = []
    state = {k: v for k, v in td.__dict__.items() if k != "_consolidated"}
    state["_tensordict"] = _strip(td, buf.untyped_storage(), layout, ())
    state["_consolidated_buffer"] = buf
    state["_consolidated_layout"] = layout
    return state


def consolidated_setstate(td, state: dict) -> None:
    state = dict(state)
    buf = state.pop("_consolidated_buffer")
    layout = state.pop("_consolidated_layout")
    td.__dict__.update(state)
    storage = buf.untyped_storage()
    for key, offset, dtype, shape, stride in layout:
        view = torch.empty(0, dtype=dtype, device=buf.device).set_(storage, offset, shape, stride)
        parent, name = _parent_and_name(td, key)
        parent._tensordict[name] = view
    td.__dict__["_consolidated"] = buf


# -- the methods TensorDict gets from this module ----------------------------------------------
def _state_dict(self, destination=None, prefix="", keep_vars=False, flatten=True):
    """Tensors by dot-separated key (``flatten=False``: nested), metadata in ``_metadata``.

    Example: ``TensorDict({"a": 1, "b": {"c": 2}}, []).state_dict()``
    """
    return state_dict(self, destination, prefix, keep_vars, flatten)


def _load_state_dict(self, state_dict, strict=True, assign=False, from_flatten=False):
    """Load a flat, nested or legacy state dict in place (auto-detected)."""
    return load_state_dict(self, state_dict, strict, assign, from_flatten)


def _consolidate(self, filename=None, **kwargs):
    """A copy whose tensors live in one storage (``filename``: a memory-mapped file)."""
    return consolidate(self, filename, **kwargs)


def _getstate(self):
    """The pickled state: the entries; a consolidated TensorDict's one buffer once."""
    if "_consolidated" in self.__dict__:  # one buffer, pickled once (not once per leaf)
        return consolidated_getstate(self)
    return self.__dict__.copy()


def _setstate(self, state):
    """Restore :func:`_getstate`'s state."""
    if "_consolidated_layout" in state:
        consolidated_setstate(self, state)
        return
    self.__dict__.update(state)


def install() -> None:
    """Give TensorDict ``state_dict``, ``load_state_dict``, ``consolidate`` and its pickling
    (``__getstate__`` / ``__setstate__``). They build TensorDicts, so they live above
    core/tensordict.py, which cannot import them; the core's face calls this once.

    Example: ``install()``
    """
    TensorDict.state_dict = _state_dict
    TensorDict.load_state_dict = _load_state_dict
    TensorDict.consolidate = _consolidate
    TensorDict.__getstate__ = _getstate
    TensorDict.__setstate__ = _setstate
