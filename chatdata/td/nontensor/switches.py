"""Global switches of the non-tensor machinery, each usable as ``.set()``, a context manager
or a decorator: ``set_list_to_stack`` (lists given to a TensorDict become NonTensorStacks) and
``set_capture_non_tensor_stack`` (stacking equal NonTensorData values gives one NonTensorData).

Example:
    >>> with set_list_to_stack(False):
    ...     list_to_stack()
    False
"""
from __future__ import annotations

import functools

__all__ = ["list_to_stack", "set_list_to_stack", "capture_non_tensor_stack", "set_capture_non_tensor_stack",
           "lazy_legacy"]

_LIST_TO_STACK = [True]


def list_to_stack() -> bool:
    """Whether lists given to a TensorDict become ``NonTensorStack`` (default ``True``)."""
    return _LIST_TO_STACK[0]


class set_list_to_stack:
    """Choose whether lists become ``NonTensorStack``: ``.set()``, a context manager or a decorator.

    Lists already become stacks by default; this exists so code written for tensordict runs.

    Example:
        >>> set_list_to_stack(True).set()
        >>> with set_list_to_stack(False):
        ...     pass
    """

    _flag = _LIST_TO_STACK

    def __init__(self, mode: bool):
        if not isinstance(mode, bool):
            raise TypeError(f"{type(self).__name__} takes a bool, got {type(mode).__name__}")
        self.mode = mode
        self._prev = None

    def set(self) -> None:
        self._flag[0] = self.mode

    def __enter__(self):
        self._prev = self._flag[0]
        self._flag[0] = self.mode
        return self

    def __exit__(self, *exc):
        self._flag[0] = self._prev

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with type(self)(self.mode):
                return func(*args, **kwargs)

        return wrapper


_CAPTURE = [True]


def capture_non_tensor_stack() -> bool:
    """Whether stacking identical NonTensorData values gives one NonTensorData (default
    ``True``); when ``False`` the result is always a NonTensorStack."""
    return _CAPTURE[0]


class set_capture_non_tensor_stack(set_list_to_stack):
    """Choose :func:`capture_non_tensor_stack`: ``.set()``, a context manager or a decorator.

    Example:
        >>> with set_capture_non_tensor_stack(False):
        ...     torch.stack([NonTensorData("a"), NonTensorData("a")]).tolist()
        ['a', 'a']
    """

    _flag = _CAPTURE


def lazy_legacy() -> bool:
    """Whether shape operations (``permute``, ``view``, ``stack``...) return lazy wrappers, as
    tensordict's legacy mode does. Always ``False``: chatdata's shape ops are dense (views of
    the leaves where torch allows), so code that checks this takes the dense path.

    Example:
        >>> lazy_legacy()
        False
    """
    return False
