"""How a tensorclass prints: its fields sorted, then batch size, device and sharing, in
tensordict's format (the leaves print as :mod:`chatdata.td.core.repr` prints them).

Example:
    >>> @tensorclass
    ... class Pt:
    ...     x: torch.Tensor
    >>> print(Pt(x=torch.zeros(2), batch_size=[2]))
    Pt(
        x=Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=False),
        batch_size=torch.Size([2]),
        device=None,
        is_shared=False)
"""
from __future__ import annotations

from ..core import TensorDict, indent, leaf_repr

__all__ = ["tensorclass_repr"]


def tensorclass_repr(tc) -> str:
    """A tensorclass: its fields sorted, then batch size, device and sharing (a shadow class
    whose fields are named ``batch_size`` / ``device`` shows ``shape=`` and no device line)."""
    storage = tc._storage
    entries = storage._tensordict if isinstance(storage, TensorDict) else {k: storage._get_raw(k) for k in storage.keys()}
    lines = [f"{k}={leaf_repr(v)}" for k, v in sorted(entries.items())]
    fields = set(tc._field_names)
    lines.append(f"shape={storage.batch_size}" if "batch_size" in fields else f"batch_size={storage.batch_size}")
    lines += [] if "device" in fields else [f"device={storage.device}"]
    lines.append(f"is_shared={storage.is_shared()}")
    body = ",\n".join(lines)
    return f"{type(tc).__name__}(\n{indent(body)})"
