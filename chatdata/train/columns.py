"""Per-token columns: how every collate finds, checks, widens and pads the columns a row carries.

A row is a dict (or a TensorDict item, as ``Rollout.tokens()[i]`` gives) with a 1-D integer
``input_ids``. Its **per-token columns** are, whatever their names:

* every ``torch.Tensor`` or numeric (bool, integer, float) numpy array entry with at least one
  dim. Its first dim must equal ``len(input_ids)``: a ValueError names the row and the column
  otherwise;
* a list or tuple under one of the names in :data:`LIST_COLUMNS` (``[1, 0, 1]`` masks and
  labels, written by hand).

``assistant_masks`` holds one flag per token (1-D), and ``labels`` token ids or -100; a
ValueError names the row otherwise. TRL's ``completion_mask`` is folded into ``assistant_masks``
and a TRL-packed row's ``seq_lengths`` is read as its sequences' boundaries
(:mod:`.trl_columns`). Not columns: ``attention_mask``, ``position_ids`` and
``seq_idx`` (each collate builds its own), 0-d tensors, numbers, strings, numpy arrays of strings or objects,
``None`` and other objects (per-row data such as a session id or a History). The collates leave
them out. ``column_dtypes`` (a dict ``name -> dtype name``) says that those
columns are stored narrower than their dtype (``Rollout.tokens()`` keeps routed-expert ids as
uint8); they come out of :func:`gather_rows` in their own dtype again.

A row that lacks a column other rows of the batch carry is refused (a ValueError naming both rows):
zeros there would be data, a logprob of 0 being a probability of 1 and a weight of 0 "not
trained". Two columns have a rule instead: ``labels`` (the row's ids where its mask is set, else
all its ids) and ``assistant_masks`` (all set: a row without a mask trains every token). :func:`gather_rows` returns the batch as flat columns plus offsets
(:class:`FlatRows`), with no Python loop over tokens; :func:`pad_rows` lays a flat column out as
``(N, L, ...)``.

Example:
    >>> rows = [{"input_ids": [5, 6, 7], "logprobs": torch.tensor([0.0, -0.5, -0.25]), "session": "a"},
    ...         {"input_ids": torch.tensor([8, 9]), "logprobs": [-1.0, -2.0], "assistant_masks": [False, True]}]
    >>> flat = gather_rows(rows)
    >>> sorted(flat.columns), flat.columns["logprobs"].tolist(), flat.offsets.tolist()
    (['assistant_masks', 'logprobs'], [0.0, -0.5, -0.25, -1.0, -2.0], [0, 3, 5])
    >>> flat.columns["assistant_masks"].tolist()  # row 0 has no mask: every token trained
    [True, True, True, False, True]
    >>> pad_rows(flat.columns["logprobs"], flat.offsets, 3).tolist()
    [[0.0, -0.5, -0.25], [-1.0, -2.0, 0.0]]
"""
from __future__ import annotations

import json
from collections.abc import Mapping

import numpy as np
import torch

from ..td.core import is_integer_dtype
from .dataset import IGNORE_INDEX, TokenRows
from .trl_columns import SEQ_LENGTHS, check_seq_lengths, fold_completion_mask, packed_row_refused
from .weights_column import reconcile_loss_weights

__all__ = ["FlatRows", "gather_rows", "pad_rows", "pad_index", "padded_index", "make_labels", "widen_columns",
           "LIST_COLUMNS", "SKIPPED_COLUMNS", "COLUMN_DTYPES"]

LIST_COLUMNS = ("labels", "assistant_masks", "completion_mask", "logprobs", "advantages", "loss_weights", "routed_experts")
SKIPPED_COLUMNS = ("attention_mask", "position_ids", "seq_idx")
COLUMN_DTYPES = "column_dtypes"


class FlatRows:
    """A batch as flat columns: ``ids`` (int64, all rows' tokens), ``offsets`` (numpy int64,
    ``N + 1``) and ``columns`` (name -> flat tensor whose first dim is the total). ``pieces``: when
    a row packs several sequences (TRL's ``seq_lengths``), the lengths of every sequence of every
    row in order (numpy int64), else None."""

    __slots__ = ("ids", "offsets", "columns", "pieces")

    def __init__(self, ids: torch.Tensor, offsets: np.ndarray, columns: dict, pieces: np.ndarray | None = None):
        self.ids, self.offsets, self.columns, self.pieces = ids, offsets, columns, pieces

    @property
    def lengths(self) -> np.ndarray:
        return self.offsets[1:] - self.offsets[:-1]

    def __len__(self) -> int:
        return self.offsets.size - 1


def _dtype_map(value) -> dict:
    """``column_dtypes`` as a dict (it may come back from disk as a JSON string)."""
    if value is None:
        return {}
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, Mapping):
        raise TypeError(f"{COLUMN_DTYPES} must map column names to dtype names, got {type(value).__name__}")
    return dict(value)


def widen_columns(columns: dict, dtypes) -> dict:
    """``columns`` with every column ``dtypes`` names cast back to its own dtype (values unchanged).

    Example:
        >>> widen_columns({"e": torch.tensor([3], dtype=torch.uint8)}, {"e": "int16"})["e"].dtype
        torch.int16
    """
    dtypes = _dtype_map(dtypes)
    for name, dtype_name in dtypes.items():
        if name in columns:
            dtype = getattr(torch, str(dtype_name), None)
            if not isinstance(dtype, torch.dtype):
                raise ValueError(f"{COLUMN_DTYPES}: {dtype_name!r} (for column {name!r}) is not a torch dtype")
            columns[name] = columns[name].to(dtype)
    return columns


def _as_ids(x, j: int) -> torch.Tensor:
    if isinstance(x, (str, bytes)) or x is None:
        raise TypeError(f"row {j}: input_ids must be a list or tensor of integer ids, got {type(x).__name__}")
    try:
        t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x) if isinstance(x, np.ndarray) else x)
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(f"row {j}: input_ids must be a list or tensor of integer ids, got {type(x).__name__} "
                        f"({err})") from None
    if t.ndim != 1:
        raise ValueError(f"row {j}: input_ids must be 1-D, got shape {tuple(t.shape)}")
    if t.numel() and not is_integer_dtype(t.dtype):
        raise TypeError(f"row {j}: input_ids must hold integer ids, got dtype {t.dtype}")
    return t.to(torch.int64)


def _row_columns(row, j: int, n: int) -> dict:
    """The per-token columns of one row (see the module docstring), checked against ``n`` ids."""
    out = {}
    for name in row.keys():
        if name == "input_ids" or name in SKIPPED_COLUMNS or name == COLUMN_DTYPES or name == SEQ_LENGTHS:
            continue
        v = row[name]
        if isinstance(v, np.ndarray):
            if v.ndim == 0 or v.dtype.kind not in "biuf":  # strings, objects, dates: per-row data, not numbers
                continue
            v = torch.from_numpy(np.ascontiguousarray(v))
        elif isinstance(v, (list, tuple)) and name in LIST_COLUMNS:
            v = torch.as_tensor(v)
            if v.numel() == 0 and n == 0:
                v = v.reshape(0)
        elif not isinstance(v, torch.Tensor) or v.ndim == 0:
            continue
        if v.ndim == 0 or v.shape[0] != n:
            raise ValueError(f"row {j}: {name} has {v.shape[0] if v.ndim else 0} entries along its first dim "
                             f"(shape {tuple(v.shape)}) but input_ids has {n}: a per-token column needs one entry per token")
        if name == "assistant_masks":
            _check_mask(v, f"row {j}: ")
        out[name] = v
    widen_columns(out, _dtype_map(row[COLUMN_DTYPES]) if COLUMN_DTYPES in row.keys() else None)
    fold_completion_mask(out, f"row {j}: ")
    return out


def _check_mask(mask: torch.Tensor, where: str) -> None:
    """An ``assistant_masks`` column holds one flag per token: a (T, k) one would broadcast the labels
    made from it to (T, k) (a padded batch then had labels of shape (B, L, k))."""
    if mask.ndim != 1:
        raise ValueError(f"{where}assistant_masks must hold one flag per token (1-D, like input_ids), got shape "
                         f"{tuple(mask.shape)}")


def _labels_column(y: torch.Tensor, where: str) -> torch.Tensor:
    """A ``labels`` column the rows give, as a fresh int64 tensor: float labels (cut silently by a
    cast) and bool ones are refused, as is more than one label per token."""
    if y.ndim != 1 or y.dtype.is_floating_point or y.dtype.is_complex or y.dtype == torch.bool:
        raise TypeError(f"{where}labels must be 1-D integer ids (-100 where not trained), got shape "
                        f"{tuple(y.shape)} and dtype {y.dtype}")
    return y.to(torch.int64, copy=True)


def _check_labels(flat: FlatRows) -> None:
    """Refuse a negative label other than -100 (one pass over the batch): the loss would stop with
    torch's "Target -1 is out of bounds", far from here (-100 is what cross-entropy ignores)."""
    labels = flat.columns["labels"]
    if not labels.numel() or labels.device.type != "cpu":
        return
    ln = labels.numpy()
    bad = (ln < 0) & (ln != IGNORE_INDEX)
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        j = int(np.searchsorted(flat.offsets, at, side="right")) - 1
        raise ValueError(f"row {j}: labels holds {int(ln[at])} at position {at - int(flat.offsets[j])}: a label is a "
                         f"token id >= 0, or {IGNORE_INDEX} where the token is not trained (the value cross-entropy "
                         "ignores; replace other ignore values such as -1 with -100)")


def _cat(parts: list) -> torch.Tensor:
    """The rows' pieces of a column as one tensor: numpy's concatenate where it can (cheaper on small
    batches), torch's for bfloat16, mixed dtypes and columns that carry autograd history
    (logprobs of a forward run with grad: they keep it, as :func:`pad_rows` does)."""
    dtype = parts[0].dtype
    if dtype != torch.bfloat16 and all(p.dtype == dtype and not p.requires_grad for p in parts):
        return torch.from_numpy(np.concatenate([p.numpy() for p in parts]))
    return torch.cat(parts)


def make_labels(ids: torch.Tensor, masks: torch.Tensor | None) -> torch.Tensor:
    """Labels from ids and an assistant mask: the id where the mask is set, else -100 (a new tensor).

    Example:
        >>> make_labels(torch.tensor([4, 5]), torch.tensor([0, 1])).tolist()
        [-100, 5]
    """
    if masks is None:
        return ids.clone()
    return ids.masked_fill(~masks.to(torch.bool), IGNORE_INDEX)


def _from_list(rows, allow_empty: bool, labels: bool) -> FlatRows:
    if isinstance(rows, (Mapping, str, bytes)) or hasattr(rows, "keys") or not hasattr(rows, "__len__"):
        raise TypeError(f"rows must be a list of dicts (one per sequence), got {type(rows).__name__}"
                        f"{' (one row: wrap it in a list)' if hasattr(rows, 'keys') else ''}")
    if len(rows) == 0:
        raise ValueError("cannot collate an empty batch: rows is empty")
    ids, cols, pieces = [], [], {}
    for j, row in enumerate(rows):
        if not (hasattr(row, "keys") and hasattr(row, "__getitem__")) or "input_ids" not in row.keys():
            raise ValueError(f"row {j} must be a dict with an 'input_ids' entry, got {type(row).__name__}"
                             f"{' with keys ' + str(sorted(row.keys())) if hasattr(row, 'keys') else ''}")
        x = _as_ids(row["input_ids"], j)
        if x.numel() == 0 and not allow_empty:
            raise ValueError(f"row {j}: input_ids is empty (a row needs at least one token)")
        c = _row_columns(row, j, x.numel())
        if SEQ_LENGTHS in row.keys() and row[SEQ_LENGTHS] is not None:
            pieces[j] = check_seq_lengths(row[SEQ_LENGTHS], x.numel(), f"row {j}: ")
        if "labels" in c:
            c["labels"] = _labels_column(c["labels"], f"row {j}: ")
        elif labels:
            c["labels"] = make_labels(x, c.get("assistant_masks"))
        ids.append(x)
        cols.append(c)
    lengths = np.fromiter((t.numel() for t in ids), dtype=np.int64, count=len(ids))
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    names = list(dict.fromkeys(name for c in cols for name in c))
    columns = {}
    for name in names:
        like = next(c[name] for c in cols if name in c)
        parts = []
        for j, c in enumerate(cols):
            v = c.get(name)
            if v is None:
                v = _missing(name, j, ids[j], like, cols)
            elif v.shape[1:] != like.shape[1:]:
                raise ValueError(f"row {j}: {name} has per-token shape {tuple(v.shape[1:])} but an earlier "
                                 f"row has {tuple(like.shape[1:])}: every row must give a column the same trailing shape")
            parts.append(v)
        columns[name] = _cat(parts)
    flat_ids = torch.from_numpy(np.concatenate([t.numpy() for t in ids]))
    # every row's sequences in order (a row without seq_lengths is one sequence), if a row packs several
    packed = np.concatenate([pieces.get(j, lengths[j:j + 1]) for j in range(len(ids))]) if pieces else None
    return FlatRows(flat_ids, offsets, columns, packed)


def _missing(name: str, j: int, ids: torch.Tensor, like: torch.Tensor, cols: list) -> torch.Tensor:
    """The ``name`` column of row ``j``, which lacks it while another row has it: ``labels`` by the
    rows' rule (its ids where its mask is set), ``assistant_masks`` all set (a row without a mask
    trains every token, as its labels say); any other column is refused, since zeros would be data
    (a logprob of 0 is a probability of 1, a weight of 0 not trained)."""
    if name == "labels":
        return make_labels(ids, cols[j].get("assistant_masks"))
    if name == "assistant_masks":
        return torch.ones((ids.numel(), *like.shape[1:]), dtype=torch.bool)
    k = next(i for i, c in enumerate(cols) if name in c)
    raise ValueError(f"row {j} has no {name} but row {k} has: give every row of a batch its {name}, or none "
                     "(filling it in would be data: a logprob of 0 is a probability of 1)")


def _from_ragged(rows, allow_empty: bool, labels: bool) -> FlatRows:
    """A ragged token set (``Rollout.tokens()``, ``apply_chat_template`` output) without a loop over rows."""
    values = rows.values
    offsets = rows.offsets.numpy().astype(np.int64, copy=False)
    if offsets.size < 2:
        raise ValueError("cannot collate an empty batch: the ragged stack holds no rows")
    ids = values.get("input_ids") if "input_ids" in values.keys() else None
    if not isinstance(ids, torch.Tensor) or ids.ndim != 1:
        raise ValueError("the ragged stack must hold a flat 'input_ids' column of token ids")
    lengths = offsets[1:] - offsets[:-1]
    if not allow_empty and not lengths.all():
        j = int(np.flatnonzero(lengths == 0)[0])
        raise ValueError(f"row {j}: input_ids is empty (a row needs at least one token)")
    if SEQ_LENGTHS in values.keys():
        raise ValueError(f"the ragged stack holds {SEQ_LENGTHS} (rows packed by TRL's pack_dataset): pass its rows "
                         "as a list of dicts, each with its seq_lengths, to collate_padding_free")
    columns = {}
    for name in values.keys():
        if name == "input_ids" or name in SKIPPED_COLUMNS or name == COLUMN_DTYPES:
            continue
        v = values.get(name)
        if isinstance(v, torch.Tensor) and v.ndim >= 1:
            columns[name] = v
    if COLUMN_DTYPES in values.keys():
        widen_columns(columns, values[COLUMN_DTYPES])
    fold_completion_mask(columns, "the ragged stack's ")
    if "assistant_masks" in columns:
        _check_mask(columns["assistant_masks"], "the ragged stack's ")
    ids = ids.to(torch.int64)
    if "labels" in columns:
        columns["labels"] = _labels_column(columns["labels"], "the ragged stack's ")
    elif labels:
        columns["labels"] = make_labels(ids, columns.get("assistant_masks"))
    return FlatRows(ids, offsets, columns)


def gather_rows(rows, *, allow_empty: bool = True, labels: bool = False, packed: bool = False) -> FlatRows:
    """The rows of a batch as :class:`FlatRows`; see the module docstring.

    ``rows``: a list of dicts / TensorDict items, the :class:`TokenRows` a ``TokenDataset`` gives a
    ``DataLoader``, or a ragged token set (``Rollout.tokens()``). ``labels=True`` adds a
    ``labels`` column: the row's own, else its ids where ``assistant_masks`` is set (-100
    elsewhere), else its ids. ``allow_empty=False`` refuses a row without tokens. ``packed=True``
    accepts rows that pack several sequences (``seq_lengths``; ``flat.pieces``); else they are refused.

    Example:
        >>> gather_rows([{"input_ids": [1, 2], "assistant_masks": [0, 1]}], labels=True).columns["labels"].tolist()
        [-100, 2]
    """
    flat = _gather(rows, allow_empty, labels)
    if flat.pieces is not None and not packed:  # a row of one sequence (seq_lengths [n]) is a plain row
        several = [j for j in range(len(flat)) if _packs_several(rows[j])]
        if several:
            raise packed_row_refused(several[0], "a padded batch or a prefix tree")
        flat.pieces = None
    _check_ids(flat)
    if "labels" in flat.columns and not (isinstance(rows, TokenRows) and "labels" not in rows.columns):
        _check_labels(flat)  # (a TokenDataset's labels are its checked ids or -100)
    masks = flat.columns.get("assistant_masks")
    if masks is not None and masks.dtype != torch.bool:  # a mask of 2 or 0.5 means trained, as in the labels
        flat.columns["assistant_masks"] = masks != 0
    reconcile_loss_weights(flat.columns)  # a weight of 0: not trained (labels -100, mask off)
    return flat


def _packs_several(row) -> bool:
    """Whether a (checked) row's ``seq_lengths`` holds more than one sequence with tokens."""
    if not (hasattr(row, "keys") and SEQ_LENGTHS in row.keys() and row[SEQ_LENGTHS] is not None):
        return False
    return int(np.count_nonzero(np.asarray(row[SEQ_LENGTHS].tolist() if isinstance(row[SEQ_LENGTHS], torch.Tensor)
                                           else row[SEQ_LENGTHS]))) > 1


def _check_ids(flat: FlatRows) -> None:
    """Refuse a negative token id (one min over the batch): it would index the embedding table
    from the end, or, as -100, silently be a label that is never trained."""
    ids = flat.ids
    if not ids.numel():
        return
    low = int(ids.numpy().min()) if ids.device.type == "cpu" else int(ids.min())
    if low < 0:
        at = int(np.flatnonzero(ids.cpu().numpy() == low)[0])
        j = int(np.searchsorted(flat.offsets, at, side="right")) - 1
        raise ValueError(f"row {j}: input_ids holds {low} at position {at - int(flat.offsets[j])}: token ids "
                         "must be >= 0 (padding and ignored labels belong in labels/attention, not in the ids)")


def _gather(rows, allow_empty: bool, labels: bool) -> FlatRows:
    if isinstance(rows, TokenRows):
        offsets = rows.offsets.numpy().astype(np.int64, copy=False)
        if offsets.size < 2:
            raise ValueError("cannot collate an empty batch: rows is empty")
        lengths = offsets[1:] - offsets[:-1]
        if not allow_empty and not lengths.all():
            j = int(np.flatnonzero(lengths == 0)[0])
            raise ValueError(f"row {j}: input_ids is empty (a row needs at least one token)")
        columns = {"assistant_masks": rows.assistant_masks, **rows.columns}
        folded = fold_completion_mask(columns, "the rows' ")
        # every TokenDataset item has labels: a batch of them does too (a fresh tensor)
        columns["labels"] = _labels_column(columns["labels"], "the rows' ") if "labels" in rows.columns \
            else make_labels(rows.input_ids, columns["assistant_masks"]) if folded else rows.labels
        return FlatRows(rows.input_ids, offsets, columns)
    if hasattr(rows, "offsets") and hasattr(rows, "values") and hasattr(rows, "keys"):
        return _from_ragged(rows, allow_empty, labels)
    return _from_list(rows, allow_empty, labels)


def padded_index(offsets: np.ndarray, L: int, left: bool = False) -> torch.Tensor:
    """Flat positions, in an ``(N, L)`` layout, of every token of rows cut by ``offsets``.

    Example:
        >>> padded_index(np.array([0, 2, 3]), 3).tolist(), padded_index(np.array([0, 2, 3]), 3, left=True).tolist()
        ([0, 1, 3], [1, 2, 5])
    """
    lengths = offsets[1:] - offsets[:-1]
    total = int(offsets[-1])
    row = np.repeat(np.arange(lengths.size, dtype=np.int64), lengths)
    col = np.arange(total, dtype=np.int64) - offsets[:-1][row]
    if left:
        col += (L - lengths)[row]
    return torch.from_numpy(row * L + col)


#: rows at least this long on average are laid out by slice copies, one per row (memcpy speed);
#: shorter ones by one scatter over a position index (fewer Python steps per token)
ROW_COPY_MIN_MEAN = 128


def pad_index(offsets: np.ndarray, L: int, left: bool = False) -> torch.Tensor | None:
    """The ``index`` to share between :func:`pad_rows` calls over the same rows: the positions of
    :func:`padded_index` when the rows are short, else None (``pad_rows`` then copies row by row).

    Example:
        >>> pad_index(np.array([0, 2, 3]), 3).tolist(), pad_index(np.array([0, 300, 600]), 300)
        ([0, 1, 3], None)
    """
    n = offsets.size - 1
    if n > 0 and int(offsets[-1]) >= ROW_COPY_MIN_MEAN * n:
        return None
    return padded_index(offsets, L, left)


def pad_rows(flat: torch.Tensor, offsets: np.ndarray, L: int, pad=0, left: bool = False,
             index: torch.Tensor | None = None) -> torch.Tensor:
    """A flat column ``(total, ...)`` laid out per row as ``(N, L, ...)``, ``pad`` elsewhere.

    ``index`` (from :func:`pad_index`) saves recomputing the positions for each column; without
    one, long rows are copied slice by slice and short ones scattered.

    Example:
        >>> pad_rows(torch.tensor([1, 2, 3]), np.array([0, 1, 3]), 2, pad=-1).tolist()
        [[1, -1], [2, 3]]
    """
    n = offsets.size - 1
    shape = (n * L, *flat.shape[1:])
    if flat.dtype == torch.bfloat16 or flat.requires_grad or flat.device.type != "cpu":
        if index is None:
            index = padded_index(offsets, L, left)
        out = torch.full(shape, pad, dtype=flat.dtype, device=flat.device)
        out[index.to(flat.device)] = flat
        return out.reshape(n, L, *flat.shape[1:])
    src = flat.numpy()
    if index is None and n > 0 and int(offsets[-1]) >= ROW_COPY_MIN_MEAN * n:
        arr = np.empty((n, L, *flat.shape[1:]), dtype=src.dtype)
        for j, (a, b) in enumerate(zip(offsets[:-1].tolist(), offsets[1:].tolist())):
            m = b - a
            if left:
                arr[j, :L - m] = pad
                arr[j, L - m:] = src[a:b]
            else:
                arr[j, :m] = src[a:b]
                arr[j, m:] = pad
        return torch.from_numpy(arr)
    if index is None:
        index = padded_index(offsets, L, left)
    # numpy's scatter: torch's index_put stalls for ms on a busy machine (thread-pool waits)
    arr = np.full(shape, pad, dtype=src.dtype)
    arr[index.numpy()] = src
    return torch.from_numpy(arr).reshape(n, L, *flat.shape[1:])
