"""``MemoryMappedTensor``: a ``torch.Tensor`` whose memory is a file (or shared memory).

Indexing gives memory-mapped views of the same memory (they keep the file name). Pickling a
file-backed tensor sends its file name, dtype and layout, not its bytes, so a DataLoader worker
or another process maps the same file; without a file name the tensor lives in shared memory.

Constructors take the shape the way torch does (``zeros(2, 3)``, ``zeros((2, 3))`` or
``zeros(shape=(2, 3))``), or tensordict's ``*_like`` / ``from_tensor`` / ``from_filename`` /
``from_storage`` / ``from_handler`` forms.

Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "x.memmap")
    >>> t = MemoryMappedTensor.from_tensor(torch.arange(4.0), filename=path)
    >>> MemoryMappedTensor.from_filename(path, torch.float32, (4,)).tolist()
    [0.0, 1.0, 2.0, 3.0]
"""
from __future__ import annotations

import operator
import os
from pathlib import Path

import torch

__all__ = ["MemoryMappedTensor"]


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _is_writable(filename) -> bool:
    """Whether this process may write ``filename`` (a read-only file is mapped copy-on-write)."""
    return os.access(filename, os.W_OK)


def _parse_shape(args, shape, what: str):
    """``f(2, 3)``, ``f((2, 3))``, ``f(shape=(2, 3))``: the shape as a Size (or a nested-shape tensor)."""
    if shape is not None:
        if args:
            raise TypeError(f"MemoryMappedTensor.{what}: give the shape positionally or as shape=, not both")
        args = (shape,)
    if not args:
        raise TypeError(f"MemoryMappedTensor.{what} needs a shape: {what}(2, 3), {what}((2, 3)) or {what}(shape=(2, 3))")
    if len(args) == 1 and isinstance(args[0], torch.Tensor) and args[0].ndim == 2:
        return args[0]  # one row per nested tensor
    if len(args) == 1 and isinstance(args[0], (list, tuple, torch.Size, torch.Tensor)):
        args = tuple(args[0].tolist()) if isinstance(args[0], torch.Tensor) else tuple(args[0])
    dims = []
    for s in args:  # int(2.5) would silently give 2; a negative size is a bare OSError from the file
        if isinstance(s, bool):
            raise TypeError(f"MemoryMappedTensor.{what}: the shape must hold ints, got {args!r}")
        try:
            dims.append(operator.index(s))
        except TypeError:
            raise TypeError(f"MemoryMappedTensor.{what}: the shape must hold ints, got {args!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"MemoryMappedTensor.{what}: the shape {tuple(dims)} has a negative size")
    return torch.Size(dims)


def _check_device(device) -> None:
    if device is not None and torch.device(device).type not in ("cpu",):
        raise RuntimeError(
            f"MemoryMappedTensor lives in CPU memory (a file or shared memory), not on {device}; "
            "create it on the CPU and move a copy with .to(device)"
        )


def _nested_numel(sizes: torch.Tensor) -> int:
    return int(sizes.prod(1).sum()) if sizes.numel() else 0


def _as_nested(flat: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """A (strided-layout) nested tensor of per-item ``sizes`` viewing the 1-D buffer ``flat``."""
    strides, offsets = torch._nested_compute_contiguous_strides_offsets(sizes)
    return torch._nested_view_from_buffer(flat, sizes.clone(), strides, offsets)


def _safe_target(filename, existsok: bool) -> Path:
    path = Path(filename).absolute()
    if path.is_symlink():
        raise RuntimeError(
            f"refusing to write through symlink {path} (it points to {os.readlink(path)}); "
            "give the path of a regular file"
        )
    if path.exists() and not existsok:
        raise RuntimeError(f"the file {path} already exists; pass existsok=True to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def map_file(filename, dtype: torch.dtype, shape, *, writable: bool = True) -> torch.Tensor:
    """Map an existing file as a plain tensor of ``dtype``/``shape`` (validating its size).

    A file this process may not write is mapped copy-on-write (writes stay in memory).
    """
    shape = torch.Size(shape)
    numel = _numel(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    size = os.path.getsize(filename)
    if size < numel * itemsize:
        raise ValueError(
            f"file {filename} holds {size} bytes but dtype {dtype} and shape {tuple(shape)} need "
            f"{numel * itemsize}; the file is truncated or the metadata is wrong"
        )
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    t = torch.from_file(str(filename), shared=writable and _is_writable(filename), size=numel, dtype=dtype)
    return t.view(shape)


class _SharedHandle:
    """The shared-memory storage behind a file-less MemoryMappedTensor (``t._handler``)."""

    def __init__(self, storage):
        self.storage = storage

    def view(self, dtype, shape) -> torch.Tensor:
        flat = torch.empty(0, dtype=torch.uint8).set_(self.storage).view(dtype)
        if isinstance(shape, torch.Tensor):
            return _as_nested(flat[: _nested_numel(shape)], shape)
        return flat[: _numel(shape)].view(shape)


class MemoryMappedTensor(torch.Tensor):
    """A tensor stored in a file or in shared memory; see the module docstring."""

    # ops on it run as on a plain tensor (no subclass dispatch on every op, which costs ~15 us
    # a call); indexing alone is overridden so that views stay memory-mapped
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls, source, *, filename=None, handler=None, device=None, **kwargs):
        if device is not None and torch.device(device).type != "cpu":
            raise ValueError(f"MemoryMappedTensor lives in CPU memory, not on {device}")
        if not isinstance(source, torch.Tensor):
            source = torch.as_tensor(source)
        out = torch.Tensor._make_subclass(cls, source)
        out._filename = None if filename is None else str(filename)
        out._handler = handler
        return out

    def __init__(self, *args, **kwargs):
        pass

    @property
    def filename(self):
        """The backing file (absolute path), or None for shared memory."""
        return self.__dict__.get("_filename")

    @property
    def _handler(self):
        return self.__dict__.get("_handler_")

    @_handler.setter
    def _handler(self, value):
        self.__dict__["_handler_"] = value

    def __getitem__(self, index):
        out = torch.Tensor.__getitem__(self, index)
        res = torch.Tensor._make_subclass(MemoryMappedTensor, out)
        d = self.__dict__
        res.__dict__.update(_filename=d.get("_filename"), _handler_=d.get("_handler_"))
        return res

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def _allocate(cls, shape, dtype, filename, existsok: bool):
        dtype = dtype or torch.get_default_dtype()
        nested = isinstance(shape, torch.Tensor)
        numel = _nested_numel(shape) if nested else _numel(shape)
        if filename is None:
            storage = torch.empty(numel, dtype=dtype).share_memory_().untyped_storage()
            handle = _SharedHandle(storage)
            return cls(handle.view(dtype, shape), handler=handle)
        path = _safe_target(filename, existsok)
        itemsize = torch.empty((), dtype=dtype).element_size()
        with open(path, "wb") as f:
            f.truncate(numel * itemsize)
        flat = map_file(path, dtype, (numel,))
        return cls(_as_nested(flat, shape) if nested else flat.view(shape), filename=path)

    @classmethod
    def from_tensor(cls, input, *, filename=None, existsok: bool = False, copy_existing: bool = False,
                    copy_data: bool = True, shape=None):
        """A memory-mapped copy of ``input`` (its data too unless ``copy_data=False``).

        A MemoryMappedTensor given again (same file, or no file asked) is returned as it is;
        copying it to another file needs ``copy_existing=True``.
        """
        if isinstance(input, MemoryMappedTensor):
            same = filename is None or (input.filename is not None and Path(input.filename).absolute() == Path(filename).absolute())
            if same and shape is None:
                return input
            if input.filename is not None and filename is not None and not copy_existing:
                raise RuntimeError(
                    f"the tensor is already memory-mapped at {input.filename}; pass copy_existing=True "
                    f"to copy it to {filename}"
                )
        if not isinstance(input, torch.Tensor):
            input = torch.as_tensor(input)
        if input.is_nested:
            sizes = input._nested_tensor_size()
            out = cls._allocate(sizes, input.dtype, filename, existsok)
            if copy_data and input.size(0):
                _nested_buffer(out).copy_(torch.cat([t.reshape(-1) for t in input.unbind()]))
            return out
        shape = input.shape if shape is None else _parse_shape((shape,), None, "from_tensor")
        if copy_data and shape != input.shape:  # refused before a file is made
            raise ValueError(f"MemoryMappedTensor.from_tensor: shape {tuple(shape)} differs from the input's "
                             f"{tuple(input.shape)}; pass copy_data=False to allocate a tensor of another shape")
        out = cls._allocate(shape, input.dtype, filename, existsok)
        if copy_data and out.numel():
            out.as_subclass(torch.Tensor).copy_(input.detach().as_subclass(torch.Tensor))
        return out

    @classmethod
    def empty(cls, *args, shape=None, dtype=None, device=None, filename=None, existsok: bool = True):
        """An uninitialised tensor (files are zero-filled by the OS): ``empty(2, 3)``,
        ``empty((2, 3))`` or ``empty(shape=(2, 3))``."""
        _check_device(device)
        return cls._allocate(_parse_shape(args, shape, "empty"), dtype, filename, existsok)

    @classmethod
    def zeros(cls, *args, shape=None, dtype=None, device=None, filename=None, existsok: bool = True):
        """A tensor of zeros (same shape forms as :meth:`empty`)."""
        _check_device(device)
        out = cls._allocate(_parse_shape(args, shape, "zeros"), dtype, filename, existsok)
        if filename is None:
            _fill(out, 0)
        return out

    @classmethod
    def ones(cls, *args, shape=None, dtype=None, device=None, filename=None, existsok: bool = True):
        """A tensor of ones (same shape forms as :meth:`empty`)."""
        _check_device(device)
        out = cls._allocate(_parse_shape(args, shape, "ones"), dtype, filename, existsok)
        _fill(out, 1)
        return out

    @classmethod
    def full(cls, *args, shape=None, fill_value=None, dtype=None, device=None, filename=None, existsok: bool = True):
        """A tensor filled with ``fill_value``: ``full((2, 3), 7)`` or ``full(2, 3, fill_value=7)``."""
        if fill_value is None:
            if shape is None and len(args) == 2 and isinstance(args[0], (list, tuple, torch.Size, torch.Tensor)):
                args, fill_value = args[:1], args[1]
            elif shape is not None and len(args) == 1:
                args, fill_value = (), args[0]
            else:
                raise TypeError("MemoryMappedTensor.full needs a fill_value: full((2, 3), 7) or full(2, 3, fill_value=7)")
        _check_device(device)
        out = cls._allocate(_parse_shape(args, shape, "full"), dtype, filename, existsok)
        _fill(out, fill_value)
        return out

    @classmethod
    def empty_like(cls, input, *, filename=None, existsok: bool = True):
        """A tensor of ``input``'s shape and dtype, content undefined (zeros for files)."""
        return cls._allocate(_shape_of(input), input.dtype, filename, existsok)

    @classmethod
    def zeros_like(cls, input, *, filename=None, existsok: bool = True):
        """Zeros with ``input``'s shape and dtype."""
        out = cls._allocate(_shape_of(input), input.dtype, filename, existsok)
        _fill(out, 0)
        return out

    @classmethod
    def ones_like(cls, input, *, filename=None, existsok: bool = True):
        """Ones with ``input``'s shape and dtype."""
        return cls.full_like(input, 1, filename=filename, existsok=existsok)

    @classmethod
    def full_like(cls, input, fill_value, *, filename=None, existsok: bool = True):
        """``fill_value`` with ``input``'s shape and dtype."""
        out = cls._allocate(_shape_of(input), input.dtype, filename, existsok)
        _fill(out, fill_value)
        return out

    @classmethod
    def from_filename(cls, filename, dtype, shape, index=None):
        """Map ``filename`` as ``dtype``/``shape`` (a missing file is created, zero-filled;
        a too-small file raises ``ValueError``; a read-only file is mapped copy-on-write)."""
        path = Path(filename).absolute()
        nested = isinstance(shape, torch.Tensor) and shape.ndim == 2
        if not nested:
            shape = _parse_shape((shape,), None, "from_filename")
        if not path.exists():
            return cls._allocate(shape, dtype, path, existsok=False)
        numel = _nested_numel(shape) if nested else _numel(shape)
        flat = map_file(path, dtype, (numel,))
        t = cls(_as_nested(flat, shape) if nested else flat.view(shape), filename=path)
        return t[index] if index is not None else t

    @classmethod
    def from_handler(cls, handler, dtype, shape, index=None):
        """The shared-memory tensor behind ``handler`` (``t._handler``) as ``dtype``/``shape``."""
        if not isinstance(handler, _SharedHandle):
            raise TypeError(f"from_handler takes the _handler of a file-less MemoryMappedTensor, got {type(handler).__name__}")
        if not isinstance(shape, torch.Tensor):
            shape = _parse_shape((shape,), None, "from_handler")
        t = cls(handler.view(dtype, shape), handler=handler)
        return t[index] if index is not None else t

    @classmethod
    def from_storage(cls, storage, *, dtype=None, shape=None, filename=None, handler=None, index=None):
        """View an untyped storage (``t.untyped_storage()``) as ``dtype``/``shape`` (a 2-D
        tensor of sizes gives a nested tensor)."""
        dtype = dtype or torch.get_default_dtype()
        handle = handler if handler is not None else _SharedHandle(storage)
        if shape is None:
            shape = torch.Size([storage.nbytes() // torch.empty((), dtype=dtype).element_size()])
        elif not isinstance(shape, torch.Tensor):
            shape = _parse_shape((shape,), None, "from_storage")
        out = cls(handle.view(dtype, shape), filename=None if filename is None else Path(filename).absolute(),
                  handler=None if filename is not None else handle)
        return out[index] if index is not None else out

    # -- pickling: the file name, not the bytes -------------------------------------------
    def __reduce_ex__(self, protocol):
        if self.filename is not None and not self.is_nested:
            nbytes = self.untyped_storage().nbytes()
            return (_rebuild_from_file, (self.filename, self.dtype, nbytes // self.element_size(), tuple(self.shape),
                                         tuple(self.stride()), self.storage_offset()))
        return (MemoryMappedTensor, (self.as_subclass(torch.Tensor),))


def _nested_buffer(t: torch.Tensor) -> torch.Tensor:
    """The flat buffer behind a nested tensor."""
    return torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())


def _shape_of(input):
    return input._nested_tensor_size() if getattr(input, "is_nested", False) else input.shape


def _fill(t: torch.Tensor, value) -> None:
    if t.is_nested:
        _nested_buffer(t).fill_(value)
    elif t.numel():
        t.as_subclass(torch.Tensor).fill_(value)


def _rebuild_from_file(filename, dtype, storage_numel, shape, stride, offset):
    flat = map_file(filename, dtype, (storage_numel,))
    return MemoryMappedTensor(flat.as_strided(shape, stride, offset), filename=filename)
