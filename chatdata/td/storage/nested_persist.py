"""The ``nested`` entry of the on-disk format: a ``torch.nested`` tensor stored as two files.

A nested tensor of ``count`` components (``nt.unbind()``), each of its own shape, is saved as

- ``<key>.memmap``: every component's elements, in order, each in C order, concatenated
  (little-endian, no padding);
- ``<key>.sizes.memmap``: ``int64``, shape ``[count, ndim]``: row ``i`` is component ``i``'s shape.

and the ``meta.json`` entry ``{"kind": "nested", "layout": "strided", "dtype": ..., "count": ...,
"ndim": ..., "file": ..., "sizes": ...}`` (``docs/format.md``, section 3.3). Loading maps both files
and returns a nested tensor that views the mapped data (writes reach the file, as for tensors).
``layout`` is ``"strided"`` (``torch.nested.nested_tensor``'s default) or ``"jagged"``
(``layout=torch.jagged``: one ragged dim, the others shared); the tensor comes back in its layout.
A jagged tensor whose ragged dim is not dim 1 (e.g. after ``.transpose(1, 2)``) is
``"jagged_transposed"`` with ``"ragged_idx": k``: the files hold ``nt.transpose(1, k)`` (ragged dim
1, as ``"jagged"``) and loading transposes it back (older readers refuse the unknown layout).

Example:
    >>> import tempfile
    >>> from chatdata.td import TensorDict, load_memmap
    >>> nt = torch.nested.nested_tensor([torch.ones(2, 3), torch.zeros(2, 1)])
    >>> path = tempfile.mkdtemp() + "/ds"
    >>> _ = TensorDict({"a": nt}, [2, 2]).memmap(path)
    >>> [tuple(t.shape) for t in load_memmap(path)["a"].unbind()]
    [(2, 3), (2, 1)]
"""
from __future__ import annotations

import warnings
from pathlib import Path

import torch

from .dtypes import dtype_name, parse_dtype
from .fsops import FormatError
from .memmap import MemoryMappedTensor, _as_nested

__all__ = ["nested_parts", "nested_meta", "load_nested", "check_sizes"]


def nested_parts(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, str]:
    """``(flat values, int64 sizes [count, ndim], layout name)`` of a nested tensor (CPU).

    Example:
        >>> flat, sizes, layout = nested_parts(torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]))
        >>> flat.numel(), sizes.tolist(), layout
        (5, [[2], [3]], 'strided')
    """
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    layout = "jagged" if t.layout == torch.jagged else "strided"
    if layout == "jagged" and t._ragged_idx != 1:  # store it with its ragged dim first, as "jagged"
        t, layout = t.transpose(1, t._ragged_idx), "jagged_transposed"
    parts = t.unbind()
    ndim = t.dim() - 1
    if parts:
        sizes = torch.tensor([list(p.shape) for p in parts], dtype=torch.int64).reshape(len(parts), ndim)
        flat = torch.cat([p.reshape(-1) for p in parts])
    else:
        sizes = torch.zeros((0, ndim), dtype=torch.int64)
        flat = torch.zeros(0, dtype=t.dtype)
    return flat, sizes, layout


def nested_meta(t: torch.Tensor, data_name: str, sizes_name: str, layout: str) -> dict:
    """The ``meta.json`` entry of a nested tensor saved as ``data_name`` + ``sizes_name``.

    Example:
        >>> nt = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
        >>> nested_meta(nt, "a.memmap", "a.sizes.memmap", "strided")["count"]
        2
    """
    m = {"kind": "nested", "layout": layout, "dtype": dtype_name(t.dtype), "count": t.size(0),
         "ndim": t.dim() - 1, "file": data_name, "sizes": sizes_name}
    if layout == "jagged_transposed":
        m["ragged_idx"] = int(t._ragged_idx)
    return m


def _check_meta(m: dict, where) -> tuple:
    try:
        dtype = parse_dtype(m["dtype"], where)
        count, ndim, layout = m["count"], m["ndim"], m.get("layout", "strided")
        names = m["file"], m["sizes"]
    except (KeyError, TypeError, ValueError) as err:
        raise FormatError(f"{where}: bad nested tensor description {m!r} ({err})") from None
    if type(count) is not int or count < 0 or type(ndim) is not int or ndim < 0:
        raise FormatError(f"{where}: nested 'count' and 'ndim' must be non-negative integers, got {count!r}, {ndim!r}")
    if layout not in ("strided", "jagged", "jagged_transposed"):
        raise FormatError(f"{where}: unknown nested layout {layout!r}")
    ragged_idx = m.get("ragged_idx") if layout == "jagged_transposed" else 1
    if layout == "jagged_transposed" and (type(ragged_idx) is not int or not 1 <= ragged_idx <= ndim):
        raise FormatError(f"{where}: nested 'ragged_idx' must be an integer in [1, ndim={ndim}], got {ragged_idx!r}")
    for name in names:
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", "..") or "\x00" in name:
            raise FormatError(f"{where}: file name {name!r} is not a plain name inside the folder")
    return dtype, count, ndim, layout, names, ragged_idx


def check_sizes(sizes: torch.Tensor, where) -> int:
    """Validate a sizes table; returns the number of elements it describes. Negative sizes, or
    sizes whose products or total exceed ``2**62`` (no file is that large; int64 would wrap), are
    a :class:`FormatError` naming ``where``.

    Example:
        >>> check_sizes(torch.tensor([[3, 4], [3, 5]]), "a.sizes.memmap")
        27
    """
    if bool((sizes < 0).any()):
        raise FormatError(f"{where}: component sizes must be non-negative")
    if not sizes.numel():
        return 0
    limit = 2 ** 62
    if bool((sizes > limit).any()):
        raise FormatError(f"{where}: a component size exceeds 2**62")
    # multiply in float64 first (no wrap; exact enough to tell small totals from overflow)
    if not float(sizes.double().prod(1).sum()) <= limit / 2:  # NaN (inf * 0) too
        total = 0  # a close call: exact Python integers
        for row in sizes.tolist():
            n = 1
            for d in row:
                n *= d
            total += n
        if total > limit:
            raise FormatError(f"{where}: component sizes describe {total} elements, more than 2**62")
        return total
    return int(sizes.prod(1).sum())


def load_nested(folder, m: dict, where: str, *, meta_device: bool = False, fake: bool = False) -> torch.Tensor:
    """The nested tensor of entry ``m`` in the opened folder (data mapped, not read); a bad
    entry or file is a :class:`FormatError` naming it. Called by the reader; see the module
    example for the public round trip (``td.memmap(path)`` / ``load_memmap(path)``)."""
    dtype, count, ndim, layout, (data_name, sizes_name), ragged_idx = _check_meta(m, where)
    if not folder.is_file(sizes_name):
        raise FormatError(f"{where}: sizes file {folder.path / sizes_name} is missing")
    if folder.size(sizes_name) != count * ndim * 8:
        raise FormatError(f"{where}: {folder.path / sizes_name} has {folder.size(sizes_name)} bytes, "
                          f"expected {count * ndim * 8} ({count} x {ndim} int64)")
    sizes, _ = folder.map(sizes_name, torch.int64, count * ndim, shared=False)
    sizes = sizes.reshape(count, ndim).clone()  # small; owned, so later writes to the file cannot change shapes
    numel = check_sizes(sizes, folder.path / sizes_name)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if meta_device or fake:
        if layout == "strided":  # torch has no meta kernel for strided nested views
            raise NotImplementedError(
                f"{where}: a strided nested tensor cannot be loaded on the meta device or under "
                "FakeTensorMode (torch lacks the kernel); load it on the CPU, or save it with "
                "layout=torch.jagged")
        flat = torch.empty(numel, dtype=dtype, device="meta" if meta_device else None)
    else:
        if not folder.is_file(data_name):
            raise FormatError(f"{where}: data file {folder.path / data_name} is missing")
        flat, size = folder.map(data_name, dtype, numel, shared=True)
        if size != numel * itemsize:
            raise FormatError(f"{where}: {folder.path / data_name} has {size} bytes, expected {numel * itemsize}")
    if layout != "strided":
        nt = _jagged(flat, sizes, where)
        return nt if ragged_idx == 1 else nt.transpose(1, ragged_idx)
    if count == 0:
        raise FormatError(f"{where}: a strided nested tensor needs at least one component")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's "nested tensors are a prototype"
        return MemoryMappedTensor(_as_nested(flat, sizes), filename=Path(folder.path) / data_name)


def _jagged(flat: torch.Tensor, sizes: torch.Tensor, where) -> torch.Tensor:
    if sizes.shape[1] < 1 or (sizes.shape[0] and bool((sizes[:, 1:] != sizes[:1, 1:]).any())):
        raise FormatError(f"{where}: a jagged nested tensor's components must share every dim but the first")
    rest = sizes[0, 1:].tolist() if sizes.shape[0] else []
    offsets = torch.zeros(sizes.shape[0] + 1, dtype=torch.int64)
    torch.cumsum(sizes[:, 0], 0, out=offsets[1:])
    return torch.nested.nested_tensor_from_jagged(flat.view(int(offsets[-1]), *rest), offsets.to(flat.device))
