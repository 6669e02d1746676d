"""Printing, in tensordict's exact format, so that printed examples match the seeds.

Example:
    >>> print(TensorDict({"a": torch.zeros(2)}, [2]))
    TensorDict(
        fields={
            a: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.float32, is_shared=False)},
        batch_size=torch.Size([2]),
        device=None,
        is_shared=False)
"""
from __future__ import annotations

import textwrap

import torch

__all__ = ["td_repr", "leaf_repr", "indent"]


def indent(text: str, n: int = 4) -> str:
    return textwrap.indent(text, " " * n)


def leaf_repr(value) -> str:
    """One field's description: tensors by shape/device/dtype, collections by their repr."""
    if isinstance(value, torch.Tensor):
        cls = type(value).__name__
        if cls not in ("Tensor", "Parameter", "MemoryMappedTensor", "FakeTensor", "Buffer"):
            cls = "Tensor"
        if value.device.type == "meta" or cls == "MemoryMappedTensor":
            shared = False  # file-backed memory is not "shared memory" in tensordict's sense
        else:
            try:
                shared = value.is_shared()
            except Exception:
                shared = False
        return f"{cls}(shape={_shape(value)}, device={value.device}, dtype={value.dtype}, is_shared={shared})"
    return repr(value)


def _shape(t: torch.Tensor) -> torch.Size:
    """``t.shape``; a strided nested tensor has none: its sizes, -1 where its items differ."""
    if not (t.is_nested and t.layout == torch.strided):
        return t.shape
    sizes = []
    for d in range(t.dim()):
        try:
            sizes.append(t.size(d))
        except RuntimeError:  # the items differ along d
            sizes.append(-1)
    return torch.Size(sizes)


def fields_block(items) -> str:
    """``fields={...}`` with one ``name: repr`` line per item, as tensordict prints it."""
    lines = [f"{k}: {leaf_repr(v)}" for k, v in items]
    return "fields={\n" + indent(",\n".join(lines)) + "}"


def td_repr(td) -> str:
    body = ",\n".join(
        [
            fields_block(sorted(td._tensordict.items())),
            f"batch_size={td.batch_size}",
            f"device={td.device}",
            f"is_shared={td.is_shared()}",
        ]
    )
    return f"{type(td).__name__}(\n{indent(body)})"
