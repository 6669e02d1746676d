"""``@tensorclass``: turn an annotated class (or a dataclass) into a tensorclass.

Example:
    >>> @tensorclass(autocast=True)
    ... class Box:
    ...     n: int
    >>> Box(n="3").n
    3
"""
from __future__ import annotations

from .base import TensorClass
from .dataclass_convert import from_dataclass
from .options import set_options

__all__ = ["tensorclass"]


def tensorclass(cls=None, *, autocast: bool = False, frozen: bool = False, nocast: bool = False, shadow: bool = False,
                tensor_only: bool = False):
    """Turn an annotated class into a tensorclass (see :mod:`chatdata.td.tensorclass.base`).

    Example:
        >>> @tensorclass
        ... class Msg:
        ...     text: str
        >>> Msg(text=["a", "b"], batch_size=[2])[1].text
        'b'
    """

    def wrap(c):
        if issubclass(c, TensorClass):
            set_options(c, autocast=autocast or None, nocast=nocast or None, shadow=shadow or None,
                        frozen=frozen or None, tensor_only=tensor_only or None)
            return c
        if "__dataclass_fields__" in c.__dict__:  # @tensorclass over @dataclass: as from_dataclass(c) (fields, methods)
            return from_dataclass(c, autocast=autocast, nocast=nocast, shadow=shadow, frozen=frozen,
                                  tensor_only=tensor_only)
        namespace = {"__module__": c.__module__, "__qualname__": c.__qualname__, "__doc__": c.__doc__}
        return type(c.__name__, (c, TensorClass), namespace, autocast=autocast, nocast=nocast, shadow=shadow,
                    frozen=frozen, tensor_only=tensor_only)

    return wrap if cls is None else wrap(cls)
