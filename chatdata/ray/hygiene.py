"""Hygiene on Ray Data: the checks of :mod:`chatdata.hygiene` over a ``ray.data.Dataset`` of
message rows (what :func:`chatdata.ray.read` gives), with results indexed by row position.

* :func:`check_tool_calls` - problems, as the local function (``conversation`` = row number);
* :func:`dedup` - the row numbers to keep. Exact: the workers hash, the driver keeps the first
  of each key (16 bytes per row). Near, in two passes: (1) the workers compute each row's MinHash
  signature and LSH band keys; (2) the driver reads only the band keys (8 bytes per band per row),
  finds the rows that share a band with another row, fetches just those rows' signatures from the
  workers' blocks, and decides them in row order with the same :class:`~chatdata.hygiene.near.NearDeduper`
  as the local run, so the kept set is the same;
* :func:`find_duplicates` - per row, the kept row it repeats and the estimated similarity (why
  :func:`dedup` drops it), as the local function;
* :func:`decontaminate` - the row numbers that share an n-gram with a benchmark prompt;
* :func:`select` - a dataset of the given rows (in order), e.g. the kept ones, for :func:`chatdata.ray.write`.

Example:
    >>> import ray, chatdata.ray as cray, chatdata.ray.hygiene as rhy   # doctest: +SKIP
    >>> ds = cray.read("corpus/")                                        # doctest: +SKIP
    >>> kept = rhy.dedup(ds, mode="near", threshold=0.8)                 # doctest: +SKIP
    >>> cray.write(rhy.select(ds, kept), "clean/")                       # doctest: +SKIP
"""
from __future__ import annotations

import functools

import numpy as np

from ..io.deps import require_pyarrow, require_ray

__all__ = ["check_tool_calls", "dedup", "find_duplicates", "decontaminate", "select"]


def _blocks(ds, fn, **kwargs):
    """Object refs of the Arrow blocks of ``ds.map_batches(fn)``, in row order."""
    from . import _ordered

    with _ordered(ds):
        out = ds.map_batches(fn, batch_format="pyarrow", zero_copy_batch=True, **kwargs).materialize()
        return out.to_arrow_refs()


def _history(batch, column):
    from ..history import History

    return History.from_arrow(batch, column)


def _tool_batch(batch, *, tools, column):
    pa = require_pyarrow()
    import json

    from ..hygiene import check_tool_calls as check

    problems = check(_history(batch, column), tools)
    return pa.table({"rows": [batch.num_rows], "problems": [json.dumps(problems)]})


def check_tool_calls(ds, tools=None, *, column: str = "messages", batch_size: int = 4096) -> list[dict]:
    """Tool-call problems of every row of ``ds`` (see :func:`chatdata.hygiene.check_tool_calls`);
    ``conversation`` is the row number in ``ds``.

    Example:
        >>> chatdata.ray.hygiene.check_tool_calls(ds)[:1]   # doctest: +SKIP
        [{'conversation': 12, 'message': 1, 'problem': 'arguments_not_json', 'detail': ...}]
    """
    ray = require_ray()
    import json

    refs = _blocks(ds, functools.partial(_tool_batch, tools=tools, column=column), batch_size=batch_size)
    out, start = [], 0
    for t in ray.get(refs):
        for rows, problems in zip(t.column("rows").to_pylist(), t.column("problems").to_pylist()):
            for p in json.loads(problems):
                p["conversation"] += start
                out.append(p)
            start += rows
    return out


def _exact_batch(batch, *, column):
    pa = require_pyarrow()
    from ..hygiene.normalize import conversation_hashes

    return pa.table({"key": pa.array(conversation_hashes(_history(batch, column)), pa.uint64())})


def _near_batch(batch, *, threshold, column):
    pa = require_pyarrow()
    from ..hygiene.dedup import conversation_signatures
    from ..hygiene.near import NearDeduper

    d = NearDeduper(threshold)
    sig = conversation_signatures(_history(batch, column), d)
    keys = d.band_keys(sig)
    n = len(sig)
    return pa.table({"keys": pa.FixedSizeListArray.from_arrays(pa.array(keys.reshape(-1), pa.uint64()), d.bands),
                     "sig": pa.FixedSizeListArray.from_arrays(pa.array(sig.reshape(-1), pa.uint32()), d.num_perm)}) \
        if n else pa.table({"keys": pa.array([], pa.list_(pa.uint64(), d.bands)),
                            "sig": pa.array([], pa.list_(pa.uint32(), d.num_perm))})


def _flat_column(table, name: str, dtype) -> np.ndarray:
    col = table.column(name).combine_chunks()
    width = col.type.list_size if hasattr(col.type, "list_size") else 1
    values = col.flatten() if width > 1 or hasattr(col.type, "list_size") else col
    return np.asarray(values.to_numpy(zero_copy_only=False), dtype=dtype).reshape(len(col), -1)


def _column(table, name):
    return table.select([name])


def _take(table, rows):
    import pyarrow as pa

    return table.take(pa.array(rows, pa.int64()))


def find_duplicates(ds, mode: str = "exact", threshold: float = 0.8, *, column: str = "messages",
                    batch_size: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """``(duplicate_of, similarity)`` per row of ``ds``: the row number of the kept row it
    repeats (-1: kept) and the estimated Jaccard similarity (1.0 for exact duplicates, NaN for
    kept rows), what :func:`chatdata.hygiene.find_duplicates` gives for the same rows in the
    same order: why each dropped row goes.

    Example:
        >>> dup, sim = chatdata.ray.hygiene.find_duplicates(ds, "near")   # doctest: +SKIP
        >>> dup[:4].tolist(), sim[2]                                      # doctest: +SKIP
        ([-1, -1, 0, -1], 0.9296875)
    """
    ray = require_ray()
    from ..hygiene.exact import ExactDeduper
    from ..hygiene.near import NearDeduper

    if mode not in ("exact", "near"):
        raise ValueError(f"mode must be 'exact' or 'near', got {mode!r}")
    if mode == "exact":
        refs = _blocks(ds, functools.partial(_exact_batch, column=column), batch_size=batch_size)
        keys = [t.column("key").to_numpy() for t in ray.get(refs)]
        keys = np.concatenate(keys).astype(np.uint64) if keys else np.zeros(0, dtype=np.uint64)
        dup = ExactDeduper().add(keys)
        return dup, np.where(dup >= 0, 1.0, np.nan)
    near = NearDeduper(threshold)
    refs = _blocks(ds, functools.partial(_near_batch, threshold=threshold, column=column), batch_size=batch_size)
    # pass 2: band keys only, then the signatures of the rows that share a band
    column_task = ray.remote(_column)
    parts = [_flat_column(t, "keys", np.uint64) for t in ray.get([column_task.remote(r, "keys") for r in refs])]
    sizes = [len(p) for p in parts]
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(starts[-1])
    out, sim = np.full(n, -1, dtype=np.int64), np.full(n, np.nan)
    if not n:
        return out, sim
    keys = np.concatenate(parts)
    shared = np.zeros(n, dtype=bool)
    for b in range(near.bands):
        _, inv, counts = np.unique(keys[:, b], return_inverse=True, return_counts=True)
        shared |= counts[inv.reshape(-1)] > 1
    cands = np.flatnonzero(shared)
    if not len(cands):
        return out, sim
    take_task = ray.remote(_take)
    block_of = np.searchsorted(starts, cands, side="right") - 1
    pending = []
    for k in np.unique(block_of).tolist():
        local = (cands[block_of == k] - starts[k]).tolist()
        pending.append(take_task.remote(refs[k], local))
    sig = np.concatenate([_flat_column(t, "sig", np.uint32) for t in ray.get(pending)])
    out[cands] = near.add(sig, keys[cands], ids=cands)
    for i, s in near.similarity.items():
        sim[i] = s
    return out, sim


def dedup(ds, mode: str = "exact", threshold: float = 0.8, *, column: str = "messages",
          batch_size: int = 4096) -> np.ndarray:
    """Row numbers (int64, increasing) of the rows of ``ds`` to keep: the same set
    :func:`chatdata.hygiene.dedup` gives for the same rows in the same order
    (:func:`find_duplicates` says which kept row each other one repeats).

    Example:
        >>> chatdata.ray.hygiene.dedup(ds, "near").tolist()[:3]   # doctest: +SKIP
        [0, 1, 3]
    """
    dup, _ = find_duplicates(ds, mode, threshold, column=column, batch_size=batch_size)
    return np.flatnonzero(dup < 0)


def _contam_batch(batch, *, index, column):
    pa = require_pyarrow()

    hits = sorted({c for c, _, _ in index.scan(_history(batch, column))})
    return pa.table({"rows": [batch.num_rows], "hits": [hits]}, schema=pa.schema([("rows", pa.int64()),
                                                                                    ("hits", pa.list_(pa.int64()))]))


def decontaminate(ds, prompts, n: int | None = None, *, column: str = "messages", batch_size: int = 4096) -> np.ndarray:
    """Row numbers (int64, increasing) of the rows of ``ds`` that share a word ``n``-gram with a
    prompt (``prompts`` as for :func:`chatdata.hygiene.decontaminate`).

    Example:
        >>> chatdata.ray.hygiene.decontaminate(ds, "gsm8k.jsonl").tolist()   # doctest: +SKIP
        [17, 204]
    """
    ray = require_ray()
    from ..hygiene.decontam import as_index

    index = as_index(prompts, n)
    refs = _blocks(ds, functools.partial(_contam_batch, index=index, column=column), batch_size=batch_size)
    out, start = [], 0
    for t in ray.get(refs):
        for rows, hits in zip(t.column("rows").to_pylist(), t.column("hits").to_pylist()):
            out.extend(start + h for h in hits)
            start += rows
    return np.array(out, dtype=np.int64)


def _count(table):
    return table.num_rows


def select(ds, rows) -> "object":
    """A Ray dataset of the rows ``rows`` (increasing row numbers, or a bool mask of one value per
    row) of ``ds``, in order. IndexError for a row past the end or what is not row numbers,
    ValueError for rows out of order or repeated.

    Example:
        >>> chatdata.ray.hygiene.select(ds, [0, 2]).count()   # doctest: +SKIP
        2
    """
    ray = require_ray()
    from . import _ordered

    from ..io.lazy_history import _as_ids

    with _ordered(ds):
        refs = ds.materialize().to_arrow_refs()
    counts = ray.get([ray.remote(_count).remote(r) for r in refs])
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    # a mask was read as rows 0 and 1, floats were truncated, rows past the end were dropped
    rows = _as_ids(rows, int(starts[-1])).numpy()
    if len(rows) > 1 and not bool((rows[1:] > rows[:-1]).all()):
        raise ValueError("select takes increasing row numbers (each once); np.unique(rows) sorts them")
    take_task = ray.remote(_take)
    out = []
    for k, ref in enumerate(refs):
        local = rows[(rows >= starts[k]) & (rows < starts[k + 1])] - starts[k]
        if len(local):
            out.append(take_task.remote(ref, local.tolist()))
    if not out:
        return ds.limit(0)
    return ray.data.from_arrow_refs(out)
