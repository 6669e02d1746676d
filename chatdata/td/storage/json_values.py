"""What a save accepts as non-tensor values: JSON values (never pickled), and no lone surrogates
(UTF-8 cannot hold them). Shared by the writer (:mod:`chatdata.td.storage.persist`) and in-place value
updates (:mod:`chatdata.td.storage.writethrough`), so both refuse the same values with the same messages.

Example:
    >>> _entry_value({"a": [1, 2.5, None]}, "entry 'x'")
    {'a': [1, 2.5, None]}
    >>> _entry_value({1, 2}, "entry 'x'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    TypeError: cannot save entry 'x': a set is not JSON-serialisable and chatdata never pickles; ...
"""
from __future__ import annotations

import json

from ..nontensor.json_keys import refuse_other_keys

__all__ = ["_entry_value", "_check_key_text"]


def _entry_value(value, where):
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=True).encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"cannot save {where}: {_surrogate_message(err)}") from None
    except (TypeError, ValueError, RecursionError):
        raise TypeError(
            f"cannot save {where}: a {type(value).__name__} is not JSON-serialisable and chatdata "
            "never pickles; convert it to str, numbers, lists or dicts (e.g. with str() or "
            "dataclasses.asdict()) before saving"
        ) from None
    refuse_other_keys([value], f" of {where}", single=True)
    return value


# -- lone surrogates: refused at save with the entry named (never a raw UnicodeEncodeError) --
class _SurrogateAt(Exception):
    def __init__(self, index: int, message: str):
        super().__init__(message)
        self.index, self.message = index, message


def _surrogate_message(err: UnicodeEncodeError) -> str:
    return (f"holds a lone surrogate ({err.object[err.start]!r}), which UTF-8 cannot store; fix "
            "the text's encoding (e.g. decode with errors='replace')")


def _has_surrogate(value) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except (TypeError, ValueError, RecursionError):
        return False
    return False


def _check_key_text(key: str) -> None:
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(f"cannot save the key {key!r}: it {_surrogate_message(err)}") from None


def _check_surrogates(values, positional: bool) -> None:
    """Raise ``_SurrogateAt`` for the first str of ``values`` holding a lone surrogate (one
    C-speed encode when there is none); its index is the item's when ``positional``."""
    strs = [v for v in values if isinstance(v, str)]
    try:
        "".join(strs).encode("utf-8")
    except UnicodeEncodeError as err:
        bad = next(i for i, v in enumerate(values) if isinstance(v, str) and _has_surrogate(v))
        raise _SurrogateAt(bad if positional else None, _surrogate_message(err)) from None


def _first_surrogate(stack):
    """Flat position of the first item holding a lone surrogate (the error path only), or None."""
    try:
        flat = stack.reshape(-1).tolist()
    except Exception:  # noqa: BLE001 - the message then names no item
        return None
    return next((i for i, v in enumerate(flat) if isinstance(v, str) and _has_surrogate(v)), None)
