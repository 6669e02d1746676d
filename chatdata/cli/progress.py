"""Progress of long commands with tqdm (a dependency of transformers, so always installed):
shown on a terminal (stderr), silent otherwise; plus the number formats the commands print.

Example:
    >>> p = Progress("importing", total=100, unit="B", enabled=False)
    >>> p.update(50, items=3); p.close()
    >>> p.done, p.items
    (50, 3)
"""
from __future__ import annotations

import sys
import time

__all__ = ["Progress", "human_bytes", "human_count"]


def human_bytes(n: float) -> str:
    """``1536 -> '1.5 KB'``.

    Example:
        >>> human_bytes(1536)
        '1.5 KB'
    """
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"  # pragma: no cover


def human_count(n: float) -> str:
    """``12345 -> '12,345'``; large floats rounded.

    Example:
        >>> human_count(12345.4)
        '12,345'
    """
    return f"{int(round(n)):,}"


class Progress:
    """A tqdm bar counting ``total`` in ``unit`` ("B" for bytes, or a word such as
    "conversations"), with the count of ``item_name`` produced alongside.

    ``done`` may also be advanced directly (cheap, e.g. once per input line); the bar catches up
    at the next :meth:`update`. ``enabled=None`` means "``stream`` (stderr) is a terminal".
    """

    def __init__(self, label: str, total: float | None = None, unit: str = "B", item_name: str = "conversations",
                 enabled: bool | None = None, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label, self.total, self.unit, self.item_name = label, total, unit, item_name
        self.done = 0
        self.items = 0
        self.start = time.perf_counter()
        self._shown = 0
        self._bar = None
        if self.enabled:
            from tqdm import tqdm

            self._bar = tqdm(total=total or None, desc=label, unit=unit if unit == "B" else f" {unit}", unit_scale=True,
                             unit_divisor=1024 if unit == "B" else 1000, file=self.stream, mininterval=0.1,
                             dynamic_ncols=True)

    def update(self, n: float = 0, items: int = 0, force: bool = False) -> None:
        """Count ``n`` more of the total and ``items`` more items."""
        self.done += n
        self.items += items
        bar = self._bar
        if bar is None:
            return
        if self.item_name and self.unit != self.item_name:
            rate = self.items / max(self.elapsed, 1e-9)
            bar.set_postfix_str(f"{human_count(self.items)} {self.item_name}, {human_count(rate)} {self.item_name}/s",
                                refresh=False)
        bar.update(self.done - self._shown)
        self._shown = self.done
        if force:
            bar.refresh()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def close(self) -> None:
        if self._bar is not None:
            self.update(force=True)
            self._bar.close()
            self._bar = None
