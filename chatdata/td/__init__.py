"""The compact TensorDict core: tensors, nesting, batch dims, non-tensor data, memmaps."""
from .nontensor import BatchSizeError
from .keys import NestedKey, unravel_key
from .memmap import MemoryMappedTensor
from .nontensor import (NonTensorData, NonTensorStack, capture_non_tensor_stack, is_non_tensor, list_to_stack,
                        set_capture_non_tensor_stack, set_list_to_stack)
from .functional import cat, stack
from .ragged import RaggedTensorDict
from .nontensor import lazy_legacy
from .tensorclass import TensorClass, is_tensorclass, tensorclass
from .tensordict import LockedError, TensorDict, TensorDictBase
from . import state as _state


def _attach_state_methods():
    def state_dict(self, destination=None, prefix="", keep_vars=False, flatten=True):
        """Tensors by dot-separated key (``flatten=False``: nested), metadata in ``_metadata``.

        Example: ``TensorDict({"a": 1, "b": {"c": 2}}, []).state_dict()``
        """
        return _state.state_dict(self, destination, prefix, keep_vars, flatten)

    def load_state_dict(self, state_dict, strict=True, assign=False, from_flatten=False):
        """Load a flat, nested or legacy state dict in place (auto-detected)."""
        return _state.load_state_dict(self, state_dict, strict, assign, from_flatten)

    def consolidate(self, filename=None, **kwargs):
        """A copy whose tensors live in one storage (``filename``: a memory-mapped file)."""
        return _state.consolidate(self, filename, **kwargs)

    TensorDict.state_dict = state_dict
    TensorDict.load_state_dict = load_state_dict
    TensorDict.consolidate = consolidate


_attach_state_methods()

from .memmap_api import TensorDictFuture, attach as _attach_memmap, load_memmap  # noqa: E402
from .fsops import FormatError  # noqa: E402
from .functional import lazy_stack  # noqa: E402  (tensordict's name; same as stack)
from .dataclass_convert import from_dataclass, tensordict_from_dataclass as _td_from_dataclass  # noqa: E402

TensorDict.from_dataclass = classmethod(_td_from_dataclass)
from .testing import assert_allclose_td, print_directory_tree  # noqa: E402

from .tensorclass_torch import install as _install_torch_functions  # noqa: E402

_install_torch_functions()

from .tensorclass_methods import install as _install_tensorclass_methods  # noqa: E402

_install_tensorclass_methods()

for _cls in (TensorDict, TensorClass, RaggedTensorDict, NonTensorStack):
    _attach_memmap(_cls)

__all__ = [
    "TensorDict", "TensorClass", "tensorclass", "is_tensorclass", "NonTensorData", "NonTensorStack",
    "MemoryMappedTensor", "RaggedTensorDict", "set_list_to_stack", "list_to_stack", "LockedError",
    "BatchSizeError", "NestedKey", "unravel_key", "load_memmap", "TensorDictFuture", "FormatError",
    "from_dataclass", "assert_allclose_td", "print_directory_tree",
]
