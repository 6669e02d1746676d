"""Ray Data bridge (thin, over :mod:`chatdata.io`): read a dataset as blocks, tokenize on the
cluster with chatdata's template engine, write sharded datasets from many workers.

* :func:`read` - a ``ray.data.Dataset`` of ``{"messages": [...]}`` rows, one block per shard
  (each worker maps its shard and hands Ray a zero-copy Arrow table);
* :func:`write` - every batch of ``rows_per_shard`` rows is written by a worker as one shard;
  the driver then adds all shards to ``manifest.json`` in one atomic update;
* :func:`tokenize` - ``map_batches`` over ``History.apply_chat_template``: rows of
  ``input_ids`` (int32) and ``assistant_masks`` (bool). ``write`` turns it into a sharded
  token set that :func:`chatdata.open_dataset` (and training code) reads lazily;
* :mod:`chatdata.ray.hygiene` - tool-call checks, exact / near deduplication and decontamination
  on the cluster (the same results as :mod:`chatdata.hygiene` on the same rows).

Workers must see the dataset path (one machine, or a shared file system) and import chatdata.

Example:
    >>> import ray, chatdata.ray as cray                                     # doctest: +SKIP
    >>> ray.init(num_cpus=2, include_dashboard=False)                        # doctest: +SKIP
    >>> ds = cray.read("corpus/")                                            # doctest: +SKIP
    >>> toks = cray.tokenize(ds, tokenizer="tok/", chat_template_name="qwen")  # doctest: +SKIP
    >>> cray.write(toks, "tokens/", rows_per_shard=100_000)                  # doctest: +SKIP
"""
from __future__ import annotations

import contextlib
import functools
import os
from pathlib import Path

from ..io.counts import check_count
from ..io.deps import require_pyarrow, require_ray

__all__ = ["read", "write", "tokenize"]


def _load_table(path: str, column: str, as_json=()):
    from ..io.shard_tables import shard_to_arrow

    table = shard_to_arrow(path, column)
    if as_json:
        from ..io.arrow_json import as_json_text

        table = as_json_text(table, column, set(as_json))
    return table


def _load_table_and_schema(path: str, column: str):
    from ..io.arrow_check import key_orders

    table = _load_table(path, column)
    # two objects: the driver fetches only the small one (the schema and the key orders its values hold)
    return table, (table.schema, key_orders(table, column))


def read(path, *, column: str = "messages"):
    """A ``ray.data.Dataset`` over a plain or sharded chatdata dataset, one block per shard;
    History rows are ``{column: [message, ...]}``, token rows ``{"input_ids", "assistant_masks"}``.
    A text field that is JSON in some shards and plain in others, and a field whose keys Ray's one
    schema for all blocks would reorder, is JSON text in every block.

    Example:
        >>> chatdata.ray.read("corpus/").count()   # doctest: +SKIP
        1000000
    """
    ray = require_ray()
    from ..io.sharded import ShardedDataset, open_dataset

    obj = open_dataset(path)
    paths = [str(p.absolute()) for p in obj.shard_paths()] if isinstance(obj, ShardedDataset) else \
        [str(Path(path).absolute())]
    if not paths:
        from ..io.stitch import empty_history

        return ray.data.from_arrow(empty_history().to_arrow(column))
    if len(paths) < 2 or getattr(obj, "kind", "History") not in ("History", None):
        load = ray.remote(_load_table)
        return ray.data.from_arrow_refs([load.remote(p, column) for p in paths])
    from ..io.arrow_check import fields_to_join_as_json

    # Ray joins blocks into batches under the first block's schema: a field that is JSON text in one
    # shard (content parts mixed with str) and plain in another would be misread in the batch. Such
    # shards are loaded again with the field as JSON text in every block.
    both = [ray.remote(num_returns=2)(_load_table_and_schema).remote(p, column) for p in paths]
    refs = [table for table, _ in both]
    infos = ray.get([info for _, info in both])
    # also fields of types one schema cannot hold, and structs whose keys one schema would reorder (tool
    # arguments {"b", "a"} in one shard, {"a", "b"} in another: Ray's joined block would give both one order)
    names = sorted(fields_to_join_as_json([s for s, _ in infos], column, [o for _, o in infos]))
    if names:
        refs = [ray.remote(_load_table).remote(p, column, names) for p in paths]
    return ray.data.from_arrow_refs(refs)


@contextlib.contextmanager
def _ordered(ds=None):
    """Row order kept while this block runs: on the current DataContext, and on the context of
    ``ds`` (a Dataset carries the context it was made with, shared with what derives from it)."""
    import ray.data

    contexts = [ray.data.DataContext.get_current()] + ([ds.context] if ds is not None else [])
    olds = [c.execution_options.preserve_order for c in contexts]
    for c in contexts:
        c.execution_options.preserve_order = True
    try:
        yield
    finally:
        for c, old in zip(contexts, olds):
            c.execution_options.preserve_order = old


def _write_batch(batch, out: str, column: str, job: str):
    """One batch -> one shard; a batch that cannot be one returns its error instead of raising it:
    only the driver, which counts the rows of the batches before it, can name the dataset's row."""
    pa = require_pyarrow()
    from ..io.shard_writer import shard_from_arrow, write_shard

    try:
        obj, kind = shard_from_arrow(batch, column)
    except (ValueError, TypeError) as err:
        return pa.table({"path": [""], "items": [batch.num_rows], "kind": [""], "error": [str(err)]})
    return write_shard(obj, kind, out, job).append_column("error", pa.array([None], pa.string()))


def _at_row(message: str, first: int, n: int) -> str:
    """A batch's error as the dataset's: ``row 1: ...`` of the batch of rows ``first..`` becomes
    ``row first+1: ...``; an error of the whole batch names its rows."""
    import re

    m = re.match(r"(?:row|chat) (\d+)(.*)", message, re.S)
    if m:
        return f"row {first + int(m[1])}{m[2]}"
    return f"rows {first} to {first + n - 1}: {message}"


def write(ds, path, *, rows_per_shard: int = 100_000, column: str = "messages", overwrite: bool = False):
    """Write the Ray dataset ``ds`` (rows of the one ``column`` of messages, or token rows from
    :func:`tokenize`; a message row with other columns is refused, as a shard cannot keep them) as a
    sharded chatdata dataset at ``path``: workers write shards of at most ``rows_per_shard``
    rows in parallel, then the driver commits them to the manifest at once (in row order).
    Appends to an existing sharded dataset unless ``overwrite``. Returns the ShardedDataset. A bad
    row raises ValueError naming it (its place in ``ds``) at the first batch that holds one; then,
    and if a worker fails, nothing is committed and the shards the workers wrote are removed: the
    folder is as it was, and the same call can be retried. A folder holding only the shards of a
    write that was killed before its commit is written into as an empty one (they stay leftovers).

    Example:
        >>> chatdata.ray.write(ds, "corpus/", rows_per_shard=100_000).num_shards   # doctest: +SKIP
        10
    """
    require_ray()
    from ..io.sharded import (ShardedDataset, commit_shards, is_sharded, missing_folders, remove_empty,
                              remove_job_shards, remove_replaced, uncommitted_shards, MANIFEST, SHARDS)
    import uuid

    rows_per_shard = check_count("rows_per_shard", rows_per_shard)
    out = Path(path).absolute()
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} is a file; give a folder for the sharded dataset")
    if out.exists() and not is_sharded(out) and uncommitted_shards(out) is None:  # a killed write's folder: go on
        raise ValueError(f"{out} is a non-empty folder that is not a sharded chatdata dataset")
    made, job = missing_folders(out), uuid.uuid4().hex[:16]
    (out / SHARDS).mkdir(parents=True, exist_ok=True)
    try:
        with _ordered(ds):
            written = ds.map_batches(functools.partial(_write_batch, out=str(out), column=column, job=job),
                                     batch_size=rows_per_shard, batch_format="pyarrow", zero_copy_batch=True)
            rows, first, it = [], 0, iter(written.iter_rows())
            try:
                for r in it:  # in row order: the rows before a bad batch are counted when it comes
                    if r["error"] is not None:
                        raise ValueError(_at_row(r["error"], first, int(r["items"])))
                    rows.append(r)
                    first += int(r["items"])
            finally:
                getattr(it, "close", lambda: None)()  # stops the job at the first bad batch
        entries = [{"path": r["path"], "items": int(r["items"])} for r in rows]
        kinds = {r["kind"] for r in rows}
        if len(kinds) > 1:
            raise ValueError(f"the rows mix {sorted(kinds)}; write messages and tokens to separate datasets")
        kind = kinds.pop() if kinds else "History"
        old = ShardedDataset(out).manifest["shards"] if overwrite and (out / MANIFEST).is_file() else []
        commit_shards(out, entries, kind, replace=overwrite)
    except BaseException:  # a failed worker, mixed kinds, a dataset of the other kind: commit nothing, keep nothing
        remove_job_shards(out, job)
        remove_empty(made)
        raise
    remove_replaced(out, old, entries)  # replaced: no manifest names them any more
    return ShardedDataset(out)


@functools.lru_cache(maxsize=4)
def _tokenizer(path: str | None):
    import os

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers import AutoTokenizer

    if path is None:
        from ..data import sample_tokenizer_path

        path = sample_tokenizer_path()
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def tokenize_batch(batch, *, tokenizer=None, chat_template_name=None, chat_template=None, tools=None,
                   max_length=None, column: str = "messages"):
    """One batch (a ``pyarrow.Table`` of message rows) -> a table of ``input_ids`` (int32 lists)
    and ``assistant_masks`` (bool lists), by ``History.apply_chat_template``. ``tokenizer`` is a
    path (loaded once per worker process) or a tokenizer object."""
    pa = require_pyarrow()
    from ..history import History
    from ..io.arrow_columns import tensor_buffer, tensor_to_array

    if max_length is not None:
        max_length = check_count("max_length (None for no limit)", max_length, minimum=0)
    tok = _tokenizer(tokenizer) if tokenizer is None or isinstance(tokenizer, (str, Path)) else tokenizer
    h = History.from_arrow(batch, column)
    out = h.apply_chat_template(tokenizer=tok, chat_template_name=chat_template_name, chat_template=chat_template,
                                tools=tools, tokenize=True, return_assistant_tokens_mask=True,
                                add_generation_prompt=False)
    import torch

    offsets = out.offsets.to(torch.int64)
    ids = out.values["input_ids"].to(torch.int32)
    masks = out.values["assistant_masks"].to(torch.bool)
    if max_length is not None:
        lengths = (offsets[1:] - offsets[:-1]).clamp(max=max_length)
        keep = torch.cat([torch.arange(a, a + n) for a, n in zip(offsets[:-1].tolist(), lengths.tolist())]) \
            if len(lengths) else torch.zeros(0, dtype=torch.int64)
        ids, masks = ids[keep], masks[keep]
        offsets = torch.zeros_like(offsets)
        torch.cumsum(lengths, 0, out=offsets[1:])
    off = pa.Array.from_buffers(pa.int64(), offsets.numel(), [None, tensor_buffer(offsets.contiguous())])
    return pa.table({"input_ids": pa.LargeListArray.from_arrays(off, tensor_to_array(ids)),
                     "assistant_masks": pa.LargeListArray.from_arrays(off, tensor_to_array(masks))})


def tokenize(ds, *, tokenizer=None, chat_template_name: str | None = None, chat_template: str | None = None,
             tools=None, max_length: int | None = None, column: str = "messages", batch_size: int = 256,
             num_cpus: float = 1):
    """A Ray dataset of ``input_ids`` / ``assistant_masks`` rows: ``map_batches`` over
    ``History.apply_chat_template`` (the same tokens as calling it on the same rows).
    ``tokenizer``: a local tokenizer folder (default: the Qwen2.5 tokenizer shipped with chatdata);
    a relative path that exists here is made absolute first (the workers run in other folders).

    Example:
        >>> toks = chatdata.ray.tokenize(chatdata.ray.read("corpus/"), tokenizer="tok/")   # doctest: +SKIP
        >>> toks.take(1)[0].keys()                                                         # doctest: +SKIP
        dict_keys(['input_ids', 'assistant_masks'])
    """
    require_ray()
    batch_size = check_count("batch_size", batch_size)
    if max_length is not None:  # checked here too, so that a bad one fails before Ray starts work
        max_length = check_count("max_length (None for no limit)", max_length, minimum=0)
    if isinstance(tokenizer, (str, os.PathLike)):
        # a Ray worker's working folder is its session's, not the caller's: "tok/" would name nothing there
        tokenizer = os.path.abspath(tokenizer) if os.path.exists(tokenizer) else os.fspath(tokenizer)
    fn = functools.partial(tokenize_batch, tokenizer=tokenizer,
                           chat_template_name=chat_template_name, chat_template=chat_template, tools=tools,
                           max_length=max_length, column=column)
    return ds.map_batches(fn, batch_size=batch_size, batch_format="pyarrow", zero_copy_batch=True, num_cpus=num_cpus)
