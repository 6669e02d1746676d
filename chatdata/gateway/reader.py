"""``read_sessions(OUT)``: every stored branch of a gateway's output as one record.

A record is a dict::

    {"session_id": str, "branch": int,
     "parent": None or (parent branch, position),   # position: ids shared with the parent
     "history": History,                            # one conversation
     "input_ids": LongTensor[T], "assistant_masks": LongTensor[T], "logprobs": FloatTensor[T]}

The three tensors are 1-D and aligned: the masks are 1 exactly on the ids the backend sampled,
the logprobs its logprobs there and 0.0 elsewhere. A fork's ``input_ids`` start with its
parent's first ``position`` ids, id for id, so the branches of a session form a prefix tree
(``chatdata.train.collate_prefix_tree`` lays such rows out once). Branch numbers are unique
within a session id, also when a session id was used again after it was stored.

Example:
    >>> import tempfile, pathlib
    >>> from chatdata.gateway.store import SessionStore
    >>> from chatdata.gateway.journal import Journal
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> store = SessionStore(out, durable=False); _ = store.open()
    >>> j = Journal.create(store.journal_dir, "s1", durable=False)
    >>> j.append({"b": 0, "parent": None, "shared": 0, "messages": [{"role": "user", "content": "hi"}],
    ...           "prompt": [1, 2], "ids": [3], "logprobs": [-0.5], "message": {"role": "assistant", "content": "x"},
    ...           "finish": "stop"})
    >>> _ = store.commit([j.path]); store.close()
    >>> r = read_sessions(out)[0]
    >>> r["session_id"], r["branch"], r["parent"], r["input_ids"].tolist(), r["assistant_masks"].tolist()
    ('s1', 0, None, [1, 2, 3], [0, 0, 1])
"""
from __future__ import annotations

import warnings

from pathlib import Path

import torch

from ..history import History
from ..io.sharded import open_dataset
from .journal import branches_from_journal, read_journal
from .store import BRANCHES, JOURNAL, TOKENS, _common_prefix, is_gateway_output

__all__ = ["read_sessions", "summarize"]


def _plain(t) -> torch.Tensor:
    return t.as_subclass(torch.Tensor) if isinstance(t, torch.Tensor) else torch.as_tensor(t)


def _stored(out: Path) -> list[tuple[str, dict]]:
    hist, toks, table = open_dataset(out), open_dataset(out / TOKENS), open_dataset(out / BRANCHES)
    by_name = [{Path(s["path"]).name: k for k, s in enumerate(ds.manifest["shards"])} for ds in (toks, table)]
    rows = []
    for k, entry in enumerate(hist.manifest["shards"]):
        name = Path(entry["path"]).name
        if name not in by_name[0] or name not in by_name[1]:
            lacking = TOKENS if name not in by_name[0] else BRANCHES  # a commit names it there first
            raise ValueError(f"{out}: shard {name} holds conversations that {out / lacking} does not list: that "
                             "folder was deleted, moved or edited after they were stored; restore it")
        h, t, b = hist.shard(k), toks.shard(by_name[0][name]), table.shard(by_name[1][name])
        sids, uids = b.get("session_id").tolist(), b.get("session_uid").tolist()
        branch, parent, fork_at = b["branch"].tolist(), b["parent"].tolist(), b["fork_at"].tolist()
        offsets = t.offsets
        ids, masks, lps = (t.values.get(key) for key in ("input_ids", "assistant_masks", "logprobs"))
        for j in range(len(sids)):
            a, e = int(offsets[j]), int(offsets[j + 1])
            rows.append((uids[j], {
                "session_id": sids[j], "branch": branch[j],
                "parent": None if parent[j] < 0 else (parent[j], fork_at[j]),
                "history": h[j], "input_ids": _plain(ids[a:e]), "assistant_masks": _plain(masks[a:e]),
                "logprobs": _plain(lps[a:e])}))
    return rows


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:  # removed right now (stored)
        return None


def _open(out: Path) -> list[tuple[str, dict]]:
    """The branches of the logs in ``out/journal``, also of a log being stored right now (its
    rows are dropped by the caller when the stored ones hold them)."""
    rows = []
    found = [(t, p) for p in (out / JOURNAL).glob("*.jsonl") if (t := _mtime(p)) is not None]
    for _, path in sorted(found):
        try:
            head, records, _ = read_journal(path)
            branches = branches_from_journal(records)
        except OSError:
            continue  # removed right now (committed)
        except ValueError as err:  # a damaged log (a line being written is skipped, not an error)
            warnings.warn(f"an open session's log is left out: {err}", stacklevel=3)
            continue
        ids_of = {b.branch: b.ids for b in branches}
        for b in branches:
            rows.append((head["uid"], {
                "session_id": head["session_id"], "branch": b.branch,
                "parent": None if b.parent is None else (b.parent, _common_prefix(b.ids, ids_of[b.parent], b.shared)),
                "history": History.from_chats([b.messages])[0],
                "input_ids": torch.tensor(b.ids, dtype=torch.int64),
                "assistant_masks": torch.tensor(b.mask, dtype=torch.int64),
                "logprobs": torch.tensor(b.logprobs, dtype=torch.float32)}))
    return rows


def read_sessions(out, include_open: bool = False) -> list[dict]:
    """One record per stored branch of the gateway output ``out`` (see the module docstring),
    in the order they were stored. ``include_open=True`` adds the branches of sessions still
    open (read from their logs, as a running gateway has them now)."""
    out = Path(out)
    if not is_gateway_output(out):
        raise ValueError(f"{out} is not a folder written by chatdata serve (no gateway.json in it)")
    # the logs first: a session stored meanwhile is then in the stored rows (its log rows are dropped);
    # read after them, a log that a commit removed between the two reads was in neither
    opened = _open(out) if include_open else []
    rows = _stored(out)
    if opened:
        stored_uids = {uid for uid, _ in rows}
        rows += [row for row in opened if row[0] not in stored_uids]
    first: dict[str, dict[str, int]] = {}  # session id -> uid -> branch offset
    taken: dict[str, int] = {}
    for uid, r in rows:
        uids = first.setdefault(r["session_id"], {})
        if uid not in uids:
            uids[uid] = taken.get(r["session_id"], 0)
        taken[r["session_id"]] = max(taken.get(r["session_id"], 0), uids[uid] + r["branch"] + 1)
    out_rows = []
    for uid, r in rows:
        shift = first[r["session_id"]][uid]
        if shift:
            r["branch"] += shift
            if r["parent"] is not None:
                r["parent"] = (r["parent"][0] + shift, r["parent"][1])
        out_rows.append(r)
    return out_rows


def summarize(out) -> dict:
    """Counts of a gateway output, from its columns (no conversation is decoded): stored
    sessions, branches, forks, turns, truncated turns, tokens, sampled tokens, and open session
    logs. ``chatdata info OUT`` prints them.

    Example:
        >>> import tempfile, pathlib
        >>> from chatdata.gateway.store import SessionStore
        >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
        >>> s = SessionStore(out, durable=False); _ = s.open(); s.close()
        >>> summarize(out)["branches"]
        0
    """
    out = Path(out)
    toks, table = open_dataset(out / TOKENS), open_dataset(out / BRANCHES)
    sessions: set = set()
    counts = {"branches": 0, "forks": 0, "turns": 0, "truncated_turns": 0, "tokens": 0, "sampled_tokens": 0}
    for k in range(table.num_shards):
        b = table.shard(k)
        sessions.update(b.get("session_uid").tolist())
        counts["branches"] += int(b.batch_size[0])
        counts["forks"] += int((b["parent"] >= 0).sum())
        counts["turns"] += int(b["turns"].sum())
        counts["truncated_turns"] += int(b["truncated_turns"].sum())
    for k in range(toks.num_shards):
        values = toks.shard(k).values
        counts["tokens"] += int(values.get("input_ids").numel())
        counts["sampled_tokens"] += int(values.get("assistant_masks").sum())
    return {"sessions": len(sessions), **counts, "open_session_logs": len(list((out / JOURNAL).glob("*.jsonl")))}
