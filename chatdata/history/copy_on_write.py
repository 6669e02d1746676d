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

Example:
    >>> import tempfile
    >>> from chatdata import History
    >>> path = tempfile.mkdtemp() + "/h"
    >>> _ = History.from_chats([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]).memmap(path)
    >>> h = History.load_memmap(path)
    >>> h[1] = {"role": "assistant", "content": "B", "is_complete": False}
    >>> h.is_complete, History.load_memmap(path).is_complete
    ([True, False], [True, True])
"""
from __future__ import annotations

import torch

from ..td import MemoryMappedTensor, NonTensorData, TensorDict
from .columns import _stack

__all__ = ["own_for_write", "file_backed"]


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
