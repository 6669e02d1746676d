"""TensorDict <-> ``torch.nn.Module``: ``TensorDict.from_module`` gathers a module's parameters
and buffers, nested by sub-module; ``to_module`` swaps (or copies) them back.

Example:
    >>> TensorDict.from_module(torch.nn.Linear(2, 3))["weight"].shape
    torch.Size([3, 2])
"""
from __future__ import annotations

import torch

from .convert import is_collection

__all__ = ["ModuleParams"]


class ModuleParams:
    """Mixin of TensorDict; see the module docstring."""

    @classmethod
    def from_module(cls, module: torch.nn.Module, as_module: bool = False, lock: bool = False, use_state_dict: bool = False) -> "TensorDict":
        """Parameters and buffers of ``module``, nested by sub-module path.

        Example:
            >>> TensorDict.from_module(torch.nn.Linear(2, 3))["weight"].shape
            torch.Size([3, 2])
        """
        td = cls()
        for name, p in module._parameters.items():
            if p is not None:
                td._tensordict[name] = p
        for name, b in module._buffers.items():
            if b is not None:
                td._tensordict[name] = b
        for name, child in module._modules.items():
            if child is not None:
                sub = cls.from_module(child)
                if len(sub._tensordict):
                    td._tensordict[name] = sub
        if lock:
            td.lock_()
        return td

    def to_module(self, module: torch.nn.Module, inplace: bool = False, return_swap: bool = True):
        """Put these tensors into ``module`` (swap them in, or copy in place with ``inplace=True``).

        Returns the module's previous tensors as a TensorDict when ``return_swap``.
        """
        old = type(self)() if return_swap else None
        for key, value in self._tensordict.items():
            if is_collection(value):
                child = module._modules.get(key)
                if child is None:
                    raise KeyError(f"module has no sub-module {key!r}")
                sub_old = value.to_module(child, inplace=inplace, return_swap=return_swap)
                if old is not None:
                    old._tensordict[key] = sub_old
                continue
            store = module._parameters if key in module._parameters else module._buffers if key in module._buffers else None
            if store is None:
                raise KeyError(f"module {type(module).__name__} has no parameter or buffer {key!r}")
            prev = store[key]
            if old is not None:
                old._tensordict[key] = prev.detach().clone() if inplace else prev
            if inplace:
                with torch.no_grad():
                    prev.copy_(value)
            else:
                store[key] = value
        return old
