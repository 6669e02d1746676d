"""One Arrow table -> one new shard folder of a sharded dataset (the Ray Data writer's step).

It sits above both :mod:`chatdata.io.shard_tables` (the table <-> shard conversions) and
:mod:`chatdata.io.shard_manifest` (the dataset's layout and shard names), which it joins; neither of
those imports the other's writer, so the two stay free of an import circle.

Example:
    >>> import pyarrow as pa
    >>> table = pa.table({"messages": [[{"role": "user", "content": "hi"}]]})
    >>> write_shard_from_arrow(table, "corpus").column("items").to_pylist()
    [1]
"""
from __future__ import annotations

from pathlib import Path

from .deps import require_pyarrow
from .shard_tables import ragged_from_arrow
from .shard_manifest import SHARDS, new_shard_name

__all__ = ["write_shard_from_arrow", "shard_from_arrow", "write_shard"]


def shard_from_arrow(table, column: str = "messages"):
    """``(obj, kind)``: the History (``"History"``) or ragged token stack (``"tokens"``) that
    ``table`` (message rows, or token rows) becomes as a shard. Raises ValueError / TypeError
    naming the row (``row N: ...``) or the column a shard cannot hold."""
    pa = require_pyarrow()
    from ..history import History

    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    if column in table.column_names:
        others = [c for c in table.column_names if c != column]
        if others:  # a History shard holds the messages only: the other columns would be dropped unsaid
            raise ValueError(f"rows have columns {others} besides {column!r}, which a History shard cannot hold; "
                             f"drop them first (ray: ds.select_columns([{column!r}])) or keep them in a dataset "
                             "of their own")
        return History.from_arrow(table, column), "History"
    if "input_ids" in table.column_names:
        return ragged_from_arrow(table), "tokens"
    raise ValueError(f"rows have columns {table.column_names}; expected {column!r} or 'input_ids'")


def write_shard(obj, kind: str, out, job: str | None = None):
    """Write ``obj`` (from :func:`shard_from_arrow`) as a new shard under ``out/shards/``; returns
    a one-row table ``{path, items, kind}`` describing it (the manifest is not touched)."""
    pa = require_pyarrow()
    name = f"{SHARDS}/{new_shard_name(job)}"
    target = Path(out) / name
    target.parent.mkdir(parents=True, exist_ok=True)
    obj.memmap(str(target), copy_existing=True)  # a loaded (memory-mapped) dataset is copied in
    return pa.table({"path": [name], "items": [int(obj.batch_size[0])], "kind": [kind]})


def write_shard_from_arrow(table, out, column: str = "messages", job: str | None = None):
    """Write ``table`` (message rows, or token rows) as a new shard under ``out/shards/``; returns
    a one-row table ``{path, items, kind}`` describing it (the manifest is not touched). ``job``
    goes into the shard's name (see :func:`~chatdata.io.shard_manifest.new_shard_name`)."""
    obj, kind = shard_from_arrow(table, column)
    return write_shard(obj, kind, out, job)
