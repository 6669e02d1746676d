"""TensorDict methods that split or prune by keys, as tensordict 0.14.3 has them:
``split_keys`` (with ``default``, ``strict``, ``inplace``, ``reproduce_struct`` and renaming
key sets), ``separates`` and ``filter_empty_``.

Text leaves are entries like any other here: they go to the part that names them.

Example:
    >>> td = TensorDict({"x": torch.zeros(2), "s": ["a", "b"], "n": {"y": torch.ones(2)}}, [2])
    >>> part, rest = td.split_keys(["s", ("n", "y")])
    >>> sorted(map(str, part.keys(True))), list(rest.keys())
    (["('n', 'y')", 'n', 's'], ['x'])
"""
from __future__ import annotations

from .keys import unravel_key
from .ops import NO_DEFAULT

__all__ = ["KeyMethods"]


def _plain(key: tuple):
    return key[0] if len(key) == 1 else key


def _key_pairs(keys) -> list:
    """``[(source key, destination key)]`` of one key set: a list of keys, or a dict renaming them."""
    if isinstance(keys, (str, tuple)):
        raise TypeError(f"split_keys takes lists of keys (or dicts renaming them), got {keys!r}: "
                        f"use split_keys([{keys!r}])")
    pairs = list(keys.items()) if isinstance(keys, dict) else [(k, k) for k in keys]
    return [(unravel_key(a), unravel_key(b)) for a, b in pairs]


class KeyMethods:
    """The methods of the module docstring, mixed into TensorDict."""

    def split_keys(self, *key_sets, inplace: bool = False, default=NO_DEFAULT, strict: bool = True,
                   reproduce_struct: bool = False):
        """One TensorDict per set of keys, then one of the keys left: ``a, b, rest =
        td.split_keys(["x"], ["y"])``. A key set may be a dict renaming its keys
        (``{"x": "obs"}``); each key goes to the first set that names it.

        ``strict=False`` lets keys be missing: they get ``default`` (which must fit the batch), or
        are skipped when no default is given (``default`` only applies with ``strict=False``).
        ``reproduce_struct=True`` gives every part the nested TensorDicts of ``self`` (empty where
        they hold none of its keys) and its text leaves, as ``empty(recurse=True)`` does;
        otherwise nested TensorDicts left empty are dropped from the rest. ``inplace=True`` moves
        the keys out of ``self``, which is the last result.

        Example:
            >>> td = TensorDict({"x": torch.zeros(2), "y": torch.ones(2), "s": ["a", "b"]}, [2])
            >>> [sorted(t.keys()) for t in td.split_keys({"x": "obs"}, ["s", "z"], strict=False)]
            [['obs'], ['s'], ['y']]
        """
        return self._split_keys(key_sets, inplace, default, strict, reproduce_struct, not reproduce_struct)

    def _split_keys(self, key_sets, inplace: bool, default, strict: bool, reproduce_struct: bool, filter_rest: bool):
        sets = [_key_pairs(keys) for keys in key_sets]  # every key set checked before anything moves
        if inplace:
            for pairs in sets:
                if pairs:
                    self._check_unlocked("move out", _plain(pairs[0][0]))
        if not strict and default is NO_DEFAULT:
            default = None
        rest = self.copy()
        parts, taken = [], []
        for pairs in sets:
            part = self.empty(recurse=reproduce_struct)
            for src, dst in pairs:
                try:
                    value = rest.pop(_plain(src))
                except KeyError:
                    if strict:
                        twice = " (an earlier key set took it: each key goes to one part)" if src in taken else ""
                        hint = ("default= applies with strict=False" if default is not NO_DEFAULT
                                else "pass strict=False to skip them")
                        raise KeyError(f"split_keys: key {_plain(src)!r} is not in the TensorDict{twice}; "
                                       f"{hint}") from None
                    value = default
                if value is not None:
                    part.set(_plain(dst), value)
                taken.append(src)
            parts.append(part)
        if inplace:
            for src in taken:
                if src in self.keys(True):
                    self.del_(_plain(src))
            rest = self
        if filter_rest:
            rest.filter_empty_()
        return (*parts, rest)

    def separates(self, *keys, default=NO_DEFAULT, strict: bool = True, filter_empty: bool = True):
        """Move ``keys`` out of ``self`` into a new TensorDict and return it (``split_keys`` with
        ``inplace=True`` and one key set); ``filter_empty=False`` keeps nested TensorDicts left
        empty in ``self``; a ``default`` lets keys be missing. (tensordict 0.14.3 also copies every text leaf of ``self`` into the
        result and stores None for a missing key, whatever ``default``; chatdata does not.)

        Example:
            >>> td = TensorDict({"x": torch.zeros(2), "s": ["a", "b"]}, [2])
            >>> list(td.separates("s").keys()), list(td.keys())
            (['s'], ['x'])
        """
        strict = strict and default is NO_DEFAULT  # a default means keys may be missing, as in tensordict
        return self._split_keys([list(keys)], True, default, strict, False, filter_empty)[0]

    def filter_empty_(self):
        """Remove, in place, every nested TensorDict that holds no leaf (nested ones walked
        first); returns self. A nested TensorDict holding only text leaves is kept.

        Example:
            >>> td = TensorDict({"x": torch.zeros(2), "e": {}, "n": {"m": {}, "t": ["a", "b"]}}, [2])
            >>> sorted(map(str, td.filter_empty_().keys(True)))
            ["('n', 't')", 'n', 'x']
        """
        for k, v in list(self._tensordict.items()):
            if isinstance(v, type(self)):
                v.filter_empty_()
                if not v._tensordict:
                    self._check_unlocked("remove the empty", k)
                    del self._tensordict[k]
        return self
