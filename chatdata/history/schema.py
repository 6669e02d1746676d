"""The schema of a saved History, checked when it loads.

A History folder holds one column per field (see :mod:`chatdata.history.columns`). Loading
checks, in O(1), that the columns are the known ones (``role`` and ``content`` required), that
each has a kind it can have (a str column, a JSON column, a constant of the right type, a
tensor of the right dtype) and that ``_flags`` is an int8 tensor; the flag values themselves
(0..15) are checked in one vectorised pass on the first read. Anything else is a
:class:`~chatdata.td.FormatError` naming the file.

Example:
    >>> check_loaded_storage(TensorDict({"role": ["user"]}, [1]), Path("chat/_storage"))
    Traceback (most recent call last):
    ...
    chatdata...FormatError: chat/_storage/meta.json: a History needs the columns ['role', 'content']; ['content'] missing
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..td import FormatError, NonTensorData, NonTensorStack, RaggedTensorDict, TensorDict
from ..td.storage import LoadedRagged
from ..td.tensorclass import TensorClass
from .columns import DEFAULTS, FIELDS, FLAGS_KEY

__all__ = ["check_loaded_storage", "FLAG_MAX"]

FLAG_MAX = 15  # CONTENT_ABSENT | IS_COMPLETE | TOOL_CALLS | TOOL_RESPONSES
_REQUIRED = ("role", "content")
# per column: the Python types a constant may have, the kinds a packed column may have
_CONST = {
    "role": (str,), "content": (str, list, type(None)), "is_complete": (bool,),
    "tool_calls": (list, type(None)), "tool_responses": (list, type(None)), "extra": (dict, type(None)),
}
_POOL_KINDS = {
    "role": ("str",), "content": ("str", "json"), "is_complete": ("json",),
    "tool_calls": ("json",), "tool_responses": ("json",), "extra": ("json",),
}


def _column_error(name: str, col) -> str | None:
    if isinstance(col, NonTensorData):
        if type(col.data) not in _CONST[name]:
            return f"column {name!r} holds a constant {type(col.data).__name__} ({col.data!r:.40})"
        return None
    if isinstance(col, NonTensorStack):
        kind = col._pool.kind
        if kind not in _POOL_KINDS[name]:
            return f"column {name!r} is a {kind} column; it must be {' or '.join(_POOL_KINDS[name])}"
        return None
    if isinstance(col, torch.Tensor):
        if name == "is_complete" and col.dtype == torch.bool:
            return None
        return f"column {name!r} is a {col.dtype} tensor"
    if name == "content" and isinstance(col, TensorClass):
        return None  # ContentBase parts
    return f"column {name!r} is a {type(col).__name__}"


def _empty_str_column(col) -> bool:
    return isinstance(col, NonTensorStack) and col.batch_size.numel() == 0 and col._pool.kind == "str"


def _check_flags(flags: torch.Tensor, where) -> None:
    # one single-threaded numpy pass over the bytes (negative int8 values are >= 128 as uint8)
    raw = flags.contiguous().reshape(-1).numpy().view(np.uint8)
    if raw.size and int(raw.max()) > FLAG_MAX:
        bad = int(np.flatnonzero(raw > FLAG_MAX)[0])
        raise FormatError(f"{where}: message {bad} has flag value {int(flags.reshape(-1)[bad])}; flags are 0..{FLAG_MAX}")


def check_loaded_storage(storage, folder: Path) -> None:
    """Raise :class:`FormatError` naming the file unless ``storage`` (just loaded from
    ``folder``) has a History's columns; defers the flag-value pass to the first read. An
    optional column the folder does not hold (``is_complete``, ``tool_calls``, ...) is added
    as its default, so that every reader sees a History's whole schema."""
    values = storage.values if isinstance(storage, RaggedTensorDict) else storage
    vdir = Path(folder) / "_values" if isinstance(storage, RaggedTensorDict) else Path(folder)
    where = vdir / "meta.json"
    if not isinstance(values, TensorDict):
        raise FormatError(f"{where}: a History's messages must be a TensorDict of columns, got {type(values).__name__}")
    cols = values._tensordict
    missing = [c for c in _REQUIRED if c not in cols]
    if missing:
        raise FormatError(f"{where}: a History needs the columns {list(_REQUIRED)}; {missing} missing")
    unknown = sorted(set(cols) - set(FIELDS) - {FLAGS_KEY})
    if unknown:
        raise FormatError(f"{where}: unknown History columns {unknown}; known: {[*FIELDS, FLAGS_KEY]}")
    for name, col in list(cols.items()):
        if name == FLAGS_KEY:
            continue
        if name in DEFAULTS and _empty_str_column(col):
            # an empty JSON column that td's stream writer saved as str (before the kind of a column of
            # no values was kept): no value can be wrong, read it as the default
            cols[name] = NonTensorData(DEFAULTS[name], batch_size=col.batch_size)
            continue
        err = _column_error(name, col)
        if err is not None:
            raise FormatError(f"{where}: {err}")
    for name, default in DEFAULTS.items():  # an optional column not saved: its default for every message
        if name not in cols:
            cols[name] = NonTensorData(default, batch_size=values.batch_size)
    flags = cols.get(FLAGS_KEY)
    if flags is None:
        return
    if not isinstance(flags, torch.Tensor) or flags.dtype != torch.int8:
        raise FormatError(f"{where}: column {FLAGS_KEY!r} must be an int8 tensor, got {getattr(flags, 'dtype', type(flags).__name__)}")
    flags_file = getattr(flags, "filename", None) or where
    if isinstance(storage, LoadedRagged):
        storage.add_check(lambda: _check_flags(flags, flags_file))
    else:
        _check_flags(flags, flags_file)
