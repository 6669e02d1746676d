"""Near duplicates: MinHash signatures (``rensa``'s R-MinHash, over word n-gram hashes), LSH bands,
and ``NearDeduper``, which streams signatures in order and keeps a conversation unless it is
near (estimated Jaccard >= threshold) to an earlier *kept* one; a dropped conversation joins the
cluster of the earliest kept conversation it is near to.

Why rensa: on the same texts it measured 50-100x faster than datasketch (see
``benchmarks/bench_hygiene.py``): it takes all texts' shingle hashes as one flat buffer and
returns a signature matrix from Rust, where datasketch hashes token by token in Python.

The decision for a conversation depends only on the signatures of earlier conversations, so
chunks in order (the CLI), one call over a whole History, and the Ray version (signatures on the
workers, then the bands in the driver, see ``chatdata.ray.hygiene``) keep the same set.

Example:
    >>> d = NearDeduper(threshold=0.8)
    >>> sig = d.signatures(["the cat sat on the mat today", "the cat sat on the mat today!", "dogs bark"])
    >>> d.add(sig).tolist()
    [-1, 0, -1]
"""
from __future__ import annotations

import bisect

import numpy as np
import xxhash

from .keyindex import KeyIndex
from .words import ngram_hashes, word_hashes

__all__ = ["NearDeduper", "lsh_params", "signatures_from_words", "group_signatures"]

NUM_PERM = 128
SHINGLE = 5
SEED = 1


def lsh_params(threshold: float, num_perm: int = NUM_PERM, *, fp_weight: float = 0.05) -> tuple[int, int]:
    """``(bands, rows)`` with ``bands * rows <= num_perm`` that minimise ``fp_weight`` times the
    false positive mass (pairs below ``threshold`` that share a band) plus ``1 - fp_weight`` times
    the false negative mass (pairs above it that share none), for Jaccard uniform on [0, 1]. False
    positives weigh little: every candidate is verified on its whole signature, so a false one
    costs one comparison, while a missed pair is a duplicate kept.

    Example:
        >>> lsh_params(0.8, 128)
        (16, 8)
    """
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    best, best_err = (1, num_perm), float("inf")
    for b in range(1, num_perm + 1):
        r = num_perm // b
        if r < 1:
            break
        lo = np.linspace(0.0, threshold, 400)
        hi = np.linspace(threshold, 1.0, 400)
        fp = _integral(1 - (1 - lo ** r) ** b, lo)
        fn = _integral((1 - hi ** r) ** b, hi)
        err = fp_weight * fp + (1 - fp_weight) * fn
        if err < best_err:
            best, best_err = (b, r), err
    return best


def _integral(y: np.ndarray, x: np.ndarray) -> float:
    return float(np.sum((y[1:] + y[:-1]) * np.diff(x)) / 2)


def signatures_from_words(hashes: np.ndarray, offsets: np.ndarray, *, num_perm: int = NUM_PERM,
                          shingle: int = SHINGLE, seed: int = SEED) -> np.ndarray:
    """uint32 MinHash signatures ``(n_texts, num_perm)`` of word ``shingle``-grams (a text with
    fewer words is one shingle of all of them), by rensa's R-MinHash.

    Example:
        >>> h, off = word_hashes(["a b c d e f", "a b c d e f"])
        >>> sig = signatures_from_words(h, off)
        >>> sig.shape, bool((sig[0] == sig[1]).all())
        ((2, 128), True)
    """
    from .deps import require_rensa

    rensa = require_rensa()
    grams, goff = ngram_hashes(hashes, offsets, shingle, short=True)
    n = len(goff) - 1
    if not n:
        return np.zeros((0, num_perm), dtype=np.uint32)
    matrix = rensa.RMinHash.digest_matrix_from_flat_token_hashes(grams, goff.astype(np.uint64), num_perm, seed)
    return np.array(matrix.to_rows(), dtype=np.uint32).reshape(n, num_perm)


def group_signatures(texts: list[str], groups: np.ndarray, *, num_perm: int = NUM_PERM, shingle: int = SHINGLE,
                     seed: int = SEED, roles: list | None = None) -> np.ndarray:
    """Signatures (:func:`signatures_from_words`) of groups of ``texts`` (group ``i`` is
    ``texts[groups[i]:groups[i+1]]``, a conversation's messages). A group with no word at all
    (empty, or only punctuation, emoji, symbols) gets one word instead: the hash of its
    normalized texts (:func:`~chatdata.hygiene.normalize.normalize_text`) and their ``roles``
    (one per text, when given), so two such groups are near duplicates only when they are exact
    ones.

    Example:
        >>> sig = group_signatures(["!!!", "???", "!!!"], np.arange(4))
        >>> bool((sig[0] == sig[2]).all()), bool((sig[0] == sig[1]).any())
        (True, False)
    """
    from .normalize import normalize_text

    h, off = word_hashes(texts)
    group_off = off[np.asarray(groups, dtype=np.int64)]
    empty = np.flatnonzero(np.diff(group_off) == 0)
    if len(empty):
        tag = b"\x03no words\x03"
        def whole(a, b):  # a conversation with no message differs from one of an empty message
            if roles is None:
                return "\x00".join(normalize_text(t) for t in texts[a:b])
            return "".join(f"\x01{normalize_text(str(r))}\x02{normalize_text(t)}" for r, t in zip(roles[a:b], texts[a:b]))

        extra = np.array([xxhash.xxh3_64_intdigest(tag + whole(groups[i], groups[i + 1]).encode("utf-8", "surrogatepass"))
                          for i in empty.tolist()], dtype=np.uint64)
        h = np.insert(h, group_off[empty], extra)
        group_off = group_off + np.searchsorted(empty, np.arange(len(group_off)), side="left")
    return signatures_from_words(h, group_off, num_perm=num_perm, shingle=shingle, seed=seed)


class NearDeduper:
    """Streaming near-duplicate detection (see the module docstring). ``add`` returns, per
    conversation, the index of the kept conversation it duplicates, or -1 (kept)."""

    def __init__(self, threshold: float = 0.8, *, num_perm: int = NUM_PERM, shingle: int = SHINGLE, seed: int = SEED):
        self.threshold = float(threshold)
        self.num_perm, self.shingle, self.seed = num_perm, shingle, seed
        self.bands, self.rows = lsh_params(self.threshold, num_perm)
        self.count = 0
        self._index = KeyIndex()
        self._kept_ids: list[np.ndarray] = []
        self._kept_sigs: list[np.ndarray] = []
        self._starts: list[int] = []
        self.similarity: dict[int, float] = {}

    def signatures(self, texts: list[str]) -> np.ndarray:
        """Signatures of ``texts`` with this deduper's parameters."""
        return group_signatures(texts, np.arange(len(texts) + 1), num_perm=self.num_perm, shingle=self.shingle,
                                seed=self.seed)

    def band_keys(self, sig: np.ndarray) -> np.ndarray:
        """uint64 ``(n, bands)``: one key per band (its ``rows`` signature values, and the band's
        number, hashed), so equal keys mean equal bands."""
        n = len(sig)
        keys = np.empty((n, self.bands), dtype=np.uint64)
        s = sig.astype(np.uint64)
        with np.errstate(over="ignore"):
            for b in range(self.bands):
                acc = np.full(n, np.uint64(b + 1) * np.uint64(0xD6E8FEB86659FD93), dtype=np.uint64)
                for c in range(b * self.rows, (b + 1) * self.rows):
                    acc = (acc ^ s[:, c]) * np.uint64(0x9E3779B97F4A7C15)
                keys[:, b] = acc ^ (acc >> np.uint64(29))
        return keys

    def _sig_of(self, ids: list[int]) -> np.ndarray:
        out = []
        for i in ids:
            k = bisect.bisect_right(self._starts, i) - 1
            ids_k = self._kept_ids[k]
            out.append(self._kept_sigs[k][int(np.searchsorted(ids_k, i))])
        return np.array(out)

    def add(self, sig: np.ndarray, keys: np.ndarray | None = None, ids: np.ndarray | None = None) -> np.ndarray:
        """Decide the conversations with signatures ``sig`` (in order after all earlier ones).
        ``ids``: their global indices (increasing; default: the next ``len(sig)``). Returns the
        kept conversation each duplicates, or -1; ``self.similarity[id]`` is the estimate."""
        m = len(sig)
        keys = self.band_keys(sig) if keys is None else keys
        ids = np.arange(self.count, self.count + m, dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
        self.count = int(ids[-1]) + 1 if m else self.count
        out = np.full(m, -1, dtype=np.int64)
        if not m:
            return out
        q, v = self._index.lookup(keys.reshape(-1))
        outside: dict[int, set] = {}
        for doc, kept in zip((q // self.bands).tolist(), v.tolist()):
            outside.setdefault(doc, set()).add(kept)
        # groups of this chunk's rows sharing a band key
        groups = []
        shared = np.zeros(m, dtype=bool)
        for b in range(self.bands):
            _, inv, counts = np.unique(keys[:, b], return_inverse=True, return_counts=True)
            inv = inv.reshape(-1)
            multi = counts[inv] > 1
            shared |= multi
            groups.append(np.where(multi, inv, -1))
        todo = np.flatnonzero(shared)
        kept_in: dict[tuple[int, int], list[int]] = {}  # (band, group) -> kept rows of this chunk
        chunk_ids = ids.tolist()
        for r in sorted(set(todo.tolist()) | set(outside)):
            cands = set(outside.get(r, ()))
            for b in range(self.bands):
                g = int(groups[b][r])
                if g >= 0:
                    cands.update(chunk_ids[j] for j in kept_in.get((b, g), ()))
            found = -1
            if cands:
                order = sorted(cands)
                earlier = [c for c in order if c < chunk_ids[0]]
                sigs = dict(zip(earlier, self._sig_of(earlier))) if earlier else {}
                for c in order:
                    other = sigs[c] if c in sigs else sig[int(np.searchsorted(ids, c))]
                    sim = float(np.mean(other == sig[r]))
                    if sim >= self.threshold:
                        found = c
                        self.similarity[chunk_ids[r]] = sim
                        break
            out[r] = found
            if found < 0:
                for b in range(self.bands):
                    g = int(groups[b][r])
                    if g >= 0:
                        kept_in.setdefault((b, g), []).append(r)
        kept = np.flatnonzero(out < 0)
        if len(kept):
            self._index.add(keys[kept].reshape(-1), np.repeat(ids[kept], self.bands))
            self._starts.append(int(ids[kept[0]]))
            self._kept_ids.append(ids[kept])
            self._kept_sigs.append(sig[kept])
        return out
