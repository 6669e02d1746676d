"""The optional libraries of ``chatdata.hygiene`` (the ``hygiene`` extra), imported when used.

Example:
    >>> require_jsonschema().__name__
    'jsonschema'
"""
from __future__ import annotations

import importlib

__all__ = ["require_rensa", "require_jsonschema", "require_parquet"]


def _require(name: str, what: str, extra: str = "hygiene"):
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(f"{what} needs the {name.split('.')[0]!r} package: pip install 'chatdata[{extra}]'") from None


def require_rensa():
    """The ``rensa`` module (MinHash signatures for near-duplicate detection)."""
    return _require("rensa", "near-duplicate detection")


def require_jsonschema():
    """The ``jsonschema`` module (tool-argument checks against a tool's parameters schema, when
    the faster ``jsonschema-rs`` is not installed)."""
    return _require("jsonschema", "checking tool arguments against their schema")


def require_parquet():
    """``pyarrow.parquet`` (benchmark prompts in Parquet files)."""
    return _require("pyarrow.parquet", "reading benchmark prompts from Parquet", "arrow")
