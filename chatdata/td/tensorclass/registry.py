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

__all__ = ["registered_tensorclass", "registered_classes", "resolve_tensorclass"]

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


def resolve_tensorclass(path):
    """The tensorclass defined (or registered) as ``module.Qualname``; None, with a warning, when
    no such class exists in this process (what the storage room's reader asks). Loading never
    imports a module named by the data.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")
        ...     resolve_tensorclass("no.such.Class") is None
        True
    """
    import warnings

    cls = registered_tensorclass(path) if isinstance(path, str) else None
    if cls is None:
        warnings.warn(
            f"tensorclass {path} is not defined in this process, so the data loads as a "
            "TensorDict; import the module that defines it before loading to get the class back",
            stacklevel=3,
        )
    return cls
