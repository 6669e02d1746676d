"""chatdata: chat-history data for PyTorch.

A compact TensorDict core, the ``History`` tensorclass, a chat-template engine with assistant
masks, specs for RL environments, and fast, safe memmap persistence.
"""
from .td import (
    BatchSizeError,
    FormatError,
    LockedError,
    MemoryMappedTensor,
    NonTensorData,
    NonTensorStack,
    RaggedTensorDict,
    TensorClass,
    TensorDict,
    is_tensorclass,
    list_to_stack,
    load_memmap,
    set_list_to_stack,
    tensorclass,
)

from .history import ContentBase, History
from .specs import Binary, Bounded, Categorical, Composite, NonTensor, TensorSpec, Unbounded
from .templates import TemplateError, add_chat_template, list_chat_templates
from .io import open_dataset  # also attaches to_arrow/from_arrow (pyarrow is imported only when called)

__version__ = "0.1.0"

__all__ = [
    "TensorDict", "TensorClass", "tensorclass", "is_tensorclass", "NonTensorData", "NonTensorStack",
    "MemoryMappedTensor", "RaggedTensorDict", "set_list_to_stack", "list_to_stack", "LockedError",
    "BatchSizeError", "FormatError", "load_memmap", "History", "ContentBase", "Composite", "NonTensor",
    "TensorSpec", "Unbounded", "Bounded", "Categorical", "Binary", "TemplateError", "add_chat_template",
    "list_chat_templates", "open_dataset",
]
