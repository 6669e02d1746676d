"""What a hygiene pass found, kept for the summary and written as report files.

* ``problems.jsonl``: one line per tool-call problem: ``{"where", "problem", "detail"}``;
* ``clusters.jsonl``: one line per duplicate cluster: the kept conversation (``kept``: where it
  came from, ``index``: its position in the output) and its dropped ``duplicates`` (where, and
  the estimated ``similarity`` for near duplicates);
* ``contamination.json``: per benchmark, the ``count`` of conversations that overlap it, the
  prompts left out as too short, and up to 20 ``examples`` (where, prompt number, prompt start);
* ``contaminated.jsonl``: one line per conversation and benchmark it overlaps: ``{"where",
  "benchmark", "prompt", "dropped"}`` (all of them, not only the examples).

A report file this pass has nothing for is removed from the folder, so a folder written by an
earlier run never shows that run's findings as this one's.

Example:
    >>> r = HygieneReport()
    >>> r.problem("a.jsonl:line 3", "orphan_tool_reply", "a tool reply with no open call before it")
    >>> r.summary_lines()
    ['tool-call problems: 1 (orphan_tool_reply: 1)']
"""
from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

__all__ = ["HygieneReport", "MAX_EXAMPLES", "REPORT_FILES"]

MAX_EXAMPLES = 20
REPORT_FILES = ("problems.jsonl", "clusters.jsonl", "contamination.json", "contaminated.jsonl")


class HygieneReport:
    """Counts and details of one hygiene pass (see the module docstring)."""

    def __init__(self):
        self.problems: list[dict] = []
        self.problem_counts: Counter = Counter()
        self.bad_rows: set[str] = set()
        self.clusters: dict[str, dict] = {}
        self.dropped_duplicates = 0
        self.dedup_mode: str | None = None
        self.contamination: dict[str, dict] = {}
        self.contaminated_rows = 0
        self.contaminated_list: list[dict] = []
        self.drop_contaminated = True

    def problem(self, where: str, code: str, detail: str) -> None:
        self.problems.append({"where": where, "problem": code, "detail": detail})
        self.problem_counts[code] += 1
        self.bad_rows.add(where)

    def duplicate(self, where: str, kept_where: str, kept_index: int | None, similarity: float) -> None:
        c = self.clusters.setdefault(kept_where, {"kept": kept_where, "index": kept_index, "duplicates": []})
        d = {"where": where}
        if not math.isnan(similarity) and similarity < 1.0:
            d["similarity"] = round(similarity, 4)
        c["duplicates"].append(d)
        self.dropped_duplicates += 1

    def benchmarks(self, names, skipped: dict) -> None:
        for name in names:
            self.contamination.setdefault(name, {"count": 0, "short_prompts_left_out": skipped.get(name, 0),
                                                 "examples": []})

    def contaminated(self, where: str, benchmark: str, prompt_number: int, prompt: str) -> None:
        entry = self.contamination[benchmark]
        entry["count"] += 1
        self.contaminated_list.append({"where": where, "benchmark": benchmark, "prompt": prompt_number,
                                       "dropped": self.drop_contaminated})
        if len(entry["examples"]) < MAX_EXAMPLES:
            entry["examples"].append({"where": where, "prompt": prompt_number, "prompt_start": prompt[:120]})

    def summary_lines(self) -> list[str]:
        """One line per check that ran: counts per problem, duplicates, contamination."""
        lines = []
        if self.problem_counts:
            per = ", ".join(f"{k}: {v}" for k, v in sorted(self.problem_counts.items()))
            lines.append(f"tool-call problems: {sum(self.problem_counts.values())} ({per})")
        if self.dedup_mode:
            lines.append(f"{self.dedup_mode} duplicates dropped: {self.dropped_duplicates} "
                         f"in {len(self.clusters)} clusters")
        for name, e in self.contamination.items():
            extra = f" ({e['short_prompts_left_out']} prompts shorter than the n-gram left out)" \
                if e["short_prompts_left_out"] else ""
            what = "" if not e["count"] else ", dropped" if self.drop_contaminated else ", kept (flagged only)"
            lines.append(f"contaminated by {name}: {e['count']}{what}{extra}")
        return lines

    def write(self, folder) -> list[Path]:
        """Write the report files that have content into ``folder`` (created) and remove the
        others (:data:`REPORT_FILES`) left there by an earlier run; returns the written ones."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        if self.problems:
            p = folder / "problems.jsonl"
            with open(p, "w", encoding="utf-8") as f:
                for rec in self.problems:
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            written.append(p)
        if self.dedup_mode:
            p = folder / "clusters.jsonl"
            with open(p, "w", encoding="utf-8") as f:
                for c in self.clusters.values():
                    f.write(json.dumps(c, ensure_ascii=False) + "\n")
            written.append(p)
        if self.contamination:
            p = folder / "contamination.json"
            p.write_text(json.dumps(self.contamination, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            written.append(p)
            p = folder / "contaminated.jsonl"
            with open(p, "w", encoding="utf-8") as f:
                for rec in self.contaminated_list:
                    f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            written.append(p)
        for name in REPORT_FILES:
            stale = folder / name
            if stale not in written and stale.is_file():
                stale.unlink()
        return written
