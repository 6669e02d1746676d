"""Is a folder one that chatdata saved? (its ``meta.json`` names chatdata's format)

Used where the io layer must not mistake a saved dataset for something else: a table import
skips the files of a saved collection (a History's typed copy, ``*.typed.arrow``), and
``open_dataset(..., mode="a")`` refuses to create a sharded dataset inside a saved one (a save
replaces the whole folder, and would then refuse: the new files are not the dataset's own).

Example:
    >>> import tempfile, pathlib, chatdata
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> _ = chatdata.History.from_chats([[{"role": "user", "content": "a"}]]).memmap(root / "ds")
    >>> saved_collection(root / "ds"), saved_ancestor(root / "ds" / "sub" / "new") == root / "ds"
    (True, True)
"""
from __future__ import annotations

import json
from pathlib import Path

from ..td.storage import FORMAT_NAME

__all__ = ["saved_collection", "saved_ancestor"]


def saved_collection(folder) -> bool:
    """Whether ``folder`` is a folder chatdata saved (its meta.json names chatdata's format)."""
    meta = Path(folder) / "meta.json"
    if not meta.is_file():
        return False
    try:
        doc = json.loads(meta.read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("format") == FORMAT_NAME


def saved_ancestor(path):
    """The nearest folder above ``path`` (``path`` itself left out) that chatdata saved, or None."""
    for parent in Path(path).absolute().parents:
        if saved_collection(parent):
            return parent
    return None
