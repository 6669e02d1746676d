"""Lock, shared and memory-mapped flags of the non-tensor leaves (``NonTensorData``,
``NonTensorStack``), and the device argument they accept.

Example:
    >>> from chatdata.td import NonTensorStack
    >>> NonTensorStack("a").lock_().is_locked
    True
"""
from __future__ import annotations

import torch

__all__ = ["StateFlags", "device"]


def device(device):
    """``device`` as a ``torch.device`` (None stays None).

    Example:
        >>> device("cpu")
        device(type='cpu')
    """
    return None if device is None else torch.device(device)


class StateFlags:
    """Lock, shared and memory-mapped flags of a non-tensor container (instance attributes
    shadow the class defaults once set)."""

    _is_shared = False
    _is_memmap = False
    _is_locked = False

    @property
    def is_locked(self) -> bool:
        return self._is_locked

    def is_shared(self) -> bool:
        return self._is_shared

    def is_memmap(self) -> bool:
        return self._is_memmap

    def lock_(self):
        self._is_locked = True
        return self

    def unlock_(self):
        self._is_locked = False
        return self
