"""Data at scale: Arrow / Parquet / Hugging Face datasets, sharded datasets (and ``chatdata.ray``).

Importing this package is cheap: pyarrow, datasets and ray are imported only when a function
needs them (install them with ``pip install "chatdata[arrow]"``, ``[hf]`` or ``[ray]``). It
attaches the Arrow methods to the core classes:

* ``History.to_arrow()`` / ``History.from_arrow(table_or_array, column="messages")``
* ``NonTensorStack.to_arrow()`` / ``NonTensorStack.from_arrow(array)``
* ``TensorDict.to_arrow()`` / ``TensorDict.from_arrow(table)``

Example:
    >>> import chatdata
    >>> h = chatdata.History.from_chats([[{"role": "user", "content": "hi"}]])
    >>> t = h.to_arrow()
    >>> import datasets; ds = datasets.Dataset(t)
    >>> chatdata.History.from_arrow(ds).to_chats()
    [[{'role': 'user', 'content': 'hi'}]]
"""
from __future__ import annotations

from ..history import History
from ..td import NonTensorStack, TensorDict
from .sharded import ShardedDataset, open_dataset
from .sharded_verify import verify_dataset
from . import arrow_typed_copy as _arrow_typed_copy  # noqa: F401 - registers the typed copies of JSON columns

__all__ = ["open_dataset", "ShardedDataset", "verify_dataset"]


def _history_to_arrow(self, column: str = "messages", json: str = "typed"):
    """This History as a ``pyarrow.Table``: one row per conversation (a 1-D History is one
    conversation, also without messages), a ``column`` of
    ``large_list<struct<role, content, ...>>`` (HF datasets' chat schema). Zero-copy for a
    memory-mapped History; ``json="text"`` keeps tool calls as JSON text, so that nothing is
    done per message. See :mod:`chatdata.io.arrow_history`.

    Example:
        >>> History.from_chats([[{"role": "user", "content": "hi"}]]).to_arrow().num_rows
        1
    """
    from .arrow_history import history_to_arrow

    return history_to_arrow(self, column, json)


def _history_from_arrow(cls, table_or_array, column: str = "messages"):
    """A History from a ``pyarrow.Table`` / RecordBatch / (Chunked)Array of message lists, or a
    ``datasets.Dataset``: ``History.from_arrow(h.to_arrow())`` equals ``h``. Null fields read
    back as absent keys; a bad row raises ValueError naming it.

    Example:
        >>> History.from_arrow(History.from_chats([[{"role": "user", "content": "hi"}]]).to_arrow()).to_chats()
        [[{'role': 'user', 'content': 'hi'}]]
    """
    from .arrow_history import history_from_arrow

    return history_from_arrow(table_or_array, column)


def _stack_to_arrow(self):
    """This NonTensorStack as an Arrow array (``large_string`` for strings, zero-copy when packed).

    Example:
        >>> NonTensorStack.from_list(["a"]).to_arrow().to_pylist()
        ['a']
    """
    from .arrow_td import nontensor_to_arrow

    return nontensor_to_arrow(self)


def _stack_from_arrow(cls, array):
    """A NonTensorStack from an Arrow array (string bytes stay in the Arrow buffers).

    Example:
        >>> import pyarrow as pa
        >>> NonTensorStack.from_arrow(pa.array(["a", "b"])).tolist()
        ['a', 'b']
    """
    from .arrow_td import nontensor_from_arrow

    return nontensor_from_arrow(array)


def _td_to_arrow(self):
    """This TensorDict (batch ``(rows,)``) as a ``pyarrow.Table``: tensors as (fixed-size list)
    numbers, strings as ``large_string``, nested TensorDicts as structs, other non-tensor values in
    Arrow's type (``arrow.json`` text where none holds them exactly) and tagged, so that
    ``TensorDict.from_arrow`` gives them back as they were. See :mod:`chatdata.io.arrow_td`.

    Example:
        >>> import torch
        >>> TensorDict({"x": torch.zeros(2, 3)}, [2]).to_arrow().num_rows
        2
    """
    from .arrow_td import tensordict_to_arrow

    return tensordict_to_arrow(self)


def _td_from_arrow(cls, table):
    """A TensorDict of batch ``(rows,)`` from a ``pyarrow.Table`` (numbers without a copy).

    Example:
        >>> import torch
        >>> TensorDict.from_arrow(TensorDict({"x": torch.zeros(2)}, [2]).to_arrow())["x"].shape
        torch.Size([2])
    """
    from .arrow_td import tensordict_from_arrow

    return tensordict_from_arrow(table)


History.to_arrow = _history_to_arrow
History.from_arrow = classmethod(_history_from_arrow)
NonTensorStack.to_arrow = _stack_to_arrow
NonTensorStack.from_arrow = classmethod(_stack_from_arrow)
TensorDict.to_arrow = _td_to_arrow
TensorDict.from_arrow = classmethod(_td_from_arrow)

