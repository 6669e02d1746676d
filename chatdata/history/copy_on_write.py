"""Copy-on-write for writes into a History's columns: a loaded History (memory-mapped from a
folder) never changes its folder when messages or per-message values are written into it, and a
column held as one constant for every message is turned into a per-message column before a
message with another value is written into it.

The folder of a loaded History is read-only data to these writes: its ``_flags`` (and a bool
``is_complete``) tensors are file-backed, and its constant columns write a new value through to
``meta.json``. Writing a message into it (``h[i] = message``) used to change ``_flags`` on disk
while the string columns changed in memory only: the folder then held flags that no longer
matched its messages. :func:`own_for_write` gives those columns in-memory copies first (once: the
copies are no longer file-backed). Only ``h.set(name, value, inplace=True)`` of one value into a
loaded constant writes through, as tensordict does.

A History taken by a basic index (``h[i]``, ``h[a:b]``, ``h[i, a:b]``, a view of a view) shares
``h``'s columns, so the copies are made at the History that holds the columns (the root) and every
view re-points at them: :func:`link_view` records, with the view, the column objects it and its
parent held when it was taken, and :func:`current_storage` (each read of a view's storage) re-takes
a view whose parent's columns were replaced since (a sibling's write copied them, ``h.role = ...``):
siblings read and write the same columns. A write through any view reaches the root whole
(content, flags and every field) or, when the view's own columns or the parent's length changed
since (``v.append``, ``v.role = ...``, ``h.append``), is refused (:func:`prepare_write`).
Other indexes (a list, a tensor, a mask) give copies, as torch's advanced indexing does.

Example:
    >>> import tempfile
    >>> from chatdata import History
    >>> path = tempfile.mkdtemp() + "/h"
    >>> _ = History.from_chats([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]).memmap(path)
    >>> h = History.load_memmap(path)
    >>> h[1] = {"role": "assistant", "content": "B", "is_complete": False}
    >>> h.is_complete, History.load_memmap(path).is_complete
    ([True, False], [True, True])
    >>> _ = History.from_chats([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]).memmap(path + "2")
    >>> h = History.load_memmap(path + "2")
    >>> a, b = h                     # two views taken before either writes
    >>> a[0] = {"role": "user", "content": "A", "is_complete": False}
    >>> b[0] = {"role": "user", "content": "B", "is_complete": False}
    >>> h.is_complete, History.load_memmap(path + "2").is_complete
    ([[False], [False]], [[True], [True]])
"""
from __future__ import annotations

import torch

from ..td import MemoryMappedTensor, NonTensorData, RaggedTensorDict, TensorDict
from .columns import _stack

__all__ = ["own_for_write", "file_backed", "is_view_index", "link_view", "current_storage", "prepare_write"]


def file_backed(entry) -> bool:
    """Whether writing into ``entry`` would change a saved folder."""
    if isinstance(entry, MemoryMappedTensor):
        return True
    return isinstance(entry, NonTensorData) and entry._is_memmap and entry._disk is not None


def _differs(const: NonTensorData, value) -> bool:
    """Whether the written column ``value`` holds anything but ``const``'s value."""
    if isinstance(value, NonTensorData):
        a, b = const.data, value.data
        return not (type(a) is type(b) and a == b)
    return True


def own_for_write(td: TensorDict, src: TensorDict | None = None) -> bool:
    """Prepare the message columns ``td`` for a write of the messages ``src`` (None: any write):
    file-backed columns become in-memory copies, and each constant column that ``src`` would
    write another value into becomes a per-message column of that constant. Returns whether a
    column was replaced (views taken of ``td`` before no longer see its columns)."""
    entries = td._tensordict
    changed = False
    for name, entry in list(entries.items()):
        if isinstance(entry, NonTensorData) and td.batch_size and (
                src is None or name not in src._tensordict or _differs(entry, src._tensordict[name])):
            entries[name] = _stack([entry.data] * td.numel()).reshape(td.batch_size)
            changed = True
        elif file_backed(entry):
            entries[name] = (torch.from_numpy(entry.as_subclass(torch.Tensor).numpy().copy())
                             if isinstance(entry, torch.Tensor) else entry.clone(recurse=False))
            changed = True
    return changed


def is_view_index(index, ragged: bool = False) -> bool:
    """Whether ``h[index]`` shares ``h``'s columns (a basic index: ints, slices, ``...``, ``None``)
    rather than copying them (a list, a tensor, a mask). On a batch of conversations of different
    lengths (``ragged``) only a conversation (``h[i]``, ``h[i, a:b]``) or a step-1 slice of
    conversations (``h[a:b]``) is a view: ``h[::2]`` and ``h[a:b, j]`` gather messages.

    Example:
        >>> is_view_index((0, slice(1, None))), is_view_index([0, 1]), is_view_index(True)
        (True, False, False)
        >>> is_view_index(slice(0, 4, 2)), is_view_index(slice(0, 4, 2), ragged=True)
        (True, False)
    """
    items = index if type(index) is tuple else (index,)
    if not all(type(i) in (int, slice) or i is Ellipsis or i is None for i in items):
        return False
    if not ragged:
        return True
    while items and (items[-1] is Ellipsis or items[-1] == slice(None)):  # h[a:b, :] is h[a:b]
        items = items[:-1]
    return not items or type(items[0]) is int or (len(items) == 1 and type(items[0]) is slice and items[0].step in (None, 1))


def _columns(s) -> tuple:
    """The objects holding the messages of the storage ``s``: itself, its message TensorDict, each column."""
    td = s.values if isinstance(s, RaggedTensorDict) else s
    return (s, td, *td._tensordict.values())


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def link_view(view, parent, index) -> None:
    """Record that the History ``view`` is ``parent[index]`` and shares its columns.

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "user", "content": "a"}]])
        >>> h[0].__dict__["_view_of"][:2] == (h, 0)
        True
    """
    view.__dict__["_view_of"] = (parent, index, _columns(parent._storage), _columns(view.__dict__["_tensordict"]))


def current_storage(view):
    """The storage of the view ``view`` (a History with ``_view_of``), re-taken from its parent if the
    parent's columns were replaced since (a sibling's write copied them, ``h.role = ...``). A view
    whose own columns were replaced, or whose parent has another shape there now, keeps its own.

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]])
        >>> a, b = h
        >>> old = b.__dict__["_tensordict"]
        >>> a[0] = {"role": "user", "content": "A", "is_complete": False}  # copies h's constant column
        >>> current_storage(b) is old, b.__dict__["_tensordict"] is old
        (False, False)
    """
    d = view.__dict__
    s = d["_tensordict"]
    parent, index, parent_seen, own_seen = d["_view_of"]
    now = _columns(parent._storage)
    if _same(now, parent_seen) or not _same(_columns(s), own_seen):
        return s
    try:
        fresh = parent._storage._index(index)
    except (IndexError, ValueError, RuntimeError):  # the parent has no such index any more
        return s
    if fresh.batch_size != s.batch_size:
        return s
    d["_tensordict"], d["_view_of"] = fresh, (parent, index, now, _columns(fresh))
    return fresh


def prepare_write(h, src: TensorDict) -> None:
    """Make the columns ``h`` writes into ready for a write of the messages ``src``: at the History
    holding them (``h``, or the root of the views ``h`` was taken from) :func:`own_for_write`,
    then each view on the way re-taken from its parent if the parent's columns were replaced.
    ``RuntimeError`` when a view no longer is one (see the module docstring).

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]])
        >>> a, b = h[0], h[1]
        >>> _ = b.append({"role": "user", "content": "c"})
        >>> try:
        ...     b[0] = {"role": "user", "content": "B"}
        ... except RuntimeError as err:
        ...     print(str(err).split(" ([")[0])
        cannot write messages into this History: it was taken from another by index
    """
    link = h.__dict__.get("_view_of")
    if link is None:
        s = h._storage
        own_for_write(s.values if isinstance(s, RaggedTensorDict) else s, src)
        return
    parent, index, _, own_seen = link
    if not _same(_columns(h._storage), own_seen):  # (h._storage re-takes h if its parent's columns were replaced)
        raise RuntimeError(
            f"cannot write messages into this History: it was taken from another by index ([{index!r}]) and shares "
            "its messages, but its own fields or length were replaced since (append, extend, a field set, ...), so "
            "a write would reach the other History in part only; take it again by index to write through, or "
            "write into a copy (h[i].copy())")
    prepare_write(parent, src)
    s = h._storage  # re-taken if that copied the columns
    if not _same(_columns(parent._storage), h.__dict__["_view_of"][2]):
        try:
            now = f"has batch size {tuple(parent._storage._index(index).batch_size)} there"
        except (IndexError, ValueError, RuntimeError):
            now = "has no such index"
        raise RuntimeError(
            f"cannot write messages into this History: it was taken from another by index ([{index!r}]), which now "
            f"{now} (it was {tuple(s.batch_size)}: an append, extend or update since); take it again by index, or "
            "write into a copy (h[i].copy())")
