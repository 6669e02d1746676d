"""Tokens as chips: the text, id, loss weight and role of every token of a sequence.

Two sources:

- :func:`chips_from_rendering`: a rendered chat with its weighted spans (what
  ``render_chats_with_weights`` gives) and a tokenizer. Ids and weights come from
  :func:`~chatdata.templates.tokenize_chats`, the code that tokenizes datasets, so the chips show
  exactly what training gets; each chip's text is the slice of the rendering its token covers, and
  its role that of the heaviest span it touches.
- :func:`chips_from_ids`: a row of a token set (ids, and the mask or weights); the text is decoded
  token by token (with a few tokens of context, so byte-level pieces of one character decode
  whole), the role is unknown (None).

Example:
    >>> from chatdata.templates import WeightedSpan
    >>> from chatdata.data import load_sample_tokenizer
    >>> tok = load_sample_tokenizer()
    >>> chips = chips_from_rendering("<|im_start|>user\\nhi<|im_end|>", [WeightedSpan(17, 19, 0.5, 0, "user")], tok)
    >>> [(c.text, c.weight, c.role) for c in chips]
    [('<|im_start|>', 0.0, None), ('user', 0.0, None), ('\\n', 0.0, None), ('hi', 0.5, 'user'), ('<|im_end|>', 0.0, None)]
"""
from __future__ import annotations

import bisect
from typing import Any, NamedTuple, Sequence

import torch

from ..templates.backend import rust_backend, unpadded

__all__ = ["TokenChip", "chips_from_rendering", "chips_from_ids", "check_weights", "row_tensor"]


class TokenChip(NamedTuple):
    """One token: its ``text``, ``token_id``, loss ``weight`` (0: not trained), the ``role`` and
    ``message`` index of the trained turn it belongs to (None when unknown or not trained)."""

    text: str
    token_id: int
    weight: float
    role: str | None
    message: int | None


def _offsets(tokenizer: Any, text: str) -> list[tuple[int, int]]:
    backend = rust_backend(tokenizer)
    if backend is not None:  # padding / truncation a caller's tok(...) left on it: off, as for every direct encode
        return [tuple(o) for o in unpadded(backend).encode(text, add_special_tokens=False).offsets]
    if not getattr(tokenizer, "is_fast", False):
        raise TypeError("the token view needs a fast tokenizer (one with character offsets)")
    return [tuple(o) for o in tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]]


def chips_from_rendering(text: str, spans: Sequence, tokenizer: Any) -> list[TokenChip]:
    """Chips of one rendered chat; ``spans`` are its weighted spans (``WeightedSpan`` or any
    ``(start, end, weight, message, role)`` tuples)."""
    from ..templates import tokenize_chats

    spans = sorted(spans, key=lambda s: (s[0], s[1]))
    enc = tokenize_chats([text], [[(s[0], s[1]) for s in spans]], tokenizer, return_assistant_tokens_mask=True,
                         span_weights=[[float(s[2]) for s in spans]])
    ids = enc["input_ids"][0].tolist()
    weights = enc["loss_weights"][0].tolist()
    offsets = _offsets(tokenizer, text)
    if len(offsets) != len(ids):
        raise ValueError(f"the tokenizer gave {len(offsets)} offsets for {len(ids)} tokens")
    starts = [s[0] for s in spans]
    chips, pos = [], 0
    for tid, w, (a, b) in zip(ids, weights, offsets):
        role = message = None
        if w > 0:  # the heaviest span this token touches
            best = None
            for j in range(max(0, bisect.bisect_right(starts, a) - 1), len(spans)):
                s = spans[j]
                if s[0] >= max(b, a + 1):
                    break
                if s[1] > a and (best is None or s[2] > best[2]):
                    best = s
            if best is not None:
                role, message = best[4], best[3]
        piece = text[pos:b] if b > pos else ""
        pos = max(pos, b)
        chips.append(TokenChip(piece, int(tid), float(w), role, message))
    if pos < len(text) and chips:  # text no token covers (trailing): keep it visible
        last = chips[-1]
        chips[-1] = last._replace(text=last.text + text[pos:])
    return chips


def row_tensor(values, what: str, n: int | None = None) -> torch.Tensor:
    """``values`` (a sequence or a tensor) as a 1-D tensor of ``n`` items (any length when None);
    TypeError / ValueError naming ``what`` otherwise."""
    try:
        t = values if isinstance(values, torch.Tensor) else torch.as_tensor(values)
    except (TypeError, ValueError, RuntimeError, OverflowError) as err:
        raise TypeError(f"{what} must be a 1-D sequence of numbers or a tensor, got {values!r:.60} ({err})") from None
    if t.ndim != 1:
        raise ValueError(f"{what} must be 1-D (one row of a token set), got shape {tuple(t.shape)}")
    if n is not None and len(t) != n:
        raise ValueError(f"{what} has {len(t)} items but the row has {n} token ids; they must be as long")
    if t.is_complex():
        raise TypeError(f"{what} must hold real numbers, got {t.dtype}")
    return t


def check_weights(weights: torch.Tensor, what: str = "weights") -> None:
    """ValueError naming the first token whose weight is NaN or infinite (one bulk pass)."""
    if weights.is_floating_point():
        bad = ~torch.isfinite(weights)
        if bool(bad.any()):
            i = int(bad.nonzero()[0])
            raise ValueError(f"{what}: token {i} has weight {weights[i].item()}; loss weights must be finite")


def chips_from_ids(ids: Sequence[int] | torch.Tensor, weights: Sequence[float] | torch.Tensor, tokenizer: Any,
                   context: int = 6) -> list[TokenChip]:
    """Chips of a token-set row: ``ids`` and per-token ``weights`` (the loss weights, or the
    assistant mask as 0/1); the text of each token is decoded with ``context`` tokens before it.

    Example:
        >>> from chatdata.data import load_sample_tokenizer
        >>> tok = load_sample_tokenizer()
        >>> ids = tok.encode("café 👋", add_special_tokens=False)
        >>> "".join(c.text for c in chips_from_ids(ids, [1] * len(ids), tok))
        'café 👋'
    """
    if isinstance(context, bool) or not isinstance(context, int) or context < 0:
        raise ValueError(f"context must be an int >= 0 (tokens decoded before each token), got {context!r}")
    ids_t = row_tensor(ids, "ids")
    if len(ids_t) and (ids_t.is_floating_point() or ids_t.dtype == torch.bool):
        raise TypeError(f"ids must be integers, got {ids_t.dtype}")
    vocab = len(tokenizer) if hasattr(tokenizer, "__len__") else None
    if len(ids_t) and vocab is not None:
        bad = (ids_t < 0) | (ids_t >= vocab)
        if bool(bad.any()):
            i = int(bad.nonzero()[0])
            raise ValueError(f"token {i} has id {int(ids_t[i])}, outside the tokenizer's vocabulary [0, {vocab})")
    w_t = row_tensor(weights, "weights", len(ids_t))
    check_weights(w_t)
    ids = [int(i) for i in ids_t.tolist()]
    weights = [float(w) for w in w_t.tolist()]

    def decode(seq):
        return tokenizer.decode(seq, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    pieces: list[str] = []
    for i, tid in enumerate(ids):
        lo = max(0, i - context)
        before, upto = decode(ids[lo:i]), decode(ids[lo:i + 1])
        piece = upto[len(before):] if upto.startswith(before) else decode([tid])
        if before.endswith("\ufffd") and not upto.endswith("\ufffd"):
            # this token completes a character whose first bytes came before (decoded as U+FFFD):
            # it shows the whole character, the earlier pieces lose their U+FFFD
            k = len(before) - len(before.rstrip("\ufffd"))
            piece = upto[len(before) - k:]
            j = len(pieces) - 1
            while k and j >= 0:
                kept = pieces[j].rstrip("\ufffd")
                cut = min(k, len(pieces[j]) - len(kept))
                pieces[j] = pieces[j][:len(pieces[j]) - cut]
                k -= cut
                j -= 1
        pieces.append(piece)
    return [TokenChip(p, tid, w, "trained" if w > 0 else None, None) for p, tid, w in zip(pieces, ids, weights)]
