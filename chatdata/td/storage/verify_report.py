"""What :func:`chatdata.td.storage.verify.verify` reports: a :class:`VerifyReport` listing
each :class:`Problem` (a bad file or folder and what is wrong with it), the files read and
checksummed, those without a checksum, and the leftovers of interrupted saves.

Example:
    >>> r = VerifyReport(Path("ds"), [Problem("ds/x.memmap", "missing")])
    >>> r.ok, str(r.problems[0])
    (False, 'ds/x.memmap: missing')
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .fsops import FormatError

__all__ = ["VerifyReport", "Problem"]


@dataclass
class Problem:
    """One bad file (or folder) and what is wrong with it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class VerifyReport:
    """What :func:`verify` found. ``ok`` is True when no problem was found."""

    path: Path
    problems: list = field(default_factory=list)
    files: int = 0  # data files read
    bytes: int = 0  # their total size
    checksummed: int = 0  # files whose checksum matched
    unchecked: list = field(default_factory=list)  # data files without a recorded checksum
    leftovers: list = field(default_factory=list)  # temporary folders of interrupted saves
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def bad_files(self) -> list:
        """The paths named by the problems, each once, in the order found.

        Example:
            >>> r = VerifyReport(Path("ds"), [Problem("ds/a", "x"), Problem("ds/a", "y")])
            >>> r.bad_files(), r.ok
            (['ds/a'], False)
        """
        return list(dict.fromkeys(p.path for p in self.problems))

    def raise_if_bad(self) -> None:
        """Raise :class:`FormatError` naming every bad file (when there is one).

        Example:
            >>> VerifyReport(Path("ds")).raise_if_bad()
        """
        if self.problems:
            lines = "; ".join(str(p) for p in self.problems[:10])
            more = f" (and {len(self.problems) - 10} more)" if len(self.problems) > 10 else ""
            raise FormatError(f"{self.path} failed verification: {lines}{more}")
