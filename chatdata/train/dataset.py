"""TokenDataset: a map-style torch Dataset over a token set (ids + assistant masks).

A token set is the ragged stack that ``chatdata tokenize`` writes to a folder, or that
``History.apply_chat_template(tokenize=True, return_dict=True,
return_assistant_tokens_mask=True)`` returns: flat ``input_ids`` and ``assistant_masks``
columns plus int64 offsets (sequence ``i`` is ``offsets[i]:offsets[i+1]``). The dataset reads
the lengths from the offsets alone and slices tokens straight from the memory map when a row
is asked for.

Example (a folder that ``chatdata tokenize`` wrote; ``TokenDataset`` takes the in-memory set too):
    >>> from chatdata.data import load_sample_chats, load_sample_tokenizer
    >>> toks = History.from_chats(load_sample_chats()[:2]).apply_chat_template(
    ...     tokenizer=load_sample_tokenizer(), tokenize=True, return_dict=True,
    ...     return_assistant_tokens_mask=True, add_generation_prompt=False)
    >>> _ = toks.memmap("tokens/")
    >>> ds = TokenDataset("tokens/")
    >>> len(ds), ds[0]["labels"][:3].tolist()
    (2, [-100, -100, -100])
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from ..td.core import is_integer_dtype
from .packing import as_int

__all__ = ["TokenDataset", "TokenRows", "IGNORE_INDEX"]

IGNORE_INDEX = -100  # the label value torch's cross-entropy (and transformers) ignore
_NOT_SIDE = ("input_ids", "assistant_masks", "attention_mask", "position_ids", "column_dtypes")


def side_columns(values) -> dict:
    """The per-token columns of a token set besides ``input_ids`` and ``assistant_masks``
    (``logprobs``, ``loss_weights``, rollout extras, ...), each in its own dtype: columns that
    ``column_dtypes`` lists as stored narrower are widened when rows are read."""
    out = {}
    for name in values.keys():
        v = values.get(name)
        if name not in _NOT_SIDE and isinstance(v, torch.Tensor) and v.ndim >= 1:
            out[name] = v
    dtypes = values["column_dtypes"] if "column_dtypes" in values.keys() else None
    if isinstance(dtypes, str):
        try:
            dtypes = json.loads(dtypes)
        except (ValueError, RecursionError):
            dtypes = ...
    if dtypes is not None and not (isinstance(dtypes, dict) and all(
            isinstance(getattr(torch, str(d), None), torch.dtype) for d in dtypes.values())):
        raise ValueError(f"column_dtypes must be a JSON object of column name -> torch dtype name "
                         f"(e.g. {{\"logprobs\": \"float32\"}}), got {values['column_dtypes']!r:.200}")
    return {name: (t, getattr(torch, str((dtypes or {}).get(name, "")), None) or t.dtype) for name, t in out.items()}


def _labels(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``ids`` where ``mask``, else -100, as a new int64 array (branch-free: (ids + 100) * mask - 100)."""
    out = np.subtract(ids, IGNORE_INDEX, dtype=np.int64)
    out *= mask
    out += IGNORE_INDEX
    return out


class TokenRows(Sequence):
    """Rows gathered from a :class:`TokenDataset` in one go, kept as flat columns.

    ``rows[j]`` is the same dict ``dataset[i]`` gives; the collators also read the flat columns
    (``input_ids``, ``assistant_masks``, ``offsets``) directly, so a batch is assembled without a
    Python loop over its rows.

    Example:
        >>> rows = TokenRows(torch.tensor([5, 6, 7]), torch.tensor([False, True, True]), torch.tensor([0, 1, 3]))
        >>> len(rows), rows[1]["labels"].tolist()
        (2, [6, 7])
    """

    def __init__(self, input_ids: torch.Tensor, assistant_masks: torch.Tensor, offsets: torch.Tensor,
                 columns: dict | None = None):
        ids, masks, offsets = (torch.as_tensor(x) for x in (input_ids, assistant_masks, offsets))
        n = ids.numel()
        if ids.ndim != 1 or (n and not is_integer_dtype(ids.dtype)):
            raise ValueError(f"TokenRows: input_ids must be one flat tensor of integer ids, got shape "
                             f"{tuple(ids.shape)} and dtype {ids.dtype}")
        if masks.shape != ids.shape:
            raise ValueError(f"TokenRows: assistant_masks has shape {tuple(masks.shape)} but input_ids {tuple(ids.shape)}: "
                             "one mask entry per token")
        if offsets.ndim != 1 or offsets.numel() < 1 or not is_integer_dtype(offsets.dtype):
            raise ValueError(f"TokenRows: offsets must be 1-D integers (rows + 1 of them), got shape "
                             f"{tuple(offsets.shape)} and dtype {offsets.dtype}")
        offsets = offsets.to(torch.int64)
        off = offsets.numpy()
        if off[0] != 0 or off[-1] != n or (off.size > 1 and (off[1:] < off[:-1]).any()):
            raise ValueError(f"TokenRows: offsets must rise from 0 to the number of tokens ({n}), got "
                             f"{off[:8].tolist()}{' ...' if off.size > 8 else ''}")
        columns = {} if columns is None else columns
        for name, col in columns.items():
            if not isinstance(col, torch.Tensor) or col.ndim < 1 or col.shape[0] != n:
                raise ValueError(f"TokenRows: column {name!r} must be a tensor with one entry per token ({n}), got "
                                 f"{tuple(col.shape) if isinstance(col, torch.Tensor) else type(col).__name__}")
        self.input_ids = ids.to(torch.int64)
        # a mask of 0/1 (or any) integers is "!= 0", as TokenDataset reads one: its labels were ids * mask
        self.assistant_masks = masks if masks.dtype == torch.bool else masks != 0
        self.offsets = offsets
        self.columns = columns  # other per-token columns, flat like input_ids

    @classmethod
    def _trusted(cls, input_ids: torch.Tensor, assistant_masks: torch.Tensor, offsets: torch.Tensor,
                 columns: dict) -> "TokenRows":
        """Rows a dataset gathered itself (int64 ids, bool mask, offsets from 0, columns sliced alike):
        the checks of ``__init__`` would cost a third of a small batch's gathering, so they are skipped."""
        rows = cls.__new__(cls)
        rows.input_ids, rows.assistant_masks, rows.offsets, rows.columns = input_ids, assistant_masks, offsets, columns
        return rows

    @property
    def loss_weights(self) -> torch.Tensor | None:
        """The flat float32 ``loss_weights`` column, or None when the rows carry none."""
        return self.columns.get("loss_weights")

    @property
    def lengths(self) -> torch.Tensor:
        off = self.offsets.numpy()
        return torch.from_numpy(off[1:] - off[:-1])

    @property
    def labels(self) -> torch.Tensor:
        """Flat labels: ``input_ids`` with -100 where the assistant mask is 0 (a new tensor)."""
        return torch.from_numpy(_labels(self.input_ids.numpy(), self.assistant_masks.numpy()))

    def __len__(self) -> int:
        return self.offsets.numel() - 1

    def __getitem__(self, j):
        if isinstance(j, slice):
            return [self[k] for k in range(*j.indices(len(self)))]
        j = as_int(j, "a row number")
        n = len(self)
        if not -n <= j < n:
            raise IndexError(f"row {j} is out of range for {n} rows")
        j %= n
        a, b = int(self.offsets[j]), int(self.offsets[j + 1])
        ids, mask = self.input_ids[a:b], self.assistant_masks[a:b]
        return {"input_ids": ids, "assistant_masks": mask, "labels": ids.masked_fill(~mask, IGNORE_INDEX),
                **{k: v[a:b] for k, v in self.columns.items()}}


def _open_source(source):
    """(flat input_ids, flat assistant_masks, offsets) of a token-set folder or ragged stack."""
    from ..td import FormatError, RaggedTensorDict, load_memmap

    where = "the source"
    if isinstance(source, (str, Path)):
        where = str(source)
        p = Path(source)
        if not p.exists():
            raise FileNotFoundError(f"{source}: no such token set (make one with `chatdata tokenize DS {source}`)")
        if p.is_dir() and (p / "manifest.json").is_file() and not (p / "meta.json").is_file():
            raise ValueError(f"{source} is a sharded token set: read it with "
                             f"ConcatTokenDataset(chatdata.open_dataset({str(source)!r}))")
        if not p.is_dir() or not (p / "meta.json").is_file():
            raise ValueError(f"{source} is not a token set: expected a folder with a meta.json, "
                             "as written by `chatdata tokenize` or apply_chat_template(...).memmap(path)")
        try:
            source = load_memmap(p)
        except (FormatError, FileNotFoundError, ValueError) as err:
            raise ValueError(f"{source} is not a readable token set: {err}") from None
    if not isinstance(source, RaggedTensorDict):
        raise TypeError(f"{where} is not a token set: expected a tokenized folder or the ragged output of "
                        "History.apply_chat_template(tokenize=True, return_dict=True, "
                        f"return_assistant_tokens_mask=True), got {type(source).__name__}")
    keys = set(source.keys())
    if "input_ids" not in keys:
        raise ValueError(f"{where} is not a token set: it has no input_ids column (columns: {sorted(keys)})")
    if "assistant_masks" not in keys:
        raise ValueError(f"{where} has no assistant_masks column: tokenize with return_assistant_tokens_mask=True "
                         "(`chatdata tokenize` always writes it)")
    values = source.values
    ids, masks = values.get("input_ids"), values.get("assistant_masks")
    for name, t in (("input_ids", ids), ("assistant_masks", masks)):
        if not isinstance(t, torch.Tensor) or t.ndim != 1:
            raise ValueError(f"{where}: {name} must be one flat tensor of tokens, got "
                             f"{type(t).__name__}{'' if not isinstance(t, torch.Tensor) else tuple(t.shape)}")
    if ids.dtype not in _INT_DTYPES:
        raise ValueError(f"{where}: input_ids must be integer token ids, got dtype {ids.dtype}")
    if masks.dtype != torch.bool and masks.dtype not in _INT_DTYPES:
        raise ValueError(f"{where}: assistant_masks must be bool (or 0/1 integers), got dtype {masks.dtype}")
    try:
        side = side_columns(values)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    if "loss_weights" in side:
        w = side["loss_weights"][0]
        if w.ndim != 1 or w.dtype not in _WEIGHT_DTYPES or w.numel() != ids.numel():
            raise ValueError(f"{where}: loss_weights must be one flat float16/bfloat16/float32/float64 column "
                             f"with a weight per token ({ids.numel()}), got {tuple(w.shape)} {w.dtype}")
    return ids, masks, source.offsets, side


_INT_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64)
_WEIGHT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _numpy_or_tensor(t: torch.Tensor):
    """A numpy view of a column when numpy has its dtype (slicing it is cheaper), else the tensor."""
    try:
        return t.numpy()
    except (TypeError, RuntimeError):  # bfloat16 and friends
        return t


def _take(col, dtype: torch.dtype, pieces: list) -> torch.Tensor:
    """The rows ``pieces`` (``(start, stop)`` pairs) of a flat side column, as one tensor of ``dtype``."""
    if isinstance(col, np.ndarray):
        parts = [col[a:b] for a, b in pieces]
        flat = np.concatenate(parts) if parts else col[:0]
        return torch.from_numpy(np.ascontiguousarray(flat)).to(dtype)
    parts = [col[a:b] for a, b in pieces]
    return (torch.cat(parts) if parts else col[:0]).to(dtype)


class TokenDataset(torch.utils.data.Dataset):
    """Map-style dataset of token sequences; see the module docstring.

    ``source``: a tokenized folder (str or Path) or the ragged output of ``apply_chat_template``.
    ``max_length``: optional; longer sequences are cut to their first ``max_length`` tokens (and
    ``lengths`` says so), so a packer never sees a sequence longer than its bins.
    ``ds[i]`` (int or 0-d tensor) is a dict: ``input_ids`` (int64), ``assistant_masks`` (bool)
    and ``labels`` (``input_ids`` with -100 where the mask is 0), plus every other per-token
    column the token set holds (``logprobs``, ``loss_weights``, rollout extras such as
    ``routed_experts``), sliced alike and in the dtype it was given (``attention_mask`` is left
    out: the collates build their own).

    Example:
        >>> from chatdata import History
        >>> from chatdata.data import load_sample_chats, load_sample_tokenizer
        >>> out = History.from_chats(load_sample_chats()[:4]).apply_chat_template(
        ...     tokenizer=load_sample_tokenizer(), tokenize=True, return_dict=True,
        ...     return_assistant_tokens_mask=True, add_generation_prompt=False)
        >>> ds = TokenDataset(out)
        >>> len(ds), ds.lengths.dtype, sorted(ds[0])
        (4, torch.int64, ['assistant_masks', 'input_ids', 'labels'])
    """

    def __init__(self, source, max_length: int | None = None):
        ids, masks, offsets, side = _open_source(source)
        if offsets.numel() < 2:
            raise ValueError(f"{source if isinstance(source, (str, Path)) else 'the source'} holds no sequences: "
                             "an empty token set cannot be trained on")
        if max_length is not None:
            if isinstance(max_length, (bool, np.bool_)) or not isinstance(max_length, (int, np.integer)) \
                    or max_length <= 0:
                raise ValueError(f"max_length must be a positive int or None, got {max_length!r}")
            max_length = int(max_length)
        self._ids, self._masks = ids, masks
        # numpy views of the (memory-mapped) columns: slicing and gathering small batches in numpy
        # costs microseconds, where torch's intra-op thread pool can cost milliseconds on a busy machine
        self._ids_np, self._masks_np = ids.numpy(), masks.numpy()
        # other per-token columns: name -> (flat column, the dtype rows give it)
        self._side = {name: (_numpy_or_tensor(t), dtype) for name, (t, dtype) in side.items()}
        self.offsets = offsets
        self._starts = offsets[:-1].numpy()
        self._ends = offsets[1:].numpy()
        self.max_length = max_length
        if max_length is not None and self._starts.size:  # a cut past the longest sequence cuts nothing
            cut = min(max_length, int((self._ends - self._starts).max()))
            self._ends = np.minimum(self._ends, self._starts + cut)

    @property
    def lengths(self) -> torch.Tensor:
        """Tokens per sequence (int64), from the offsets only."""
        return torch.from_numpy(self._ends - self._starts)

    @property
    def num_tokens(self) -> int:
        return int((self._ends - self._starts).sum())

    def __len__(self) -> int:
        return self._starts.size

    @property
    def has_loss_weights(self) -> bool:
        """Whether the token set has a ``loss_weights`` column (``chatdata tokenize --loss-weight``)."""
        return "loss_weights" in self._side

    def trained_lengths(self) -> torch.Tensor:
        """Trained tokens per sequence (assistant mask set, and loss weight not 0 when the set has
        weights), int64: one pass over the mask column (and the weights).

        Example: ``ds.trained_lengths().sum() / ds.lengths.sum()`` is the trained share of tokens.
        """
        s, e = self._starts, self._ends
        out = np.zeros(s.size, dtype=np.int64)
        trained = self._masks_np.astype(bool, copy=False)
        if "loss_weights" in self._side:  # a weight of 0 is not trained, as ds[i]'s mask says
            w = self._side["loss_weights"][0]
            trained = trained & (w != 0 if isinstance(w, np.ndarray) else (w != 0).numpy())
        nonempty = e > s
        if nonempty.any():
            idx = np.empty(2 * int(nonempty.sum()), dtype=np.int64)
            idx[0::2], idx[1::2] = s[nonempty], e[nonempty]
            if idx[-1] == trained.size:  # the last segment runs to the end of the column
                idx = idx[:-1]
            out[nonempty] = np.add.reduceat(trained, idx, dtype=np.int64)[0::2]
        return torch.from_numpy(out)

    def _index(self, i) -> int:
        if isinstance(i, torch.Tensor):
            if i.ndim != 0 or i.dtype.is_floating_point or i.dtype == torch.bool:
                raise TypeError(f"a TokenDataset is indexed by an int or a 0-d integer tensor, got a tensor "
                                f"of shape {tuple(i.shape)} and dtype {i.dtype}")
            i = int(i)
        elif isinstance(i, np.integer):
            i = int(i)
        elif not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"a TokenDataset is indexed by an int or a 0-d integer tensor, got {type(i).__name__}")
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of range for a TokenDataset of {n} sequences")
        return i % n

    def __getitem__(self, i) -> dict:
        i = self._index(i)
        a, b = int(self._starts[i]), int(self._ends[i])
        ids = torch.from_numpy(self._ids_np[a:b].astype(np.int64))
        mask = torch.from_numpy(self._masks_np[a:b].astype(bool))
        side = {name: _take(col, dtype, [(a, b)]) for name, (col, dtype) in self._side.items()}
        if "loss_weights" in side:  # a weight of 0 is not trained
            mask &= side["loss_weights"] != 0
        return {"input_ids": ids, "assistant_masks": mask, "labels": ids.masked_fill(~mask, IGNORE_INDEX), **side}

    def __getitems__(self, indices) -> TokenRows:
        """Many rows at once, as flat columns (what ``DataLoader`` calls with a batch sampler)."""
        rows = indices.reshape(-1).numpy() if isinstance(indices, torch.Tensor) else np.asarray(indices)
        if rows.ndim != 1 or (rows.size and rows.dtype.kind not in "iu"):
            raise TypeError(f"a TokenDataset takes a list of int indices, got {type(indices).__name__} "
                            f"of dtype {rows.dtype} and shape {rows.shape}")
        n = len(self)
        if rows.size and (int(rows.min()) < -n or int(rows.max()) >= n):
            raise IndexError(f"indices out of range for a TokenDataset of {n} sequences")
        rows = rows.astype(np.int64, copy=False) % n
        starts, ends = self._starts[rows], self._ends[rows]
        offsets = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(ends - starts, out=offsets[1:])
        pieces = [(a, b) for a, b in zip(starts.tolist(), ends.tolist())]
        if pieces:
            ids = np.concatenate([self._ids_np[a:b] for a, b in pieces], dtype=np.int64)
            mask = np.concatenate([self._masks_np[a:b] for a, b in pieces], dtype=bool, casting="unsafe")  # != 0
        else:
            ids, mask = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        side = {name: _take(col, dtype, pieces) for name, (col, dtype) in self._side.items()}
        if "loss_weights" in side:  # a weight of 0 is not trained (compared in torch: bfloat16 has no numpy)
            mask &= (side["loss_weights"] != 0).numpy()
        return TokenRows._trusted(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(offsets), side)

    def __repr__(self) -> str:
        return f"TokenDataset(sequences={len(self)}, tokens={self.num_tokens}, max_length={self.max_length})"
