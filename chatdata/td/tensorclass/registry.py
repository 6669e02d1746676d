"""The tensorclass registry: saved class names -> classes, filled as tensorclasses are defined.

Loading resolves a saved class name (``"module.Qualname"``) here only: it never imports a
module named by the data. ``register_tensorclass`` (in :mod:`.base`, which knows what a
tensorclass is) adds another name for a class (e.g. another library's name for an equivalent
class). This module imports nothing: every other module of the room may read it.

Example:
    >>> registered_tensorclass("no.such.Class") is None
    True
"""
from __future__ import annotations

__all__ = ["registered_tensorclass", "registered_classes"]

_REGISTRY: dict = {}


def registered_tensorclass(name: str):
    """The tensorclass registered (or defined) under ``module.Qualname``, or None.

    Example:
        >>> registered_tensorclass("") is None
        True
    """
    return _REGISTRY.get(name)


def registered_classes() -> list:
    """Every registered tensorclass, oldest first (a class registered under two names twice).

    Example:
        >>> isinstance(registered_classes(), list)
        True
    """
    return list(_REGISTRY.values())
