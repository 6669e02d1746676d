"""The tensorclass registry: saved class names -> classes, filled as tensorclasses are defined.

Loading resolves a saved class name (``"module.Qualname"``) here only: it never imports a
module named by the data. ``register_tensorclass`` adds another name for a class (e.g. another
library's name for an equivalent class).

Example:
    >>> registered_tensorclass("no.such.Class") is None
    True
"""
from __future__ import annotations

__all__ = ["register_tensorclass", "registered_tensorclass", "registered_classes"]

_REGISTRY: dict = {}


def register_tensorclass(name: str, cls) -> None:
    """Make saved data whose class is ``name`` load as ``cls``.

    Example:
        >>> register_tensorclass("otherlib.Sample", Sample)  # doctest: +SKIP
    """
    from .tensorclass import TensorClass

    if not (isinstance(cls, type) and issubclass(cls, TensorClass)):
        raise TypeError(f"register_tensorclass needs a tensorclass, got {cls!r}")
    _REGISTRY[name] = cls


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
