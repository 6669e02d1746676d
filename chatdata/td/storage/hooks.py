"""What the storage room registers with the rooms below it, which cannot import it.

The on-disk format sits on the top floor of td/: it imports the core, the non-tensor leaves and
tensorclasses, and none of them imports it. Where one of them must reach the format, this
module hands it the piece it needs, once, when the storage room is imported:

- ``memmap``, ``memmap_``, ``memmap_like``, ``save``, ``load_memmap``, ... on TensorDict,
  RaggedTensorDict, NonTensorStack and every tensorclass (:mod:`chatdata.td.storage.memmap_api`);
- the memory-mapped buffer of ``TensorDict.consolidate(filename=...)``;
- ``FormatError`` as what a corrupt packed string column raises.

(In-place writes into memory-mapped non-tensor values need no registration: the reader gives
each loaded leaf a link object, ``leaf._disk``, whose methods write through.)

Example:
    >>> from chatdata.td import TensorDict
    >>> hasattr(TensorDict, "memmap")
    True
"""
from __future__ import annotations

import torch

from ..core import RaggedTensorDict, TensorDict, state as _core_state
from ..nontensor import NonTensorStack, Pool
from ..tensorclass import TensorClass
from .fsops import FormatError
from .memmap import MemoryMappedTensor
from .memmap_api import attach

__all__ = ["install"]


def file_backed_buffer(nbytes: int, filename) -> torch.Tensor:
    """A 1-D uint8 MemoryMappedTensor of ``nbytes`` bytes in the new file ``filename``.

    Example:
        >>> import tempfile, os
        >>> file_backed_buffer(8, os.path.join(tempfile.mkdtemp(), "buf")).shape
        torch.Size([8])
    """
    return MemoryMappedTensor.empty((nbytes,), dtype=torch.uint8, filename=filename)


def install() -> None:
    """Register the storage room with the rooms below (see the module docstring); the room's
    face calls it once.

    Example: ``install()``
    """
    for cls in (TensorDict, TensorClass, RaggedTensorDict, NonTensorStack):
        attach(cls)
    _core_state.file_backed_buffer = file_backed_buffer
    Pool.corrupt_error = FormatError
