"""Parquet and Arrow IPC files <-> chatdata datasets, streaming (bounded memory).

Sources :func:`table_files` understands:

* a ``.parquet`` file, or a folder of them (searched recursively, e.g. a Hub repo's ``data/``);
* an Arrow IPC file or stream (``.arrow`` / ``.feather`` / ``.ipc``), or a folder of them;
* a ``datasets.Dataset.save_to_disk`` folder (its ``state.json`` lists the ``.arrow`` files).

:func:`import_tables` reads record batches of at most ``chunk_size`` rows (Parquet row groups
are read batch by batch, IPC files are memory-mapped), turns each into a History with
:func:`~chatdata.io.arrow_history.history_from_arrow` and appends it to a StreamWriter (or a
:class:`~chatdata.io.sharded.ShardedWriter`). A bad row (null, a null message, a message without
a role, a message chatdata cannot hold) is reported as ``file:row N: reason`` and skipped, as
bad JSONL lines are; a file whose messages column chatdata cannot read (two columns of that name,
a field of a type :mod:`~chatdata.io.arrow_check` refuses) is an error naming the file.
:func:`export_parquet` writes a dataset to one Parquet file.

Example:
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> pq.write_table(pa.table({"messages": [[{"role": "user", "content": "hi"}]] * 3}), "chats.parquet")
    >>> stats = import_tables("chats.parquet", "ds/")
    >>> stats.conversations
    3
"""
from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from ..td import FormatError, RaggedTensorDict
from .arrow_check import SHAREGPT_HINT, check_one_column, fields_to_join_as_json, key_orders
from .arrow_columns import empty_table
from .arrow_json import as_json_text
from .counts import check_count
from .deps import require_pyarrow
from .saved import saved_collection

__all__ = ["TABLE_SUFFIXES", "is_table_source", "table_files", "iter_batches", "import_tables", "export_parquet",
           "TableImportStats"]

TABLE_SUFFIXES = (".parquet", ".arrow", ".feather", ".ipc")
MAX_REPORTED = 20


def _is_table_file(p: Path, saved: bool | None = None) -> bool:
    # a file of a saved chatdata dataset (e.g. a History's typed copy, *.typed.arrow) is not a
    # table; a Parquet file beside some other meta.json (a Hub repository's) is. ``saved``:
    # saved_collection(p.parent), when the caller knows it
    if p.suffix.lower() not in TABLE_SUFFIXES or p.name.startswith("."):
        return False
    return not (saved_collection(p.parent) if saved is None else saved)


def _visible_files(folder: Path) -> list[Path]:
    """The files under ``folder``, sorted, leaving out hidden ones and those in hidden folders."""
    return sorted(f for f in folder.rglob("*") if f.is_file()
                  and not any(part.startswith(".") for part in f.relative_to(folder).parts))


def is_table_source(path) -> bool:
    """True if ``path`` is a Parquet / Arrow file, or a folder of them (not a chatdata dataset)."""
    p = Path(path)
    if p.is_file():
        return _is_table_file(p)
    if p.is_dir() and not (p / "meta.json").is_file() and not (p / "manifest.json").is_file():
        if (p / "state.json").is_file() or (p / "dataset_dict.json").is_file():
            return True
        return any(_is_table_file(f) for f in p.rglob("*") if f.is_file())
    return False


def table_files(src) -> list[Path]:
    """The data files of a source, in order; ValueError naming ``src`` if it has none."""
    p = Path(src)
    if not p.exists():
        raise ValueError(f"{src}: no such file or folder")
    if p.is_file():
        if not _is_table_file(p):
            raise ValueError(f"{src}: not a .parquet or Arrow (.arrow/.feather/.ipc) file")
        return [p]
    if (p / "dataset_dict.json").is_file():
        splits = sorted(d.name for d in p.iterdir() if d.is_dir())
        raise ValueError(f"{src} holds several splits ({', '.join(splits)}); give one split folder, e.g. {p / splits[0]}"
                         if splits else f"{src}: a dataset_dict.json folder without splits")
    state = p / "state.json"
    if state.is_file():
        try:
            files = [p / f["filename"] for f in json.loads(state.read_text(encoding="utf-8"))["_data_files"]]
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{state}: not a datasets save_to_disk state file ({err})") from None
        for f in files:
            if f.parent != p or f.name in ("", ".", ".."):  # "../x", "/etc/x", "sub/x": a save lists its own files only
                raise ValueError(f"{state}: data file {str(f.relative_to(p) if f.is_relative_to(p) else f)!r} is "
                                 f"not a file of {p}; a save_to_disk folder names the .arrow files beside its "
                                 "state.json (save the dataset again)")
            if not f.is_file():
                raise ValueError(f"{state}: data file {f.name} is missing")
        return files
    visible = _visible_files(p)
    saved = {d: saved_collection(d) for d in {f.parent for f in visible}}  # each meta.json read once
    files = [f for f in visible if _is_table_file(f, saved[f.parent])]
    if not files:
        raise ValueError(f"{src}: a folder without .parquet or .arrow files")
    others = [f for f in visible if f.name.endswith((".jsonl", ".jsonl.gz"))]
    if others:  # a table import reads tables only: it would drop them without a word
        names = ", ".join(str(f.relative_to(p)) for f in others[:3]) + (", ..." if len(others) > 3 else "")
        raise ValueError(f"{src} holds JSON Lines files ({names}) beside its {len(files)} table file(s); a table "
                         "import would skip them: import the tables and the JSON Lines files separately")
    return files


def _ipc_reader(path: Path):
    pa = require_pyarrow()
    source = pa.memory_map(str(path))
    try:
        r = pa.ipc.open_file(source)
        return r.schema, (r.get_batch(i) for i in range(r.num_record_batches))
    except pa.ArrowInvalid:
        source.seek(0)
        r = pa.ipc.open_stream(source)
        return r.schema, iter(r)


def iter_batches(path, column: str, batch_rows: int):
    """Record batches (of the one column ``column``) of at most ``batch_rows`` rows of a Parquet or
    Arrow file. ValueError naming the file if it is unreadable or has no such column."""
    pa = require_pyarrow()
    path = Path(path)
    try:
        if path.suffix.lower() == ".parquet":
            import pyarrow.parquet as pq

            pf = pq.ParquetFile(str(path))
            schema = pf.schema_arrow
            batches = None if column not in schema.names else pf.iter_batches(batch_size=batch_rows, columns=[column])
        else:
            schema, batches = _ipc_reader(path)
    except (pa.ArrowInvalid, OSError) as err:
        raise ValueError(f"{path}: cannot read it as {'Parquet' if path.suffix == '.parquet' else 'Arrow IPC'} ({err})") from None
    if column not in schema.names:
        sharegpt = f"'conversations' is ShareGPT's column: {SHAREGPT_HINT}; or " if "conversations" in schema.names else ""
        raise ValueError(f"{path}: no column {column!r} (columns: {schema.names}); {sharegpt}name the messages column "
                         "with --column")
    try:
        check_one_column(schema.names, column)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    kind = "Parquet" if path.suffix.lower() == ".parquet" else "Arrow IPC"
    while True:
        try:
            b = next(batches, None)
            if b is None:
                return
            col = b.column(b.schema.get_field_index(column))
            if kind != "Parquet":  # mapped as it is on disk: a bad offset would read outside the file
                col.validate(full=True)
        except (pa.ArrowInvalid, OSError) as err:
            raise ValueError(f"{path}: corrupt {kind} data ({str(err).splitlines()[0][:300]})") from None
        for a in range(0, len(col), batch_rows):
            yield col.slice(a, batch_rows) if len(col) > batch_rows else col


class TableImportStats:
    """Counts of an import (same fields as the JSONL importer's)."""

    def __init__(self):
        self.conversations = 0
        self.messages = 0
        self.bad = 0
        self.first_bad = None
        self.seconds = 0.0
        self.bytes = 0


def check_target(out: Path, overwrite: bool, sharded: bool) -> None:
    """Refuse to write over something that is not a chatdata dataset (or without ``overwrite``)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise ValueError(f"{out} exists and is a file; choose another output folder")
    if not any(out.iterdir()):
        return
    if sharded:
        if (out / "meta.json").is_file() and not (out / "manifest.json").is_file():
            raise ValueError(f"{out} holds a plain (unsharded) dataset, which a sharded import does not replace; "
                             "choose another output folder, or import without --shard-size to replace it")
        if not (out / "manifest.json").is_file():
            from .shard_manifest import uncommitted_shards

            if uncommitted_shards(out) is not None:  # a sharded import killed before its commit: start it again
                return
            raise ValueError(f"{out} is a non-empty folder that is not a sharded chatdata dataset; refusing to write into it")
    elif (out / "manifest.json").is_file() and not (out / "meta.json").is_file():
        raise ValueError(f"{out} holds a sharded dataset (manifest.json), which a plain import does not replace; "
                         "choose another output folder, or import with --shard-size N to replace it")
    elif not (out / "meta.json").is_file():
        raise ValueError(f"{out} is a non-empty folder that is not a chatdata dataset; refusing to replace it")
    if not overwrite:
        raise ValueError(f"{out} already holds a dataset; pass --overwrite to replace it")


def import_tables(src, out, *, column: str = "messages", chunk_size: int = 8192, strict: bool = False,
                  overwrite: bool = True, shard_size: int | None = None, report=None,
                  allow_empty: bool = True, screen=None, before_close=None) -> TableImportStats:
    """Import the Parquet / Arrow source ``src`` into the dataset folder ``out`` (sharded when
    ``shard_size``); returns counts. Raises ValueError (naming the file) for a bad source, and for
    a bad row when ``strict``, or when the source holds no conversation and not ``allow_empty``;
    otherwise bad rows go to ``report(msg)`` and are skipped. ``screen(history, file_name, rows,
    unit="row")`` may filter each chunk (rows: the chunk's row numbers in the file);
    ``before_close()`` runs before the output is committed and may raise to write nothing."""
    import sys

    from ..history import History
    from ..history.columns import FIELDS, FLAGS_KEY, build_storage
    from ..td import RaggedTensorDict
    from ..td.storage import StreamWriter
    from .arrow_check import checked_messages
    from .arrow_read import read_good_rows
    from .sharded import ShardedWriter

    require_pyarrow()
    chunk_size = check_count("chunk_size", chunk_size)
    if shard_size is not None:
        shard_size = check_count("shard_size (None for a plain dataset)", shard_size)
    files = table_files(src)
    out = Path(out)
    check_target(out, overwrite, bool(shard_size))
    report = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    stats = TableImportStats()
    start = time.perf_counter()

    def bad(name: str, row: int, reason: str) -> None:
        msg = f"{name}:row {row}: {reason}"
        if strict:
            raise ValueError(msg + " (--strict: nothing written)")
        stats.bad += 1
        if stats.first_bad is None:
            stats.first_bad = msg
        if stats.bad <= MAX_REPORTED:
            report(msg)
        elif stats.bad == MAX_REPORTED + 1:
            report(f"{name}: more bad rows; not reporting them one by one")

    if shard_size:
        writer = ShardedWriter(out, shard_size, overwrite=overwrite)
    else:
        writer = StreamWriter(out, tensorclass=History, columns=(*FIELDS, FLAGS_KEY))
    try:
        for f in files:
            row0 = 0
            stats.bytes += f.stat().st_size
            for arr in iter_batches(f, column, chunk_size):
                try:
                    arr = checked_messages(arr, column)
                except (TypeError, ValueError) as err:  # a type it cannot read; bytes that are not UTF-8
                    raise ValueError(f"{f}: {err}") from None
                n = len(arr)
                h, rows, bad_rows = read_good_rows(arr, column)  # each row checked once
                for r, reason in bad_rows:
                    bad(f.name, row0 + r, reason)
                if screen is not None and h is not None and h.batch_size[0]:
                    src_rows = row0 + rows
                    h = screen(h, f.name, src_rows, unit="row")
                row0 += n
                if h is None or not h.batch_size[0]:
                    continue
                writer.append(h)
                stats.conversations += h.batch_size[0]
                stats.messages += int(h.conversation_offsets()[-1])
        if before_close is not None:
            before_close()
        if stats.conversations == 0:
            if stats.bad:
                raise ValueError(f"{src}: no valid conversation ({stats.bad} bad rows; first: {stats.first_bad})")
            if not allow_empty:
                raise ValueError(f"{src} holds no conversation; pass --allow-empty to write an empty dataset")
            if not shard_size:
                import torch

                writer.append(RaggedTensorDict(build_storage([], None), torch.zeros(1, dtype=torch.int64)))
        writer.close()
    except BaseException:
        writer.abort()
        raise
    stats.seconds = time.perf_counter() - start
    return stats


def _chunks(ds, chunk_size: int):
    from .sharded import ShardedDataset

    if isinstance(ds, ShardedDataset):
        yield from ds.iter_chunks(chunk_size)
        return
    n = ds.batch_size[0]
    for a in range(0, n, chunk_size):
        yield ds[a:a + chunk_size]


def _check_strings(table, column: str, first: int) -> None:
    """The ``role`` and ``content`` of a History's table are the saved files' bytes, handed
    over unread (zero-copy): check their UTF-8 (Arrow's validation, ~0.3 ms per MB) before a
    Parquet file carries them on."""
    pa = require_pyarrow()
    messages = table.column(column)
    for chunk in messages.chunks:
        for name in ("role", "content"):
            arr = chunk.values.field(name)
            if pa.types.is_large_string(arr.type) or pa.types.is_string(arr.type):
                try:
                    arr.validate(full=True)
                except pa.ArrowInvalid as err:
                    raise FormatError(f"the {name} of conversations {first}..{first + len(table) - 1} is corrupt "
                                      f"({err}); `chatdata verify` names the file") from None


def export_parquet(ds, out, *, chunk_size: int = 8192, column: str = "messages", compression: str = "zstd") -> int:
    """Write the History dataset ``ds`` (a History, a path to a plain or sharded dataset) to the
    Parquet file ``out`` (one row group per chunk; written to a temporary file, then renamed).
    Returns the number of conversations (one for a conversation, a 1-D History). Anything else
    (a token set, message dicts) is a TypeError before a file is made.

    Example:
        >>> from chatdata import History
        >>> _ = History.from_chats([[{"role": "user", "content": "hi"}]] * 3).memmap("ds/")
        >>> export_parquet("ds/", "chats.parquet")
        3
    """
    pa = require_pyarrow()
    import pyarrow.parquet as pq

    from ..history import History
    from .sharded import ShardedDataset, open_dataset
    from .stitch import as_conversations, empty_history

    chunk_size = check_count("chunk_size", chunk_size)
    if isinstance(ds, (str, os.PathLike)):
        ds = open_dataset(ds)
    if isinstance(ds, History):  # one conversation (h[i]) is one row: its chunks must not cut it into rows
        ds = as_conversations(ds, "export_parquet")
    elif not (isinstance(ds, ShardedDataset) and ds.kind in ("History", None)):
        tokens = isinstance(ds, RaggedTensorDict) or getattr(ds, "kind", None) == "tokens"
        hint = " (it has no messages: export the History dataset it was tokenized from)" if tokens else \
            " (History.from_chats(chats) makes one from message dicts)" if isinstance(ds, (list, tuple)) else ""
        raise TypeError("export_parquet takes conversations (a History, or the path of a plain or sharded History "
                        f"dataset), got {'a token set' if tokens else type(ds).__name__}{hint}")
    out = Path(out)
    if out.is_dir():
        raise ValueError(f"{out} is a folder; give a .parquet file name")
    # pass 1: the schema every chunk fits (chunks may differ: tool calls in some, not others).
    # For a memory-mapped role/content dataset this pass is zero-copy.
    schemas, orders = [], []  # orders: which keys come together, in which order (a few tuples per chunk)
    for chunk in _chunks(ds, chunk_size):
        t = chunk.to_arrow(column)
        s = t.schema
        if not schemas or not s.equals(schemas[-1], check_metadata=True):  # == ignores the JSON tags
            schemas.append(s)
        orders.append(key_orders(t, column))
    if not schemas:
        schemas.append(empty_history().to_arrow(column).schema)
    # a text field that is JSON in some chunks (content parts mixed with str) and plain in others:
    # one schema would keep one tag for both, misreading the other chunks; and a field of types one
    # schema cannot hold (an int in one chunk, a str in another: this export failed on it): write
    # such fields as JSON text in all chunks
    as_json = fields_to_join_as_json(schemas, column, orders)
    if as_json:
        schemas = [as_json_text(empty_table(s), column, as_json).schema for s in schemas]
    try:
        schema = schemas[0] if len(schemas) == 1 else pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise ValueError(f"the conversations have message fields of incompatible types across chunks ({err}); "
                         "export to JSON Lines instead") from None
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{uuid.uuid4().hex[:12]}")
    n = 0
    try:
        with pq.ParquetWriter(str(tmp), schema, compression=compression) as w:
            for chunk in _chunks(ds, chunk_size):
                t = chunk.to_arrow(column)
                if as_json:
                    t = as_json_text(t, column, as_json)
                _check_strings(t, column, n)
                if t.schema != schema:
                    t = t.cast(schema)
                w.write_table(t, row_group_size=max(len(t), 1))
                n += len(t)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return n
