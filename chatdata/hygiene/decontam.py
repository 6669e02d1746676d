"""Decontamination: flag conversations that share a word n-gram (13 by default) with a benchmark
prompt. Words are those of :mod:`chatdata.hygiene.words` (format characters dropped, NFKC, case
folded, runs of ``\\w``); a conversation's words are those of its messages' texts, reasoning and
tool-call arguments, in order (:func:`scanned_texts`), and an n-gram may cross messages.

A benchmark is a list of prompts; :func:`load_prompts` reads them from JSON Lines / JSON or
Parquet (a column named by the user, or the first of ``prompt``, ``question``, ``problem``,
``input``, ``text``, ``messages``). The n-gram hashes of all prompts of a benchmark are one
sorted uint64 array (plus the prompt each came from); a chunk of conversations is checked with
one vectorised ``searchsorted``. A prompt shorter than ``n`` words (but at least ``min_words``)
matches where all its words appear in a row; shorter prompts are left out and counted.

Example:
    >>> from chatdata import History
    >>> bench = {"quiz": ["what is the capital city of the small european country of luxembourg today"]}
    >>> h = History.from_chats([[{"role": "user", "content": "Q: What is the capital city of the small "
    ...                           "European country of Luxembourg today? A: Luxembourg."}],
    ...                         [{"role": "user", "content": "hello"}]])
    >>> decontaminate(h, bench).tolist()
    [0]
"""
from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .columns import conversation_offsets, extra_values, message_texts, message_values
from .keyindex import KeyIndex
from .words import ngram_hashes, word_hashes

__all__ = ["decontaminate", "ContaminationIndex", "load_prompts", "scanned_texts", "PROMPT_COLUMNS"]

PROMPT_COLUMNS = ("prompt", "question", "problem", "input", "text", "messages")


def _as_text(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # a list of messages, or of strings
        parts = [m.get("content") if isinstance(m, dict) else m for m in value]
        return "\n".join(p for p in parts if isinstance(p, str))
    return None


def load_prompts(path, column: str | None = None) -> list[str]:
    """The prompts of a benchmark file: ``.jsonl`` / ``.json`` (optionally ``.gz``) or
    ``.parquet``; ``column`` names the field (default: the first of :data:`PROMPT_COLUMNS` the
    file has). A value may be a string or a list of messages (their contents are joined).

    Example:
        >>> p = Path("bench.jsonl"); _ = p.write_text('{"question": "a b"}\\n{"question": "c"}\\n')
        >>> load_prompts(p)
        ['a b', 'c']
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a folder, not a benchmark file")
    if not path.is_file():
        raise ValueError(f"{path}: no such benchmark file")
    name = path.name.lower()
    if name.endswith(".parquet"):
        col, rows = _parquet_column(path, column)
    else:
        records = _json_records(path, _read_text(path, name.endswith(".gz")))
        if not records:
            raise ValueError(f"{path}: the file holds no records")
        if column is None and all(isinstance(r, str) for r in records):
            col, rows = None, records  # a list of prompts
        else:
            keys = sorted({k for r in records if isinstance(r, dict) for k in r})
            col = _pick(column, keys, path)
            rows = [r.get(col) if isinstance(r, dict) else None for r in records]
    texts = [t for t in map(_as_text, rows) if t]
    if not texts:
        raise ValueError(f"{path}: no text in column {col!r}" if col is not None else f"{path}: no text")
    return texts


def _read_text(path: Path, gz: bool) -> str:
    """The file's text: UTF-8 (a byte-order mark is dropped), gunzipped for ``.gz``."""
    import zlib

    try:
        raw = gzip.open(path, "rb").read() if gz else path.read_bytes()
    except (OSError, EOFError, zlib.error) as err:
        raise ValueError(f"{path}: cannot be read{' as gzip' if gz else ''} ({err})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise ValueError(f"{path}:line {line}: not UTF-8 (byte 0x{raw[err.start]:02x}); re-encode the file as "
                         f"UTF-8") from None


def _json_records(path: Path, raw: str) -> list:
    """One JSON document (a list of records, or one record), else JSON Lines."""
    try:
        doc = json.loads(raw)
        return doc if isinstance(doc, list) else [doc]
    except (ValueError, RecursionError):
        pass
    records = []
    for lineno, line in enumerate(raw.splitlines(), 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except (ValueError, RecursionError) as err:
                why = err if isinstance(err, ValueError) else "nested too deeply"
                raise ValueError(f"{path}:line {lineno}: invalid JSON ({why})") from None
    return records


def _parquet_column(path: Path, column: str | None) -> tuple[str, list]:
    from .deps import require_parquet

    pq = require_parquet()
    import pyarrow as pa

    try:
        col = _pick(column, pq.read_schema(path).names, path)
        return col, pq.read_table(path, columns=[col]).column(col).to_pylist()
    except (pa.ArrowException, OSError) as err:
        raise ValueError(f"{path}: not a readable Parquet file ({err})") from None


def _pick(column, names, path) -> str:
    if column is not None:
        if column not in names:
            raise ValueError(f"{path} has no column {column!r}; columns: {', '.join(map(str, names)) or 'none'}")
        return column
    for c in PROMPT_COLUMNS:
        if c in names:
            return c
    raise ValueError(f"{path}: none of the columns {', '.join(PROMPT_COLUMNS)}; name one with "
                     f"--decontaminate-column (columns: {', '.join(map(str, names)) or 'none'})")


class ContaminationIndex:
    """Hashed n-grams of the prompts of one or more benchmarks (``{name: [prompt, ...]}``)."""

    def __init__(self, benchmarks: dict[str, list[str]], n: int = 13, *, min_words: int = 8):
        for what, value in (("n", n), ("min_words", min_words)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{what} must be an integer >= 1, got {value!r}")
        n, min_words = int(n), int(min_words)
        self.n = n
        self.min_words = min(min_words, n)
        if not isinstance(benchmarks, dict):
            raise TypeError(f"ContaminationIndex takes {{benchmark name: [prompt, ...]}}, got {type(benchmarks).__name__}")
        self.prompts = as_benchmarks(benchmarks)  # every prompt a str, or a TypeError naming it
        self.names = list(self.prompts)
        self.skipped = {}  # benchmark -> prompts too short to use
        # per gram length: gram hash -> benchmark number << 40 | prompt number
        self._tables: dict[int, KeyIndex] = {}
        parts: dict[int, list] = {}
        for b, name in enumerate(self.names):
            h, off = word_hashes(self.prompts[name])
            lengths = np.diff(off)
            self.skipped[name] = int((lengths < self.min_words).sum())
            grams, goff = ngram_hashes(h, off, n)
            owner = np.repeat(np.arange(len(lengths)), np.diff(goff))
            parts.setdefault(n, []).append((grams, np.full(len(grams), b), owner))
            for k in sorted(set(lengths[(lengths >= self.min_words) & (lengths < n)].tolist())):
                which = np.flatnonzero(lengths == k)
                whole, woff = ngram_hashes(h, off, k)
                gk = np.diff(woff)
                owner_k = np.repeat(np.arange(len(lengths)), gk)
                sel = np.isin(owner_k, which)
                parts.setdefault(k, []).append((whole[sel], np.full(int(sel.sum()), b), owner_k[sel]))
        for k, items in parts.items():
            table = self._tables[k] = KeyIndex()
            table.add(np.concatenate([x[0] for x in items]),
                      np.concatenate([(x[1].astype(np.int64) << 40) | x[2] for x in items]))

    def __len__(self) -> int:
        return sum(map(len, self._tables.values()))

    def scan_texts(self, texts: list[str], groups: np.ndarray | None = None) -> list[tuple[int, int, int]]:
        """``(group, benchmark number, prompt number)`` of the first match of each group of texts
        with each benchmark; ``groups`` maps text -> group (offsets, default: one group per text).
        A group's words run on from one text to the next, so a prompt split over two messages is
        found as one run."""
        h, off = word_hashes(texts)
        groups = np.arange(len(texts) + 1) if groups is None else np.asarray(groups, dtype=np.int64)
        group_words = off[groups]
        hits = set()
        out = []
        for k, table in self._tables.items():
            grams, goff = ngram_hashes(h, group_words, k)
            q, v = table.lookup(grams)
            if not len(q):
                continue
            group_of = np.searchsorted(goff, q, side="right") - 1
            for g, code in zip(group_of.tolist(), v.tolist()):
                key = (g, code >> 40)
                if key not in hits:
                    hits.add(key)
                    out.append((g, code >> 40, code & ((1 << 40) - 1)))
        out.sort()
        return out

    def scan(self, history) -> list[tuple[int, int, int]]:
        """``(conversation, benchmark number, prompt number)`` for each conversation of ``history``
        and each benchmark it shares an n-gram with (the first such prompt). A conversation's words
        are those of :func:`scanned_texts`, in order."""
        return self.scan_texts(*scanned_texts(history))


def scanned_texts(history) -> tuple[list[str], np.ndarray]:
    """``(texts, offsets)``: what decontamination reads of each conversation (conversation ``i``
    is ``texts[offsets[i]:offsets[i+1]]``): per message its text, then its ``reasoning_content``,
    then the string values of its tool calls' arguments (a JSON string of arguments is decoded),
    so a benchmark item in a model's reasoning or in a search query it sends is found.

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "user", "content": "q"}, {"role": "assistant", "content": "",
        ...     "reasoning_content": "r", "tool_calls": [{"name": "f", "arguments": '{"x": ["s", 1]}'}]}]])
        >>> scanned_texts(h)
        (['q', '', 'r', 's'], array([0, 4]))
    """
    texts = message_texts(history)
    offsets = conversation_offsets(history)
    calls = message_values(history, "tool_calls")
    extras = extra_values(history)
    if all(c is None for c in calls) and not any(extras):
        return texts, offsets
    out, per_message = [], np.empty(len(texts), dtype=np.int64)
    for k, (text, c, e) in enumerate(zip(texts, calls, extras)):
        start = len(out)
        out.append(text)
        if e and isinstance(e.get("reasoning_content"), str):
            out.append(e["reasoning_content"])
        for call in c or ():
            fn = call.get("function") if isinstance(call, dict) and isinstance(call.get("function"), dict) else call
            args = fn.get("arguments") if isinstance(fn, dict) else None
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except (ValueError, RecursionError):
                    pass  # not JSON: its text as it is
            _strings(args, out)
        per_message[k] = len(out) - start
    bounds = np.concatenate([[0], np.cumsum(per_message)])
    return out, bounds[offsets]


def _strings(value, out: list) -> None:
    """Append the strings inside a JSON value (depth first, dict values in order)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))


def as_benchmarks(prompts) -> dict[str, list[str]]:
    """``{name: prompts}`` from a dict, a list of prompts (named ``"prompts"``), or a file path;
    every prompt must be a string.

    Example:
        >>> as_benchmarks({"quiz": "one prompt"})
        Traceback (most recent call last):
        ...
        TypeError: benchmark 'quiz' must be a list of prompt strings, got str
    """
    if isinstance(prompts, (str, Path)):
        if not Path(prompts).exists() and isinstance(prompts, str):
            raise ValueError(f"{prompts[:80]!r}: no such benchmark file (pass prompts as a list of strings)")
        return {Path(prompts).name: load_prompts(prompts)}
    out = {str(k): v for k, v in prompts.items()} if isinstance(prompts, dict) else {"prompts": prompts}
    for name, items in out.items():
        if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
            raise TypeError(f"benchmark {name!r} must be a list of prompt strings, got {type(items).__name__}")
        items = list(items)
        bad = next((j for j, p in enumerate(items) if not isinstance(p, str)), None)
        if bad is not None:
            raise TypeError(f"benchmark {name!r}: prompt {bad} is a {type(items[bad]).__name__}, not a string")
        out[name] = list(items)
    return out


def as_index(prompts, n: int | None = None) -> ContaminationIndex:
    """``prompts`` as a :class:`ContaminationIndex` of ``n``-grams (13 when ``None``). An index is
    returned as it is; an ``n`` that differs from its own is a ValueError, never silently ignored.

    Example:
        >>> as_index(["one two three four"], n=3).n
        3
    """
    if isinstance(prompts, ContaminationIndex):
        if n is not None and n != prompts.n:
            raise ValueError(f"n={n!r} differs from the ContaminationIndex's n={prompts.n}: build the index "
                             f"with n={n!r}, or leave n out to use the index's")
        return prompts
    return ContaminationIndex(as_benchmarks(prompts), 13 if n is None else n)


def decontaminate(history, prompts, n: int | None = None) -> np.ndarray:
    """Indices (int64, increasing) of the conversations of ``history`` that share a word
    ``n``-gram with a prompt (13 words unless ``n`` says; an index keeps its own ``n``). ``prompts``:
    a list of strings, ``{benchmark: [prompt, ...]}``, a :class:`ContaminationIndex`, or the path of a
    benchmark file (:func:`load_prompts`).

    Example:
        >>> from chatdata import History
        >>> h = History.from_chats([[{"role": "user", "content": "one two three"}]])
        >>> decontaminate(h, ["one two three four"], n=3).tolist()
        [0]
    """
    index = as_index(prompts, n)
    return np.array(sorted({c for c, _, _ in index.scan(history)}), dtype=np.int64)
