"""The write-ahead log of one open session: one JSON line per completed request.

A session's file ``OUT/journal/<uid>.jsonl`` starts with a header line (the session id) and
gets one line per completed request *before* the answer is sent, written with ``O_APPEND`` and
(``durable=True``) fsynced. The log alone rebuilds every branch of the session exactly
(:func:`branches_from_journal`): it holds the ids sent (the prompt past what the branch
already had), the ids sampled, their logprobs, the new messages and the parsed answer. When
the session is stored, a ``{"committed": shard}`` line names the shard that holds it; then the
file is removed. A line torn by a kill (no newline at its end) was never answered and is
skipped.

Record fields: ``b`` (branch), ``parent`` (``[branch, n_messages]`` for a branch's first turn
when it forks another, else null), ``shared`` (ids the branch takes from its parent), ``messages``
(the non-generated messages added), ``prompt`` (the prompt ids past what the branch held),
``ids`` / ``logprobs`` (sampled), ``message`` (the stored assistant message), ``finish``.

On disk (header ``"version": 2``) the three number lists are packed: ``{"i64le": <base64>}`` for
``prompt`` and ``ids`` (little-endian int64), ``{"f64le": <base64>}`` for ``logprobs``
(little-endian float64: every logprob exactly, bit for bit). Writing a float's shortest repr
took about 0.7 us per sampled token, three quarters of the line's cost; the packed form
takes a few microseconds per request. :func:`read_journal` unpacks them (and reads the plain
JSON lists of version 1 logs as they are).

Example:
    >>> import tempfile, pathlib
    >>> j = Journal.create(pathlib.Path(tempfile.mkdtemp()), "s1", durable=False)
    >>> j.append({"b": 0, "parent": None, "shared": 0, "messages": [{"role": "user", "content": "hi"}],
    ...           "prompt": [1, 2], "ids": [3], "logprobs": [-0.5], "message": {"role": "assistant", "content": "x"},
    ...           "finish": "stop"})
    >>> head, records, committed = read_journal(j.path)
    >>> head["session_id"], len(records), committed
    ('s1', 1, None)
    >>> b = branches_from_journal(records)[0]
    >>> b.ids, b.mask, b.messages[-1]["content"]
    ([1, 2, 3], [0, 0, 1], 'x')
"""
from __future__ import annotations

import base64
import json
import os
import sys
import threading
import time
import uuid
from array import array
from dataclasses import dataclass, field
from pathlib import Path

from ..td.storage import fsync_dir, write_all

__all__ = ["Journal", "read_journal", "branches_from_journal", "StoredBranch"]

HEADER = "chatdata-gateway-journal"
VERSION = 2  # 1: number lists as JSON lists; 2: packed (see the module docstring)
_PACKED = (("prompt", "q", "i64le"), ("ids", "q", "i64le"), ("logprobs", "d", "f64le"))
_SWAP = sys.byteorder != "little"


def _pack(values, code: str) -> str:
    """``values`` (a list, or a 1-D int64 tensor for ids) as base64 of little-endian machine
    numbers."""
    if hasattr(values, "numpy"):  # a tensor: its bytes, as int64 / float64
        import torch

        arr = array(code, values.to(torch.int64 if code == "q" else torch.float64).contiguous().numpy().tobytes())
    else:
        arr = array(code, values)
    if _SWAP:
        arr.byteswap()
    return base64.b64encode(arr).decode("ascii")


def _unpack(value, code: str, tag: str):
    """The list a packed field holds (a plain list, from a version 1 log, as it is)."""
    if isinstance(value, list):
        return value
    if not isinstance(value, dict) or not isinstance(value.get(tag), str):
        raise ValueError(f"expected a list or {{{tag!r}: <base64>}}, got {str(value)[:80]}")
    raw = base64.b64decode(value[tag], validate=True)
    if len(raw) % 8:
        raise ValueError(f"{tag}: {len(raw)} bytes is not a whole number of 8-byte values")
    arr = array(code, raw)
    if _SWAP:
        arr.byteswap()
    return arr.tolist()


class Journal:
    """Appends records to one session's log file (see the module docstring)."""

    __slots__ = ("path", "session_id", "uid", "durable", "_header", "_lock")

    def __init__(self, path: Path, session_id: str, uid: str, durable: bool) -> None:
        self.path, self.session_id, self.uid, self.durable = path, session_id, uid, durable
        self._header: dict | None = None  # a new log's header, written with its first record
        self._lock = threading.Lock()  # appends come from worker threads: one at a time, header first

    @classmethod
    def reopen(cls, path: Path, session_id: str, uid: str, durable: bool = True) -> "Journal":
        """The log of a session resumed from ``path``, to append to. A line torn by a kill (the
        file does not end with a newline) is cut off first: it was never answered, and a record
        appended behind it would make one garbled line of both.

        Example:
            >>> import tempfile, pathlib
            >>> p = pathlib.Path(tempfile.mkdtemp()) / "s.jsonl"
            >>> _ = p.write_bytes(b'{"journal": 1}\\n{"b": 0, "pro')
            >>> _ = Journal.reopen(p, "s1", "u", durable=False)
            >>> p.read_bytes()
            b'{"journal": 1}\\n'
        """
        _cut_torn_tail(Path(path), durable)
        return cls(Path(path), session_id, uid, durable)

    @classmethod
    def create(cls, folder: Path, session_id: str, durable: bool = True) -> "Journal":
        """A new log (nothing is written before its first record)."""
        uid = uuid.uuid4().hex
        j = cls(Path(folder) / f"{uid}.jsonl", session_id, uid, durable)
        j._header = {"journal": HEADER, "version": VERSION, "session_id": session_id, "uid": uid,
                     "created": time.time()}
        return j

    def _write(self, obj: dict) -> None:
        line = (json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        with self._lock:
            self._write_locked(line)

    def _write_locked(self, line: bytes) -> None:
        new = self._header is not None
        if new:  # one write (and one fsync) for the header and the first record
            line = (json.dumps(self._header, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8") + line
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            write_all(fd, line, self.durable)
        finally:
            os.close(fd)
        if new and self.durable:  # the file's name too: a power loss could drop a new log, fsynced or not
            fsync_dir(self.path.parent)
        self._header = None

    def append(self, record: dict) -> None:
        """Write one completed request (returns once it is in the file; fsynced when durable);
        its number lists are packed (see the module docstring)."""
        line = dict(record)
        for key, code, tag in _PACKED:
            line[key] = {tag: _pack(record[key], code)}
        self._write(line)

    def mark_committed(self, shard: str) -> None:
        """Say that shard ``shard`` holds this session (before the manifests name it)."""
        self._write({"committed": shard})


def _cut_torn_tail(path: Path, durable: bool) -> None:
    """Truncate ``path`` after its last newline (nothing when it ends with one)."""
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        end, step = size, 1 << 16
        while end > 0:
            start = max(0, end - step)
            f.seek(start)
            chunk = f.read(end - start)
            if start + len(chunk) == size and chunk.endswith(b"\n"):
                return  # whole
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                f.truncate(start + nl + 1)
                break
            end = start
        else:
            f.truncate(0)
        if durable:
            os.fsync(f.fileno())


MAX_TOKEN_ID = 2 ** 31  # token ids are vocabulary indices: a larger or negative one is a damaged line


def _count(v) -> bool:
    return type(v) is int and v >= 0


def _check_record(r: dict, packed: frozenset = frozenset()) -> None:
    """Raise ValueError when a record cannot be a completed request: ids that are not
    vocabulary indices, no sampled id, not one logprob per sampled id, or the fields that place
    it in its session (``b``, ``parent``, ``shared``, ``messages``, ``message``, ``finish``) of
    the wrong shape. Fields in ``packed`` were decoded from int64 bytes: their items need no
    type check."""
    for name in ("prompt", "ids"):
        ids = r.get(name)
        if not isinstance(ids, list) or (name not in packed and any(type(i) is not int for i in ids)):
            raise ValueError(f"'{name}' must be a list of integers")
        if ids and (min(ids) < 0 or max(ids) >= MAX_TOKEN_ID):
            raise ValueError(f"'{name}' holds an id outside [0, 2**31): the line is damaged")
    if not r["ids"]:
        raise ValueError("'ids' is empty: a completed request sampled at least one id")
    lps = r.get("logprobs")
    if not isinstance(lps, list) or len(lps) != len(r["ids"]):
        raise ValueError(f"'logprobs' must hold one value per sampled id ({len(r['ids'])})")
    if not _count(r.get("b")):
        raise ValueError(f"bad branch number {r.get('b')!r} (a 'b' >= 0)")
    parent = r.get("parent")
    if parent is not None and not (isinstance(parent, list) and len(parent) == 2 and all(map(_count, parent))):
        raise ValueError(f"'parent' must be null or [branch, messages], got {parent!r:.80}")
    if not _count(r.get("shared", 0)):
        raise ValueError(f"'shared' must be a count of ids, got {r.get('shared')!r:.80}")
    msgs = r.get("messages", [])
    if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
        raise ValueError("'messages' must be a list of message objects")
    if not isinstance(r.get("message"), dict):
        raise ValueError(f"'message' must be the stored assistant message (an object), got {r.get('message')!r:.80}")
    if r.get("finish") not in ("stop", "length"):
        raise ValueError(f"'finish' must be 'stop' or 'length', got {r.get('finish')!r:.80}")
    if not isinstance(r.get("sent_content", ""), str):
        raise ValueError(f"'sent_content' must be the text the client received, got {r.get('sent_content')!r:.80}")


def read_journal(path: Path) -> tuple[dict, list[dict], str | None]:
    """``(header, records, committed shard or None)`` of a log file; a torn last line is
    skipped, any other bad line raises ValueError naming the file and line."""
    raw = Path(path).read_bytes()
    lines = raw.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines:
        lines.pop()  # no newline at the end: a write cut by a kill, never answered
    if not lines:
        raise ValueError(f"{path}: an empty session log (no header line)")
    out: list[dict] = []
    committed = None
    for n, line in enumerate(lines, 1):
        try:
            obj = json.loads(line)
        except ValueError as err:
            raise ValueError(f"{path}:{n}: not a JSON line ({err})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{path}:{n}: not a JSON object")
        out.append(obj)
    head = out[0]
    if head.get("journal") != HEADER or not isinstance(head.get("session_id"), str) or \
            not isinstance(head.get("uid"), str):
        raise ValueError(f"{path}: not a chatdata gateway session log (bad header line)")
    version = head.get("version", 1)
    if not isinstance(version, int) or version > VERSION:
        raise ValueError(f"{path}: session log version {version!r} is newer than this chatdata reads ({VERSION}); "
                         "upgrade chatdata (logs are not readable by older versions)")
    records = []
    for n, obj in enumerate(out[1:], 2):
        if "committed" in obj:
            committed = obj["committed"]
            if not isinstance(committed, str) or not committed.startswith("shard-") or \
                    Path(committed).name != committed:  # a name, never a path to somewhere else
                raise ValueError(f"{path}:{n}: 'committed' must name a shard (shard-...), got {committed!r:.80}")
            continue
        try:
            packed = frozenset(key for key, _, _ in _PACKED if isinstance(obj.get(key), dict))  # version 2
            for key, code, tag in _PACKED:
                if key in obj:
                    try:
                        obj[key] = _unpack(obj[key], code, tag)
                    except (ValueError, TypeError) as err:
                        raise ValueError(f"bad {key!r} ({err})") from None
            _check_record(obj, packed)
        except ValueError as err:
            raise ValueError(f"{path}:{n}: {err}") from None
        records.append(obj)
    return head, records, committed


@dataclass
class StoredBranch:
    """One branch rebuilt from a log: what a stored record holds."""

    branch: int
    parent: int | None = None
    fork_message: int = -1  # messages taken from the parent
    shared: int = 0  # ids taken from the parent (at least; the stored position is the common prefix)
    messages: list = field(default_factory=list)
    ids: list = field(default_factory=list)
    mask: list = field(default_factory=list)
    logprobs: list = field(default_factory=list)
    turns: int = 0
    truncated: int = 0


def branches_from_journal(records: list[dict]) -> list[StoredBranch]:
    """Every branch of a session, rebuilt from its records as :func:`read_journal` returns them
    (parents before forks, as written); a fork of a branch no earlier record holds, or one that
    takes more than its parent has, is a ValueError naming the record."""
    branches: dict[int, StoredBranch] = {}
    for n, r in enumerate(records):
        b = r["b"]  # the record's shape was checked when read (read_journal)
        if b not in branches:  # numbers are taken in request order, logged in completion order
            sb = StoredBranch(b)
            parent = r.get("parent")
            if parent is not None:
                pb, k = parent
                if pb not in branches:
                    raise ValueError(f"record {n}: branch {b} forks branch {pb}, which no earlier record holds")
                p = branches[pb]
                sb.parent, sb.fork_message, sb.shared = pb, k, int(r.get("shared", 0))
                if k > len(p.messages) or sb.shared > len(p.ids):
                    raise ValueError(f"record {n}: branch {b} takes {k} messages and {sb.shared} ids from branch "
                                     f"{pb}, which holds {len(p.messages)} and {len(p.ids)}")
                sb.messages = list(p.messages[:k])
                sb.ids, sb.mask, sb.logprobs = p.ids[:sb.shared], p.mask[:sb.shared], p.logprobs[:sb.shared]
            branches[b] = sb
        sb = branches[b]
        prompt, ids = r["prompt"], r["ids"]
        if len(r["logprobs"]) != len(ids):
            raise ValueError(f"record {n}: {len(r['logprobs'])} logprobs for {len(ids)} sampled ids")
        sb.messages += r.get("messages", [])
        sb.messages.append(r["message"])
        sb.ids += prompt + ids  # own lists (slices of the parent's when forked): O(new ids)
        sb.mask += [0] * len(prompt) + [1] * len(ids)
        sb.logprobs += [0.0] * len(prompt) + list(r["logprobs"])
        sb.turns += 1
        sb.truncated += r.get("finish") == "length"
    return [branches[b] for b in sorted(branches)]
