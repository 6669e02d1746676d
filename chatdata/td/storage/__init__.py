"""The storage room of td/: the on-disk format (``docs/format.md``).

A saved collection is a folder: ``meta.json`` plus raw little-endian files; strings are columns
(UTF-8 bytes plus int64 offsets). The room holds the writer (:mod:`.writer`) and the reader
(:mod:`.reader`) of every collection class, joined by :mod:`.persist` (``save_and_load``), the
memmap API of the collections (:mod:`.memmap_api`: ``memmap``, ``load_memmap``, ...),
``MemoryMappedTensor`` (:mod:`.memmap`), the streaming writer (:mod:`.stream`), ``verify``
(:mod:`.verify`: its walk :mod:`.verify_walk`, its report :mod:`.verify_report`, its UTF-8
check :mod:`.utf8_check`), checksums (:mod:`.checksum`), load-time integrity checks and the format's
constants (:mod:`.integrity`), folders opened once (:mod:`.folder`), atomic file-system
operations and ``FormatError`` (:mod:`.fsops`), writers' temporary folders (:mod:`.tempdirs`),
write-through of in-place updates (:mod:`.writethrough`), torch.nested tensors
(:mod:`.nested_persist`), JSON values (:mod:`.json_values`), typed copies of JSON columns that
a higher room registers the format of (:mod:`.typed_copies`), dtype names (:mod:`.dtypes`) and
the reader of folders tensordict wrote (:mod:`.tensordict_folders`).

It is the top floor of td/: it imports the core, the non-tensor and the tensorclass rooms, and
none of them imports it. What they need from it, it registers with them when it is imported
(:mod:`.hooks`): the memmap methods of every collection, the buffer of
``consolidate(filename=...)``, ``FormatError`` for corrupt string columns.

Other rooms and packages import these names from here (this face), never from the modules inside.

Example:
    >>> import tempfile
    >>> from chatdata.td.storage import load_memmap, verify
    >>> path = TensorDict({"s": ["a", "b"]}, [2]).memmap(tempfile.mkdtemp() + "/ds")._saved_path
    >>> load_memmap(path)["s"].tolist(), verify(path).ok
    (['a', 'b'], True)
"""
from .checksum import checksum_file
from .fsops import FormatError, check_overwritable, find_orphans, fsync_dir, write_all
from .integrity import FORMAT_NAME, FORMAT_VERSION, LoadedRagged
from .memmap import MemoryMappedTensor
from .memmap_api import TensorDictFuture, load_memmap
from .persist import load, save, save_and_load
from .stream import StreamWriter
from .tempdirs import find_dead_temps
from .verify import Problem, VerifyReport, find_leftovers, verify
from .writethrough import DetachedWriteWarning
from .typed_copies import TypedCopyFormat, register as register_typed_copy
from . import hooks as _hooks

_hooks.install()  # memmap methods, consolidate(filename=...)'s buffer, FormatError for corrupt columns

__all__ = [
    "MemoryMappedTensor", "FormatError", "load_memmap", "TensorDictFuture", "save", "load", "save_and_load",
    "StreamWriter", "check_overwritable", "write_all", "fsync_dir", "verify", "VerifyReport", "Problem", "find_leftovers", "find_orphans", "find_dead_temps", "checksum_file",
    "DetachedWriteWarning", "LoadedRagged", "FORMAT_NAME", "FORMAT_VERSION", "TypedCopyFormat", "register_typed_copy",
]
