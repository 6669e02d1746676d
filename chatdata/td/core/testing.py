"""Helpers for tests and debugging: compare two collections, show a saved folder.

Example:
    >>> a = TensorDict({"x": torch.zeros(2), "n": {"y": torch.ones(1)}}, [])
    >>> assert_allclose_td(a, a.clone())
    True
"""
from __future__ import annotations

from pathlib import Path

import torch

__all__ = ["assert_allclose_td", "print_directory_tree"]


def _leaves(obj) -> dict:
    storage = getattr(obj, "_storage", obj)
    return dict(storage.items(include_nested=True, leaves_only=True))


def assert_allclose_td(actual, expected, rtol: float | None = None, atol: float | None = None,
                       equal_nan: bool = True, msg: str = "") -> bool:
    """Assert two TensorDicts / tensorclasses hold the same keys and close values (tensors via
    ``torch.testing.assert_close``; non-tensor values must be equal). Returns True.

    Example:
        >>> a = TensorDict({"x": torch.zeros(2)}, [])
        >>> assert_allclose_td(a, TensorDict({"x": torch.zeros(2) + 1e-9}, []))
        True
        >>> assert_allclose_td(a, TensorDict({"y": torch.zeros(2)}, []))
        Traceback (most recent call last):
        ...
        AssertionError: key sets differ: only in actual ['x'], only in expected ['y']
    """
    mine, theirs = _leaves(actual), _leaves(expected)
    if set(mine) != set(theirs):
        only_a = sorted(map(str, set(mine) - set(theirs)))
        only_e = sorted(map(str, set(theirs) - set(mine)))
        raise AssertionError(f"{msg + ': ' if msg else ''}key sets differ: only in actual {only_a}, "
                             f"only in expected {only_e}")
    for key, a in mine.items():
        e = theirs[key]
        if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor):
            try:
                torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=equal_nan,
                                           check_device=False, check_dtype=True)
            except AssertionError as err:
                raise AssertionError(f"{msg + ': ' if msg else ''}entry {key!r}: {err}") from None
            continue
        av, ev = getattr(a, "data", a), getattr(e, "data", e)
        av = a.tolist() if hasattr(a, "tolist") and not isinstance(a, torch.Tensor) else av
        ev = e.tolist() if hasattr(e, "tolist") and not isinstance(e, torch.Tensor) else ev
        if av != ev:
            raise AssertionError(f"{msg + ': ' if msg else ''}entry {key!r}: {av!r} != {ev!r}")
    return True


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024:
            return f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TB"


def print_directory_tree(path, indent: str = "", display_metadata: bool = True) -> str:
    """Print (and return) the folder tree of a saved collection, with file sizes.

    Example:
        >>> d = TensorDict({"x": torch.zeros(2)}, []).memmap("saved")
        >>> print_directory_tree("saved", display_metadata=False)  # doctest: +ELLIPSIS
        saved/
        ...
    """
    root = Path(path)
    lines = []
    if display_metadata:
        total = sum(f.stat().st_size for f in root.rglob("*") if f.is_file() and not f.is_symlink())
        lines.append(f"Directory size: {_size(total)}")

    def walk(p: Path, pad: str):
        if p.is_dir() and not p.is_symlink():
            lines.append(f"{pad}{p.name}/")
            for child in sorted(p.iterdir(), key=lambda c: c.name):
                walk(child, pad + "    ")
        else:
            lines.append(f"{pad}{p.name} ({_size(p.stat().st_size)})" if p.exists() else f"{pad}{p.name}")

    walk(root, indent)
    text = "\n".join(lines)
    print(text)
    return text
