"""``LinkedList``: what ``td[key]`` gives for a NonTensorStack - the values as a list-like
sequence, linked to the stack so that item writes reach the TensorDict (tensordict's
behaviour). It compares equal to the plain list of its values.

Unlike tensordict's, it is lazy: ``td["content"][i]`` decodes one value, not the whole
column, so it costs the same on a million memory-mapped strings as on three. Growing or
shrinking it (append, extend, del, ...) turns it into a detached copy (``_td()`` is None).

Example:
    >>> td = TensorDict(a=["foo", "bar"], batch_size=[2])
    >>> td["a"][0] = "baz"
    >>> td["a"] == ["baz", "bar"], td.get("a").tolist()
    (True, ['baz', 'bar'])
"""
from __future__ import annotations

from collections.abc import MutableSequence

__all__ = ["LinkedList"]


class LinkedList(MutableSequence):
    """The values of a NonTensorStack along its first dim; see the module docstring."""

    __slots__ = ("_stack", "_items")

    def __init__(self, items=()):
        self._stack = None
        self._items = list(items)

    @classmethod
    def of(cls, stack) -> "LinkedList":
        """A lazy view of ``stack``'s values."""
        out = cls.__new__(cls)
        out._stack, out._items = stack, None
        return out

    def _td(self):
        """The linked stack, or None once the sequence was resized."""
        return self._stack

    def _detach(self) -> list:
        if self._items is None:
            self._items = self._stack.tolist()
            self._stack = None
        return self._items

    def tolist(self) -> list:
        """The values as a plain (nested) list."""
        return self._stack.tolist() if self._items is None else list(self._items)

    def __len__(self) -> int:
        return len(self._stack) if self._items is None else len(self._items)

    def __getitem__(self, index):
        if self._items is not None:
            return self._items[index]
        if isinstance(index, slice):
            return self._stack[index].tolist()
        if not isinstance(index, int):
            raise TypeError(f"LinkedList indices must be integers or slices, not {type(index).__name__}")
        item = self._stack[index]
        # a row of a stack of 2+ dims is linked too: td["s"][0][1] = v writes into the stack
        return LinkedList.of(item) if hasattr(item, "_pool") else item.data

    def __setitem__(self, index, value):
        if self._items is not None:
            self._items[index] = value
        else:
            self._stack[index] = list(value) if isinstance(index, slice) else value

    def __delitem__(self, index):
        del self._detach()[index]

    def insert(self, index, value):
        self._detach().insert(index, value)

    def __iter__(self):
        return iter(self.tolist())

    def __eq__(self, other):
        if isinstance(other, LinkedList):
            other = other.tolist()
        if isinstance(other, (list, tuple)):
            return self.tolist() == list(other)
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def __add__(self, other):
        return self.tolist() + list(other)

    def __radd__(self, other):
        return list(other) + self.tolist()

    def __repr__(self):
        return f"LinkedList({self.tolist()!r})"

    __str__ = __repr__
