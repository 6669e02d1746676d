"""``dedup(history, mode, threshold)``: the conversations to keep, exact or near duplicates
removed (the first of each cluster stays), and ``find_duplicates``, which says for each
conversation which kept one it repeats.

Example:
    >>> from chatdata import History
    >>> h = History.from_chats([[{"role": "user", "content": "Hi  there"}], [{"role": "user", "content": "hi"}],
    ...                         [{"role": "user", "content": "Hi there"}]])
    >>> dedup(h).tolist()
    [0, 1]
"""
from __future__ import annotations

import numpy as np

from .columns import conversation_offsets
from .exact import ExactDeduper
from .near import NearDeduper
from .normalize import conversation_hashes, message_items

__all__ = ["dedup", "find_duplicates", "parse_dedup", "conversation_signatures", "MODES"]

MODES = ("exact", "near")


def parse_dedup(spec: str) -> tuple[str, float]:
    """``"exact"`` / ``"near"`` / ``"near:0.9"`` -> ``(mode, threshold)``; ValueError otherwise.

    Example:
        >>> parse_dedup("near:0.9")
        ('near', 0.9)
    """
    mode, _, rest = spec.partition(":")
    if mode not in MODES:
        raise ValueError(f"--dedup takes exact, near or near:THRESHOLD, got {spec!r}")
    if mode == "exact":
        if rest:
            raise ValueError(f"--dedup exact takes no threshold, got {spec!r}")
        return mode, 1.0
    try:
        threshold = float(rest) if rest else 0.8
    except ValueError:
        raise ValueError(f"--dedup near:THRESHOLD needs a number, got {rest!r}") from None
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"the near-duplicate threshold must be strictly between 0 and 1 (0 < T < 1; 'exact' "
                         f"finds equal conversations), got {threshold}")
    return mode, threshold


def conversation_signatures(history, deduper: NearDeduper) -> np.ndarray:
    """MinHash signatures (uint32, one row per conversation) of the words of all its messages:
    their texts, tool calls (name and arguments) and ``reasoning_content``, as the exact key
    reads them (:func:`~chatdata.hygiene.near.group_signatures`; a conversation with no word is
    one word of its roles and normalized texts).

    Example:
        >>> from chatdata import History
        >>> conversation_signatures(History.from_chats([[{"role": "user", "content": "a b"}]]), NearDeduper()).shape
        (1, 128)
    """
    from .near import group_signatures

    roles, texts = message_items(history)
    return group_signatures(texts, conversation_offsets(history), num_perm=deduper.num_perm,
                            shingle=deduper.shingle, seed=deduper.seed, roles=roles)


def find_duplicates(history, mode: str = "exact", threshold: float = 0.8, *, chunk: int = 65536):
    """``(duplicate_of, similarity)``: per conversation, the index of the kept conversation it
    duplicates (-1: kept) and, for near duplicates, the estimated Jaccard similarity (1.0 for
    exact ones, NaN for kept ones).

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "user", "content": "x"}], [{"role": "user", "content": " x"}]])
        >>> find_duplicates(h)[0].tolist()
        [-1, 0]
    """
    if mode not in MODES:
        raise ValueError(f"mode must be 'exact' or 'near', got {mode!r}")
    if not isinstance(chunk, (int, np.integer)) or isinstance(chunk, bool) or chunk < 1:
        raise ValueError(f"chunk must be an integer >= 1 (conversations per pass), got {chunk!r}")
    n = len(conversation_offsets(history)) - 1
    sim = np.full(n, np.nan)
    if mode == "exact":
        out = ExactDeduper().add(conversation_hashes(history))
        sim[out >= 0] = 1.0
        return out, sim
    near = NearDeduper(threshold)
    parts = []
    for a in range(0, n, chunk):
        parts.append(near.add(conversation_signatures(history[a:a + chunk], near)))
    out = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    for i, s in near.similarity.items():
        sim[i] = s
    return out, sim


def dedup(history, mode: str = "exact", threshold: float = 0.8) -> np.ndarray:
    """Indices (int64, increasing) of the conversations to keep: the first of each group of
    duplicates. ``mode="exact"``: equal after format-character, NFC and whitespace normalization
    (roles, texts, tool calls); ``"near"``: MinHash-LSH over word 5-grams, estimated Jaccard >= ``threshold``.

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "user", "content": "a b c d e f g h"}],
        ...                         [{"role": "user", "content": "a b c d e f g h!"}]])
        >>> dedup(h, "near").tolist()
        [0]
    """
    out, _ = find_duplicates(history, mode, threshold)
    return np.flatnonzero(out < 0)
