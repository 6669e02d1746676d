"""The memmap API of every collection: ``memmap``, ``memmap_``, ``memmap_like``, ``save``,
``dumps``, ``load_memmap`` (function and classmethod), ``load``, ``load_``, ``load_memmap_``
and ``memmap_refresh_``, on top of :mod:`chatdata.td.storage.persist`.

Example:
    >>> td = TensorDict.fromkeys(["a", "b", ("nested", "e")], 0)
    >>> path = tempfile.mkdtemp()
    >>> _ = td.memmap(path)
    >>> bool((load_memmap(path) == td).all())
    True
"""
from __future__ import annotations

import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch

from ..core import RaggedTensorDict
from ..nontensor import NonTensorData
from .memmap import MemoryMappedTensor
from .persist import load, save_and_load
from .reader import _fake_mode_active
from .verify import verify as _verify

__all__ = ["load_memmap", "TensorDictFuture", "attach"]


class TensorDictFuture:
    """The result of ``memmap(..., return_early=True, num_threads>0)``: call ``result()``."""

    def __init__(self, future, executor):
        self._future, self._executor = future, executor

    def result(self, timeout=None):
        try:
            return self._future.result(timeout)
        finally:
            self._executor.shutdown(wait=False)

    def done(self) -> bool:
        return self._future.done()


def _storage(obj):
    return getattr(obj, "_storage", obj)


def _mark(obj, prefix, durable: bool = False) -> None:
    st = _storage(obj)
    st.lock_()
    st._is_memmap = True
    st._saved_path = str(prefix)
    if getattr(st, "_disk", None) is not None:  # a stack memory-mapped on its own
        st._disk.durable = durable
    _mark_non_tensor(st, durable)


def _mark_non_tensor(st, durable: bool = False) -> None:
    """NonTensorData leaves of a memory-mapped collection report it (and are locked); their
    in-place updates are written through to the folder (fsynced if the save was durable)."""
    for v in getattr(st, "_tensordict", {}).values() if isinstance(getattr(st, "_tensordict", None), dict) else ():
        if isinstance(v, NonTensorData):
            v._is_memmap = True
            v._is_locked = True
            if v._disk is not None:
                v._disk.durable = durable
        elif hasattr(v, "_tensordict"):
            _mark_non_tensor(_storage(v), durable)


def _mmap_leaves(obj):
    st = _storage(obj)
    if isinstance(st, RaggedTensorDict):
        st = st.values  # its flat columns (no nested tensors built just to look)
    keys = st.keys(include_nested=True, leaves_only=True) if hasattr(st, "keys") else []
    for k in keys:
        try:
            v = st._get_raw(k)
        except (KeyError, TypeError):
            continue
        if isinstance(v, MemoryMappedTensor):
            yield k, v


def memmap(self, prefix=None, copy_existing: bool = False, *, num_threads: int = 0, return_early: bool = False,
           share_non_tensor: bool = False, existsok: bool = True, durable: bool = False, _like: bool = False):
    """Write every entry to memory-mapped files under ``prefix`` (a temporary folder when None)
    and return the memory-mapped, locked copy. ``durable=True`` fsyncs the files and folders
    so the saved data survives a power loss once this returns."""
    if return_early and num_threads > 0:
        ex = ThreadPoolExecutor(1)
        fut = ex.submit(memmap, self, prefix, copy_existing, num_threads=num_threads, existsok=existsok,
                        durable=durable, _like=_like)
        return TensorDictFuture(fut, ex)
    out, temporary = _memmap_into(self, prefix, copy_existing, num_threads, existsok, _like, durable)
    if temporary is not None:
        _remove_when_gone(out, temporary)
    return out


def _remove_when_gone(owner, folder) -> None:
    """Delete the temporary ``folder`` when ``owner`` is garbage-collected or the process exits.
    Safe for the data still in use: a load maps every file at once, and a mapping outlives the
    file's name (what is deleted is the folder entry; the pages stay until the last map goes)."""
    import shutil
    import weakref

    weakref.finalize(owner, shutil.rmtree, str(folder), True)


def _memmap_into(self, prefix, copy_existing, num_threads, existsok, _like, durable=False):
    """The memory-mapped copy, and the temporary folder made for it (None if ``prefix`` was given)."""
    st = _storage(self)
    saved = getattr(st, "_saved_path", None)
    temporary = None
    if prefix is None:
        if saved is not None and getattr(st, "_is_memmap", False):
            return self, None  # already memory-mapped: the same tensors
        prefix = temporary = tempfile.mkdtemp(prefix="chatdata-memmap-")
    prefix = Path(prefix).absolute()
    if not copy_existing:
        for key, t in _mmap_leaves(self):
            if t.filename is not None and prefix not in Path(t.filename).absolute().parents:
                raise RuntimeError(
                    f"entry {key!r} is already memory-mapped at {t.filename}, outside {prefix}; pass "
                    "copy_existing=True to copy it there"
                )
    try:
        # the object of this call's own save, even if another writer swaps ``prefix`` right after
        _, out = save_and_load(self, prefix, num_threads=num_threads, like=_like, existsok=existsok,
                                       durable=durable)
    except BaseException:
        if temporary is not None:
            import shutil

            shutil.rmtree(temporary, ignore_errors=True)
        raise
    _mark(out, prefix, durable)
    return out, temporary


def memmap_(self, prefix=None, copy_existing: bool = False, *, num_threads: int = 0, return_early: bool = False,
            share_non_tensor: bool = False, existsok: bool = True, durable: bool = False):
    """Like :func:`memmap`, but this object's entries become the memory-mapped ones."""
    if return_early and num_threads > 0:
        ex = ThreadPoolExecutor(1)
        fut = ex.submit(memmap_, self, prefix, copy_existing, num_threads=num_threads, existsok=existsok,
                        durable=durable)
        return TensorDictFuture(fut, ex)
    out, temporary = _memmap_into(self, prefix, copy_existing, num_threads, existsok, False, durable)
    if out is self:
        return self
    _adopt(self, out)
    if temporary is not None:
        _remove_when_gone(self, temporary)
    return self


def _adopt(self, out) -> None:
    if hasattr(self, "_storage"):
        object.__setattr__(self, "_storage", _storage(out))
        return
    self.__dict__.update({k: v for k, v in out.__dict__.items()})


def memmap_like(self, prefix=None, copy_existing: bool = False, *, existsok: bool = True, num_threads: int = 0,
                return_early: bool = False, share_non_tensor: bool = False):
    """Files of the right sizes, content not copied (zeros): preallocate a dataset on disk.
    Works on expanded views without touching their memory."""
    return memmap(self, prefix, copy_existing, num_threads=num_threads, return_early=return_early,
                  existsok=existsok, _like=True)


def load_memmap(prefix, device=None, non_blocking: bool = False, *, out=None, allow_pickle: bool | None = None,
                verify: bool = False):
    """Load a saved collection (any class) lazily: files are mapped, not read.

    ``device="meta"`` opens no data file; under ``FakeTensorMode`` tensors are fake; ``out``
    receives the loaded values in place. ``allow_pickle`` is accepted for tensordict code and
    changes nothing: chatdata never unpickles data. ``verify=True`` first reads every file and
    checks sizes, offsets, UTF-8 and checksums (:func:`chatdata.td.storage.verify.verify`), raising
    ``FormatError`` naming the bad file.
    """
    if verify:
        _verify(prefix).raise_if_bad()
    fake = _fake_mode_active()
    res = load(prefix, device, fake=fake)
    if out is not None:
        _storage(out).update_(_storage(res))
        return out
    is_meta = device is not None and torch.device(device).type == "meta"
    if not (fake or is_meta) and hasattr(_storage(res), "lock_"):
        _mark(res, Path(prefix).absolute())
    return res


def _load_memmap_cls(cls, prefix, device=None, non_blocking: bool = False, *, out=None, allow_pickle: bool | None = None,
                     verify: bool = False):
    res = load_memmap(prefix, device, non_blocking, out=out, verify=verify)
    # a saved tensorclass comes back as its own class, whichever class's load_memmap was called
    if isinstance(res, cls) or not hasattr(cls, "_from_storage") or out is not None or hasattr(res, "_from_storage"):
        return res
    extra = {k for k in res.keys() if not k.startswith("_")} - set(cls._field_names) if hasattr(res, "keys") else ()
    if extra:  # a TensorDict folder with keys the class has no field for: not this class's data
        raise ValueError(f"{cls.__name__}.load_memmap({str(prefix)!r}): the folder holds {sorted(extra)}, which are not "
                         f"fields of {cls.__name__} (fields: {list(cls._field_names)}); load it with load_memmap()")
    return cls._from_storage(res)


def load_memmap_(self, prefix, *args, **kwargs):
    """Load ``prefix`` into this object, in place."""
    res = load_memmap(prefix, *args, **kwargs)
    st = _storage(self)
    if getattr(st, "is_locked", False):
        st.update_(_storage(res))
    else:
        st.update(_storage(res))
    return self


def memmap_refresh_(self):
    """Re-read the memory-mapped content from its folder (raises if it was never saved)."""
    path = getattr(_storage(self), "_saved_path", None)
    if path is None:
        raise RuntimeError("memmap_refresh_: this collection has no saved path; call memmap(prefix) first")
    _adopt(self, load_memmap(path))
    return self


def attach(cls) -> None:
    """Give ``cls`` the memmap API methods."""
    cls.memmap = memmap
    cls.memmap_ = memmap_
    cls.memmap_like = memmap_like
    cls.save = memmap
    cls.dumps = memmap
    cls.load_memmap = classmethod(_load_memmap_cls)
    cls.load = classmethod(_load_memmap_cls)
    cls.load_ = load_memmap_
    cls.load_memmap_ = load_memmap_
    cls.memmap_refresh_ = memmap_refresh_
