"""Load-time integrity checks: format fields, offsets, and checks deferred to the first read.

Opening a dataset stays O(1) in its number of items: the reader checks every ``meta.json``
field, file name and file size when it opens the folder, but checks that need to look at every
offset (a ragged stack's item offsets, a History's per-message flags) run once, in one
vectorised pass, the first time the loaded stack is read. A corrupt folder therefore raises a
:class:`FormatError` naming the file before any wrong value can be returned.

Example:
    >>> check_offsets(torch.tensor([0, 2, 1, 3]), 3, "x/_offsets.memmap")
    Traceback (most recent call last):
    chatdata.td.storage.fsops.FormatError: x/_offsets.memmap: offsets must not decrease (offset 2 is 1, after 2)
"""
from __future__ import annotations

import json
import sys

import numpy as np
import torch

from .fsops import FormatError
from ..core import RaggedTensorDict

__all__ = ["check_offsets", "parse_meta", "check_version", "LoadedRagged", "FORMAT_NAME", "FORMAT_VERSION"]

FORMAT_NAME = "chatdata"  # every meta.json's "format"
FORMAT_VERSION = 1  # and its "version" (readers refuse newer ones)

if sys.byteorder != "little":  # pragma: no cover - every supported platform is little-endian
    raise ImportError("chatdata's on-disk format is little-endian; big-endian hosts are not supported")


def parse_meta(raw: bytes, where) -> dict:
    """``meta.json`` bytes as a dict; anything else (bad UTF-8 or JSON, nesting too deep for
    the parser, not an object) is a :class:`FormatError` naming ``where``.

    Example:
        >>> parse_meta(b"[" * 100000, "m.json")
        Traceback (most recent call last):
        chatdata.td.storage.fsops.FormatError: m.json is not valid JSON (nested too deeply)
    """
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise FormatError(f"{where} is not valid JSON ({err})") from None
    except RecursionError:
        raise FormatError(f"{where} is not valid JSON (nested too deeply)") from None
    if not isinstance(meta, dict):
        raise FormatError(f"{where} must hold a JSON object")
    return meta


def check_version(meta: dict, where, current: int) -> None:
    """The ``version`` field must be a positive integer (``true`` is not) not above ``current``."""
    v = meta.get("version")
    if type(v) is not int or v < 1:
        raise FormatError(f"{where}: 'version' must be a positive integer, got {v!r}")
    if v > current:
        raise FormatError(f"{where}: format version {v} is newer than this chatdata ({current}); upgrade chatdata")


def check_offsets(offsets: torch.Tensor, total: int, where) -> None:
    """Item offsets: first 0, never decreasing, last ``total``: one vectorised pass.

    Example:
        >>> check_offsets(torch.tensor([0, 1, 1, 4]), 4, "o")
    """
    n = offsets.numel()
    if n == 0 or int(offsets[0]) != 0:
        raise FormatError(f"{where}: offsets must start at 0, got {offsets[:1].tolist()}")
    if int(offsets[-1]) != total:
        raise FormatError(f"{where}: offsets end at {int(offsets[-1])} but the values hold {total} rows")
    if n > 1:
        # numpy: one single-threaded SIMD pass (a torch op here would start a thread pool,
        # which on a busy machine waits on scheduling far longer than the pass itself)
        a = offsets.numpy()
        if bool((a[1:] < a[:-1]).any()):
            i = int(np.flatnonzero(a[1:] < a[:-1])[0]) + 1
            raise FormatError(
                f"{where}: offsets must not decrease (offset {i} is {int(offsets[i])}, after {int(offsets[i - 1])})"
            )


class LoadedRagged(RaggedTensorDict):
    """A ragged stack just loaded from disk whose O(n) checks run on its first read.

    It behaves exactly as a :class:`RaggedTensorDict`; the pending checks (callables raising
    :class:`FormatError`) run the first time its offsets are used, then never again.
    Pickling or copying runs them first and gives a plain ``RaggedTensorDict``.
    """

    def __init__(self, values, offsets, checks):
        self.__dict__["_pending"] = list(checks)
        super().__init__(values, offsets)

    def _check_order(self, offsets) -> None:
        """Left to the pending checks: they run on the first read, not at load."""

    @property
    def _offsets(self):
        if self._pending:
            self._run_checks()
        return self.__dict__["_raw_offsets"]

    @_offsets.setter
    def _offsets(self, value):
        self.__dict__["_raw_offsets"] = value

    # O(1) shape queries use the offsets' ends, checked when the stack was built: no pass yet
    @property
    def batch_size(self) -> torch.Size:
        return torch.Size([self.__dict__["_raw_offsets"].numel() - 1, -1, *self._values.batch_size[1:]])

    def __len__(self) -> int:
        return self.__dict__["_raw_offsets"].numel() - 1

    def numel(self) -> int:
        return int(self.__dict__["_raw_offsets"][-1])

    def _run_checks(self) -> None:
        pending = self.__dict__["_pending"]
        while pending:
            pending[0]()
            pending.pop(0)

    def add_check(self, check) -> None:
        """Run ``check()`` (which raises :class:`FormatError`) on the first read too."""
        self.__dict__["_pending"].append(check)

    def __reduce_ex__(self, protocol):
        self._run_checks()
        state = {k: v for k, v in self.__dict__.items() if k not in ("_pending", "_raw_offsets", "_off_mv")}
        state["_offsets"] = self.__dict__["_raw_offsets"]
        return (_plain_ragged, (state,))


def _plain_ragged(state: dict) -> RaggedTensorDict:
    obj = RaggedTensorDict.__new__(RaggedTensorDict)
    obj.__dict__.update(state)
    return obj
