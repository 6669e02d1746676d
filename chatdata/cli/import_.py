"""``chatdata import SRC OUT``: JSON Lines / JSON / Parquet / Arrow conversations -> a memmapped History dataset.

The file is read line by line and written in chunks of ``--chunk-size`` conversations: each
chunk becomes a ``History`` (``History.from_chats``) whose columns are appended to the output
by :class:`chatdata.td.storage.stream.StreamWriter`, so memory does not grow with the file. A JSON document
(a list of conversations, or one conversation spread over several lines) is read whole.

The record shapes it accepts (OpenAI, ShareGPT, bare lists of messages) and how a JSON document
is told from JSON Lines: :mod:`chatdata.cli.import_formats`.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import stat
import sys
import time
import zlib
from pathlib import Path

from .common import CLIError, check_output, plural, positive_int, say
from .import_formats import FORMATS, document_records, is_document, to_messages, weight_error
from .progress import Progress, human_bytes

def _folder_source_error(src: Path) -> str:
    """What to do with a folder given as the source that holds no Parquet / Arrow files: a dataset
    is already imported; JSON Lines files go through standard input together.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp()); _ = (d / "a.jsonl").write_text(""); _ = (d / "b.jsonl").write_text("")
        >>> _folder_source_error(d).split("; ", 1)[1].replace(str(d), "DIR")
        'it holds JSON Lines files: import them together with cat DIR/*.jsonl | chatdata import - OUT'
    """
    if (src / "meta.json").is_file() or (src / "manifest.json").is_file():
        return (f"{src} is a chatdata dataset already; use it as it is (chatdata info / show / tokenize {src}), "
                f"or export it: chatdata export {src} OUT.jsonl")
    names = [f.name for f in src.iterdir() if f.is_file()]
    found = [suffix for suffix in (".jsonl", ".jsonl.gz") if any(f.endswith(suffix) for f in names)]
    if not found:
        return (f"{src} is a folder without .parquet or Arrow files; give a .jsonl or .json file, or a folder of "
                ".parquet / .arrow files")
    reader = "zcat -f" if ".jsonl.gz" in found else "cat"
    globs = " ".join(f"{src}/*{f}" for f in found)
    return (f"{src} is a folder, not a file; it holds JSON Lines files: import them together with {reader} {globs} | "
            "chatdata import - OUT")


HELP = "import JSON Lines / JSON / Parquet / Arrow conversations into a memmapped History dataset"
EXAMPLE = """examples:
  chatdata import chats.jsonl ds/
  chatdata import sharegpt.json ds/ --strict
  chatdata import big.jsonl.gz ds/ --chunk-size 16384 --overwrite
  zcat big.jsonl.gz | chatdata import - ds/                # standard input
  chatdata import train.parquet ds/ --column messages
  chatdata import hub_repo/data/ corpus/ --shard-size 100000
  chatdata import chats.jsonl ds/ --check-tools --skip-bad --dedup near:0.85
  chatdata import chats.jsonl ds/ --dedup exact --decontaminate gsm8k.jsonl mmlu.parquet --decontaminate-column question"""

MAX_REPORTED = 20
CHUNK_BYTES = 8 << 20


def add_parser(sub):
    p = sub.add_parser("import", help=HELP, description=HELP + ".", epilog=EXAMPLE,
                       formatter_class=_raw_formatter())
    p.add_argument("src", help="a .jsonl / .json file (optionally .gz), a .parquet / .arrow file or a folder of those, "
                   "a datasets save_to_disk folder, or '-' for standard input (JSON; a folder of .jsonl: "
                   "cat DIR/*.jsonl | chatdata import - OUT)")
    p.add_argument("out", help="the dataset folder to write")
    p.add_argument("--format", choices=FORMATS, default="auto",
                   help="record shape: openai {messages}, sharegpt {conversations}, bare [messages] (default: auto, per line)")
    p.add_argument("--chunk-size", type=positive_int, default=8192, metavar="N",
                   help="conversations per written chunk (default 8192; a chunk also ends after 8 MB of input)")
    p.add_argument("--strict", action="store_true", help="stop at the first bad line (exit 1, nothing written)")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it is an existing dataset")
    p.add_argument("--allow-empty", action="store_true",
                   help="write an empty dataset when SRC holds no conversation (default: an error)")
    p.add_argument("--column", default="messages", help="Parquet/Arrow: the messages column (default: messages)")
    p.add_argument("--shard-size", type=positive_int, metavar="N",
                   help="write a sharded dataset (shards of N conversations + manifest.json)")
    p.add_argument("--durable", action="store_true",
                   help="fsync the dataset before and after it is renamed into place (survives a power loss)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary")
    from .import_hygiene import add_arguments

    add_arguments(p)
    p.set_defaults(func=run)
    return p


def _raw_formatter():
    import argparse

    return argparse.RawDescriptionHelpFormatter




# -- reading ----------------------------------------------------------------------------------
def _open(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


@contextlib.contextmanager
def _reading(path: Path):
    """Errors of reading ``path`` (a truncated or damaged .gz, an I/O error) as one line naming it."""
    try:
        yield
    except (EOFError, OSError, zlib.error) as err:  # gzip.BadGzipFile is an OSError
        hint = "; a damaged or truncated gzip file" if path.suffix == ".gz" else ""
        raise CLIError(f"{path}: cannot read it ({err}{hint}); nothing was written") from None


def _whole_json(path: Path) -> bool:
    """True if the file is one JSON document (a list of conversations, or one conversation
    spread over several lines), not JSON Lines; reads its first lines only."""
    with _reading(path), _open(path) as f:
        return is_document(f)


def _records(path: Path, progress: Progress, fmt: str = "auto"):
    """Yield ``(where, line_number, record_or_error)``; errors are ValueError instances.

    A file whose first lines look like one JSON document but which does not parse as one is
    read as JSON Lines when the whole file reads so (:func:`is_document` over every line: two
    whole values on consecutive lines, or a whole value last), so that JSON Lines whose first
    lines are all bad still imports its good lines; otherwise it is one error naming the file."""
    if _whole_json(path):
        with _reading(path), _open(path) as f:
            raw = f.read()
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as err:
            if is_document(io.BytesIO(raw), limit=None):
                what = "nested too deeply" if isinstance(err, RecursionError) else str(err)
                raise CLIError(f"{path}: not valid JSON ({what})") from None
            del raw
            yield from _lines(path, progress)
            return
        progress.update(len(raw))
        del raw
        try:
            doc = document_records(doc, fmt)
        except ValueError as err:
            raise CLIError(f"{path}: {err}") from None
        for i, rec in enumerate(doc):
            yield f"item {i}", i, rec
        return
    yield from _lines(path, progress)


def _lines(path: Path, progress: Progress):
    """The records of a JSON Lines file, as :func:`_records` yields them (a bad line is a ValueError)."""
    loads = json.loads
    with _reading(path), _open(path) as f:
        for lineno, line in enumerate(f, 1):
            progress.done += len(line)
            if line.isspace() or not line:
                continue
            try:
                rec = loads(line)
            except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
                rec = ValueError(f"invalid JSON ({err})")
            except RecursionError:  # a value nested deeper than the parser goes: one bad line
                rec = ValueError("invalid JSON (nested too deeply)")
            yield None, lineno, rec


# -- the command ------------------------------------------------------------------------------
class ImportStats:
    def __init__(self):
        self.conversations = 0
        self.messages = 0
        self.bad = 0
        self.first_bad = None  # the bad line first in file order (not first found)
        self.first_bad_at = None
        self.seconds = 0.0
        self.bytes = 0


def _spool(src: Path, out: Path) -> Path:
    """Copy a stream (a pipe, not a file) to a temporary file beside ``out`` (``.gz`` when it
    starts with gzip's magic bytes), for an import that reads its source twice."""
    import shutil
    import tempfile

    out.absolute().parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.stream-", suffix=".jsonl", dir=out.absolute().parent)
    try:
        with open(src, "rb") as f, os.fdopen(fd, "wb") as w:
            head = f.read(2)
            w.write(head)
            shutil.copyfileobj(f, w, 1 << 20)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    if head == b"\x1f\x8b":  # gzip's magic bytes: read it as a .gz file
        Path(name).rename(name + ".gz")
        return Path(name + ".gz")
    return Path(name)


def _check_out(out: Path, overwrite: bool) -> None:
    check_output(out, overwrite)


def import_file(src, out, *, fmt: str = "auto", chunk_size: int = 8192, strict: bool = False,
                overwrite: bool = True, progress: bool | None = None, report=None,
                chunk_bytes: int = CHUNK_BYTES, allow_empty: bool = False, column: str = "messages",
                shard_size: int | None = None, durable: bool = False, screen=None,
                source_name: str | None = None) -> ImportStats:
    """Import ``src`` into the dataset folder ``out``; returns counts. ``report(msg)`` receives
    each bad-line message (default: printed to stderr). Raises :class:`CLIError`, also when
    ``src`` holds no conversation at all, unless ``allow_empty``.

    A chunk is written every ``chunk_size`` conversations or ``chunk_bytes`` bytes of input,
    whichever comes first: chunks of a few MB keep the working set in reused heap memory
    (much larger ones make every chunk fault fresh pages in, ~1.5x slower end to end).
    ``durable=True`` fsyncs the dataset before and after it is renamed into place.
    ``screen``: a :class:`chatdata.hygiene.Screen` every chunk goes through (tool checks, dedup,
    decontamination); rows it drops are not written, and an import it refuses writes nothing.
    ``source_name``: what messages call the source (default: its file name). A stream (a pipe
    such as ``/dev/stdin``) is first copied to a temporary file beside ``out``: its format is
    sniffed from its first lines, then it is read."""
    from ..history import History
    from ..history.columns import FIELDS, FLAGS_KEY, build_storage
    from ..td import RaggedTensorDict
    from ..td.storage import StreamWriter

    import torch

    if str(src) == "-":  # standard input, as `chatdata export ds/ -` writes to standard output
        if sys.stdin is None or sys.stdin.isatty():  # reading a terminal would wait for typed JSON
            raise CLIError("- reads conversations from standard input, which is a terminal here; pipe them in, "
                           "e.g. zcat chats.jsonl.gz | chatdata import - ds/")
        src, source_name = "/dev/stdin", source_name or "stdin"
    src, out = Path(src), Path(out)
    if not src.exists():
        raise CLIError(f"{src}: no such file")
    from .paths import check_apart, check_writable

    check_apart(out, [src])  # before anything is read or written: an import never replaces its source
    check_writable(out)
    if not src.is_dir() and not stat.S_ISREG(src.stat().st_mode):  # a pipe: /dev/stdin, <(zcat x.gz)
        spooled = _spool(src, out)  # its format is sniffed from its first lines, then it is read: twice
        try:
            return import_file(spooled, out, fmt=fmt, chunk_size=chunk_size, strict=strict, overwrite=overwrite,
                               progress=progress, report=report, chunk_bytes=chunk_bytes, allow_empty=allow_empty,
                               column=column, shard_size=shard_size, durable=durable, screen=screen,
                               source_name=source_name or src.name)
        except CLIError as err:  # named as the user gave it, not by its temporary copy
            raise CLIError(str(err).replace(str(spooled), source_name or str(src)), err.code) from None
        finally:
            spooled.unlink(missing_ok=True)
    from ..io.tables import is_table_source

    report = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    screened = None
    if screen is not None:
        from .import_hygiene import ScreenedImport, finish

        screened = ScreenedImport(screen, report)
    if is_table_source(src):  # Parquet / Arrow: chatdata.io reads it
        stats = _import_tables(src, out, column, chunk_size, strict, overwrite, shard_size, report, allow_empty,
                               screened, (lambda: finish(screen)) if screen is not None else None)
        stats.hygiene = screen.report if screen is not None else None
        return stats
    if src.is_dir():
        raise CLIError(_folder_source_error(src))
    if fmt not in FORMATS:
        raise CLIError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if shard_size:
        _check_sharded_out(out, overwrite)
    else:
        _check_out(out, overwrite)
    stats = ImportStats()
    size = src.stat().st_size if src.suffix != ".gz" else None
    bar = Progress("importing", total=size, unit="B", enabled=progress)
    name = source_name or src.name

    def bad(where: str, err, order: int) -> None:
        msg = f"{name}:{where}: {err}"
        if strict:
            raise CLIError(msg + " (--strict: nothing written)")
        stats.bad += 1
        if stats.first_bad is None or order < stats.first_bad_at:
            stats.first_bad, stats.first_bad_at = msg, order
        if stats.bad <= MAX_REPORTED:
            report(msg)
        elif stats.bad == MAX_REPORTED + 1:
            report(f"{name}: more bad lines; not reporting them one by one")

    want_tools = screen is not None and screen.check_tools

    def flush(writer, convs, wheres, tools_of) -> None:
        if any("weight" in m for c in convs for m in c if type(m) is dict):  # one pass; weights are rare
            problems = {k: e for k, e in enumerate(map(weight_error, convs)) if e is not None}
            for k, err in problems.items():
                bad(wheres[k][0], err, wheres[k][1])
            if problems:
                keep = [k for k in range(len(convs)) if k not in problems]
                convs, wheres = [convs[k] for k in keep], [wheres[k] for k in keep]
                tools_of = [tools_of[k] for k in keep] if tools_of is not None else None
                if not convs:
                    return
        try:
            h = History.from_chats(convs)
        except (ValueError, RecursionError):
            keep, kept_at = [], []
            for k, (conv, (where, order)) in enumerate(zip(convs, wheres)):
                try:
                    History.from_chats([conv])
                    keep.append(conv)
                    kept_at.append(k)
                except ValueError as err:
                    bad(where, str(err).replace("chat 0, ", ""), order)
                except RecursionError:
                    bad(where, "a value is nested too deeply", order)
            if not keep:
                return
            h = History.from_chats(keep)
            convs = keep
            wheres = [wheres[k] for k in kept_at]
            tools_of = [tools_of[k] for k in kept_at] if tools_of is not None else None
        if screened is not None:
            unit = "item" if wheres[0][0].startswith("item") else "line"
            h = screened(h, name, [order for _, order in wheres], unit=unit, conv_tools=tools_of)
            if not h.batch_size[0]:
                return
        writer.append(h)
        stats.conversations += h.batch_size[0]
        stats.messages += int(h.conversation_offsets()[-1])

    start = time.perf_counter()
    writer = None
    try:
        writer = _sharded_writer(out, shard_size, overwrite, durable) if shard_size else \
            StreamWriter(out, tensorclass=History, columns=(*FIELDS, FLAGS_KEY), durable=durable)
        convs, wheres = [], []
        tools_of = [] if want_tools else None
        flushed_at = 0
        for item, lineno, rec in _records(src, bar, fmt):
            where = item or f"line {lineno}"
            try:
                if isinstance(rec, ValueError):
                    raise rec
                msgs = rec["messages"] if fmt in ("auto", "openai") and type(rec) is dict \
                    and type(rec.get("messages")) is list else to_messages(rec, fmt)
            except ValueError as err:
                if strict and convs:  # the lines read before are checked first: --strict names the first bad one
                    flush(writer, convs, wheres, tools_of)
                bad(where, err, lineno)
                continue
            convs.append(msgs)
            wheres.append((where, lineno))
            if want_tools:
                tools_of.append(rec.get("tools") if type(rec) is dict else None)
            if len(convs) >= chunk_size or bar.done - flushed_at >= chunk_bytes:
                flush(writer, convs, wheres, tools_of)
                bar.update(items=len(convs))
                convs, wheres = [], []
                tools_of = [] if want_tools else None
                flushed_at = bar.done
        if convs:
            flush(writer, convs, wheres, tools_of)
            bar.update(items=len(convs))
        if screen is not None:
            finish(screen)
        if stats.conversations == 0:
            if screen is not None:
                finish(screen)
            if screen is not None and screen.seen and not allow_empty:
                raise CLIError(f"{src}: the hygiene checks dropped every conversation; pass --allow-empty to "
                               "write an empty dataset")
            if stats.bad:
                raise CLIError(f"{src}: no valid conversation ({plural(stats.bad, 'bad line')}; first: {stats.first_bad})")
            if not allow_empty:
                raise CLIError(f"{src} holds no conversation; pass --allow-empty to write an empty dataset")
            if not shard_size:
                writer.append(RaggedTensorDict(build_storage([], None), torch.zeros(1, dtype=torch.int64)))
        writer.close()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    finally:
        bar.close()
    stats.seconds = time.perf_counter() - start
    stats.bytes = bar.done
    stats.hygiene = screen.report if screen is not None else None
    return stats


# -- Parquet / Arrow sources and sharded output: chatdata.io does the work ------------------------
def _import_tables(src, out, column, chunk_size, strict, overwrite, shard_size, report, allow_empty, screen=None,
                   before_close=None):
    from ..io.tables import import_tables
    from ..td import FormatError

    try:
        return import_tables(src, out, column=column, chunk_size=chunk_size, strict=strict, overwrite=overwrite,
                             shard_size=shard_size, report=report, allow_empty=allow_empty, screen=screen,
                             before_close=before_close)
    except (ValueError, FormatError) as err:
        raise CLIError(str(err)) from None


def _check_sharded_out(out: Path, overwrite: bool) -> None:
    from ..io.tables import check_target

    try:
        check_target(out, overwrite, sharded=True)
    except ValueError as err:
        raise CLIError(str(err)) from None


def _sharded_writer(out: Path, shard_size: int, overwrite: bool, durable: bool = False):
    from ..io.sharded import ShardedWriter

    return ShardedWriter(out, shard_size, overwrite=overwrite, durable=durable)


def run(args) -> int:
    from .import_hygiene import build_screen, summary

    screen = build_screen(args)
    try:
        stats = import_file(args.src, args.out, fmt=args.format, chunk_size=args.chunk_size, strict=args.strict,
                            overwrite=args.overwrite, allow_empty=args.allow_empty, column=args.column,
                            shard_size=args.shard_size, durable=args.durable, screen=screen)
    except CLIError:
        if screen is not None and screen.report.problems:
            summary(screen, args, args.quiet)
        raise
    if not args.quiet:
        rate = stats.bytes / max(stats.seconds, 1e-9)
        say(f"imported {plural(stats.conversations, 'conversation')} ({plural(stats.messages, 'message')}) "
            f"from {args.src} into {args.out} in {stats.seconds:.2f} s ({human_bytes(rate)}/s)")
        if stats.bad:
            say(f"skipped {plural(stats.bad, 'bad line')}; first: {stats.first_bad} "
                "(use --strict to stop at the first)")
    summary(screen, args, args.quiet)
    return 0
