"""Test data for chatdata.hygiene, made as columns (no message dicts): conversations of random
words with exact and near duplicates planted at known rates, and their ground truth.

Words are 7 random lowercase letters from a vocabulary of 20,000, so two independent texts share
no word 5-gram in practice; each message is a slice of one ASCII buffer built by numpy.
"""
from __future__ import annotations

import re
import unicodedata

import numpy as np

WORD = 7


def _vocab(rng, size=20_000):
    letters = rng.integers(97, 123, size=(size, WORD), dtype=np.uint8)
    return letters


def random_texts(rng, n_texts, lo=10, hi=30, vocab=None):
    """``n_texts`` strings of ``lo``..``hi`` random words (one numpy pass, then slices)."""
    vocab = _vocab(rng) if vocab is None else vocab
    counts = rng.integers(lo, hi + 1, size=n_texts)
    total = int(counts.sum())
    idx = rng.integers(0, len(vocab), size=total)
    cells = np.full((total, WORD + 1), 32, dtype=np.uint8)
    cells[:, :WORD] = vocab[idx]
    buf = cells.tobytes().decode("ascii")
    ends = np.cumsum(counts) * (WORD + 1)
    starts = ends - counts * (WORD + 1)
    return [buf[a:b - 1] for a, b in zip(starts.tolist(), ends.tolist())]


def planted(n, *, exact_rate=0.02, near_rate=0.05, mid_rate=0.01, hard_rate=0.01, seed=0, messages=(2, 4),
            words=(10, 30)):
    """Columns of ``n`` conversations and the truth: ``(roles, contents, offsets, truth)``;
    ``truth[kind]`` maps a planted row to its source row, for kinds "exact" (whitespace and
    Unicode composition changed), "near" (one or two words replaced), "mid" (8% of the words
    replaced) and "hard" (40% replaced). A copy has as many messages as its source."""
    rng = np.random.default_rng(seed)
    vocab = _vocab(rng)
    names = ("exact", "near", "mid", "hard")
    rates = [exact_rate, near_rate, mid_rate, hard_rate]
    kinds = rng.choice(5, size=n, p=[1 - sum(rates), *rates])
    kinds[: max(1, n // 50)] = 0  # the first rows are originals
    originals = np.flatnonzero(kinds == 0)
    copies = np.flatnonzero(kinds)
    pick = rng.random(len(copies))
    # each copy's source: a random original before it
    before = np.searchsorted(originals, copies)
    sources = originals[(pick * before).astype(np.int64)]
    n_msg = rng.integers(messages[0], messages[1] + 1, size=n)
    n_msg[copies] = n_msg[sources]
    offsets = np.concatenate([[0], np.cumsum(n_msg)]).astype(np.int64)
    total = int(offsets[-1])
    contents = random_texts(rng, total, *words, vocab=vocab)
    pos = np.arange(total) - np.repeat(offsets[:-1], n_msg)
    roles = np.where(pos % 2 == 0, "user", "assistant").tolist()
    for row in originals[:: max(1, len(originals) // 200)].tolist():  # some originals carry an accent
        contents[offsets[row]] += " caf\u00e9"
    truth = {k: {} for k in names}
    for row, src in zip(copies.tolist(), sources.tolist()):
        kind = names[kinds[row] - 1]
        truth[kind][row] = src
        texts = contents[offsets[src]:offsets[src + 1]]
        if kind == "exact":
            texts = [_reformat(t, rng) for t in texts]
            if row % 2:
                texts = [unicodedata.normalize("NFD", t) for t in texts]
        else:
            texts = _edit(texts, rng, {"near": None, "mid": 0.08, "hard": 0.4}[kind], vocab)
        contents[offsets[row]:offsets[row + 1]] = texts
    return roles, contents, offsets, truth


def _reformat(text, rng):
    words = text.split(" ")
    seps = rng.choice(np.array([" ", "  ", "\n", " \t", "\n\n"]), size=len(words) - 1, p=[0.8, 0.05, 0.05, 0.05, 0.05])
    out = words[0] + "".join(s + w for s, w in zip(seps.tolist(), words[1:]))
    return (" " if rng.random() < 0.3 else "") + out + ("\n" if rng.random() < 0.3 else "")


def _edit(texts, rng, rate, vocab):
    """Replace words of a conversation: one or two (``rate=None``) or a share of them."""
    words = [t.split(" ") for t in texts]
    where = [(m, j) for m, w in enumerate(words) for j in range(len(w))]
    k = int(rng.integers(1, 3)) if rate is None else max(1, int(len(where) * rate))
    for i in rng.choice(len(where), size=min(k, len(where)), replace=False).tolist():
        m, j = where[i]
        words[m][j] = vocab[rng.integers(len(vocab))].tobytes().decode()
    return [" ".join(w) for w in words]


def shingles(texts, n=5):
    words = re.findall(r"\w+", unicodedata.normalize("NFC", "\n".join(texts)).lower())
    if len(words) < n:
        return {tuple(words)}
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def jaccard(a, b):
    return len(a & b) / max(len(a | b), 1)
