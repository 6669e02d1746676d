"""The compact TensorDict core: tensors, nesting, batch dims, non-tensor data, memmaps."""
from .nontensor import (BatchSizeError, NonTensorData, NonTensorStack, capture_non_tensor_stack, is_non_tensor,
                        lazy_legacy, list_to_stack, set_capture_non_tensor_stack, set_list_to_stack)
from .core import (LockedError, NestedKey, RaggedTensorDict, TensorDict, TensorDictBase, assert_allclose_td, cat,
                   lazy_stack, print_directory_tree, stack, unravel_key)
from .memmap import MemoryMappedTensor
from .tensorclass import TensorClass, from_dataclass, is_tensorclass, tensorclass
from .memmap_api import TensorDictFuture, load_memmap  # noqa: E402
from .fsops import FormatError  # noqa: E402
from .storage_hooks import install as _install_storage  # noqa: E402

_install_storage()

__all__ = [
    "TensorDict", "TensorClass", "tensorclass", "is_tensorclass", "NonTensorData", "NonTensorStack",
    "MemoryMappedTensor", "RaggedTensorDict", "set_list_to_stack", "list_to_stack", "LockedError",
    "BatchSizeError", "NestedKey", "unravel_key", "load_memmap", "TensorDictFuture", "FormatError",
    "from_dataclass", "assert_allclose_td", "print_directory_tree",
]
