"""Two columns of rows tokenized or packed by TRL, which the collates read rather than pass along.

* ``completion_mask`` (TRL's prompt-completion rows: 0 on the prompt, 1 on the completion) is a
  mask like ``assistant_masks``: a token is trained where every mask the row has is set, as TRL
  builds its labels (``completion_only_loss``). Passed along as a plain column, the prompt
  would have been trained without a word.
* ``seq_lengths`` (a row of TRL's ``pack_dataset(strategy="bfd")``: several sequences laid end to
  end, their lengths in order) splits the row into its sequences: the padding-free collate
  restarts positions, ``cu_seq_lens`` and ``seq_idx`` at each and gives each first token the
  label -100, as TRL's padding-free collator does. A padded batch or a prefix tree cannot keep
  such a row's sequences apart (they would attend to each other), so they refuse it.

Example:
    >>> cols = {"assistant_masks": torch.tensor([True, True, True]), "completion_mask": torch.tensor([0, 1, 1])}
    >>> fold_completion_mask(cols, "row 0: ")
    True
    >>> sorted(cols), cols["assistant_masks"].tolist()
    (['assistant_masks'], [False, True, True])
    >>> check_seq_lengths([2, 1], 3, "row 0: ").tolist()
    [2, 1]
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["COMPLETION_MASK", "SEQ_LENGTHS", "fold_completion_mask", "check_seq_lengths", "packed_row_refused"]

COMPLETION_MASK = "completion_mask"
SEQ_LENGTHS = "seq_lengths"


def fold_completion_mask(columns: dict, where: str) -> bool:
    """Move ``columns["completion_mask"]`` into ``columns["assistant_masks"]`` (their AND, as bools);
    True if there was one. A mask with more than one flag per token is a ValueError naming ``where``.

    Example:
        >>> cols = {"completion_mask": torch.tensor([0, 1])}
        >>> fold_completion_mask(cols, ""), cols["assistant_masks"].tolist()
        (True, [False, True])
    """
    mask = columns.pop(COMPLETION_MASK, None)
    if mask is None:
        return False
    if mask.ndim != 1:
        raise ValueError(f"{where}{COMPLETION_MASK} must hold one flag per token (1-D, like input_ids), got shape "
                         f"{tuple(mask.shape)}")
    keep = mask != 0
    other = columns.get("assistant_masks")
    columns["assistant_masks"] = keep if other is None else keep & (other != 0)
    return True


def check_seq_lengths(value, n: int, where: str) -> np.ndarray:
    """A row's ``seq_lengths`` as int64 numpy: integers >= 0 that add up to its ``n`` tokens, else a
    ValueError naming ``where`` (a row cut after packing no longer matches its lengths).

    Example:
        >>> check_seq_lengths(torch.tensor([3, 0, 2]), 5, "row 1: ").tolist()
        [3, 0, 2]
    """
    try:
        arr = np.asarray(value.tolist() if isinstance(value, torch.Tensor) else value)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{where}{SEQ_LENGTHS} must be a list of sequence lengths, got {type(value).__name__} ({err})") \
            from None
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise TypeError(f"{where}{SEQ_LENGTHS} must be a 1-D list of integer lengths (one per sequence packed in the "
                        f"row), got {value!r:.100}")
    arr = arr.astype(np.int64)
    if arr.size and int(arr.min()) < 0:
        raise ValueError(f"{where}{SEQ_LENGTHS} holds {int(arr.min())}: a sequence length cannot be negative")
    if int(arr.sum()) != n:
        raise ValueError(f"{where}{SEQ_LENGTHS} adds up to {int(arr.sum())} tokens but input_ids has {n}: the row was "
                         "cut or changed after packing; give the lengths of the sequences it holds, in order")
    return arr


def packed_row_refused(j: int, what: str) -> ValueError:
    """The error of a collate that cannot keep a packed row's sequences apart.

    Example:
        >>> str(packed_row_refused(2, "a padded batch"))[:30]
        'row 2 holds seq_lengths: it pa'
    """
    return ValueError(f"row {j} holds {SEQ_LENGTHS}: it packs several sequences (as TRL's pack_dataset writes "
                      f"them), which {what} would let attend to each other; collate it with collate_padding_free "
                      "(positions restart at each sequence), or pass the sequences as rows of their own")
