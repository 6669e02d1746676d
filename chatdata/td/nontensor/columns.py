"""Column-level methods of ``NonTensorStack``: sizes, packed (bytes + offsets) views, value
counts, ``contiguous``. A mixin: the stack's pool (``_pool``), its index
(``_index_t``, ``_index_view``, ``_rng``, ``_ids()``) and ``_from_parts`` come from
:class:`~chatdata.td.nontensor.stack.NonTensorStack`.

Example:
    >>> from chatdata.td import NonTensorStack
    >>> NonTensorStack.from_list(["user", "assistant", "user"]).value_counts()
    {'user': 2, 'assistant': 1}
"""
from __future__ import annotations

from array import array

import numpy as np
import torch

from .pool import Pool, json_text
from .range_index import consecutive_run

__all__ = ["ColumnMethods"]


class ColumnMethods:
    """Mixin of NonTensorStack (see the module docstring)."""

    def contiguous(self, canonical: bool = False):
        """Self: a column is always in its usable form (``canonical`` is accepted for
        tensordict code).

        Example:
            >>> from chatdata.td import NonTensorStack
            >>> s = NonTensorStack("a", "b"); s.contiguous() is s
            True
        """
        return self

    def value_nbytes(self) -> torch.Tensor:
        """Size in bytes of every value's text, with the stack's shape: a string's UTF-8 bytes,
        0 for None, and the JSON text of any other value. Read from the offsets without decoding
        when the column holds only strings.

        Example:
            >>> from chatdata.td import NonTensorStack
            >>> NonTensorStack.from_list(["ab", "é", None]).value_nbytes().tolist()
            [2, 2, 0]
        """
        pool = self._pool
        if pool.is_packed and not pool._extras and pool.kind == "str":
            idx = self._index_view
            off = pool.offsets
            return off[idx + 1] - off[idx]
        sizes = array("q", (len(v.encode("utf-8", "surrogatepass")) if type(v) is str else
                            0 if v is None else len(json_text(v).encode("utf-8", "surrogatepass"))
                            for v in pool.take(self._ids())))
        out = torch.frombuffer(sizes, dtype=torch.int64) if sizes else torch.zeros(0, dtype=torch.int64)
        return out.reshape(self.batch_size)

    def packed_column(self) -> tuple[torch.Tensor, torch.Tensor, str]:
        """The values in order as one packed column: ``(data, offsets, kind)`` with ``data`` a
        uint8 tensor of UTF-8 (``kind="str"``) or JSON text (``"json"``) and ``offsets`` int64
        (``offsets[i]:offsets[i+1]`` is value ``i``; ``offsets[0]`` may be > 0). A 1-D stack over
        a contiguous range of a packed (e.g. memory-mapped) pool, or any view whose values are
        consecutive in it (``h[i]``'s messages), gives views of it, no copy.

        Example:
            >>> from chatdata.td import NonTensorStack
            >>> data, off, kind = NonTensorStack.from_list(["ab", "é"]).packed_column()
            >>> bytes(data[off[0]:off[-1]].numpy()), off.tolist(), kind
            (b'ab\\xc3\\xa9', [0, 2, 4], 'str')
        """
        pool = self._pool
        rng = self._rng
        if rng is None and pool.is_packed and not pool._extras:  # a view of consecutive values (h[i]'s messages)
            rng = consecutive_run(self._index_view.reshape(-1))
        if pool.is_packed and not pool._extras and rng is not None and rng.step == 1:
            pool.check_offsets(rng.start, rng.stop)  # views go to code that trusts them (Arrow)
            return pool.data, pool.offsets[rng.start:rng.stop + 1], pool.kind
        p = pool.packed(self._index_view.reshape(-1))
        return p.data, p.offsets, p.kind

    @classmethod
    def from_packed(cls, data: torch.Tensor, offsets: torch.Tensor, kind: str = "str") -> "NonTensorStack":
        """A 1-D stack over a packed column (no copy): value ``i`` is ``data[offsets[i]:offsets[i+1]]``
        decoded as UTF-8 (``kind="str"``) or JSON (``"json"``); ``offsets[0]`` must be 0.

        Example:
            >>> from chatdata.td import NonTensorStack
            >>> NonTensorStack.from_packed(torch.tensor([104, 105], dtype=torch.uint8), torch.tensor([0, 1, 2])).tolist()
            ['h', 'i']
        """
        if offsets.numel() < 1 or int(offsets[0]) != 0:
            raise ValueError("packed offsets must start at 0")
        if int(offsets[-1]) > data.numel():
            raise ValueError(f"packed offsets end at {int(offsets[-1])}, beyond the {data.numel()} data bytes")
        return cls._from_parts(range(offsets.numel() - 1), Pool.from_packed(data, offsets, kind))

    def value_counts(self) -> dict:
        """How often each distinct value occurs, most frequent first. Short packed strings
        (roles, labels) are counted by a vectorised unique over their bytes, without decoding
        every value.

        Example:
            >>> from chatdata.td import NonTensorStack
            >>> NonTensorStack.from_list(["user", "assistant", "user"]).value_counts()
            {'user': 2, 'assistant': 1}
        """
        from collections import Counter

        pool, n = self._pool, self.numel()
        if not (pool.is_packed and not pool._extras and pool.kind == "str" and n):
            flat = pool.take(self._ids())
            try:
                return dict(Counter(flat).most_common())
            except TypeError:  # unhashable values (dicts, lists): count their JSON text
                counts = Counter(json_text(v) for v in flat)
                return {k: c for k, c in counts.most_common()}
        idx = self._index_view.reshape(-1)
        starts = pool.offsets[idx]
        lens = pool.offsets[idx + 1] - starts
        width = int(lens.max())
        if width > 64:  # long values: decoding them is the cheaper way
            return dict(Counter(pool.take(idx.tolist())).most_common())
        data = pool.data
        cols = torch.arange(max(width, 1), dtype=torch.int64)
        pos = (starts.unsqueeze(1) + cols).clamp(max=max(data.numel() - 1, 0))
        mat = data[pos] if data.numel() else torch.zeros((n, max(width, 1)), dtype=torch.uint8)
        mat = mat.masked_fill(cols >= lens.unsqueeze(1), 0)
        mat = torch.cat([mat, lens.to(torch.uint8).unsqueeze(1)], 1)  # the length too: "a" is not "a\0"
        # each row as one opaque numpy value: np.unique sorts them as bytes, ~20x faster than
        # torch.unique(dim=0) (2.7 s -> 0.13 s for 700k roles)
        keys = np.ascontiguousarray(mat.numpy()).view(f"V{mat.shape[1]}").reshape(-1)
        _, firsts, counts = np.unique(keys, return_index=True, return_counts=True)
        found = {pool.get(int(idx[f])): c for f, c in zip(firsts.tolist(), counts.tolist())}  # decoded exactly
        return dict(sorted(found.items(), key=lambda kv: -kv[1]))

    def packed(self) -> "NonTensorStack":
        """A copy whose values are packed in index order (UTF-8 bytes + offsets)."""
        pool = self._pool.packed(self._index_view)
        index = torch.arange(self.numel(), dtype=torch.long).reshape(self.batch_size)
        return type(self)._from_parts(index, pool, self._device)
