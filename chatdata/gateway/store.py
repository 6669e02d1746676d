"""The gateway's output folder: sessions stored as sharded chatdata datasets, crash-safe.

::

    OUT/
    ├── manifest.json, shards/        the conversations: a sharded History, one per stored branch
    ├── tokens/                       a sharded token set, row for row: input_ids, assistant_masks, logprobs
    ├── branches/                     a sharded table, row for row: session_id, session_uid, branch,
    │                                 parent, fork_at, fork_message, turns, truncated_turns
    ├── journal/<uid>.jsonl           the logs of open sessions (see :mod:`chatdata.gateway.journal`)
    ├── gateway.json                  {"format": "chatdata-gateway", "version": 1}
    └── .gateway.lock                 held by the running gateway

``chatdata info OUT`` and ``chatdata show OUT`` read the conversations as any sharded History;
``ConcatTokenDataset(open_dataset("OUT/tokens"))`` trains on the tokens;
:func:`chatdata.gateway.read_sessions` joins the three.

Storing a batch of sessions (:meth:`SessionStore.commit`) writes one shard of the same name in
each of the three datasets, then a ``committed`` line in each session's log, then adds the
shard to the token, branch and conversation manifests (in that order), then removes the logs.
A kill at any point loses nothing: before the ``committed`` line the logs are whole and the
unnamed shard folders are removed at the next start; after it, the next start adds the shard to
whichever manifest lacks it.

Example:
    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> store = SessionStore(out, durable=False); store.open()
    []
    >>> from chatdata.gateway.journal import Journal
    >>> j = Journal.create(store.journal_dir, "s1", durable=False)
    >>> j.append({"b": 0, "parent": None, "shared": 0, "messages": [{"role": "user", "content": "hi"}],
    ...           "prompt": [1, 2], "ids": [3], "logprobs": [-0.5], "message": {"role": "assistant", "content": "x"},
    ...           "finish": "stop"})
    >>> name = store.commit([j.path]); store.close()
    >>> import chatdata; len(chatdata.open_dataset(out)), len(chatdata.open_dataset(out / "tokens"))
    (1, 1)
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

from ..history import History
from ..io.sharded import MANIFEST, SHARDS, commit_shards, new_shard_name, open_dataset
from ..td import NonTensorStack, RaggedTensorDict, TensorDict
from .journal import Journal, StoredBranch, branches_from_journal, read_journal

__all__ = ["SessionStore", "TOKENS", "BRANCHES", "JOURNAL", "MARKER", "is_gateway_output"]

TOKENS, BRANCHES, JOURNAL, MARKER, LOCK = "tokens", "branches", "journal", "gateway.json", ".gateway.lock"
FORMAT = "chatdata-gateway"


def is_gateway_output(path) -> bool:
    """True when ``path`` is a folder ``chatdata serve`` writes (it holds ``gateway.json``)."""
    return (Path(path) / MARKER).is_file()


def _common_prefix(a: list, b: list, start: int) -> int:
    n = min(len(a), len(b))
    if start >= n:
        return n
    x, y = torch.tensor(a[start:n]), torch.tensor(b[start:n])
    diff = (x != y).nonzero()
    return n if diff.numel() == 0 else start + int(diff[0])


def _has_newline(path: Path) -> bool:
    """Whether ``path`` holds a newline (read in chunks: a log's first line is short)."""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 16):
            if b"\n" in chunk:
                return True
    return False


class _Refused(Exception):
    """A batch of logs that cannot be stored as one shard (see :meth:`SessionStore.commit`)."""


class SessionStore:
    """Owns ``OUT`` while a gateway runs: the lock, recovery at start, commits (see the module
    docstring). ``durable=True`` fsyncs logs and shards, so stored data survives a power loss."""

    def __init__(self, out, durable: bool = True) -> None:
        self.out = Path(out)
        self.durable = durable
        self.journal_dir = self.out / JOURNAL
        self._lock_fd: int | None = None

    # -- opening --------------------------------------------------------------------------------
    def preflight(self, logs: bool = True) -> None:
        """Raise ValueError (what to fix) if ``OUT`` cannot be used: a file, someone else's
        folder, a folder another gateway is writing to, or (``logs=True``) an open session's log
        that cannot be resumed (damaged, or a file the gateway did not write). Changes nothing."""
        self._check_folder()
        for path in self._logs() if logs else ():
            self._read_log(path)

    def _check_folder(self) -> None:
        out = self.out
        if out.exists() and not out.is_dir():
            raise ValueError(f"--out {out} is a file, not a folder")
        if out.is_dir() and any(out.iterdir()) and not is_gateway_output(out):
            raise ValueError(f"--out {out} is a non-empty folder that chatdata serve did not write; "
                             "give an empty or new folder (or one an earlier chatdata serve wrote, to resume)")
        if (out / LOCK).is_file():
            self._lock()
            self.close()
        self._check_whole()

    def _check_whole(self) -> None:
        """Every shard the conversations' manifest names is named by ``tokens/`` and ``branches/``
        too (a commit adds it to those two first), else a ValueError: a start would recreate the
        missing dataset empty and store new sessions beside records that can never be joined."""
        if not (self.out / MANIFEST).is_file():
            return
        stored = self._names("")
        for sub in (TOKENS, BRANCHES):
            missing = stored - (self._names(sub) if (self.out / sub / MANIFEST).is_file() else set())
            if missing:
                raise ValueError(f"{self.out / sub} lacks {len(missing)} of the {len(stored)} stored shards "
                                 f"(e.g. {sorted(missing)[0]}); it was deleted, moved or edited after they "
                                 "were stored. Restore it, or give chatdata serve a new --out")

    def open(self) -> list[Path]:
        """Create or reopen ``OUT``, take its lock, finish or undo an interrupted commit, and
        return the logs of sessions that were open (to resume, oldest first)."""
        out = self.out
        self._check_folder()  # the logs are read once, by _recover
        open_dataset(out, mode="a")  # the conversations' manifest first: it refuses a foreign folder
        self._lock()
        for sub in (TOKENS, BRANCHES):
            open_dataset(out / sub, mode="a")
        self.journal_dir.mkdir(exist_ok=True)
        if not is_gateway_output(out):
            (out / MARKER).write_text(json.dumps({"format": FORMAT, "version": 1}) + "\n", encoding="utf-8")
        try:
            return self._recover()
        except BaseException:  # a log that cannot be resumed: release the folder, so a retry (the log
            self.close()  # moved away) in this process is not told another gateway holds it
            raise

    def _lock(self) -> None:
        import fcntl

        fd = os.open(self.out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise ValueError(f"another chatdata serve is writing to {self.out} (it holds {self.out / LOCK}); "
                             "give each gateway its own --out") from None
        self._lock_fd = fd

    def close(self) -> None:
        """Release the lock (open sessions stay in their logs for the next start)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _names(self, sub: str) -> set[str]:
        return {Path(s["path"]).name for s in open_dataset(self.out / sub).manifest["shards"]}

    def _logs(self) -> list[Path]:
        """The open sessions' logs, oldest first, without those a kill cut before their header
        line was whole (nothing was answered in them)."""
        paths = sorted(self.journal_dir.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
        return [p for p in paths if _has_newline(p)]

    def _read_log(self, path: Path):
        """``read_journal(path)``, its branches checked too; a log that cannot be stored is a
        ValueError that says how to start anyway."""
        try:
            head, records, committed = read_journal(path)
            branches_from_journal(records)
        except ValueError as err:
            raise ValueError(f"{err}. This session log cannot be resumed or stored: move {path.name} out of "
                             f"{self.journal_dir} (or delete it) to start without it") from None
        return head, records, committed

    def _recover(self) -> list[Path]:
        named = {sub: self._names(sub) for sub in ("", TOKENS, BRANCHES)}
        pending = []
        whole = self._logs()
        for path in set(self.journal_dir.glob("*.jsonl")).difference(whole):
            path.unlink()  # killed before its header line was whole: nothing was answered
        for path in whole:
            _, records, committed = self._read_log(path)
            if committed is not None and self._finish_commit(committed, named):
                path.unlink()
            elif records:
                pending.append(path)
            else:
                path.unlink()
        for sub in ("", TOKENS, BRANCHES):  # shard folders no manifest names: an interrupted commit's
            folder = self.out / sub / SHARDS
            for child in folder.iterdir() if folder.is_dir() else ():
                if child.is_dir() and child.name.startswith("shard-") and child.name not in named[sub]:
                    shutil.rmtree(child, ignore_errors=True)
        return pending

    def _finish_commit(self, name: str, named: dict) -> bool:
        """Add shard ``name`` to the manifests that lack it; False if its folders are not all there."""
        if name in named[""]:
            return True
        if not all((self.out / sub / SHARDS / name / "meta.json").is_file() for sub in ("", TOKENS, BRANCHES)):
            return False
        from ..td import load_memmap

        items = int(load_memmap(self.out / BRANCHES / SHARDS / name).batch_size[0])
        for sub, kind in ((TOKENS, "tokens"), (BRANCHES, "TensorDict"), ("", "History")):
            if name not in named[sub]:
                commit_shards(self.out / sub, [{"path": f"{SHARDS}/{name}", "items": items}], kind)
                named[sub].add(name)
        return True

    # -- committing -----------------------------------------------------------------------------
    def commit(self, journals: list[Path]) -> str | None:
        """Store the sessions logged in ``journals`` as one shard (see the module docstring) and
        remove the logs; returns the shard name (None when they held no completed request).
        When one of several logs cannot be stored (nothing is written then), each is stored
        alone, so that it keeps no other out; the logs left are named in a ValueError."""
        journals = list(journals)
        if len(journals) < 2:
            try:
                return self._commit(journals, False)
            except ValueError as err:
                if journals[0].name in str(err):
                    raise
                raise ValueError(f"{journals[0].name}: {err}") from None
        try:
            return self._commit(journals, True)
        except _Refused:
            pass
        name, left = None, []
        for path in journals:
            try:
                name = self.commit([path]) or name
            except ValueError as err:
                left.append(str(err))
        if left:
            raise ValueError(f"{len(left)} session log(s) could not be stored and stay in {self.journal_dir}: "
                             + "; ".join(left))
        return name

    def _commit(self, journals: list[Path], batch: bool) -> str | None:
        rows: list[tuple[dict, StoredBranch]] = []
        used: list[tuple[Path, dict]] = []
        name = new_shard_name()
        written = [self.out / sub / SHARDS / name for sub in ("", TOKENS, BRANCHES)]
        try:
            for path in journals:
                if not path.exists():
                    continue
                head, records, _ = read_journal(path)
                used.append((path, head))
                rows += [(head, b) for b in branches_from_journal(records)]
            if not rows:
                for path, _ in used:
                    path.unlink(missing_ok=True)
                return None
            try:
                self._write(rows, written)
            except BaseException:
                for folder in written:
                    shutil.rmtree(folder, ignore_errors=True)
                raise
        except ValueError as err:  # a log that cannot be read or stored (History refuses a value): nothing written
            if batch:
                raise _Refused from err
            raise
        for path, head in used:
            Journal.reopen(path, head["session_id"], head["uid"], self.durable).mark_committed(name)
        entry = [{"path": f"{SHARDS}/{name}", "items": len(rows)}]
        commit_shards(self.out / TOKENS, entry, "tokens")
        commit_shards(self.out / BRANCHES, entry, "TensorDict")
        commit_shards(self.out, entry, "History")
        for path, _ in used:
            path.unlink(missing_ok=True)
        return name

    def _write(self, rows: list[tuple[dict, StoredBranch]], folders: list[Path]) -> None:
        by_key = {(h["uid"], b.branch): b for h, b in rows}
        fork_at = []
        for h, b in rows:
            if b.parent is None:
                fork_at.append(-1)
            else:
                fork_at.append(_common_prefix(b.ids, by_key[(h["uid"], b.parent)].ids, b.shared))
        History.from_chats([b.messages for _, b in rows]).memmap(str(folders[0]), durable=self.durable)
        lengths = torch.tensor([len(b.ids) for _, b in rows], dtype=torch.int64)
        offsets = torch.zeros(len(rows) + 1, dtype=torch.int64)
        torch.cumsum(lengths, 0, out=offsets[1:])
        flat = lambda key, dtype: torch.cat([torch.tensor(getattr(b, key), dtype=dtype) for _, b in rows])  # noqa: E731
        tokens = TensorDict({"input_ids": flat("ids", torch.int64), "assistant_masks": flat("mask", torch.int64),
                             "logprobs": flat("logprobs", torch.float32)}, [int(offsets[-1])])
        RaggedTensorDict(tokens, offsets).memmap(str(folders[1]), durable=self.durable)
        ints = lambda values: torch.tensor(values, dtype=torch.int64)  # noqa: E731
        table = TensorDict({
            "session_id": NonTensorStack.from_list([h["session_id"] for h, _ in rows]),
            "session_uid": NonTensorStack.from_list([h["uid"] for h, _ in rows]),
            "branch": ints([b.branch for _, b in rows]),
            "parent": ints([-1 if b.parent is None else b.parent for _, b in rows]),
            "fork_at": ints(fork_at),
            "fork_message": ints([b.fork_message for _, b in rows]),
            "turns": ints([b.turns for _, b in rows]),
            "truncated_turns": ints([b.truncated for _, b in rows]),
        }, [len(rows)])
        table.memmap(str(folders[2]), durable=self.durable)
