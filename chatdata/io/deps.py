"""Optional dependencies of :mod:`chatdata.io`, imported only when a feature needs them.

Example:
    >>> pa = require_pyarrow()   # pyarrow, or MissingExtraError naming `pip install "chatdata[arrow]"`
    >>> pa.table({"x": [1]}).num_rows
    1
"""
from __future__ import annotations

import functools
import importlib
import sys

__all__ = ["MissingExtraError", "require_pyarrow", "require_datasets", "require_ray", "arrow_json_type"]


class MissingExtraError(ImportError):
    """An optional package a feature needs is not installed; the message names the pip extra."""


def _require(module: str, extra: str, what: str):
    loaded = sys.modules.get(module)  # already imported: skip the import machinery (hot paths ask often)
    if loaded is not None:
        return loaded
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise MissingExtraError(
            f"{what} needs the optional package {module.split('.')[0]!r}, which is not installed "
            f"({err}); install it with: pip install \"chatdata[{extra}]\""
        ) from None


def require_pyarrow():
    """The ``pyarrow`` module, or an ImportError saying ``pip install "chatdata[arrow]"``."""
    return _require("pyarrow", "arrow", "Arrow / Parquet support")


def require_datasets():
    """The ``datasets`` module, or an ImportError saying ``pip install "chatdata[hf]"``."""
    return _require("datasets", "hf", "Hugging Face datasets support")


def require_ray():
    """The ``ray`` module (with Ray Data), or an ImportError saying ``pip install "chatdata[ray]"``."""
    ray = _require("ray", "ray", "Ray Data support")
    _require("ray.data", "ray", "Ray Data support")
    return ray


@functools.lru_cache(maxsize=1)
def arrow_json_type():
    """Arrow's canonical JSON extension type (``arrow.json`` over ``string``, the type of HF
    datasets' ``Json()`` feature) when tables may carry it: this pyarrow has it (>= 19) and the
    installed HF datasets reads it (>= 4.7; an older one refuses a table holding it), or none is
    installed. None otherwise. Reads the installed version without importing ``datasets``.

    Example:
        >>> arrow_json_type() is None or arrow_json_type().extension_name == "arrow.json"
        True
    """
    pa = require_pyarrow()
    return pa.json_() if hasattr(pa, "json_") and _datasets_reads_arrow_json() else None


@functools.cache
def _datasets_reads_arrow_json() -> bool:
    """Whether the installed HF datasets (if any) reads ``arrow.json`` (>= 4.7). Asked once per
    process: reading a package's version scans the installed distributions (~0.8 ms), and
    :func:`arrow_json_type` is asked for every JSON-text field of every ``to_arrow()``."""
    from importlib import metadata

    from packaging.version import InvalidVersion, Version

    try:
        version = metadata.version("datasets")
    except metadata.PackageNotFoundError:
        return True
    try:
        return Version(version).release[:2] >= (4, 7)
    except InvalidVersion:
        return False
