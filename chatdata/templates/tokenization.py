"""Tokenise rendered chats and turn assistant character spans into token masks.

When the tokenizer has a verified tiktoken twin, ids and masks come from the splice engine
(:mod:`.splice`), checked against the path below once per template and tokenizer. The
reference path: one batch call into the fast tokenizer (``add_special_tokens=False``, as
``apply_chat_template`` does), then a single vectorised torch pass for all masks:

1. all texts are laid end to end; span starts add +1 and span ends -1 to a difference array,
   whose cumulative sum > 0 is a per-character mask;
2. a prefix sum of that mask gives, for every token ``[s, e)`` (offsets shifted into the
   concatenated text), the number of assistant characters it covers: ``cs[e] - cs[s]``;
3. a token is an assistant token iff it covers at least one assistant character (overlap).
   This is what transformers computes for ``{% generation %}`` spans (tokens from the one
   holding the span's first character to the last one holding its last: a character split
   over several byte tokens is in each).

Tokenizers without offsets (slow / Python tokenizers) are handled by encoding each text
piecewise, split at span boundaries, and concatenating; ids can then differ from whole-text
encoding where a token would straddle a span boundary.
"""
from __future__ import annotations

import contextlib
import functools
import gc
from array import array
from typing import Any, Sequence

import torch

from .backend import rust_backend, unpadded
from .token_weights import check_span_weights, piece_weight, token_weights, weights_from_ranges
from .splice import spliced_ids_and_masks


def char_masks_to_token_masks(lengths: Sequence[int], spans: Sequence[Sequence[tuple[int, int]]],
                              offsets: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Per-token assistant masks from character spans and token offsets, vectorised.

    Example:
        >>> off = [torch.tensor([[0, 2], [2, 5], [5, 6]])]
        >>> char_masks_to_token_masks([6], [[(2, 4)]], off)[0].tolist()
        [0, 1, 0]
    """
    if not len(lengths) == len(spans) == len(offsets):
        raise ValueError(f"one text length, span list and offsets tensor per text: got {len(lengths)} lengths, "
                         f"{len(spans)} span lists and {len(offsets)} offsets")
    lengths_t = torch.tensor(list(lengths), dtype=torch.int64)
    base = torch.zeros_like(lengths_t)
    if len(lengths_t) > 1:
        base[1:] = torch.cumsum(lengths_t, 0)[:-1]
    total = int(lengths_t.sum())
    flat = [(b + s, b + e) for b, sp in zip(base.tolist(), spans) for s, e in sp if e > s]
    diff = torch.zeros(total + 1, dtype=torch.int32)
    if flat:
        se = torch.tensor(flat, dtype=torch.int64)
        diff.index_add_(0, se[:, 0], torch.ones(len(flat), dtype=torch.int32))
        diff.index_add_(0, se[:, 1], torch.full((len(flat),), -1, dtype=torch.int32))
    covered = torch.zeros(total + 1, dtype=torch.int64)
    covered[1:] = torch.cumsum(torch.cumsum(diff, 0)[:total] > 0, 0)
    counts = [len(o) for o in offsets]
    if not counts or sum(counts) == 0:
        return [torch.zeros(n, dtype=torch.int64) for n in counts]
    off = torch.cat([o.reshape(-1, 2).to(torch.int64) for o in offsets])
    off = off + torch.repeat_interleave(base, torch.tensor(counts)).unsqueeze(1)
    start, end = off[:, 0], torch.maximum(off[:, 1], off[:, 0] + 1).clamp(max=total)
    mask = ((covered[end] - covered[start.clamp(max=total)]) > 0).to(torch.int64)
    return list(torch.split(mask, counts))


def check_spans(texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]]) -> None:
    """ValueError/TypeError unless ``spans`` holds, per text, ``(start, end)`` int pairs with
    ``0 <= start <= end <= len(text)``. One flat pass; the bounds are compared in bulk.

    Example:
        >>> check_spans(["hello"], [[(3, 9)]])
        Traceback (most recent call last):
        ...
        ValueError: text 0: span (3, 9) must have 0 <= start <= end <= 5 (the text's length)
    """
    if len(spans) != len(texts):
        raise ValueError(f"spans needs one list of (start, end) pairs per text: got {len(spans)} for {len(texts)} texts")
    try:  # array('q') refuses floats and strings; unpacking refuses anything but pairs
        flat = array("q", [v for sp in spans for s, e in sp for v in (s, e)])
        counts = array("q", [len(sp) for sp in spans])
    except (TypeError, ValueError, OverflowError):
        flat = None
    if flat is None or any(isinstance(sp, (str, bytes)) for sp in spans):
        i, what = _first_bad_span(spans)
        raise TypeError(f"text {i}: spans must be (start, end) pairs of int character positions, got {what!r:.80}")
    if not flat:
        return
    se = torch.frombuffer(flat, dtype=torch.int64).view(-1, 2)
    lens = torch.repeat_interleave(_int64([len(x) for x in texts]), torch.frombuffer(counts, dtype=torch.int64),
                                   output_size=len(se))
    bad = (se[:, 0] < 0) | (se[:, 0] > se[:, 1]) | (se[:, 1] > lens)
    if bool(bad.any()):
        k = int(bad.nonzero()[0])
        i = int(torch.searchsorted(torch.cumsum(torch.frombuffer(counts, dtype=torch.int64), 0), k, right=True))
        raise ValueError(f"text {i}: span {tuple(se[k].tolist())} must have 0 <= start <= end <= {int(lens[k])} "
                         "(the text's length)")


def _first_bad_span(spans) -> tuple[int, Any]:
    """(text number, the first span or span list) that is not a list of int pairs."""
    for i, sp in enumerate(spans):
        if isinstance(sp, (str, bytes)) or not hasattr(sp, "__iter__"):
            return i, sp
        for x in sp:
            if isinstance(x, (str, bytes)) or not hasattr(x, "__len__") or len(x) != 2 or not all(
                    hasattr(v, "__index__") and not isinstance(v, bool) for v in x):
                return i, x
    return 0, spans  # pragma: no cover


def _encode_fast(tokenizer: Any, texts: list[str], truncation: bool, max_length: int | None):
    """(ids per text, encodings or None). The encodings answer char -> token questions."""
    backend = rust_backend(tokenizer)
    if backend is not None:
        encs = unpadded(backend).encode_batch(texts, add_special_tokens=False)
        return [_int64(e.ids) for e in encs], encs
    out = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    ids = [torch.tensor(x, dtype=torch.int64) for x in out["input_ids"]]
    offsets = [torch.tensor(x, dtype=torch.int64).reshape(-1, 2) for x in out["offset_mapping"]]
    return ids, offsets


@contextlib.contextmanager
def _gc_paused():
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _int64(values: list) -> torch.Tensor:
    """A list of ints as an int64 tensor (array -> buffer is ~3x faster than torch.tensor)."""
    if not values:
        return torch.zeros(0, dtype=torch.int64)
    return torch.frombuffer(array("q", values), dtype=torch.int64)


def _boundary_token(enc, pos: int, step: int, stop: int):
    """The token holding character ``pos``, walking by ``step`` over characters that belong to
    no token (until ``stop``)."""
    while pos != stop:
        t = enc.char_to_token(pos)
        if t is not None:
            return t
        pos += step
    return None


def _starts_before(enc, t: int, pos: int) -> bool:
    """Whether token ``t`` starts before character ``pos`` (it holds a character before it)."""
    chars = enc.token_to_chars(t)
    return chars is not None and chars[0] < pos


def span_token_ranges(encodings, spans: Sequence[Sequence[tuple[int, int]]]) -> tuple[list, list[int]]:
    """``([(first token, end token, span number), ...], tokens per text)``: each span's tokens,
    numbered across all texts (flat), from the one holding its first character to the last one
    holding its last (a character split over byte tokens is in each); spans that hold no token
    are left out. ``span number`` counts the spans in order over all texts."""
    counts = [len(e) for e in encodings]
    bounds, base, k = [], 0, 0
    for enc, sp, n in zip(encodings, spans, counts):
        for s, e in sp:
            k += 1
            if e <= s:
                continue
            ts = _boundary_token(enc, s, 1, e)
            te = _boundary_token(enc, e - 1, -1, s - 1)
            while te is not None and te + 1 < n and _starts_before(enc, te + 1, e):
                te += 1  # the other byte tokens of a character split over several (an emoji)
            if ts is not None and te is not None and te >= ts:
                bounds.append((base + ts, base + te + 1, k - 1))
        base += n
    return bounds, counts


def span_token_masks(encodings, spans: Sequence[Sequence[tuple[int, int]]]) -> list[torch.Tensor]:
    """Assistant masks from character spans, asking each encoding only for the tokens at span
    boundaries (a few per conversation) and filling all masks in one vectorised pass: a token
    is masked from the one holding a span's first character to the last one holding its last
    (what transformers does for ``{% generation %}`` spans)."""
    bounds, counts = span_token_ranges(encodings, spans)
    base = sum(counts)
    bounds = [b[:2] for b in bounds]
    diff = torch.zeros(base + 1, dtype=torch.int32)
    if bounds:
        b = torch.tensor(bounds, dtype=torch.int64)
        diff.index_add_(0, b[:, 0], torch.ones(len(bounds), dtype=torch.int32))
        diff.index_add_(0, b[:, 1], torch.full((len(bounds),), -1, dtype=torch.int32))
    mask = (torch.cumsum(diff, 0)[:base] > 0).to(torch.int64)
    return list(torch.split(mask, counts))


def _encode_piecewise(tokenizer: Any, text: str, spans: Sequence[tuple[int, int]], weights=None):
    cuts = sorted({0, len(text), *(p for s in spans for p in s if 0 <= p <= len(text))})
    ids: list[int] = []
    mask: list[int] = []
    wts: list[float] = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        inside = any(s <= a and b <= e for s, e in spans)
        piece = tokenizer.encode(text[a:b], add_special_tokens=False)
        ids.extend(piece)
        mask.extend([int(inside)] * len(piece))
        if weights is not None:
            wts.extend([piece_weight(spans, weights, a, b)] * len(piece))
    out = torch.tensor(ids, dtype=torch.int64), torch.tensor(mask, dtype=torch.int64)
    return out + (torch.tensor(wts, dtype=torch.float32),) if weights is not None else out


def _truncate(t: torch.Tensor, max_length: int, side: str) -> torch.Tensor:
    if len(t) <= max_length:
        return t
    return t[:max_length] if side != "left" else t[len(t) - max_length:]


def _pad(seqs: list[torch.Tensor], length: int, value: int, side: str) -> torch.Tensor:
    out = torch.full((len(seqs), length), value, dtype=seqs[0].dtype if seqs else torch.int64)
    for i, s in enumerate(seqs):
        n = min(len(s), length)
        if side == "left":
            out[i, length - n:] = s[:n]
        else:
            out[i, :n] = s[:n]
    return out


_NO_LIMIT = 10**20  # a model_max_length above it is transformers' placeholder for "not set" (its LARGE_INTEGER)
_TRUNCATE = {"longest_first": True, "only_first": True, "do_not_truncate": False}
_PADDING = {"longest": "longest", "max_length": "max_length", "do_not_pad": False}


def truncation_on(truncation: Any, max_length: Any = None, padding: Any = False) -> bool:
    """Whether ``truncation`` (what ``tokenizer(...)`` takes: a bool, or a ``TruncationStrategy``
    or its string) cuts a sequence: ``"do_not_truncate"`` does not. ``None`` is transformers'
    rule: it cuts when ``max_length`` is given and ``padding`` is off (``tok(text, max_length=8)``
    truncates), else not. ValueError for another value.

    Example:
        >>> truncation_on(True), truncation_on("longest_first"), truncation_on("do_not_truncate")
        (True, True, False)
        >>> truncation_on(None), truncation_on(None, max_length=8), truncation_on(None, 8, padding="max_length")
        (False, True, False)
    """
    if truncation is None:
        return max_length is not None and not padding_mode(padding)
    if isinstance(truncation, bool):
        return truncation
    value = getattr(truncation, "value", truncation)  # transformers' TruncationStrategy is a str enum
    if isinstance(value, str) and value in _TRUNCATE:
        return _TRUNCATE[value]
    if value == "only_second":
        raise ValueError("truncation='only_second' cuts the second text of a pair; a chat is one text: use True")
    raise ValueError(f"truncation must be a bool or one of {sorted(_TRUNCATE)}, got {truncation!r}")


def padding_mode(padding: Any) -> str | bool:
    """``False``, ``"longest"`` or ``"max_length"`` from what ``tokenizer(...)`` takes as
    ``padding`` (a bool, or a ``PaddingStrategy`` or its string). ValueError for another value.

    Example:
        >>> padding_mode(True), padding_mode("do_not_pad"), padding_mode("max_length")
        ('longest', False, 'max_length')
    """
    if padding is None or isinstance(padding, bool):
        return "longest" if padding else False
    value = getattr(padding, "value", padding)  # transformers' PaddingStrategy is a str enum
    if isinstance(value, str) and value in _PADDING:
        return _PADDING[value]
    raise ValueError(f"padding must be True, False or one of {sorted(_PADDING)}, got {padding!r}")


def _texts_utf8(fn):
    """``fn(texts, ...)`` with a text UTF-8 cannot store named: the encoders raise a bare
    ``UnicodeEncodeError`` at the first lone surrogate, somewhere in a joined batch. The texts
    are looked at only on that error path (no cost otherwise)."""
    @functools.wraps(fn)
    def checked(texts, *args, **kwargs):
        if not isinstance(texts, (str, bytes)):
            texts = list(texts)  # read twice on the error path
        try:
            return fn(texts, *args, **kwargs)
        except UnicodeEncodeError:
            from .render import _surrogate

            bad = next(((i, e) for i, e in ((i, _surrogate(t)) for i, t in enumerate(texts)) if e), None)
            if bad is None:
                raise
            raise ValueError(f"texts[{bad[0]}] {bad[1]}; fix the text's encoding (e.g. decode with "
                             "errors='replace')") from None
    return checked


@_texts_utf8
def tokenize_chats(
    texts: Sequence[str],
    spans: Sequence[Sequence[tuple[int, int]]] | None,
    tokenizer: Any,
    *,
    padding: bool | str = False,
    truncation: bool | str = False,
    max_length: int | None = None,
    return_assistant_tokens_mask: bool = False,
    span_weights: Sequence[Sequence[float]] | None = None,
    template: str | None = None,
) -> dict:
    """Tokenise rendered chats (no special tokens added) and build assistant token masks.

    Returns ``{"input_ids", "attention_mask"[, "assistant_masks"][, "loss_weights"]}``: lists of
    1-D int64 tensors, or 2-D tensors padded on ``tokenizer.padding_side`` with
    ``tokenizer.pad_token_id`` when ``padding`` is ``True``/``"longest"``/``"max_length"``.
    Truncation (``truncation=True`` with ``max_length``; ``None``, as in ``tokenizer(...)``, when
    ``max_length`` is given without ``padding``) cuts ids and masks together on
    ``tokenizer.truncation_side``; ``padding="max_length"`` never cuts: a longer text is a
    ValueError. Both also take the strategy names ``tokenizer(...)`` takes
    (``"do_not_pad"``, ``"longest_first"``, ``"do_not_truncate"``, ...). ``span_weights`` (one
    float per span, with ``return_assistant_tokens_mask``) adds float32 ``loss_weights`` per token (see
    :mod:`.token_weights`; 0.0 on padding).

    Ids and masks come from the splice engine (:mod:`.splice`) when the tokenizer has a verified
    tiktoken twin, else from the tokenizer's full batch encode; both give the same result.
    ``template`` (the template that rendered ``texts``) lets the engine check itself against
    the full encode once per template and tokenizer, and fall back where they differ.

    Example:
        >>> from chatdata.data import load_sample_tokenizer
        >>> from chatdata.templates import render_chats_with_spans, get_chat_template
        >>> tok = load_sample_tokenizer()
        >>> chats = [[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]]
        >>> texts, spans = render_chats_with_spans(chats, get_chat_template("qwen"))
        >>> out = tokenize_chats(texts, spans, tok, return_assistant_tokens_mask=True)
        >>> tok.decode(out["input_ids"][0][out["assistant_masks"][0].bool()])
        'hello<|im_end|>'
    """
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a list of strings (one per chat), got a single str; wrap it: [text]")
    texts = list(texts)
    if any(not isinstance(t, str) for t in texts):
        raise TypeError("texts must be strings")
    if return_assistant_tokens_mask:
        if spans is None or len(spans) != len(texts):
            raise ValueError("return_assistant_tokens_mask=True needs one list of spans per text")
        check_spans(texts, spans)
        if span_weights is not None:
            check_span_weights(spans, span_weights)
    elif span_weights is not None:
        raise ValueError("span_weights weigh the trained spans: pass return_assistant_tokens_mask=True too")
    if max_length is not None and (isinstance(max_length, bool) or not hasattr(max_length, "__index__") or max_length < 0):
        raise ValueError(f"max_length must be an int >= 0 (or None), got {max_length!r}")
    truncation, padding = truncation_on(truncation, max_length, padding), padding_mode(padding)
    if truncation and max_length is None:
        max_length = getattr(tokenizer, "model_max_length", None)
        if not isinstance(max_length, int) or max_length > _NO_LIMIT:  # transformers' "no limit" (1e30): no cut
            max_length = None
    side = getattr(tokenizer, "truncation_side", "right")
    if getattr(tokenizer, "is_fast", False):
        if span_weights is None:  # the splice engine (or the full encode where it cannot splice)
            def reference(texts, spans):  # the full encode: what the splice engine must equal
                with _gc_paused():  # millions of new ints and lists: no point scanning them mid-flight
                    ids, encs = _encode_fast(tokenizer, texts, bool(truncation), max_length)
                if spans is None:
                    return ids, None
                return ids, (char_masks_to_token_masks([len(t) for t in texts], spans, encs)
                             if isinstance(encs[0] if encs else None, torch.Tensor) else span_token_masks(encs, spans))

            want = spans if return_assistant_tokens_mask else None
            spliced = spliced_ids_and_masks(texts, want, tokenizer, reference=reference, template=template)
            ids, masks = spliced if spliced is not None else reference(texts, want)
            weights = None
        else:  # per-token weights need the full encode's offsets
            with _gc_paused():  # millions of new ints and lists: no point scanning them mid-flight
                ids, encs = _encode_fast(tokenizer, texts, bool(truncation), max_length)
            masks = weights = None
            if return_assistant_tokens_mask:
                if isinstance(encs[0] if encs else None, torch.Tensor):
                    def mask_of(sp):
                        return char_masks_to_token_masks([len(t) for t in texts], sp, encs)
                    masks = mask_of(spans)
                    if span_weights is not None:
                        weights = token_weights(mask_of, spans, span_weights, masks)
                else:
                    masks = span_token_masks(encs, spans)
                    if span_weights is not None:
                        weights = weights_from_ranges(*span_token_ranges(encs, spans), spans, span_weights)
        if truncation and max_length is not None:
            ids = [_truncate(t, max_length, side) for t in ids]
            masks = masks and [_truncate(m, max_length, side) for m in masks]
            weights = weights and [_truncate(w, max_length, side) for w in weights]
    else:
        with_weights = return_assistant_tokens_mask and span_weights is not None
        pairs = [_encode_piecewise(tokenizer, t, sp if return_assistant_tokens_mask else [], ws if with_weights else None)
                 for t, sp, ws in zip(texts, spans or [[]] * len(texts), span_weights or [None] * len(texts))]
        ids = [p[0] for p in pairs]
        masks = [p[1] for p in pairs] if return_assistant_tokens_mask else None
        weights = [p[2] for p in pairs] if with_weights else None
        if truncation and max_length is not None:
            ids = [_truncate(t, max_length, side) for t in ids]
            masks = masks and [_truncate(m, max_length, side) for m in masks]
            weights = weights and [_truncate(w, max_length, side) for w in weights]
    out: dict[str, Any] = {"input_ids": ids, "attention_mask": [torch.ones_like(t) for t in ids]}
    if masks is not None:
        out["assistant_masks"] = masks
    if weights is not None:
        out["loss_weights"] = weights
    if padding:
        if padding == "max_length":
            if max_length is None:
                raise ValueError("padding='max_length' needs max_length=N (the length to pad to)")
            length = max_length
            longest = max(range(len(ids)), key=lambda i: len(ids[i]), default=None)
            if longest is not None and len(ids[longest]) > length:  # padding never cuts (transformers' neither)
                raise ValueError(f"chat {longest} has {len(ids[longest])} tokens, more than max_length={length}: "
                                 f"padding='max_length' cannot fit it; pass truncation=True to cut it (on "
                                 f"tokenizer.truncation_side), or a larger max_length")
        else:  # "longest"
            length = max((len(t) for t in ids), default=0)
        pad_id = getattr(tokenizer, "pad_token_id", None)
        if pad_id is None:
            raise ValueError("padding needs tokenizer.pad_token_id; set a pad token on the tokenizer")
        pside = getattr(tokenizer, "padding_side", "right")
        out["input_ids"] = _pad(ids, length, pad_id, pside)
        out["attention_mask"] = _pad(out["attention_mask"], length, 0, pside)
        if masks is not None:
            out["assistant_masks"] = _pad(masks, length, 0, pside)
        if weights is not None:
            out["loss_weights"] = _pad(weights, length, 0, pside)
    return out
