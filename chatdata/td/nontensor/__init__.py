"""The non-tensor room of td/: the leaves of a collection that are not tensors.

It holds ``NonTensorData`` (one value for a whole batch) and ``NonTensorStack`` (a column of
values: a value pool plus an int64 index tensor), the value pools and packed string columns
(UTF-8 bytes plus int64 offsets), ``LinkedList`` (what ``td[key]`` gives for a stack), the
``set_list_to_stack`` / ``capture_non_tensor_stack`` switches, and the batch-shape base that
every batched container shares (``Batched``: indexing, reshape, permute, ... computed once on
a dummy; ``BatchSizeError``).

It is the ground floor of td/ and imports nothing else of chatdata: TensorDict (in
:mod:`chatdata.td.core`) holds these leaves, so they cannot know it. Where a leaf must reach
the on-disk format (an in-place write into a memory-mapped value), it calls the link object the
storage room gave it (``leaf._disk``); a corrupt packed column raises ``Pool.corrupt_error``,
which the storage room sets to its ``FormatError``.

Other rooms import these names from here (this face), never from the modules inside.

Example:
    >>> from chatdata.td.nontensor import NonTensorStack
    >>> NonTensorStack.from_list(["a", "b", "c"])[1:].tolist()
    ['b', 'c']
"""
from .batched import (Batched, BatchSizeError, as_batch_size, dummy, from_numpy_index, indexed_batch_size,
                      normalize_index)
from .data import NonTensorData
from .stack import NonTensorStack, is_non_tensor
from .linkedlist import LinkedList
from .pool import Pool, pack_strings, to_json, to_json_texts
from .switches import (capture_non_tensor_stack, lazy_legacy, list_to_stack, set_capture_non_tensor_stack,
                       set_list_to_stack)

__all__ = [
    "NonTensorData", "NonTensorStack", "is_non_tensor", "LinkedList", "Pool", "pack_strings", "to_json", "to_json_texts",
    "set_list_to_stack", "list_to_stack", "set_capture_non_tensor_stack", "capture_non_tensor_stack",
    "lazy_legacy", "Batched", "BatchSizeError", "as_batch_size", "from_numpy_index", "dummy", "indexed_batch_size",
    "normalize_index",
]
