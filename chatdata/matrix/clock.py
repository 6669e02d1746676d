"""A fixed clock for the matrix: templates that write the time make it reproducible.

Some templates call ``strftime_now`` (Hunyuan writes the time to the second when tools are given).
A rollout's first render and the fresh tokenization it is compared with would then differ
whenever a second ticks between them, and the page would change from run to run. Inside
:func:`fixed_clock`, ``strftime_now`` of chatdata's engine and of transformers' both read one
fixed instant; outside, nothing changes.

Example:
    >>> from chatdata.templates import render_chats
    >>> with fixed_clock():
    ...     render_chats([[{"role": "user", "content": "x"}]], "{{ strftime_now('%Y-%m-%d') }}")
    ['2025-01-02']
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import importlib

__all__ = ["fixed_clock", "MATRIX_NOW"]

MATRIX_NOW = _dt.datetime(2025, 1, 2, 3, 4, 5)
_MODULES = ("chatdata.templates.jinja_env", "transformers.utils.chat_template_utils")


def _frozen(now: _dt.datetime) -> type:
    class Frozen(_dt.datetime):
        @classmethod
        def now(cls, tz=None):  # noqa: D102 - the one method templates reach
            return now if tz is None else now.replace(tzinfo=tz)
    return Frozen


@contextlib.contextmanager
def fixed_clock(now: _dt.datetime = MATRIX_NOW):
    """Within the block, ``strftime_now`` in templates (chatdata's and transformers') reads ``now``."""
    patched = []
    try:
        for name in _MODULES:
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            if getattr(mod, "datetime", None) is not None:
                patched.append((mod, mod.datetime))
                mod.datetime = _frozen(now)
        yield now
    finally:
        for mod, original in patched:
            mod.datetime = original
