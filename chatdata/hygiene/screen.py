"""``Screen``: the hygiene checks as one streaming step for importers. Each chunk of conversations
(a History, in source order, each named by where it came from) goes through: tool-call checks
(rows with problems are dropped with ``skip_bad``, otherwise only recorded: the caller refuses
the import), string arguments decoded, decontamination (drop, or only flag), then exact or near
deduplication against everything seen before. What it found goes to ``screen.report``, each
conversation named ``SOURCE:line N`` (or ``row N``). Per conversation it keeps 20 bytes for the
reports (source, position, output index), plus what the deduper keeps.

Example:
    >>> from chatdata import History
    >>> s = Screen(dedup="exact")
    >>> h = History.from_chats([[{"role": "user", "content": "hi"}], [{"role": "user", "content": "hi "}]])
    >>> kept = s(h, "a.jsonl", [1, 2])
    >>> kept.batch_size[0], s.report.summary_lines()
    (1, ['exact duplicates dropped: 1 in 1 clusters'])
"""
from __future__ import annotations

import bisect
import json

import numpy as np

from .decontam import ContaminationIndex
from .dedup import conversation_signatures
from .exact import ExactDeduper
from .near import NearDeduper
from .normalize import conversation_hashes
from .reports import HygieneReport
from .tool_calls import check_tool_calls, decode_arguments

__all__ = ["Screen"]


class Screen:
    """See the module docstring. ``tools``: tool specs for every conversation (added to each
    conversation's own tools given per chunk)."""

    def __init__(self, *, check_tools: bool = False, tools=None, skip_bad: bool = False, dedup: str | None = None,
                 threshold: float = 0.8, contamination: ContaminationIndex | None = None,
                 drop_contaminated: bool = True):
        if dedup not in (None, "exact", "near"):
            raise ValueError(f"Screen: dedup must be None, 'exact' or 'near', got {dedup!r}")
        self.check_tools, self.tools, self.skip_bad = check_tools, tools, skip_bad
        self.report = HygieneReport()
        self.report.dedup_mode = dedup
        self._exact = ExactDeduper() if dedup == "exact" else None
        self._near = NearDeduper(threshold) if dedup == "near" else None
        self._sources: list[str] = []
        self._unit = "line"
        self._src: list[np.ndarray] = []  # per conversation given to the deduper: source number,
        self._pos: list[np.ndarray] = []  # position in the source,
        self._out: list[np.ndarray] = []  # index in the output (-1: dropped)
        self._chunk_starts: list[int] = []  # index of the first conversation of each of those chunks
        self._seen = 0
        self.contamination = contamination
        self.drop_contaminated = drop_contaminated
        self.report.drop_contaminated = drop_contaminated
        if contamination is not None:
            self.report.benchmarks(contamination.names, contamination.skipped)
        self.written = 0  # conversations let through so far (their index in the output)
        self.seen = 0  # conversations given to the screen so far

    @property
    def active(self) -> bool:
        return bool(self.check_tools or self._exact or self._near or self.contamination)

    def _tools_for(self, conv_tools, n):
        if conv_tools is None:
            return self.tools
        shared = list(self.tools or [])
        out = []
        for t in conv_tools:
            own = _tool_list(t)
            if t is None:
                out.append(self.tools)
            elif isinstance(own, list):
                out.append([*shared, *own])
            else:
                out.append(own if isinstance(own, str) else json.dumps(own))
        return out

    def _where_of(self, i: int) -> tuple[str, int]:
        """(where, output index) of the i-th conversation the deduper saw."""
        k = bisect.bisect_right(self._chunk_starts, i) - 1
        j = i - self._chunk_starts[k]
        return f"{self._sources[int(self._src[k][j])]}:{self._unit} {int(self._pos[k][j])}", int(self._out[k][j])

    def __call__(self, history, source: str, positions, *, unit: str = "line", conv_tools=None):
        """The conversations of ``history`` that pass (a History, possibly empty); conversation
        ``i`` came from ``source`` at ``positions[i]`` (a line or ``unit`` number)."""
        n = history.batch_size[0]
        self.seen += n
        positions = np.asarray(positions, dtype=np.int64)
        wheres = _Wheres(source, positions, unit)
        keep = np.ones(n, dtype=bool)
        if self.check_tools:
            for p in check_tool_calls(history, self._tools_for(conv_tools, n)):
                i = p["conversation"]
                self.report.problem(wheres[i], p["problem"], f"message {p['message']}: {p['detail']}")
                keep[i] = False
            if not self.skip_bad:
                keep[:] = True  # recorded; the importer refuses the whole input at the end
            history = decode_arguments(history)
        if self.contamination is not None:
            names = self.contamination.names
            rows = np.flatnonzero(keep)
            sub = history if len(rows) == n else history[rows.tolist()]
            for c, b, p in self.contamination.scan(sub):
                name = names[b]
                self.report.contaminated(wheres[rows[c]], name, p, self.contamination.prompts[name][p])
                if self.drop_contaminated:
                    keep[rows[c]] = False
        if self._exact is not None or self._near is not None:
            rows = np.flatnonzero(keep)
            sub = history if len(rows) == n else history[rows.tolist()]
            base = self._seen
            self._seen += len(rows)
            if source not in self._sources:
                self._sources.append(source)
            self._unit = unit
            self._chunk_starts.append(base)
            self._src.append(np.full(len(rows), self._sources.index(source), dtype=np.int32))
            self._pos.append(positions[rows])
            if self._exact is not None:
                dup = self._exact.add(conversation_hashes(sub))
            else:
                dup = self._near.add(conversation_signatures(sub, self._near))
            out_index = np.full(len(rows), -1, dtype=np.int64)
            self._out.append(out_index)
            dropped = np.flatnonzero(dup >= 0)
            keep[rows[dropped]] = False
            kept_rows = np.flatnonzero(keep)  # deduplication is the last step: these are written
            alive = dup < 0
            out_index[alive] = self.written + np.searchsorted(kept_rows, rows[alive])
            for j in dropped.tolist():
                sim = 1.0 if self._exact is not None else self._near.similarity.get(base + j, np.nan)
                kept_where, kept_index = self._where_of(int(dup[j]))
                self.report.duplicate(wheres[rows[j]], kept_where, kept_index, float(sim))
        kept_rows = np.flatnonzero(keep)
        self.written += len(kept_rows)
        if len(kept_rows) == n:
            return history
        return history[kept_rows.tolist()]


class _Wheres:
    """``wheres[i]`` -> ``"SOURCE:line N"`` without building the strings of every row."""

    def __init__(self, source, positions, unit):
        self.source, self.positions, self.unit = source, positions, unit

    def __getitem__(self, i) -> str:
        return f"{self.source}:{self.unit} {int(self.positions[int(i)])}"


def _tool_list(tools):
    """A row's own tools as a list (a JSON string is read); what is not a list stays as it is,
    for the checker to report."""
    if isinstance(tools, str):
        import json

        try:
            tools = json.loads(tools)
        except (ValueError, RecursionError):
            return tools
    return list(tools) if isinstance(tools, list) else tools
