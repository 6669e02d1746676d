"""ConcatTokenDataset: one map-style dataset over several token sets (the shards of a sharded
token set, as ``chatdata tokenize --ray`` writes it, or any list of token-set folders).

It keeps one :class:`~chatdata.train.TokenDataset` per part (each maps its folder lazily) and
answers like a single one: ``lengths`` and ``trained_lengths()`` are the parts' concatenated,
``ds[i]`` finds its part with one binary search, and ``ds.__getitems__(rows)`` (what a
``DataLoader`` with a batch sampler calls) gathers a batch as flat columns, part by part.

Example:
    >>> from chatdata.data import load_sample_chats, load_sample_tokenizer
    >>> w = chatdata.open_dataset("tokens", mode="a")
    >>> for a in (0, 3):
    ...     w.append(History.from_chats(load_sample_chats()[a:a + 3]).apply_chat_template(
    ...         tokenizer=load_sample_tokenizer(), tokenize=True, return_dict=True,
    ...         return_assistant_tokens_mask=True, add_generation_prompt=False))
    >>> ds = ConcatTokenDataset(chatdata.open_dataset("tokens"))
    >>> len(ds), ds[4]["input_ids"].shape == (int(ds.lengths[4]),)
    (6, True)
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from .dataset import TokenDataset, TokenRows

__all__ = ["ConcatTokenDataset"]


def _is_empty(source) -> bool:
    """A token set (folder or ragged stack) with no sequences; errors are left to TokenDataset."""
    if isinstance(source, (str, Path)):
        from ..td import load_memmap

        try:
            source = load_memmap(source)
        except Exception:  # TokenDataset reports what is wrong with it
            return False
    offsets = getattr(source, "offsets", None)
    return isinstance(offsets, torch.Tensor) and offsets.numel() == 1


def _side_columns(per_row: list) -> dict:
    """Each side column of the rows, concatenated (every part has the same ones: see
    :func:`_check_side_columns`)."""
    return {name: torch.cat([cols[name] for cols in per_row]) for name in per_row[0]} if per_row else {}


def _check_side_columns(parts: list, where: str) -> None:
    """Refuse parts that do not give the same side columns, in the same dtypes and per-token
    shapes: a column some parts lack has no value there (zeros would be wrong logprobs, or
    untrained tokens for loss_weights), and other dtypes fail the first batch that mixes their
    rows; say so before training starts."""
    seen: dict = {}
    for k, p in enumerate(parts):
        for name, (col, dtype) in p._side.items():
            kind = (dtype, tuple(col.shape[1:]))
            first = seen.setdefault(name, (k, kind))
            if first[1] != kind:
                raise ValueError(f"part {k} of {where} gives side column {name!r} as {kind[0]} of per-token shape "
                                 f"{kind[1]} but part {first[0]} as {first[1][0]} of {first[1][1]}: tokenize every "
                                 "part with the same options")
    for name, (k, _) in seen.items():
        lacking = next((j for j, p in enumerate(parts) if name not in p._side), None)
        if lacking is not None:
            raise ValueError(f"part {lacking} of {where} has no {name!r} column but part {k} has one (a missing "
                             "column has no value to fill in): tokenize (or record) every part with the same options")


class ConcatTokenDataset(torch.utils.data.Dataset):
    """Token sets read as one; see the module docstring.

    ``sources``: a sharded dataset (anything with ``shard_paths()``, e.g.
    ``chatdata.open_dataset("tokens/")``) or a list of token-set folders / ragged stacks /
    TokenDatasets. ``max_length`` cuts every sequence as :class:`TokenDataset` does.

    Example:
        >>> from chatdata import History
        >>> from chatdata.data import load_sample_chats, load_sample_tokenizer
        >>> kw = dict(tokenizer=load_sample_tokenizer(), tokenize=True, return_dict=True,
        ...           return_assistant_tokens_mask=True, add_generation_prompt=False)
        >>> chats = load_sample_chats()[:5]
        >>> ds = ConcatTokenDataset([History.from_chats(chats[:2]).apply_chat_template(**kw),
        ...                          History.from_chats(chats[2:]).apply_chat_template(**kw)])
        >>> len(ds), ds.lengths.shape
        (5, torch.Size([5]))
    """

    def __init__(self, sources, max_length: int | None = None):
        if hasattr(sources, "shard_paths"):
            where = str(getattr(sources, "path", "the sharded dataset"))
            sources = sources.shard_paths()
        else:
            where = "the sources"
        if isinstance(sources, (str, bytes, Mapping)) or not hasattr(sources, "__iter__"):
            raise TypeError("ConcatTokenDataset takes a list of token sets or a sharded dataset "
                            f"(chatdata.open_dataset(path)), got {type(sources).__name__}")
        parts = []
        for s in sources:
            if isinstance(s, TokenDataset):
                if max_length is not None and s.max_length != max_length:
                    raise ValueError("a TokenDataset part has max_length="
                                     f"{s.max_length}, but ConcatTokenDataset was given max_length={max_length}")
                parts.append(s)
            elif not _is_empty(s):  # an empty shard adds nothing (a sharded set may hold one)
                parts.append(TokenDataset(s, max_length=max_length))
        if not parts:
            raise ValueError(f"{where} holds no sequences: an empty token set cannot be trained on")
        _check_side_columns(parts, where)
        self.parts = parts
        self.max_length = max_length
        counts = np.array([len(p) for p in parts], dtype=np.int64)
        self._starts = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum(counts, out=self._starts[1:])

    @property
    def lengths(self) -> torch.Tensor:
        """Tokens per sequence (int64), every part's in order."""
        return torch.cat([p.lengths for p in self.parts])

    @property
    def num_tokens(self) -> int:
        return sum(p.num_tokens for p in self.parts)

    @property
    def has_loss_weights(self) -> bool:
        """Whether the parts have a ``loss_weights`` column (all of them, or none)."""
        return self.parts[0].has_loss_weights

    def trained_lengths(self) -> torch.Tensor:
        """Trained tokens per sequence (mask set, weight not 0), every part's in order."""
        return torch.cat([p.trained_lengths() for p in self.parts])

    def __len__(self) -> int:
        return int(self._starts[-1])

    def _locate(self, i: int) -> tuple[int, int]:
        k = int(np.searchsorted(self._starts, i, side="right")) - 1
        return k, i - int(self._starts[k])

    def __getitem__(self, i) -> dict:
        n = len(self)
        if isinstance(i, torch.Tensor) and i.ndim == 0 and not (i.dtype.is_floating_point or i.dtype == torch.bool):
            i = int(i)
        elif isinstance(i, np.integer):
            i = int(i)
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"a ConcatTokenDataset is indexed by an int or a 0-d integer tensor, got {type(i).__name__}")
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range for a ConcatTokenDataset of {n} sequences")
        k, j = self._locate(i % n)
        return self.parts[k][j]

    def __getitems__(self, indices) -> TokenRows:
        """Many rows at once as flat columns, in the order asked (what ``DataLoader`` calls)."""
        rows = indices.reshape(-1).numpy() if isinstance(indices, torch.Tensor) else np.asarray(indices)
        if rows.ndim != 1 or (rows.size and rows.dtype.kind not in "iu"):
            raise TypeError(f"a ConcatTokenDataset takes a list of int indices, got {type(indices).__name__} "
                            f"of dtype {rows.dtype} and shape {rows.shape}")
        n = len(self)
        if rows.size and (int(rows.min()) < -n or int(rows.max()) >= n):
            raise IndexError(f"indices out of range for a ConcatTokenDataset of {n} sequences")
        rows = rows.astype(np.int64, copy=False) % n
        part_of = np.searchsorted(self._starts, rows, side="right") - 1
        lengths = np.zeros(rows.size, dtype=np.int64)
        pieces: list = [None] * rows.size  # (ids, mask, side columns) per row, filled part by part
        for k in np.unique(part_of).tolist():
            where = np.nonzero(part_of == k)[0]
            got = self.parts[k].__getitems__(rows[where] - self._starts[k])
            off = got.offsets.numpy()
            ids, mask = got.input_ids.numpy(), got.assistant_masks.numpy()
            for w, a, b in zip(where.tolist(), off[:-1].tolist(), off[1:].tolist()):
                pieces[w] = (ids[a:b], mask[a:b], {name: col[a:b] for name, col in got.columns.items()})
                lengths[w] = b - a
        offsets = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if rows.size:
            ids = np.concatenate([p[0] for p in pieces])
            mask = np.concatenate([p[1] for p in pieces])
        else:
            ids, mask = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        return TokenRows._trusted(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(offsets),
                         _side_columns([p[2] for p in pieces]))

    def __repr__(self) -> str:
        return (f"ConcatTokenDataset(parts={len(self.parts)}, sequences={len(self)}, tokens={self.num_tokens}, "
                f"max_length={self.max_length})")
