"""Dict keys JSON would change: refused where non-tensor values become JSON text.

Values that are not strings are stored as JSON (never pickled). JSON object keys are strings,
so ``json.dumps`` turns ``{2: 0.5}`` into ``{"2": 0.5}`` without a word: after a save (or once
a stack is packed) ``value[2]`` raises ``KeyError``. Top-k logprobs keyed by token id are such
values. Rather than change them silently, packing and saving refuse them with the value and the
key path named. (``History.from_chats`` already refuses them at the door, with tuples and lone
surrogates: :mod:`chatdata.history.message_checks`.)

The check runs over a whole column at once, one nesting level at a time (the key types of all
dicts of a level in one set), after ``json.dumps`` has accepted every value, so cycles were
already refused and the walk ends. Only when it fails is each value walked to name the key.

Example:
    >>> refuse_other_keys([{"a": 1}, [{"b": {"c": 2}}], "x", None])  # str keys only: nothing happens
    >>> refuse_other_keys([{"a": 1}, {"top": [{2: 0.5}]}], " of 'logprobs'")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    TypeError: cannot store value #1 of 'logprobs': its key 2 (int) at ['top'][0] would come back as the string '2' ...
"""
from __future__ import annotations

import json
from itertools import chain

__all__ = ["refuse_other_keys"]

_CONTAINERS = (dict, list, tuple)


def _containers(items) -> list:
    return [x for x in items if isinstance(x, _CONTAINERS)]


def _keys_are_str(dicts: list) -> bool:
    keys = list(chain.from_iterable(dicts))
    types = set(map(type, keys))
    return types <= {str} or all(isinstance(k, str) for k in keys)  # a str subclass reads back equal


def refuse_other_keys(values, where: str = "", *, single: bool = False) -> None:
    """Raise TypeError when a dict anywhere in ``values`` (a list of JSON-serialisable values)
    has a key that is not a str; ``where`` ends the message (e.g. ``" of 'logprobs'"``), and
    ``single`` names "the value" instead of its index.

    Example:
        >>> refuse_other_keys([{True: 1}])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        TypeError: cannot store value #0: its key True (bool) at the top would come back as the string 'true' ...
    """
    level = _containers(values)
    while level:
        dicts = [v for v in level if isinstance(v, dict)]
        if dicts and not _keys_are_str(dicts):
            _name_first(values, where, single)
        seqs = [v for v in level if not isinstance(v, dict)]
        level = _containers(chain(chain.from_iterable(map(dict.values, dicts)), chain.from_iterable(seqs)))


def _name_first(values, where: str, single: bool) -> None:
    for i, value in enumerate(values):
        stack = [(value, "")]
        while stack:
            v, path = stack.pop()
            if isinstance(v, dict):
                for k, x in v.items():
                    if not isinstance(k, str):
                        raise TypeError(
                            f"cannot store {'the value' if single else f'value #{i}'}{where}: its key {k!r} ({type(k).__name__}) at "
                            f"{path or 'the top'} would come back as the string {json.dumps(k)!r} "
                            "(JSON keys are strings, and chatdata never pickles); use str keys, e.g. "
                            "{str(k): v for k, v in d.items()}, or a list of [key, value] pairs")
                    stack.append((x, f"{path}[{k!r}]"))
            elif isinstance(v, (list, tuple)):
                stack.extend((x, f"{path}[{j}]") for j, x in enumerate(v))
