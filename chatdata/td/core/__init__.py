"""The core room of td/: ``TensorDict`` and what it is built from.

It holds TensorDict (keys, nesting, batch dims, indexing, locking), the key rules
(``unravel_key``, key <-> file-name encoding), the batch-size rules of entries
(``check_batch``: an entry starts with the batch size), the conversion of user values into
entries, the whole-collection operations (apply, clone, compare, to, lock, ...), stacking and
concatenation of every container (``stack``, ``cat``), ``RaggedTensorDict``, printing in
tensordict's format, ``state_dict`` / ``load_state_dict`` / ``consolidate``, and test helpers.

It imports only the non-tensor room (:mod:`chatdata.td.nontensor`): the leaves TensorDict
holds, and the ``Batched`` shape base. It never imports tensorclasses or the on-disk format;
those rooms sit above and register what the core needs to reach them (the storage room gives
TensorDict its ``memmap`` methods and ``consolidate(filename=...)`` its file-backed buffer).

Other rooms import these names from here (this face), never from the modules inside.

Example:
    >>> from chatdata.td.core import TensorDict, stack
    >>> stack([TensorDict(a=torch.zeros(2)), TensorDict(a=torch.ones(2))])["a"].shape
    torch.Size([2, 2])
"""
from .convert import check_batch, check_no_names, is_collection, is_integer_dtype
from .functional import cat, dispatch, lazy_stack, stack
from .keys import GENERIC_NESTED_ERR, NestedKey, filename_to_key, is_valid_key, key_to_filename, unravel_key
from .ragged import RaggedTensorDict
from .repr import indent, leaf_repr
from .tensordict import LockedError, TensorDict, TensorDictBase
from .testing import assert_allclose_td, print_directory_tree
from . import builders as _builders, state as _state

_state.install()  # state_dict, load_state_dict, consolidate and pickling of TensorDict
_builders.install()  # TensorDict.from_list

__all__ = [
    "TensorDict", "TensorDictBase", "LockedError", "RaggedTensorDict", "NestedKey", "unravel_key",
    "is_valid_key", "key_to_filename", "filename_to_key", "GENERIC_NESTED_ERR", "check_batch",
    "check_no_names", "is_collection", "stack", "cat", "lazy_stack", "dispatch", "indent", "leaf_repr",
    "assert_allclose_td", "print_directory_tree",
]
