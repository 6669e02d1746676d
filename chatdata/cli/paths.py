"""Checks of an output path made before a command does any work: that it is apart from the
command's inputs (replacing or writing into an input would destroy it) and that its folder can be
written (so that a long run does not fail at its end on a temporary file's name).
Not a subcommand; :func:`chatdata.cli.common.check_output` calls these.

Example:
    >>> import tempfile; from pathlib import Path
    >>> ds = Path(tempfile.mkdtemp()) / "ds"; ds.mkdir()
    >>> check_apart(ds.parent / "tokens", [ds])           # fine
    >>> check_apart(ds / "tokens", [ds])
    Traceback (most recent call last):
    ...
    chatdata.cli.errors.CLIError: .../ds/tokens is inside the input .../ds; write the output elsewhere
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import CLIError

__all__ = ["check_apart", "check_writable"]


def _real(path) -> Path:
    return Path(os.path.realpath(Path(path).expanduser()))


def check_apart(out, inputs) -> None:
    """Refuse an output that is one of ``inputs`` (also through a symbolic link), lies inside one,
    or holds one (replacing it would delete the input while it is read)."""
    target = _real(out)
    for src in inputs:
        if src is None or not Path(src).exists():
            continue
        real = _real(src)
        if target == real:
            raise CLIError(f"{out} is the input {src} itself; write the output elsewhere (the input would be "
                           "destroyed)")
        if real in target.parents:
            raise CLIError(f"{out} is inside the input {src}; write the output elsewhere")
        if target in real.parents:
            raise CLIError(f"{out} holds the input {src}; write the output elsewhere (replacing it would delete "
                           "the input)")


def check_writable(out, *, make_parents: bool = True) -> None:
    """Refuse an output whose folder is a file, is missing (unless ``make_parents``: the command
    creates it) or cannot be written; tries a temporary file there (removed at once)."""
    out = Path(out)
    parent = Path(os.path.abspath(out)).parent
    if not make_parents and not parent.exists():
        raise CLIError(f"{out}: folder {parent} does not exist; create it first or choose another path")
    folder = parent
    while not folder.exists() and folder != folder.parent:  # the nearest folder that exists
        folder = folder.parent
    if not folder.is_dir():
        raise CLIError(f"{out}: {folder} is a file, not a folder; choose another path")
    try:
        fd, probe = tempfile.mkstemp(prefix=".chatdata-write-test-", dir=folder)
    except OSError as err:
        raise CLIError(f"{out}: cannot write in {folder} ({err.strerror or err}); choose another path") from None
    os.close(fd)
    os.unlink(probe)
