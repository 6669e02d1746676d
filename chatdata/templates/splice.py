"""The splice engine: token ids and assistant masks of rendered chats, spliced from pieces.

Every tokenizer splits a text at its added tokens (``<|im_start|>``, ``<|im_end|>``,
``[INST]``, ``<tool_call>``, ...) before anything else, and encodes the text between two added
tokens on its own. So a rendered chat is a sequence of *pieces*: added tokens (one id each,
known) and the segments between them. A chat template writes the same segments over and over:
``"\\n"`` between turns, the system prompt and tool schemas of every chat, the role lines.
The engine therefore

1. splits every text at the added tokens (one compiled regex, a trie of their spellings);
2. takes each distinct segment once: the template's own pieces come from a per-tokenizer cache
   (tokenized once per template and tokenizer), the rest are encoded in one batch, joined by an
   added token so that nothing merges across them, on several threads without the GIL;
3. splices the ids of every chat together with one vectorised gather;
4. computes the masks from the character spans with the number of characters each token
   starts (``cumsum`` + ``searchsorted``), the rule of the reference path: a span covers the
   tokens from the one holding its first character to the last one holding its last.

No cut is ever made where the tokenizer itself does not cut, so the ids are those of the
tokenizer by construction; :mod:`.tokenization` still checks them against the full encode once
per template and tokenizer and falls back to it where they differ. The segments are encoded
by the verified tiktoken twin of the tokenizer (:mod:`.tiktoken_bpe`); a tokenizer without one,
or text it does not cover (not NFC for an NFC tokenizer), goes through the reference path.

Example:
    >>> from chatdata.data import load_sample_tokenizer
    >>> from chatdata.templates.tiktoken_bpe import tiktoken_bpe_for
    >>> tok = load_sample_tokenizer()
    >>> texts = ["<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\nyo<|im_end|>\\n"]
    >>> ids, offsets, masks = splice_encode(tiktoken_bpe_for(tok), texts, [[(52, 64)]])
    >>> ids.tolist() == tok.encode(texts[0], add_special_tokens=False), masks.tolist()
    (True, [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0])
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from itertools import chain
from typing import Sequence

import numpy as np
import torch

from .tiktoken_bpe import TiktokenBPE, encode_threads

__all__ = ["splice_encode", "special_splitter", "span_token_ranges", "spliced_ids_and_masks", "template_fallbacks"]

_PIECE_CACHE_MAX = 1 << 16  # cached segments per tokenizer (the template's own pieces are few)
_PIECE_MAX_CHARS = 256  # only short segments are cached: long ones are messages
_THREADED_CHARS = 1 << 16  # below this many characters one thread is faster


def special_splitter(bpe: TiktokenBPE):
    """The ``split`` of a compiled regex that cuts a text at the added tokens and keeps them:
    ``[segment, token, segment, ..., segment]`` (cached on ``bpe``).

    Example:
        >>> from chatdata.data import load_sample_tokenizer
        >>> from chatdata.templates.tiktoken_bpe import tiktoken_bpe_for
        >>> split = special_splitter(tiktoken_bpe_for(load_sample_tokenizer()))
        >>> split("<|im_start|>user\\nhi<|im_end|>")
        ['', '<|im_start|>', 'user\\nhi', '<|im_end|>', '']
    """
    if bpe.piece_cache is None:  # the template's pieces, tokenized once
        bpe.piece_cache = {tok: np.array([tid], dtype=np.int64) for tok, tid in bpe.encoding._special_tokens.items()}
        bpe.piece_cache[""] = np.zeros(0, dtype=np.int64)
    return bpe.special_re.split


def _encode_chunk(bpe: TiktokenBPE, segments: list[str]) -> list[np.ndarray]:
    arr = bpe.encode_joined(segments)
    cuts = np.flatnonzero(arr == bpe.separator_id)
    if len(cuts) != len(segments) - 1:  # cannot happen: segments are cut at every added token
        raise RuntimeError("splice: a segment holds an added token")
    return _between(arr, cuts)


def _between(arr: np.ndarray, cuts: np.ndarray) -> list[np.ndarray]:
    starts = np.concatenate(([0], cuts + 1))
    ends = np.concatenate((cuts, [len(arr)]))
    return [arr[a:b] for a, b in zip(starts.tolist(), ends.tolist())]


def _encode_segments(bpe: TiktokenBPE, segments: list[str]) -> list[np.ndarray]:
    """The ids of each segment (no added token inside), in one or a few tiktoken calls."""
    if not segments:
        return []
    total = sum(map(len, segments))
    n = encode_threads() if total >= _THREADED_CHARS else 1
    if n == 1 or len(segments) < 2:
        return _encode_chunk(bpe, segments)
    bounds = np.searchsorted(np.cumsum([len(s) for s in segments]), np.linspace(0, total, n + 1)[1:-1])
    edges = [0, *sorted(set(int(b) + 1 for b in bounds if 0 <= b < len(segments) - 1)), len(segments)]
    chunks = [segments[a:b] for a, b in zip(edges[:-1], edges[1:]) if b > a]
    with ThreadPoolExecutor(len(chunks)) as pool:
        parts = list(pool.map(lambda c: _encode_chunk(bpe, c), chunks))
    return list(chain.from_iterable(parts))


def _pieces(bpe: TiktokenBPE, texts: Sequence[str]):
    """(ids of every distinct piece, the piece index of every piece of every text, pieces per text)."""
    split = special_splitter(bpe)
    per_text = [split(t) for t in texts]
    flat = list(chain.from_iterable(per_text))
    index = {p: i for i, p in enumerate(dict.fromkeys(flat))}
    uniques = list(index)
    cache = bpe.piece_cache
    arrays: list = [cache.get(p) for p in uniques]
    todo = [i for i, a in enumerate(arrays) if a is None]
    encoded = _encode_segments(bpe, [uniques[i] for i in todo])
    room = _PIECE_CACHE_MAX - len(cache)
    for i, a in zip(todo, encoded):
        arrays[i] = a
        if room > 0 and len(uniques[i]) <= _PIECE_MAX_CHARS:
            cache[uniques[i]] = a.copy()
            room -= 1
    uid = np.fromiter(map(index.__getitem__, flat), dtype=np.int64, count=len(flat))
    return arrays, uid, np.fromiter(map(len, per_text), dtype=np.int64, count=len(per_text))


def span_token_ranges(cum_chars: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Token ranges ``[first, last]`` of character spans ``[start, end)`` (all in one flat
    coordinate), given ``cum_chars[t]``: the characters started by tokens ``0..t``. ``first``
    holds the span's first character, ``last`` is the last token holding its last one: a
    character the tokenizer splits over several byte tokens (an emoji, ``\u2028``) is in each of
    them, the ones after the first starting no character (what the reference path masks).

    Example:
        >>> cum = np.array([2, 5, 6])   # tokens "ab", "cde", "f"
        >>> span_token_ranges(cum, np.array([2]), np.array([4]))
        (array([1]), array([1]))
        >>> cum = np.array([1, 2, 2, 3])  # tokens "a", "🎉" split in two byte tokens, "b"
        >>> span_token_ranges(cum, np.array([0]), np.array([2]))
        (array([0]), array([2]))
    """
    first = np.searchsorted(cum_chars, starts, side="right")
    last = np.maximum(np.searchsorted(cum_chars, ends - 1, side="right"),
                      np.searchsorted(cum_chars, ends, side="right") - 1)
    return first, last


def splice_encode(bpe: TiktokenBPE, texts: Sequence[str], spans: Sequence[Sequence[tuple[int, int]]] | None):
    """Token ids of ``texts`` (no special tokens added) and, with ``spans``, 0/1 assistant masks,
    as flat int64 tensors plus int64 token offsets (``n + 1``) per text. Every text must pass
    ``bpe.supports``. See the module docstring.

    Example:
        >>> from chatdata.data import load_sample_tokenizer
        >>> from chatdata.templates.tiktoken_bpe import tiktoken_bpe_for
        >>> ids, offsets, masks = splice_encode(tiktoken_bpe_for(load_sample_tokenizer()), ["hi", "yo yo"], None)
        >>> ids.tolist(), offsets.tolist(), masks
        ([6023, 16032, 29496], [0, 1, 3], None)
    """
    arrays, uid, n_pieces = _pieces(bpe, texts)
    lengths = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    pool = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
    pool_start = np.zeros(len(arrays), dtype=np.int64)
    if len(arrays) > 1:
        np.cumsum(lengths[:-1], out=pool_start[1:])
    piece_len = lengths[uid]
    total = int(piece_len.sum())
    out_start = np.zeros(len(uid), dtype=np.int64)
    if len(uid) > 1:
        np.cumsum(piece_len[:-1], out=out_start[1:])
    gather = np.repeat(pool_start[uid] - out_start, piece_len) + np.arange(total, dtype=np.int64)
    ids = pool[gather]
    per_text = np.zeros(len(texts) + 1, dtype=np.int64)
    if len(uid):
        piece_end = np.cumsum(n_pieces)
        tok_end = np.concatenate(([0], np.cumsum(piece_len)))
        per_text[1:] = tok_end[piece_end]
    masks = None
    if spans is not None:
        masks = _masks(bpe, ids, texts, spans)
    return (torch.from_numpy(ids), torch.from_numpy(per_text),
            None if masks is None else torch.from_numpy(masks))


def _masks(bpe: TiktokenBPE, ids: np.ndarray, texts: Sequence[str], spans) -> np.ndarray:
    total = len(ids)
    mask = np.zeros(total, dtype=np.int64)
    counts = np.fromiter(map(len, spans), dtype=np.int64, count=len(spans))
    if not total or not counts.sum():
        return mask
    flat = np.array(list(chain.from_iterable(spans)), dtype=np.int64).reshape(-1, 2)
    base = np.zeros(len(texts), dtype=np.int64)
    if len(texts) > 1:
        np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))[:-1], out=base[1:])
    shift = np.repeat(base, counts)
    flat[:, 1] = np.minimum(flat[:, 1], np.repeat(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), counts))
    keep = flat[:, 1] > flat[:, 0]
    starts, ends = flat[keep, 0] + shift[keep], flat[keep, 1] + shift[keep]
    cum = np.cumsum(bpe.char_widths[ids])
    first, last = span_token_ranges(cum, starts, ends)
    diff = np.zeros(total + 1, dtype=np.int64)
    np.add.at(diff, first, 1)
    np.add.at(diff, last + 1, -1)
    np.cumsum(diff[:total], out=mask)
    return (mask > 0).astype(np.int64)


_CHECK_CHARS = 1 << 18  # characters of a template's first texts checked against the full encode


def _views(ids: torch.Tensor, offsets: torch.Tensor) -> list[torch.Tensor]:
    return list(torch.split(ids, torch.diff(offsets).tolist()))


def spliced_ids_and_masks(texts: Sequence[str], spans, tokenizer, *, reference, template: str | None = None):
    """``(ids, masks)`` per text (lists of 1-D int64 tensors; masks None without ``spans``) from
    the splice engine, or None when it does not apply -- the caller then runs ``reference``,
    the full encode, itself.

    The engine applies when the tokenizer has a verified tiktoken twin; texts it does not cover
    go through ``reference(texts, spans) -> (ids, masks)``. For a ``template`` seen for the
    first time with this tokenizer, the engine's ids and masks of the first texts are compared
    with ``reference``'s: if they differ, that template always takes the reference path
    (:func:`template_fallbacks` lists such templates).

    Example:
        >>> from chatdata.data import load_sample_tokenizer
        >>> tok = load_sample_tokenizer()
        >>> def full(texts, spans):
        ...     return [torch.tensor(tok.encode(t, add_special_tokens=False)) for t in texts], None
        >>> ids, masks = spliced_ids_and_masks(["hi there"], None, tok, reference=full)
        >>> ids[0].tolist(), masks
        ([6023, 1052], None)
    """
    from .tiktoken_bpe import tiktoken_bpe_for, twin_allowed

    if not twin_allowed():
        return None
    bpe = tiktoken_bpe_for(tokenizer)
    if bpe is None:
        return None
    if template is not None:
        verdict = bpe.template_ok.get(template)
        if verdict is None:
            verdict = _agrees(bpe, texts, spans, reference)
            if verdict is not None:  # None: no text to compare yet, decided with the next call
                bpe.template_ok[template] = verdict
                if not verdict:
                    _FALLBACKS.append(template)
        if verdict is False:
            return None
    supported = list(map(bpe.supports, texts))
    if all(supported):
        ids, offsets, masks = splice_encode(bpe, texts, spans)
        return _views(ids, offsets), None if masks is None else _views(masks, offsets)
    ok = [i for i, s in enumerate(supported) if s]
    other = [i for i, s in enumerate(supported) if not s]
    ids_f, offsets, masks_f = splice_encode(bpe, [texts[i] for i in ok], None if spans is None else [spans[i] for i in ok])
    ids_r, masks_r = reference([texts[i] for i in other], None if spans is None else [spans[i] for i in other])
    ids: list = [None] * len(texts)
    masks: list | None = None if spans is None else [None] * len(texts)
    for i, t in zip(ok, _views(ids_f, offsets)):
        ids[i] = t
    for i, t in zip(other, ids_r):
        ids[i] = t
    if masks is not None:
        for i, m in zip(ok, _views(masks_f, offsets)):
            masks[i] = m
        for i, m in zip(other, masks_r):
            masks[i] = m
    return ids, masks


def _agrees(bpe: TiktokenBPE, texts, spans, reference) -> bool | None:
    """Whether the engine and the full encode agree on ids and masks of the first texts (None
    when no text here is one the engine covers)."""
    take, chars = [], 0
    for i, t in enumerate(texts):
        if chars >= _CHECK_CHARS:
            break
        if bpe.supports(t):
            take.append(i)
            chars += len(t)
    if not take:
        return None
    sub_t = [texts[i] for i in take]
    sub_s = None if spans is None else [spans[i] for i in take]
    ids, offsets, masks = splice_encode(bpe, sub_t, sub_s)
    ref_ids, ref_masks = reference(sub_t, sub_s)
    if not all(torch.equal(a, b.to(torch.int64)) for a, b in zip(_views(ids, offsets), ref_ids)):
        return False
    return masks is None or all(torch.equal(a, b.to(torch.int64)) for a, b in zip(_views(masks, offsets), ref_masks))


_FALLBACKS: list = []


def template_fallbacks() -> list[str]:
    """Templates whose spliced ids or masks differed from the full encode in this process (they
    take the reference path); empty when the engine agreed everywhere.

    Example:
        >>> from chatdata.templates import get_chat_template
        >>> get_chat_template("qwen") in template_fallbacks()  # the engine agrees with the full encode
        False
    """
    return list(_FALLBACKS)
