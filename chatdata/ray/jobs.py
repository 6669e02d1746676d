"""Whole jobs on a Ray cluster, for the ``chatdata`` command (``chatdata tokenize --ray``).

Example:
    >>> stats = tokenize_on_ray("corpus/", "tokens/", tokenizer="tok/")   # doctest: +SKIP
    >>> stats.conversations, stats.tokens                                 # doctest: +SKIP
    (1000000, 812000000)
"""
from __future__ import annotations

import os
import time
from pathlib import Path

__all__ = ["connect", "tokenize_on_ray", "RayTokenizeStats"]


class RayTokenizeStats:
    conversations = 0
    tokens = 0
    trained = 0
    seconds = 0.0
    shards = 0


def connect(address: str | None = None, num_cpus: int | None = None):
    """Join the Ray cluster at ``address``, or start a local one (``None`` / ``"local"``) whose
    workers import this chatdata. Returns True if this call started Ray (the caller shuts it down)."""
    from ..io.deps import require_ray

    ray = require_ray()
    if ray.is_initialized():
        return False
    if address in (None, "local"):
        root = str(Path(__file__).resolve().parents[2])  # workers import the same chatdata
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
        ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False, configure_logging=False)
    else:
        ray.init(address=address, log_to_driver=False, configure_logging=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    return True


def tokenize_on_ray(ds, out, *, tokenizer=None, chat_template: str | None = None, chat_template_name=None,
                    tools=None, max_length=None, batch_size: int = 256, rows_per_shard: int = 100_000,
                    overwrite: bool = False, address: str | None = None) -> RayTokenizeStats:
    """Read the dataset ``ds`` (plain or sharded) on a Ray cluster, tokenize it with
    :func:`chatdata.ray.tokenize`, and write the sharded token set ``out``."""
    from . import read, tokenize, write

    started = connect(address)
    t0 = time.perf_counter()
    try:
        toks = tokenize(read(ds), tokenizer=tokenizer, chat_template=chat_template,
                        chat_template_name=chat_template_name, tools=tools, max_length=max_length,
                        batch_size=batch_size)
        result = write(toks, out, rows_per_shard=rows_per_shard, overwrite=overwrite)
    finally:
        if started:
            import ray

            ray.shutdown()
    stats = RayTokenizeStats()
    stats.seconds = time.perf_counter() - t0
    stats.shards = result.num_shards
    stats.conversations = len(result)
    for k in range(result.num_shards):
        values = result.shard(k).values
        stats.tokens += values["input_ids"].numel()
        stats.trained += int(values["assistant_masks"].sum())
    return stats
