"""Streaming UTF-8 validation of a data file read in pieces, at memory speed for mostly-ASCII
text: :class:`_Utf8Check` (used by :func:`chatdata.td.storage.verify.verify` on string and
JSON columns; lone surrogates are allowed, as the writer stores them).

Example:
    >>> check = _Utf8Check()
    >>> data = "héllo wörld".encode()
    >>> check.feed(data[:2], 0); check.feed(data[2:], 2); check.finish()
    >>> check.bad is None
    True
    >>> bad = _Utf8Check(); bad.feed(b"ok " + bytes([0xFF]), 0); bad.finish(); bad.bad
    3
"""
from __future__ import annotations

import codecs

import numpy as np

__all__ = []

_NONE = np.zeros(0, np.uint8)
_NOPOS = np.zeros(0, np.int64)


_BLOCK = 4096


def _non_ascii(arr: np.ndarray) -> np.ndarray:
    """Positions of the bytes >= 0x80. Per-block maxima first (SIMD, ~10 GB/s), so only the
    blocks holding a non-ASCII byte are searched."""
    if arr.size == 0 or arr.max() < 0x80:
        return _NOPOS
    full = arr.size // _BLOCK * _BLOCK
    if full == 0:
        return np.flatnonzero(arr >= 0x80)
    rows = arr[:full].reshape(-1, _BLOCK)
    blocks = np.flatnonzero(rows.max(axis=1) >= 0x80)
    if blocks.size * 4 > rows.shape[0]:  # dense (e.g. CJK text): search everything
        return np.flatnonzero(arr >= 0x80)
    found = np.flatnonzero(rows[blocks] >= 0x80)
    idx = blocks[found // _BLOCK] * _BLOCK + found % _BLOCK
    if full < arr.size:
        idx = np.concatenate([idx, np.flatnonzero(arr[full:] >= 0x80) + full])
    return idx


class _Utf8Check:
    """Validates a byte stream, fed in pieces, as UTF-8 ("surrogatepass").

    ASCII bytes are never part of a multi-byte character, so the stream is valid exactly when
    every maximal run of non-ASCII bytes is. Each piece's non-ASCII bytes are gathered with
    numpy (runs separated by a space) and only they go through the decoder: mostly-ASCII
    text validates at memory speed. ``bad`` is the position of the first invalid byte.
    """

    def __init__(self):
        self.carry, self.carry_pos = _NONE, _NOPOS  # an unfinished last run of the previous piece
        self.bad = None

    def feed(self, piece, start: int) -> None:
        if self.bad is not None:
            return
        arr = np.frombuffer(piece, np.uint8)
        idx = _non_ascii(arr)
        carried = self.carry.size > 0
        joined = carried and idx.size > 0 and idx[0] == 0  # the carried run goes on here
        if carried and not joined:
            self._decode(self.carry, self.carry_pos)
            self.carry, self.carry_pos = _NONE, _NOPOS
        if idx.size == 0 or self.bad is not None:
            return
        vals, pos = arr[idx], idx + start
        breaks = np.flatnonzero(np.diff(idx) > 1) + 1
        if breaks.size:
            vals = np.insert(vals, breaks, 0x20)
            pos = np.insert(pos, breaks, -1)
        if joined:
            vals, pos = np.concatenate([self.carry, vals]), np.concatenate([self.carry_pos, pos])
        self.carry, self.carry_pos = _NONE, _NOPOS
        if arr[-1] >= 0x80:  # the last run may go on in the next piece: keep its last character back
            leads = np.flatnonzero((vals & 0xC0) != 0x80)
            cut = int(leads[-1]) if leads.size else 0
            if vals.size - cut <= 4:  # longer cannot be one character: decode now, it fails
                self.carry, self.carry_pos = vals[cut:].copy(), pos[cut:].copy()
                vals, pos = vals[:cut], pos[:cut]
        self._decode(vals, pos)

    def finish(self) -> None:
        if self.carry.size and self.bad is None:
            self._decode(self.carry, self.carry_pos)
        self.carry, self.carry_pos = _NONE, _NOPOS

    def _decode(self, vals, pos) -> None:
        if not vals.size:
            return
        try:
            codecs.utf_8_decode(memoryview(vals), "surrogatepass", True)
        except UnicodeDecodeError as err:
            p = pos[min(err.start, pos.size - 1)]
            self.bad = int(p if p >= 0 else pos[min(err.start + 1, pos.size - 1)])
