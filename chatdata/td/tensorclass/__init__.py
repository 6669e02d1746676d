"""The tensorclass room of td/: ``@tensorclass`` and ``TensorClass``.

A tensorclass is a dataclass-like class whose fields live in a TensorDict. The room holds the
class (:mod:`.base`), how its annotations become fields (:mod:`.fields`), the TensorDict
operations it runs on its fields (:mod:`.forwarded`), the decorator (:mod:`.decorator`), its
options (``autocast``, ``nocast``, ``shadow``, ``frozen``, ``tensor_only``: :mod:`.options`),
how field annotations are read (:mod:`.field_types`), ``state_dict`` / ``load_state_dict`` (:mod:`.state`), torch
functions on tensorclasses (:mod:`.torch_functions`), more methods (:mod:`.methods`), the
registry of class names that loading resolves (:mod:`.registry`), dataclass conversion
(:mod:`.dataclass_convert`) and printing (:mod:`.repr`).

It imports the core and the non-tensor rooms, never the on-disk format (the storage room gives
tensorclasses their memmap methods, and reads the registry to load a saved class). Importing
this face installs the room's methods: state_dict on TensorClass, torch functions on every
collection, the extra TensorClass methods and ``TensorDict.from_dataclass``.

Note: ``chatdata.td.tensorclass`` the attribute is the decorator (``from chatdata.td import
tensorclass``); this room is ``from chatdata.td.tensorclass import ...``.

Other rooms import these names from here (this face), never from the modules inside.

Example:
    >>> from chatdata.td.tensorclass import TensorClass
    >>> class Pair(TensorClass):
    ...     a: torch.Tensor
    ...     b: str
    >>> Pair(a=torch.zeros(2), b="x", batch_size=[2])[1].b
    'x'
"""
from ..core import TensorDict as _TensorDict
from .base import TensorClass, is_tensorclass, register_tensorclass
from .dataclass_convert import from_dataclass, tensordict_from_dataclass
from .decorator import tensorclass
from .registry import registered_classes, registered_tensorclass
from . import methods as _methods, state as _state, torch_functions as _torch_functions

_state.install()  # TensorClass.state_dict / load_state_dict
_TensorDict.from_dataclass = classmethod(tensordict_from_dataclass)
_torch_functions.install()  # torch.stack(...) & co. on every collection, torch functions on tensorclasses
_methods.install()  # replace, get_at, from_list, stack, cat, shape ops as context managers, ...

__all__ = [
    "TensorClass", "tensorclass", "is_tensorclass", "register_tensorclass", "registered_tensorclass",
    "registered_classes", "from_dataclass", "tensordict_from_dataclass",
]
