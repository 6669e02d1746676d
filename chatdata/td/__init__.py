"""The compact TensorDict core: tensors, nesting, batch dims, non-tensor data, memmaps.

td/ is four rooms, each a sub-package with a face (its ``__init__``); arrows run one way,
from each room to the rooms below it (``docs/architecture.md``):

- :mod:`chatdata.td.storage` (top): the on-disk format, ``MemoryMappedTensor``, the memmap API;
- :mod:`chatdata.td.tensorclass`: ``@tensorclass`` / ``TensorClass``;
- :mod:`chatdata.td.core`: ``TensorDict``, keys, batch-size rules, stack/cat, state_dict;
- :mod:`chatdata.td.nontensor` (ground floor): ``NonTensorData``, ``NonTensorStack``, string
  columns, ``LinkedList``, the switches and the ``Batched`` shape base.

This face imports the four rooms (which registers each room's methods with the rooms below)
and re-exports the names users import from ``chatdata.td``.

Example:
    >>> from chatdata.td import TensorDict, load_memmap
    >>> import tempfile
    >>> path = tempfile.mkdtemp() + "/ds"
    >>> _ = TensorDict({"a": torch.arange(3)}, [3]).memmap(path)
    >>> load_memmap(path)["a"].tolist()
    [0, 1, 2]
"""
# names outside __all__ (is_non_tensor, cat, stack, lazy_stack, ...) are exported as well
from .nontensor import (BatchSizeError, NonTensorData, NonTensorStack, capture_non_tensor_stack, is_non_tensor,  # noqa: F401
                        lazy_legacy, list_to_stack, set_capture_non_tensor_stack, set_list_to_stack)
from .core import (LockedError, NestedKey, RaggedTensorDict, TensorDict, TensorDictBase, assert_allclose_td, cat,  # noqa: F401
                   lazy_stack, print_directory_tree, stack, unravel_key)
from .tensorclass import TensorClass, from_dataclass, is_tensorclass, tensorclass
from .storage import FormatError, MemoryMappedTensor, TensorDictFuture, load_memmap

# Two private names of tensordict that ported code (and tensordict's own test suite, which
# ../shared/peer_tests runs against chatdata) imports from ``tensordict.memmap`` and
# ``tensordict.base``; chatdata's flat td/ had them as module attributes of td/memmap.py and
# td/keys.py, and the peer shim looks them up here now.
from .core.keys import _GENERIC_NESTED_ERR  # noqa: E402,F401
from .storage.memmap import _is_writable  # noqa: E402,F401

__all__ = [
    "TensorDict", "TensorClass", "tensorclass", "is_tensorclass", "NonTensorData", "NonTensorStack",
    "MemoryMappedTensor", "RaggedTensorDict", "set_list_to_stack", "list_to_stack", "LockedError",
    "BatchSizeError", "NestedKey", "unravel_key", "load_memmap", "TensorDictFuture", "FormatError",
    "from_dataclass", "assert_allclose_td", "print_directory_tree",
]
