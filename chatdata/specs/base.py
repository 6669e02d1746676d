"""``TensorSpec``, the base of every leaf spec, and the boxes that describe their spaces.

A spec has a ``shape`` (``-1`` = any length), a ``space``, a ``device``, a ``dtype`` and a
``domain``. It makes values (``zero``, ``one``, ``rand``), checks them (``is_in``,
``assert_is_in``) and reshapes like a tensor (``expand``, ``unsqueeze``, ``squeeze``,
indexing). Printing follows torchrl's format field by field.

Example:
    >>> print(CategoricalBox(4))
    CategoricalBox(n=4)
"""
from __future__ import annotations

import textwrap

import torch

from ._stack import spec_torch_function
from ._shape import expand_shape, index_shape, norm_dim, norm_shape, parse_shape_args, safe_shape

__all__ = ["TensorSpec", "ContinuousBox", "CategoricalBox", "spec_repr", "as_device"]


def as_device(device) -> torch.device | None:
    """``None`` stays None; anything else becomes a ``torch.device`` (TypeError if it cannot)."""
    if device is None:
        return None
    if isinstance(device, torch.dtype):
        raise TypeError(f"device must be a device (e.g. 'cpu'), got the dtype {device}")
    try:
        return torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise TypeError(f"invalid device {device!r}: {err}") from None


def spec_repr(name: str, fields) -> str:
    """``Name(\\n    k=v,\\n    ...)`` with multi-line values indented, as torchrl prints specs."""
    body = ",\n".join(textwrap.indent(f"{k}={v}", " " * 4) for k, v in fields)
    return f"{name}(\n{body})"


def _tensor_desc(t: torch.Tensor) -> str:
    return f"Tensor(shape={t.shape}, device={t.device}, dtype={t.dtype}, contiguous={t.is_contiguous()})"


class ContinuousBox:
    """The interval ``[low, high]`` of a Bounded or Unbounded spec (tensors of the safe shape)."""

    def __init__(self, low: torch.Tensor, high: torch.Tensor):
        self.low = low
        self.high = high

    def __iter__(self):
        yield self.low
        yield self.high

    def __eq__(self, other):
        return (
            type(other) is type(self)
            and self.low.dtype == other.low.dtype
            and self.low.shape == other.low.shape
            and bool(torch.equal(self.low.cpu(), other.low.cpu()))
            and bool(torch.equal(self.high.cpu(), other.high.cpu()))
        )

    __hash__ = None

    def __repr__(self):
        return f"ContinuousBox(\n    low={_tensor_desc(self.low)},\n    high={_tensor_desc(self.high)})"


class CategoricalBox:
    """The integers ``0 .. n-1``."""

    def __init__(self, n: int):
        self.n = int(n)

    def __eq__(self, other):
        return type(other) is type(self) and other.n == self.n

    __hash__ = None

    def __repr__(self):
        return f"CategoricalBox(n={self.n})"


class TensorSpec:
    """Base of the leaf specs. Subclasses implement ``_fill``, ``_check`` and ``_rebuild``.

    Attributes: ``shape`` (torch.Size, ``-1`` = any length), ``device``, ``dtype``,
    ``domain`` and ``space``.
    """

    shape: torch.Size
    device: torch.device | None
    dtype: torch.dtype | None
    domain: str | None

    # -- subclass hooks ----------------------------------------------------------------------
    def _fill(self, shape: torch.Size, kind: str):  # pragma: no cover - abstract
        raise NotImplementedError

    def _check(self, value) -> str | None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _rebuild(self, shape=None, device=..., dtype=None, fn=None) -> "TensorSpec":  # pragma: no cover
        """A copy with a new shape / device / dtype; ``fn`` maps tensors of the safe shape."""
        raise NotImplementedError

    @property
    def space(self):
        return None

    # -- shape -----------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def ndimension(self) -> int:
        return len(self.shape)

    @property
    def _safe_shape(self) -> torch.Size:
        return safe_shape(self.shape)

    def _sample_shape(self, shape) -> torch.Size:
        lead = torch.Size() if shape is None else norm_shape(shape, "leading shape")
        if -1 in lead:
            raise ValueError(f"cannot sample with leading shape {tuple(lead)}: -1 is not a length")
        return torch.Size(lead + self._safe_shape)

    # -- values ----------------------------------------------------------------------------
    def zero(self, shape=None):
        """A value of zeros; ``shape`` adds leading dims; ``-1`` dims have length 1."""
        return self._fill(self._sample_shape(shape), "zero")

    def zeros(self, shape=None):
        return self.zero(shape)

    def one(self, shape=None):
        """A value of ones (brought into the spec's bounds)."""
        return self._fill(self._sample_shape(shape), "one")

    def ones(self, shape=None):
        return self.one(shape)

    def rand(self, shape=None):
        """A random value in the spec."""
        return self._fill(self._sample_shape(shape), "rand")

    def sample(self, shape=None):
        return self.rand(shape)

    def is_in(self, value) -> bool:
        """Whether ``value`` fits the spec (type, dtype, device, shape, bounds). Never changes the spec."""
        return self._check(value) is None

    def contains(self, value) -> bool:
        return self.is_in(value)

    def assert_is_in(self, value) -> None:
        """Raise ``ValueError`` saying why ``value`` does not fit the spec."""
        reason = self._check(value)
        if reason is not None:
            raise ValueError(f"value is not in the {type(self).__name__} spec: {reason}")

    # -- transforms ------------------------------------------------------------------------
    def clone(self) -> "TensorSpec":
        return self._rebuild(fn=lambda t: t.clone())

    def to(self, dest) -> "TensorSpec":
        """Move to a device, or (tensor specs) change the dtype."""
        if isinstance(dest, torch.dtype):
            return self._rebuild(dtype=dest)
        return self._rebuild(device=as_device(dest))

    def cpu(self) -> "TensorSpec":
        return self.to("cpu")

    def expand(self, *shape) -> "TensorSpec":
        """The spec with new leading dims (trailing dims of 1 or -1 may take a length)."""
        new = parse_shape_args(shape)
        expand_shape(self.shape, new)
        safe = safe_shape(new)
        return self._rebuild(shape=new, fn=lambda t: t.expand(safe).clone())

    def unsqueeze(self, dim: int) -> "TensorSpec":
        d = norm_dim(dim, self.ndim + 1)
        new = list(self.shape)
        new.insert(d, 1)
        return self._rebuild(shape=torch.Size(new), fn=lambda t: t.unsqueeze(d))

    def squeeze(self, dim: int | None = None) -> "TensorSpec":
        """Remove dims of length 1 (all of them, or ``dim`` if it is 1); -1 dims stay."""
        if dim is None:
            dims = tuple(i for i, s in enumerate(self.shape) if s == 1)
        else:
            d = norm_dim(dim, self.ndim)
            dims = (d,) if self.ndim and self.shape[d] == 1 else ()
        if not dims:
            return self.clone()
        new = torch.Size(s for i, s in enumerate(self.shape) if i not in dims)
        return self._rebuild(shape=new, fn=lambda t: t.squeeze(dims))

    def __getitem__(self, index) -> "TensorSpec":
        """The spec of ``value[index]`` for values of this spec."""
        new, t_idx = index_shape(self.shape, index)
        return self._rebuild(shape=new, fn=lambda t: t[t_idx].clone())

    def _stacked(self, specs, dim: int, shape: torch.Size):
        """``torch.stack`` of ``specs`` (one type, shape, device, dtype) along ``dim``: the spec,
        or None when they do not stack into one (by default, when they differ)."""
        if any(s != self for s in specs):
            return None
        return self._rebuild(shape=shape, fn=lambda t: torch.stack([t] * len(specs), dim))

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return spec_torch_function(func, args, kwargs)

    # -- comparison and printing -------------------------------------------------------------
    def _eq_fields(self):
        return (self.shape, self.device, self.dtype, self.domain, self.space)

    def __eq__(self, other):
        return type(other) is type(self) and other._eq_fields() == self._eq_fields()

    def __ne__(self, other):
        return not self == other

    __hash__ = None

    def _repr_fields(self):
        return [
            ("shape", self.shape),
            ("space", self.space),
            ("device", self.device),
            ("dtype", self.dtype),
            ("domain", self.domain),
        ]

    def __repr__(self) -> str:
        return spec_repr(type(self).__name__, self._repr_fields())
