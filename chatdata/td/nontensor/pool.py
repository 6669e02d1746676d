"""Value pools: where the strings (and other non-tensor values) of a stack live.

A :class:`Pool` is an append-only sequence of values addressed by integer ids. Its base is
either a plain Python list (cheap to build from user data) or a *packed column*: one UTF-8
byte buffer plus int64 offsets (``offsets[i]:offsets[i+1]`` is value ``i``), which is what
memory maps, pickles and shares well. Values that are not strings are packed as JSON text.
Values appended after packing go to a small overflow list, so ids never change and many
stacks (views, slices) can share one pool safely.

Example:
    >>> pool = Pool.from_values(["a", "héllo"]).packed()
    >>> pool.get(1), len(pool.data)
    ('héllo', 7)
"""
from __future__ import annotations

import json
from array import array
import warnings
from typing import Any, Iterable, Sequence

import torch

from .json_keys import refuse_other_keys

__all__ = ["Pool", "pack_strings", "to_json", "to_json_texts"]

KINDS = ("str", "json")


def pack_strings(values: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Pack strings into (uint8 bytes, int64 offsets of length n+1) in a few C-level passes.

    Example:
        >>> data, offsets = pack_strings(["ab", "", "é"])
        >>> offsets.tolist()
        [0, 2, 2, 4]
    """
    joined = "".join(values)
    if joined.isascii():
        raw = joined.encode("ascii")
        lengths = array("q", map(len, values))
    else:
        encoded = [v.encode("utf-8", "surrogatepass") for v in values]
        raw = b"".join(encoded)
        lengths = array("q", map(len, encoded))
    offsets = torch.zeros(len(values) + 1, dtype=torch.int64)
    if lengths:  # array -> tensor without a per-element conversion
        torch.cumsum(torch.frombuffer(lengths, dtype=torch.int64), 0, out=offsets[1:])
    if raw:
        with warnings.catch_warnings():  # a read-only buffer: packed data is never written in place
            warnings.simplefilter("ignore", UserWarning)
            data = torch.frombuffer(raw, dtype=torch.uint8)  # no copy of the (large) bytes
    else:
        data = torch.zeros(0, dtype=torch.uint8)
    return data, offsets


def _dumps(value, where: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError, RecursionError) as err:
        raise TypeError(
            f"non-tensor value{where} of type {type(value).__name__} is not JSON-serialisable "
            f"({err}); convert it to str, numbers, lists or dicts before packing or saving"
        ) from None


def to_json(value, where: str = "") -> str:
    """The JSON text of one non-tensor value; TypeError for a value JSON cannot hold or would
    change (a dict key that is not a str: :mod:`~chatdata.td.nontensor.json_keys`).

    Example:
        >>> to_json({"a": [1, None]})
        '{"a": [1, null]}'
    """
    text = _dumps(value, where)
    refuse_other_keys([value], where, single=True)  # a scalar costs one isinstance
    return text


def json_text(value) -> str:
    """The JSON text of a value without the key check (for sizes and counts, not for storing).

    Example:
        >>> json_text({1: 0.5})
        '{"1": 0.5}'
    """
    return _dumps(value, "")


def to_json_texts(values: Sequence, where: str = "") -> list[str]:
    """:func:`to_json` of every value of a column (the keys checked over the column at once).

    Example:
        >>> to_json_texts([1, {"a": "b"}])
        ['1', '{"a": "b"}']
    """
    texts = [_dumps(v, f" #{i}{where}") for i, v in enumerate(values)]
    refuse_other_keys(values, where)
    return texts


class Pool:
    """An append-only, shareable sequence of values (see the module docstring)."""

    __slots__ = ("_list", "_data", "_offsets", "kind", "_extras", "_mv", "_off", "_loader", "_n", "_source", "_typed",
                 "_whole", "_recorded")

    #: What reading a corrupt packed column raises (the message names its file). The storage
    #: room sets its ``FormatError`` here when it is imported: the on-disk format sits above
    #: this room, so this module cannot import it.
    corrupt_error: type = ValueError

    def __init__(self, values: list | None = None, *, data=None, offsets=None, kind="str", loader=None, n=None):
        if kind not in KINDS:
            raise ValueError(f"unknown pool kind {kind!r}; expected one of {KINDS}")
        self._list = values
        self._data = data
        self._offsets = offsets
        self.kind = kind
        self._extras: list = []
        self._mv = None
        self._off = None
        self._loader = loader  # maps (data, offsets) on first use: loading opens no file
        self._n = n
        self._source = None  # the file a loaded column comes from (for error messages)
        # a loaded JSON column's typed copy: (format name, uint8 tensor of its file, its path, its
        # recorded checksum), or None;
        # it describes the packed base only (chatdata.td.storage.typed_copies)
        self._typed = None
        # a loaded column's files and the checksums their folder recorded, ((data path, checksum),
        # (offsets path, checksum)), or None: a save of the whole column compares what it writes
        self._recorded = None
        # the packed base's offsets are known to be whole (0, never decreasing, the data size):
        # packed here, or checked once by check_offsets(); offsets from a file or a caller are not
        self._whole = False
        if values is None and loader is None and (data is None or offsets is None):
            self._list = []

    @property
    def data(self) -> torch.Tensor:
        if self._data is None and self._loader is not None:
            self._data, self._offsets = self._loader()
            self._loader = None
        return self._data

    @property
    def offsets(self) -> torch.Tensor:
        if self._offsets is None and self._loader is not None:
            self.data  # noqa: B018 - maps both files
        return self._offsets

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_values(cls, values: Iterable) -> "Pool":
        """A list-backed pool holding ``values`` (no copy of the strings)."""
        return cls(values if isinstance(values, list) else list(values))

    @classmethod
    def from_packed(cls, data: torch.Tensor, offsets: torch.Tensor, kind: str = "str") -> "Pool":
        """A pool over an existing packed column (e.g. memory-mapped files)."""
        if data.dtype != torch.uint8 or data.ndim != 1:
            raise ValueError("packed data must be a 1-D uint8 tensor")
        if offsets.dtype != torch.int64 or offsets.ndim != 1 or offsets.numel() < 1:
            raise ValueError("packed offsets must be a 1-D int64 tensor with at least one element")
        return cls(None, data=data, offsets=offsets, kind=kind)

    @classmethod
    def from_loader(cls, loader, n: int, kind: str = "str") -> "Pool":
        """A packed pool of ``n`` values whose files ``loader()`` maps on first access."""
        return cls(None, loader=loader, n=n, kind=kind)

    def check_offsets(self, start: int = 0, stop: int | None = None) -> None:
        """Check the offsets of the packed base's values ``start:stop`` (all by default) whole:
        never decreasing, inside the data; raises ``corrupt_error`` naming the file. One
        vectorised pass over that range; a pool remembers when all of it was checked. Reading
        one value checks only its own range; code that hands a range of the column to another
        library without reading it (Arrow's zero-copy arrays) must call this first: a decreasing
        offset there reads outside the mapped file and kills the process.

        Example:
            >>> pool = Pool.from_packed(torch.tensor([104, 105], dtype=torch.uint8), torch.tensor([0, 2, 1, 2]))
            >>> try:
            ...     pool.check_offsets()
            ... except ValueError as err:  # FormatError once chatdata.td.storage is imported
            ...     print(err)
            string column: corrupt offsets: offset 2 is 1, after 2
        """
        if self._whole or self._list is not None:
            return
        n = self._n_base()
        stop = n if stop is None else stop
        off = self.offsets.numpy()[start:stop + 1]  # numpy: one single-threaded SIMD pass (see td.storage.integrity)
        size = self.data.numel()
        bad = off[1:] < off[:-1]
        if bad.any():
            i = int(bad.argmax()) + 1
            raise self.corrupt_error(f"{self._source or 'string column'}: corrupt offsets: offset {start + i} is "
                                     f"{int(off[i])}, after {int(off[i - 1])}")
        if len(off) and (int(off[0]) < 0 or int(off[-1]) > size):
            raise self.corrupt_error(f"{self._source or 'string column'}: corrupt offsets: values {start}:{stop} "
                                     f"span bytes {int(off[0])}:{int(off[-1])}, the data holds {size} bytes")
        if start == 0 and stop == n:
            self._whole = True

    @property
    def is_packed(self) -> bool:
        return self._list is None

    def _n_base(self) -> int:
        if self._offsets is None and self._n is not None:
            return self._n
        return self.offsets.numel() - 1

    def __len__(self) -> int:
        if self._list is not None:
            return len(self._list)
        return self._n_base() + len(self._extras)

    # -- access --------------------------------------------------------------------------
    def _views(self):
        if self._mv is None:
            data = self.data
            self._mv = memoryview(data.numpy()) if data.numel() else memoryview(b"")
            self._off = memoryview(self.offsets.numpy())
        return self._mv, self._off

    def get(self, i: int) -> Any:
        """The value with id ``i``."""
        if self._list is not None:
            return self._list[i]
        n = self._n_base()
        if i >= n:
            return self._extras[i - n]
        mv, off = self._views()
        a, b = off[i], off[i + 1]
        if not 0 <= a <= b <= len(mv):
            raise self.corrupt_error(
                f"{self._source or 'string column'}: corrupt offsets: value {i} spans bytes {a}:{b} "
                f"of {len(mv)}"
            )
        try:
            text = str(mv[a:b], "utf-8", "surrogatepass")
            return text if self.kind == "str" else json.loads(text)
        except ValueError as err:  # UnicodeDecodeError, JSONDecodeError
            raise self.corrupt_error(f"{self._source or 'string column'}: value {i} is corrupt ({err})") from None

    def take(self, ids: Sequence[int]) -> list:
        """The values with the given ids, as a list."""
        if self._list is not None:
            lst = self._list
            if isinstance(ids, range) and ids.step == 1:
                return lst[ids.start : ids.stop]
            return [lst[i] for i in ids]
        if not self._extras:  # fast path over the packed column (errors: see get)
            mv, off = self._views()
            size, out = len(mv), []
            try:
                for i in ids:
                    a, b = off[i], off[i + 1]
                    if not 0 <= a <= b <= size:
                        raise ValueError
                    out.append(str(mv[a:b], "utf-8", "surrogatepass"))
                if self.kind != "str":
                    out = [json.loads(v) for v in out]
                return out
            except ValueError:
                pass  # fall through: get() raises the precise corrupt_error
        get = self.get
        return [get(i) for i in ids]

    def append(self, value) -> int:
        """Add ``value``; returns its id. Existing ids (and views on them) are unaffected."""
        if self._list is not None:
            self._list.append(value)
            return len(self._list) - 1
        self._extras.append(value)
        return self._n_base() - 1 + len(self._extras)

    def extend(self, values: list) -> int:
        """Add many values; returns the id of the first."""
        start = len(self)
        if self._list is not None:
            self._list.extend(values)
        else:
            self._extras.extend(values)
        return start

    # -- packing -------------------------------------------------------------------------
    def packed(self, ids: torch.Tensor | None = None) -> "Pool":
        """A packed pool with the values ``ids`` (all values when None), in that order.

        Strings pack as UTF-8; anything else packs as JSON (and must be JSON-serialisable).
        """
        if ids is None and self._list is None and not self._extras:
            return self
        if ids is not None and self._list is None and not self._extras and ids.numel():
            return self._gather_packed(ids.reshape(-1))
        values = list(self._list) if ids is None and self._list is not None else (
            self.take(range(len(self))) if ids is None else self.take(ids.reshape(-1).tolist())
        )
        if not values:  # no value to tell: an empty pick keeps the column's kind (json stays json);
            # a list-backed column is judged by its first value (O(1): a mixed one is rare, and empty)
            kind = self.kind if self._list is None else (
                "json" if self._list and type(self._list[0]) is not str else "str")
            return Pool.from_packed(torch.zeros(0, dtype=torch.uint8), torch.zeros(1, dtype=torch.int64), kind)
        if all(type(v) is str for v in values):
            return _packed_here(*pack_strings(values), "str")
        return _packed_here(*pack_strings(to_json_texts(values)), "json")

    def _gather_packed(self, ids: torch.Tensor) -> "Pool":
        # vectorised gather of variable-length byte ranges: no per-value Python work
        starts = self.offsets[ids]
        ends = self.offsets[ids + 1]
        lengths = ends - starts
        bad = (lengths < 0) | (starts < 0) | (ends > self.data.numel())  # a corrupt file: never wrapped round
        if bool(bad.any()):
            k = int(bad.nonzero()[0, 0])
            i = int(ids[k])
            raise self.corrupt_error(
                f"{self._source or 'string column'}: corrupt offsets: value {i} spans bytes "
                f"{int(starts[k])}:{int(ends[k])} of {self.data.numel()}"
            )
        new_off = torch.zeros(ids.numel() + 1, dtype=torch.int64)
        torch.cumsum(lengths, 0, out=new_off[1:])
        total = int(new_off[-1])
        if total == 0:
            return Pool.from_packed(torch.zeros(0, dtype=torch.uint8), new_off, self.kind)
        shift = torch.repeat_interleave(starts - new_off[:-1], lengths)
        pos = torch.arange(total, dtype=torch.int64) + shift
        return _packed_here(self.data[pos], new_off, self.kind)

    def __getstate__(self):
        # in-memory pickling (multiprocessing, DataLoader workers): packed when possible,
        # otherwise the Python values themselves, as any pickled Python object would be.
        try:
            p = self.packed() if (self._list is not None or self._extras) else self
        except TypeError:
            return {"values": self.take(range(len(self)))}
        return {"data": p.data.clone(), "offsets": p.offsets.clone(), "kind": p.kind}

    def __setstate__(self, state):
        if "values" in state:
            Pool.__init__(self, state["values"])
        else:
            Pool.__init__(self, None, data=state["data"], offsets=state["offsets"], kind=state["kind"])


def _packed_here(data: torch.Tensor, offsets: torch.Tensor, kind: str) -> Pool:
    """A pool over a column packed by this module (its offsets are whole by construction)."""
    pool = Pool.from_packed(data, offsets, kind)
    pool._whole = True
    return pool
