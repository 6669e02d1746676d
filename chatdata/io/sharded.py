"""Sharded datasets: a folder of ordinary chatdata datasets plus a ``manifest.json``.

::

    corpus/
    ├── manifest.json        {"format": "chatdata-sharded", "version": 1, "kind": "History",
    │                         "items": 30, "shards": [{"path": "shards/shard-...", "items": 10}, ...]}
    ├── .manifest.lock       (empty; writers take an fcntl lock on it)
    └── shards/
        ├── shard-00001732540000000000000-1f3a.../   a dataset as `chatdata import` writes it
        └── ...

A writer writes its shard folder (atomically, under a name no other writer can pick), then,
holding an exclusive ``fcntl`` lock on ``.manifest.lock``, re-reads the manifest, adds its
shards and replaces the manifest with ``os.replace`` of a fully written, fsynced temporary file.
So concurrent writers lose no shard, and a reader (which takes no lock) always sees a whole
manifest: the old one or the new one. A writer killed at any point leaves at worst an orphan
shard folder that no manifest names.

Example:
    >>> import tempfile, chatdata
    >>> path = tempfile.mkdtemp() + "/corpus"
    >>> ds = chatdata.open_dataset(path, mode="a")
    >>> ds.append(chatdata.History.from_chats([[{"role": "user", "content": "hi"}]]))
    >>> ds.append(chatdata.History.from_chats([[{"role": "user", "content": "yo"}]]))
    >>> r = chatdata.open_dataset(path)
    >>> len(r), r[1].content
    (2, ['yo'])
"""
from __future__ import annotations

import bisect
import contextlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path

from .lazy_history import LazyShards

__all__ = ["open_dataset", "ShardedDataset", "ShardedWriter", "MANIFEST", "is_sharded"]

MANIFEST = "manifest.json"
LOCK = ".manifest.lock"
SHARDS = "shards"
FORMAT = "chatdata-sharded"
VERSION = 1


def _format_error(msg: str):
    from ..td import FormatError

    return FormatError(msg)


def is_sharded(path) -> bool:
    """True if ``path`` is a folder holding a ``manifest.json``."""
    return (Path(path) / MANIFEST).is_file()


def _kind_of(obj) -> str:
    from ..history import History
    from ..td import RaggedTensorDict

    if isinstance(obj, History):
        return "History"
    if isinstance(obj, RaggedTensorDict):
        keys = set(obj.keys())
        return "tokens" if "input_ids" in keys else "ragged"
    return type(obj).__name__


def _is_history(obj) -> bool:
    return _kind_of(obj) == "History"


def _items(obj) -> int:
    return int(obj.batch_size[0]) if obj.batch_size else 1


@contextlib.contextmanager
def _locked(folder: Path):
    """An exclusive lock on ``folder/.manifest.lock`` (advisory ``fcntl.flock``; released when the
    process dies, so a killed writer never leaves the folder locked)."""
    fd = os.open(folder / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            import fcntl
        except ImportError:  # not POSIX: no cross-process lock available
            fcntl = None
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


_MAX_ITEMS = 2**62  # past 2**63 Python cannot even index them


def _read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
    except FileNotFoundError:
        raise _format_error(f"{path}: no such manifest") from None
    except ValueError as err:
        raise _format_error(f"{path}: not valid JSON ({err})") from None
    except RecursionError:
        raise _format_error(f"{path}: not valid JSON (nested too deeply)") from None
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise _format_error(f"{path}: not a chatdata sharded-dataset manifest (no \"format\": \"{FORMAT}\")")
    if not isinstance(m.get("version"), int) or m["version"] > VERSION:
        raise _format_error(f"{path}: manifest version {m.get('version')!r} is newer than this chatdata ({VERSION})")
    shards = m.get("shards")
    if not isinstance(shards, list):
        raise _format_error(f"{path}: 'shards' must be a list")
    if m.get("kind") is not None and not isinstance(m["kind"], str):
        raise _format_error(f"{path}: 'kind' must be a string (the shards' class, e.g. \"History\"), got {m['kind']!r}")
    total, seen = 0, {}
    for i, s in enumerate(shards):
        p = s.get("path") if isinstance(s, dict) else None
        items = s.get("items") if isinstance(s, dict) else None
        if not isinstance(p, str) or type(items) is not int or not 0 <= items <= _MAX_ITEMS:
            raise _format_error(f"{path}: shard {i} must be {{\"path\": str, \"items\": int >= 0}}, got {s!r}")
        total += items
        if total > _MAX_ITEMS:
            raise _format_error(f"{path}: the shards hold {total} items in all, more than a dataset can")
        parts = Path(p).parts
        if Path(p).is_absolute() or ".." in parts or not parts:
            raise _format_error(f"{path}: shard {i} path {p!r} is not a relative path inside the folder")
        if seen.setdefault(parts, i) != i:  # "shards/a" and "shards/./a/" are one folder
            raise _format_error(f"{path}: shards {seen[parts]} and {i} are both {p!r}: readers would return its "
                                "items twice; remove one of the entries")
    return m


def _write_manifest(folder: Path, manifest: dict) -> None:
    """Replace the manifest atomically: write a temporary file, fsync it, rename it over."""
    tmp = folder / f".{MANIFEST}.tmp-{uuid.uuid4().hex[:12]}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(manifest, f, ensure_ascii=False, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, folder / MANIFEST)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with contextlib.suppress(OSError):  # make the rename durable
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _empty_manifest(kind: str | None) -> dict:
    return {"format": FORMAT, "version": VERSION, "kind": kind, "items": 0, "shards": []}


def new_shard_name(job: str | None = None) -> str:
    """A shard folder name no other writer (process, thread or machine) picks: time + random.
    ``job`` (hex, no ``-``) goes into the name, so that a job whose workers write shards in
    parallel can find and remove them all if it fails (:func:`remove_job_shards`)."""
    return f"shard-{time.time_ns():020d}-{job + '-' if job else ''}{uuid.uuid4().hex}"


def remove_job_shards(folder, job: str) -> None:
    """Remove the shard folders of ``folder/shards/`` that :func:`new_shard_name` named for ``job``
    (a failed job's shards, which no manifest names)."""
    shards = Path(folder) / SHARDS
    if shards.is_dir():
        for child in shards.glob(f"shard-*-{job}-*"):
            shutil.rmtree(child, ignore_errors=True)


def remove_replaced(folder, old: list[dict], new: list[dict]) -> None:
    """Remove the shard folders of the ``old`` manifest entries that an overwrite replaced by
    ``new``. Only what a writer makes is removed: a folder ``shards/<name>`` (not a symlink) that
    ``new`` does not name; an entry of a tampered manifest (``shards`` itself, a path through a
    symlink out of the dataset) names nothing this deletes, and stays for ``verify`` to list."""
    root = Path(folder)
    shards = (root / SHARDS).resolve()
    keep = {Path(e["path"]).parts for e in new}
    for s in old:
        parts = Path(s["path"]).parts
        p = root.joinpath(*parts)
        if len(parts) == 2 and parts[0] == SHARDS and parts not in keep and not p.is_symlink() \
                and p.resolve().parent == shards:
            shutil.rmtree(p, ignore_errors=True)


def missing_folders(path) -> list:
    """``path/shards`` and those of its parents that do not exist yet, innermost first: what a
    writer about to create ``path/shards`` makes, for :func:`remove_empty` to undo."""
    return [p for p in (Path(path) / SHARDS, *(Path(path) / SHARDS).parents) if not p.exists()]


def remove_empty(folders: list) -> None:
    """Remove ``folders`` (innermost first) that are empty; a folder something else wrote into stays.
    A failed first write leaves no ``OUT/shards/`` that the retry would refuse as a foreign folder."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


def commit_shards(folder, entries: list[dict], kind: str | None, *, replace: bool = False) -> dict:
    """Add shard ``entries`` (``{"path", "items"}``) to the manifest of ``folder`` under the lock
    (``replace=True``: they become the only shards); returns the new manifest."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder):
        m = _read_manifest(folder) if (folder / MANIFEST).is_file() else _empty_manifest(kind)
        if replace:
            m = _empty_manifest(kind)
        if kind is not None and m.get("kind") not in (None, kind):
            raise ValueError(f"{folder}: cannot add {kind} shards to a dataset of {m['kind']} shards")
        if m.get("kind") is None:
            m["kind"] = kind
        m["shards"] = [*m["shards"], *entries]
        m["items"] = sum(s["items"] for s in m["shards"])
        _write_manifest(folder, m)
    return m


class ShardedDataset(LazyShards):
    """A sharded dataset opened by :func:`open_dataset`: one lazy History (or token set) over its
    shards, read as :class:`~chatdata.io.lazy_history.LazyShards` says (``batch_size``, ``ds[i]``,
    ``ds[a:b]``, ``ds[i, j]``, ``to_chats``, ``apply_chat_template``, ``memmap``, ...).
    ``ds.shard(k)`` is the k-th shard as loaded by ``load_memmap``. In mode ``"a"``,
    :meth:`append` adds a shard.
    """

    def __init__(self, path, mode: str = "r"):
        self.path = Path(path)
        self.mode = mode
        self._loaded: dict[int, object] = {}
        self.refresh()

    def refresh(self) -> None:
        """Re-read the manifest (a reader sees the shards committed when it (re)opened)."""
        m = _read_manifest(self.path)
        for i, s in enumerate(m["shards"]):
            if not (self.path / s["path"] / "meta.json").is_file():
                raise _format_error(f"{self.path / MANIFEST}: shard {i} ({s['path']}) is missing "
                                    f"(no {self.path / s['path'] / 'meta.json'})")
        self.manifest = m
        self.kind = m.get("kind")
        self._starts = [0]
        for s in m["shards"]:
            self._starts.append(self._starts[-1] + s["items"])
        self._loaded = {}

    # -- reading ----------------------------------------------------------------------------
    @property
    def num_shards(self) -> int:
        return len(self.manifest["shards"])

    def shard_paths(self) -> list[Path]:
        """The folders of the shards, in manifest order."""
        return [self.path / s["path"] for s in self.manifest["shards"]]

    def shard(self, k: int):
        """Shard ``k``, loaded lazily (memory-mapped) and checked against the manifest."""
        obj = self._loaded.get(k)
        if obj is None:
            from ..history import History  # noqa: F401 - registers the class for load_memmap
            from ..td import load_memmap

            entry = self.manifest["shards"][k]
            path = self.path / entry["path"]
            obj = load_memmap(path)
            if self.kind is not None and _kind_of(obj) != self.kind:
                raise _format_error(f"{self.path / MANIFEST}: shard {k} ({entry['path']}) holds a {_kind_of(obj)}, "
                                    f"the manifest says its shards hold {self.kind}")
            if _is_history(obj) and obj.ndim != 2:  # a single message or a 3-D batch is not a set of conversations
                raise _format_error(f"{self.path / MANIFEST}: shard {k} ({entry['path']}) holds a History of batch "
                                    f"{tuple(obj.batch_size)}, not a batch of conversations")
            if _items(obj) != entry["items"]:
                raise _format_error(f"{self.path / MANIFEST}: shard {k} ({entry['path']}) holds {_items(obj)} "
                                    f"items, the manifest says {entry['items']}")
            self._loaded[k] = obj
        return obj

    def __len__(self) -> int:
        return self._starts[-1]

    def _locate(self, i: int) -> tuple[int, int]:
        k = bisect.bisect_right(self._starts, i) - 1
        return k, i - self._starts[k]

    def iter_chunks(self, size: int):
        """Consecutive pieces of at most ``size`` items, never crossing a shard (no copies)."""
        from .counts import check_count

        size = check_count("size", size)
        for k in range(self.num_shards):
            s = self.shard(k)
            n = _items(s)
            for a in range(0, n, size):
                yield s[a:a + size]

    def to_arrow(self, column: str = "messages"):
        """One ``pyarrow.Table`` over all shards (one chunk per shard, zero-copy per shard). Shards
        whose message fields have types one schema cannot hold (str content in one shard, content
        parts in another) are joined first and written as ``History.to_arrow`` writes them."""
        from .deps import require_pyarrow

        pa = require_pyarrow()
        from .shard_tables import ragged_to_arrow

        tables = [self.shard(k).to_arrow(column) if self.kind == "History" else ragged_to_arrow(self.shard(k))
                  for k in range(self.num_shards)]
        if not tables:
            from ..history import History

            return History.from_chats([]).to_arrow(column)
        if self.kind not in ("History", None):
            return pa.concat_tables(tables, promote_options="permissive")
        from .arrow_check import encoding_clash, key_orders, order_clash

        schemas = [t.schema for t in tables]
        if encoding_clash(schemas, column) is None and not order_clash([key_orders(t, column) for t in tables],
                                                                       schemas, column):
            try:
                return pa.concat_tables(tables, promote_options="permissive")
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                pass
        # shards whose message fields have types no one schema holds (str content in one, content
        # parts in another; an extra field of other types; keys one struct would reorder: tool
        # arguments {"unit", "city"} in one shard, {"city", ...} first in another), or text that is JSON in one shard and
        # plain in another (concat would keep one tag for all): the History of them all writes
        # such fields one way (as JSON text), at the price of reading the values
        return self[:].to_arrow(column)

    def __repr__(self) -> str:
        return f"ShardedDataset({str(self.path)!r}, kind={self.kind!r}, items={len(self)}, shards={self.num_shards})"

    # -- writing ----------------------------------------------------------------------------
    def append(self, obj) -> None:
        """Write ``obj`` (a batch of conversations, or a ragged token set) as a new shard and
        add it to the manifest atomically; safe with other writers appending at the same time.
        ``obj`` may be a sharded dataset (another one, or this one): its shards are copied in as
        new shards, all added in one update of the manifest."""
        if self.mode != "a":
            raise PermissionError(f"{self.path} was opened with mode={self.mode!r}; open it with mode=\"a\" to append")
        from ..history import History

        if isinstance(obj, LazyShards):  # its shards, as they are (each one checked against its manifest)
            pieces, kind = [obj.shard(k) for k in range(obj.num_shards)], obj.kind
        else:
            if isinstance(obj, History) and obj.ndim == 1:  # one conversation; none: History.from_chats([])
                if obj.batch_size[0]:
                    obj = obj.unsqueeze(0)
                else:
                    from .stitch import empty_history

                    obj = empty_history()
            if isinstance(obj, History) and obj.ndim != 2:
                raise ValueError(f"append takes a batch of conversations (batch (n, -1)) or one conversation, got a "
                                 f"History of batch {tuple(obj.batch_size)}"
                                 + (" (one message: unsqueeze(0) makes it a conversation)" if obj.ndim == 0 else ""))
            if not callable(getattr(obj, "memmap", None)):
                raise TypeError(f"append takes a History or a ragged token set, got {type(obj).__name__}"
                                + (" (History.from_chats(chats) makes one from message dicts)"
                                   if isinstance(obj, (list, tuple, dict)) else ""))
            pieces, kind = [obj], _kind_of(obj)
        (self.path / SHARDS).mkdir(parents=True, exist_ok=True)
        names: list[str] = []
        try:
            for piece in pieces:
                names.append(f"{SHARDS}/{new_shard_name()}")
                piece.memmap(str(self.path / names[-1]), copy_existing=True)  # also a loaded dataset
            commit_shards(self.path, [{"path": n, "items": _items(p)} for n, p in zip(names, pieces)], kind)
        except BaseException:
            for name in names:
                shutil.rmtree(self.path / name, ignore_errors=True)
            raise
        self.refresh()


def _refuse_foreign(p: Path) -> None:
    """Refuse a folder holding anything but a sharded dataset's own files (the lock, the shards,
    a manifest being written by another writer)."""
    if p.is_dir() and any(x.name not in (LOCK, SHARDS) and not x.name.startswith(f".{MANIFEST}.tmp-")
                          for x in p.iterdir()):
        raise ValueError(f"{p} is a non-empty folder that is not a chatdata dataset")


def open_dataset(path, mode: str = "r"):
    """Open a dataset folder: a plain chatdata dataset (returned as ``load_memmap`` gives it, a
    lazy History or token set), or a sharded folder with a ``manifest.json`` (a
    :class:`ShardedDataset`, indexable across shards). ``mode="a"`` opens (creating it if needed)
    a sharded dataset for :meth:`ShardedDataset.append`.

    Example:
        >>> import tempfile, chatdata
        >>> ds = chatdata.open_dataset(tempfile.mkdtemp() + "/new", mode="a")
        >>> len(ds), ds.num_shards
        (0, 0)
    """
    if mode not in ("r", "a"):
        raise ValueError(f"mode must be 'r' or 'a', got {mode!r}")
    p = Path(path)
    if mode == "a":
        if (p / "meta.json").is_file() and not (p / MANIFEST).is_file():
            raise ValueError(f"{p} is a plain (unsharded) dataset; append shards to a sharded folder instead")
        if p.exists() and not p.is_dir():
            raise ValueError(f"{p} is a file, not a dataset folder")
        if not (p / MANIFEST).is_file():
            _refuse_foreign(p)  # before creating anything in someone else's folder
            from .saved import saved_ancestor

            inside = saved_ancestor(p)
            if inside is not None:  # its save would then refuse to replace it (files not its own)
                raise ValueError(f"{p} is inside the saved dataset {inside}; create the sharded dataset elsewhere")
            p.mkdir(parents=True, exist_ok=True)
            with _locked(p):  # writers creating the dataset at once: one writes the manifest
                if not (p / MANIFEST).is_file():
                    _refuse_foreign(p)
                    _write_manifest(p, _empty_manifest(None))
        return ShardedDataset(p, "a")
    if (p / MANIFEST).is_file():
        return ShardedDataset(p, "r")
    if (p / "meta.json").is_file():
        from ..history import History  # noqa: F401 - registers the class for load_memmap
        from ..td import load_memmap

        return load_memmap(p)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such dataset")
    raise _format_error(f"{p} is neither a chatdata dataset (no meta.json) nor a sharded one (no {MANIFEST})")


class ShardedWriter:
    """Streams items into new shards of at most ``shard_size`` items; :meth:`close` adds them all
    to the manifest in one atomic update (so an import either lands whole or not at all), and
    :meth:`abort` removes them. Same ``append``/``close``/``abort`` as ``StreamWriter``.

    Example:
        >>> import tempfile, chatdata
        >>> w = ShardedWriter(tempfile.mkdtemp() + "/c", shard_size=1)
        >>> w.append(chatdata.History.from_chats([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]]))
        >>> w.close().num_shards
        2
    """

    def __init__(self, path, shard_size: int, *, kind: str = "History", overwrite: bool = False, columns=None,
                 durable: bool = False):
        from .counts import check_count

        self.path = Path(path)
        self.shard_size = check_count("shard_size", shard_size)
        self.kind = kind
        self.overwrite = overwrite
        self.columns = columns
        self.durable = durable  # fsync each shard before and after its rename (the manifest always is)
        self.entries: list[dict] = []
        self._current = None
        self._current_name = None
        self._current_items = 0
        # the folders this writer makes, removed again by abort() when it leaves them empty: a failed
        # import leaves no `OUT/shards/` that the next import would refuse as someone else's folder
        self._made = missing_folders(self.path)
        (self.path / SHARDS).mkdir(parents=True, exist_ok=True)

    def _open(self):
        from ..td.storage import StreamWriter

        self._current_name = f"{SHARDS}/{new_shard_name()}"
        if self.kind == "History":
            from ..history import History
            from ..history.columns import FIELDS, FLAGS_KEY

            self._current = StreamWriter(self.path / self._current_name, tensorclass=History,
                                         columns=(*FIELDS, FLAGS_KEY), durable=self.durable)
        else:
            self._current = StreamWriter(self.path / self._current_name, columns=self.columns or (),
                                         durable=self.durable)
        self._current_items = 0

    def _finish(self):
        if self._current is not None:
            self._current.close()
            self.entries.append({"path": self._current_name, "items": self._current_items})
            self._current = None

    def append(self, chunk) -> None:
        """Append a ragged chunk (a History batch or a ragged stack), split across shards."""
        n = _items(chunk)
        a = 0
        while a < n:
            if self._current is None:
                self._open()
            take = min(n - a, self.shard_size - self._current_items)
            self._current.append(chunk[a:a + take] if (a, take) != (0, n) else chunk)
            self._current_items += take
            a += take
            if self._current_items >= self.shard_size:
                self._finish()

    def close(self) -> ShardedDataset:
        """Finish the last shard and commit every shard written to the manifest."""
        try:
            self._finish()
        except BaseException:
            self.abort()
            raise
        old = _read_manifest(self.path)["shards"] if (self.overwrite and is_sharded(self.path)) else []
        commit_shards(self.path, self.entries, self.kind, replace=self.overwrite)
        remove_replaced(self.path, old, self.entries)  # replaced by --overwrite: no manifest names them any more
        return ShardedDataset(self.path)

    def abort(self) -> None:
        """Remove every shard this writer wrote; the manifest is untouched."""
        if self._current is not None:
            self._current.abort()
            self._current = None
        for e in self.entries:
            shutil.rmtree(self.path / e["path"], ignore_errors=True)
        self.entries = []
        remove_empty(self._made)
        self._made = []
