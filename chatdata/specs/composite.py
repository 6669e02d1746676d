"""``Composite``: a (nested) dict of specs describing a TensorDict or a tensorclass.

Every entry's shape starts with the Composite's shape. ``zero``/``one``/``rand`` (and
``encode`` of a dict) build a TensorDict, or a ``data_cls`` instance
(``data_cls.from_tensordict(td)``) when ``data_cls`` is given, e.g. a History for History's
spec. ``update`` merges another Composite in, all or nothing; ``torch.stack`` stacks
Composites entry by entry.

Example:
    >>> from chatdata.specs import Composite, NonTensor, Unbounded
    >>> spec = Composite(obs=Unbounded(shape=(2, 3)), text=NonTensor(shape=(2,)), shape=(2,))
    >>> td = spec.rand()
    >>> td.batch_size, spec.is_in(td)
    (torch.Size([2]), True)
"""
from __future__ import annotations

import textwrap

import torch

from ..td import NonTensorData, NonTensorStack, RaggedTensorDict, TensorDict
from ..td.tensorclass import TensorClass
from ._shape import expand_shape, index_shape, norm_dim, norm_shape, parse_shape_args, shape_mismatch
from ._entries import _entry, _lists_fill_shape
from ._keys import _check_key, _SpecKeys, _unravel
from ._stack import spec_torch_function
from .base import TensorSpec, as_device
from .nontensor import NonTensor

__all__ = ["Composite", "history_default_spec"]

_MISSING = object()


class Composite:
    """A dict of specs: ``Composite(specs=None, shape=None, device=None, data_cls=None, **specs)``.

    Args:
        specs: a dict of key -> spec (a dict value becomes a nested Composite; tuple keys
            are nested keys).
        shape: the leading dims shared by every entry (``-1`` = any length); empty by default.
        device: if set, every entry is moved to it.
        data_cls: what ``zero``/``one``/``rand`` return (a tensorclass, via
            ``data_cls.from_tensordict``); a TensorDict when None. ``is_in`` then checks the type.
    """

    def __init__(self, specs=None, shape=None, device=None, data_cls=None, **kwargs):
        if specs is not None and not isinstance(specs, dict):
            raise TypeError(f"Composite specs must be a dict of key -> spec, got {type(specs).__name__}")
        if data_cls is not None and not (isinstance(data_cls, type) and hasattr(data_cls, "from_tensordict")):
            raise TypeError(f"data_cls must be a tensorclass (a class with from_tensordict), got {data_cls!r}")
        self._specs: dict = {}
        self.shape = norm_shape(() if shape is None else shape)
        self._device = as_device(device)
        self.data_cls = data_cls
        for key, value in list((specs or {}).items()) + list(kwargs.items()):
            self.set(key, value)

    # -- attributes -----------------------------------------------------------------------
    @property
    def device(self):
        return self._device

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def ndimension(self) -> int:
        return len(self.shape)

    @property
    def dtype(self):
        return None

    def is_empty(self, recurse: bool = True) -> bool:
        """True when there is no leaf spec (nested Composites may be empty too); with
        ``recurse=False``, when there is no entry at all (torchrl's default)."""
        if not recurse:
            return not self._specs
        return not any(True for _ in self.keys(True, True))

    # -- entries -------------------------------------------------------------------------
    def set(self, key, spec) -> "Composite":
        """Set ``key`` (nested keys create sub-Composites) to ``spec``; returns self."""
        k = _check_key(key)
        if isinstance(spec, dict):
            spec = Composite(spec, shape=self.shape, device=self._device)
        if not isinstance(spec, (TensorSpec, Composite)):
            raise TypeError(
                f"Composite entries must be specs (Unbounded, Bounded, Categorical, Binary, "
                f"NonTensor or Composite) or dicts of specs; got {type(spec).__name__} for key {key!r}"
            )
        node, depth = self, 0
        for part in k[:-1]:  # walk the existing sub-Composites; create none until the spec is accepted
            nxt = node._specs.get(part)
            if nxt is None:
                break
            if not isinstance(nxt, Composite):
                raise KeyError(f"cannot set {key!r}: {part!r} is a {type(nxt).__name__}, not a Composite")
            node, depth = nxt, depth + 1
        node._check_entry(k[-1], spec)  # new sub-Composites take node's shape: the same check
        for part in k[depth:-1]:
            node._specs[part] = node = Composite(shape=node.shape, device=node._device)
        node._set_str(k[-1], spec)
        return self

    def update(self, other) -> "Composite":
        """Set every entry of ``other`` (a Composite or a dict of key -> spec); a sub-Composite
        present on both sides is updated in turn rather than replaced. All or nothing: when an
        entry is refused, the spec is left as it was. Returns self."""
        if isinstance(other, Composite):
            items = list(other._specs.items())
        elif isinstance(other, dict):
            items = list(other.items())
        else:
            raise TypeError(f"Composite.update takes a Composite or a dict of key -> spec, got {type(other).__name__}")
        self._skeleton()._update(items)  # a dry run on a copy of the tree: raises before anything changes
        self._update(items)
        return self

    def _update(self, items) -> None:
        for key, value in items:
            current = self.get(key, None)
            if isinstance(current, Composite) and isinstance(value, (Composite, dict)):
                current._update(list(value._specs.items() if isinstance(value, Composite) else value.items()))
            else:
                self.set(key, value)

    def _skeleton(self) -> "Composite":
        """A copy of the tree of Composites sharing the leaf specs (cheap; for dry runs)."""
        out = Composite(shape=self.shape, device=self._device, data_cls=self.data_cls)
        out._specs = {k: v._skeleton() if isinstance(v, Composite) else v for k, v in self._specs.items()}
        return out

    def _check_entry(self, key: str, spec) -> None:
        n = len(self.shape)
        if tuple(spec.shape[:n]) != tuple(self.shape):
            raise ValueError(
                f"the spec for {key!r} has shape {tuple(spec.shape)}, which does not start with the "
                f"Composite's shape {tuple(self.shape)}"
            )

    def _set_str(self, key: str, spec) -> None:
        self._check_entry(key, spec)
        if self._device is not None and spec.device != self._device:
            spec = spec.to(self._device)
        self._specs[key] = spec

    def get(self, key, default=_MISSING):
        try:
            k = _unravel(key)
            node = self
            for part in k:
                if not isinstance(node, Composite):
                    raise KeyError(key)
                node = node._specs[part]
            return node
        except KeyError:
            if default is not _MISSING:
                return default
            raise KeyError(f"key {key!r} not found in Composite with keys {list(self.keys(True))}") from None

    def __getitem__(self, index):
        if isinstance(index, str) or (isinstance(index, tuple) and index and all(isinstance(i, (str, tuple)) for i in index)):
            return self.get(index)
        return self._index(index)

    def __setitem__(self, key, spec):
        if not (isinstance(key, str) or isinstance(key, tuple)):
            raise TypeError(f"Composite keys must be str or tuples of str, got {type(key).__name__} {key!r}")
        self.set(key, spec)

    def __delitem__(self, key):
        self.del_(key)

    def del_(self, key) -> "Composite":
        k = _unravel(key)
        parent = self.get(k[:-1]) if len(k) > 1 else self
        if not isinstance(parent, Composite) or k[-1] not in parent._specs:
            raise KeyError(f"key {key!r} not found in Composite with keys {list(self.keys(True))}")
        del parent._specs[k[-1]]
        return self

    def pop(self, key, default=_MISSING):
        try:
            out = self.get(key)
        except KeyError:
            if default is not _MISSING:
                return default
            raise
        self.del_(key)
        return out

    def __contains__(self, key) -> bool:
        return key in self.keys(include_nested=True)

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self):
        return iter(self._specs)

    def _iter(self, include_nested, leaves_only, prefix=()):
        for k, v in self._specs.items():
            full = prefix + (k,)
            is_comp = isinstance(v, Composite)
            if not (leaves_only and is_comp):
                yield (full if len(full) > 1 else k), v
            if include_nested and is_comp:
                yield from v._iter(include_nested, leaves_only, full)

    def keys(self, include_nested: bool = False, leaves_only: bool = False) -> _SpecKeys:
        return _SpecKeys([k for k, _ in self._iter(include_nested, leaves_only)])

    def values(self, include_nested: bool = False, leaves_only: bool = False) -> list:
        return [v for _, v in self._iter(include_nested, leaves_only)]

    def items(self, include_nested: bool = False, leaves_only: bool = False) -> list:
        return list(self._iter(include_nested, leaves_only))

    # -- values ------------------------------------------------------------------------------
    def _make(self, shape, kind: str):
        lead = torch.Size() if shape is None else norm_shape(shape, "leading shape")
        if -1 in lead:
            raise ValueError(f"cannot sample with leading shape {tuple(lead)}: -1 is not a length")
        batch = lead + torch.Size(1 if d == -1 else d for d in self.shape)
        td = TensorDict(batch_size=batch, device=self._device)
        for key, spec in self._specs.items():
            td.set(key, getattr(spec, kind)(lead))
        if self.data_cls is not None:
            return self.data_cls.from_tensordict(td)
        return td

    def zero(self, shape=None):
        """A TensorDict (or ``data_cls``) of every entry's ``zero()``; ``shape`` adds leading dims."""
        return self._make(shape, "zero")

    def zeros(self, shape=None):
        return self.zero(shape)

    def one(self, shape=None):
        return self._make(shape, "one")

    def ones(self, shape=None):
        return self.one(shape)

    def rand(self, shape=None):
        return self._make(shape, "rand")

    def sample(self, shape=None):
        return self.rand(shape)

    def encode(self, values):
        """``values`` (a dict of key -> value, nested dicts for sub-Composites) as a TensorDict
        (or ``data_cls``) of the spec, each entry through its spec's ``encode``; a key the spec
        lacks is a KeyError, a missing or misfitting entry a ValueError (nothing is reshaped)."""
        if not isinstance(values, dict):
            raise TypeError(f"Composite.encode takes a dict of key -> value, got {type(values).__name__}")
        td = self._encode(values)
        out = td if self.data_cls is None else self.data_cls.from_tensordict(td)
        self.assert_is_in(out)
        return out

    def _encode(self, values: dict):
        entries = {}
        for key, value in values.items():
            spec = self._specs.get(key) if isinstance(key, str) else None
            if spec is None:
                raise KeyError(f"cannot encode {key!r}: the spec has no entry {key!r} (its keys: {list(self._specs)})")
            if isinstance(spec, Composite):
                if not isinstance(value, dict):
                    raise TypeError(f"cannot encode {key!r}: its spec is a Composite, so it takes a dict, got {type(value).__name__}")
                entries[key] = spec._encode(value)
            elif isinstance(spec, NonTensor) and not isinstance(value, (list, NonTensorData, NonTensorStack, RaggedTensorDict)):
                spec.assert_is_in(value)
                entries[key] = value  # one value for the whole batch, as a TensorDict takes it
            else:
                entries[key] = spec.encode(value)
        batch = list(self.shape)
        for i, d in enumerate(batch):  # a -1 dim takes its length from the entries
            if d == -1:
                lens = {tuple(getattr(v, "batch_size", None) or v.shape)[i] for v in entries.values()
                        if isinstance(v, (torch.Tensor, TensorDict, NonTensorStack, RaggedTensorDict))}
                if len(lens) > 1:
                    raise ValueError(f"cannot encode: the entries disagree on the length of dim {i} (any length in the spec): {sorted(lens)}")
                batch[i] = lens.pop() if lens else 1
        td = TensorDict(batch_size=batch, device=self._device)
        for key, value in entries.items():
            td.set(key, value)
        return td

    def _check(self, value) -> str | None:
        if self.data_cls is not None:
            if not isinstance(value, self.data_cls):
                return f"expected a {self.data_cls.__name__}, got {type(value).__name__}"
        elif not isinstance(value, (TensorDict, TensorClass, RaggedTensorDict)):
            return f"expected a TensorDict or a tensorclass, got {type(value).__name__}"
        reason = shape_mismatch(value.batch_size, self.shape)
        if reason is not None and not _lists_fill_shape(self, value):
            return f"batch size: {reason}"
        for key, spec in self._specs.items():
            try:
                entry = _entry(value, key)
            except (KeyError, AttributeError):
                if isinstance(spec, Composite) and spec.is_empty():
                    continue
                return f"missing entry {key!r}"
            reason = spec._check(entry)
            if reason is not None:
                return f"entry {key!r}: {reason}"
        return None

    def is_in(self, value) -> bool:
        """Whether ``value`` is of the right type, its batch size fits, and every entry fits its spec.

        Extra entries in ``value`` are allowed. Never changes the spec.
        """
        return self._check(value) is None

    def contains(self, value) -> bool:
        return self.is_in(value)

    def assert_is_in(self, value) -> None:
        """Raise ``ValueError`` naming the first entry that does not fit."""
        reason = self._check(value)
        if reason is not None:
            raise ValueError(f"value is not in the Composite spec: {reason}")

    # -- transforms ------------------------------------------------------------------------
    def _new(self, shape, specs: dict, device=...):
        out = Composite(shape=shape, device=self._device if device is ... else device, data_cls=self.data_cls)
        for k, v in specs.items():
            out._set_str(k, v)
        return out

    def clone(self) -> "Composite":
        return self._new(self.shape, {k: v.clone() for k, v in self._specs.items()})

    def to(self, dest) -> "Composite":
        """Move every entry to a device, or change the dtype of every tensor entry."""
        if isinstance(dest, torch.dtype):
            return self._new(self.shape, {k: v.to(dest) for k, v in self._specs.items()})
        device = as_device(dest)
        return self._new(self.shape, {k: v.to(device) for k, v in self._specs.items()}, device=device)

    def cpu(self) -> "Composite":
        return self.to("cpu")

    def expand(self, *shape) -> "Composite":
        """The Composite with shape ``shape``: new leading dims are prepended to every entry."""
        new = parse_shape_args(shape)
        expand_shape(self.shape, new)
        n = len(self.shape)
        return self._new(new, {k: v.expand(new + v.shape[n:]) for k, v in self._specs.items()})

    def unsqueeze(self, dim: int) -> "Composite":
        d = norm_dim(dim, self.ndim + 1)
        new = list(self.shape)
        new.insert(d, 1)
        return self._new(torch.Size(new), {k: v.unsqueeze(d) for k, v in self._specs.items()})

    def squeeze(self, dim: int | None = None) -> "Composite":
        if dim is None:
            dims = [i for i, s in enumerate(self.shape) if s == 1]
        else:
            d = norm_dim(dim, self.ndim)
            dims = [d] if self.ndim and self.shape[d] == 1 else []
        out = self
        for d in reversed(dims):
            new = torch.Size(s for i, s in enumerate(out.shape) if i != d)
            out = out._new(new, {k: v.squeeze(d) for k, v in out._specs.items()})
        return out if dims else self.clone()

    def _index(self, index) -> "Composite":
        if not self.ndim:
            raise IndexError("cannot index a Composite with an empty shape (use a key to get an entry)")
        new, _ = index_shape(self.shape, index)
        idx = index if isinstance(index, tuple) else (index,)
        if any(i is Ellipsis for i in idx):  # spell out '...' over the Composite's own dims
            pos = next(j for j, i in enumerate(idx) if i is Ellipsis)
            used = sum(1 for i in idx if i is not None and i is not Ellipsis)
            idx = idx[:pos] + (slice(None),) * (self.ndim - used) + idx[pos + 1 :]
        return self._new(new, {k: v[idx] for k, v in self._specs.items()})

    def _stacked(self, specs, dim: int, shape: torch.Size) -> "Composite":
        """``torch.stack`` of Composites with the same keys and data_cls: entry by entry."""
        for i, other in enumerate(specs):
            if other._specs.keys() != self._specs.keys() or other.data_cls is not self.data_cls:
                what = "keys" if other._specs.keys() != self._specs.keys() else "data_cls"
                raise ValueError(f"cannot stack Composites 0 and {i}: their {what} differ (they must match to stack)")
        return self._new(shape, {k: torch.stack([o._specs[k] for o in specs], dim) for k in self._specs})

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return spec_torch_function(func, args, kwargs)

    # -- comparison and printing -----------------------------------------------------------
    def __eq__(self, other):
        return (
            type(other) is type(self)
            and other.shape == self.shape
            and other._device == self._device
            and other.data_cls is self.data_cls
            and other._specs.keys() == self._specs.keys()
            and all(other._specs[k] == v for k, v in self._specs.items())
        )

    def __ne__(self, other):
        return not self == other

    __hash__ = None

    def __repr__(self) -> str:
        lines = [textwrap.indent(f"{k}: {v!r}", " " * 4) for k, v in self._specs.items()]
        lines += [f"    device={self._device}", f"    shape={self.shape}"]
        return "Composite(\n" + ",\n".join(lines) + ")"


def history_default_spec(history_cls, shape=(-1,)) -> Composite:
    """The spec of a History (``history_cls``) of ``shape``: role and content as strings.

    Example:
        >>> spec = history_default_spec(History)
        >>> spec.zero().role
        'foo'
    """
    return Composite(
        role=NonTensor(example_data="foo", shape=shape),
        content=NonTensor(example_data="foo", shape=shape),
        shape=shape,
        data_cls=history_cls,
    )
