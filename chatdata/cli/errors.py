"""The error every subcommand reports as one line (``chatdata CMD: error: ...``); its own module so
that the helpers of :mod:`chatdata.cli.common` and :mod:`chatdata.cli.paths` share it without an
import circle. Not a subcommand.

Example:
    >>> CLIError("ds/: no such dataset").code
    1
"""
from __future__ import annotations

__all__ = ["CLIError"]


class CLIError(Exception):
    """An error reported to the user as one line on stderr (exit status ``code``)."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code
