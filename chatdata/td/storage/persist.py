"""The on-disk format, and its entry points: :func:`save`, :func:`load`, :func:`save_and_load`.

A saved collection is a folder holding ``meta.json`` and raw little-endian, C-order files.
``meta.json`` keeps the class's own fields (``_type``, ``batch_size``, ...) apart from its
``entries``, so no user key can collide with them. Entries are:

- ``tensor``: ``<key>.memmap`` with ``dtype`` and ``shape`` in the JSON;
- ``strings``: a column: ``<key>.bytes.memmap`` (UTF-8, or JSON text for other values) and
  ``<key>.offsets.memmap`` (int64, n+1) with the stack's ``shape``: two files, however many;
- ``value``: one JSON value for the whole batch (NonTensorData);
- ``collection``: a sub-folder ``<key>/`` with its own ``meta.json`` (nested TensorDict,
  tensorclass, ragged stack), so a sub-folder loads on its own.

Keys become file names through :func:`~chatdata.td.core.keys.key_to_filename` only, so no key
reaches outside the folder. Saves write a temporary sibling folder and swap it into place
atomically. Loading never unpickles or imports anything, maps files lazily and validates sizes.
``docs/format.md`` is the full specification. One writer (:mod:`.writer`) and one reader
(:mod:`.reader`) serve every collection class; this module joins them.

Example:
    >>> import tempfile
    >>> td = TensorDict({"a": torch.zeros(3), "s": ["x", "y", "z"]}, [3])
    >>> path = tempfile.mkdtemp()
    >>> _ = save(td, path)
    >>> load(path)["s"].tolist()
    ['x', 'y', 'z']
"""
from __future__ import annotations

from .folder import Folder
from .fsops import FormatError
from .integrity import FORMAT_NAME, FORMAT_VERSION
from .reader import _load_folder, load
from .writer import _save, save

__all__ = ["save", "save_and_load", "load", "FormatError", "FORMAT_NAME", "FORMAT_VERSION"]


def save_and_load(obj, prefix, *, num_threads: int = 0, like: bool = False, existsok: bool = True,
                  durable: bool = False):
    """:func:`save`, then the saved object, loaded from the files this call wrote (opened
    before they are swapped into place), never from what another writer put at ``prefix``
    since. Returns ``(path, loaded)``."""
    return _save(obj, prefix, num_threads=num_threads, like=like, existsok=existsok,
                 after_write=_load_written, durable=durable)


def _load_written(folder, prefix):
    """The collection in the just-written ``folder``, shown (paths, errors) as ``prefix``."""
    return _load_folder(Folder.open(folder), prefix)
