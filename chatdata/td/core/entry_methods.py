"""TensorDict methods a data pipeline reaches for to build, patch and hand out entries, as
tensordict 0.14.3 has them: ``replace`` (a copy with
some entries swapped), ``update_at_`` / ``copy_at_`` (write some entries at an index),
``get_item_shape`` and ``numpy``.

(``from_list``, which builds a TensorDict, lives above: :mod:`chatdata.td.core.builders`.)

Text leaves are entries like the others:
``update_at_`` / ``copy_at_`` write them (tensordict 0.14.3 raises ``TypeError`` for a string in
``update_at_`` and leaves text columns unwritten in ``copy_at_``), ``numpy`` gives their values.

Example:
    >>> td = TensorDict({"x": torch.tensor([1, 2]), "s": ["a", "b"]}, [2])
    >>> list(td.replace(x=torch.zeros(2))["s"]), list(td.update_at_({"s": "z"}, 0)["s"])
    (['a', 'b'], ['z', 'b'])
"""
from __future__ import annotations

import torch

from .keys import unravel_key
from ..nontensor import NonTensorData, NonTensorStack

__all__ = ["EntryMethods"]


def _leaf_keys(value, prefix=()) -> list:
    """The leaf keys of a (nested) dict or TensorDict, as tuples."""
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            full = prefix + unravel_key(k)
            out.extend(_leaf_keys(v, full) if isinstance(v, dict) else [full])
        return out
    return [unravel_key(k) for k in value.keys(True, True)]


class EntryMethods:
    """The methods of the module docstring, mixed into TensorDict."""

    def replace(self, *args, **kwargs):
        """A shallow copy (the other entries shared) with the entries of ``args[0]`` (a dict,
        keys may be nested tuples) and the keywords set; new keys are added.

        Example:
            >>> td = TensorDict({"x": torch.zeros(2), "s": ["a", "b"]}, [2])
            >>> r = td.replace(s=["p", "q"])
            >>> list(r["s"]), list(td["s"]), r.get("x") is td.get("x")
            (['p', 'q'], ['a', 'b'], True)
        """
        if len(args) > 1 or (args and not isinstance(args[0], (dict, type(self)))):
            raise TypeError(f"replace takes one dict (or TensorDict) of entries and/or keywords, got {args!r}")
        entries = dict(args[0].items() if isinstance(args[0], dict) else
                       ((k, args[0].get(k)) for k in args[0].keys())) if args else {}
        entries.update(kwargs)
        out = self.copy()
        for k, v in entries.items():
            out.set(k, v)
        return out

    def _check_existing(self, value, what: str) -> None:
        if not isinstance(value, (dict, type(self))):
            raise TypeError(f"{what} takes a dict or a TensorDict of entries, got {type(value).__name__}")
        mine = set(unravel_key(k) for k in self.keys(True))
        missing = [k[0] if len(k) == 1 else k for k in _leaf_keys(value) if k not in mine]
        if missing:
            raise KeyError(f"{what}: keys {missing} are not in the TensorDict; it writes existing entries only "
                           f"(set new keys first, or use td[index] = ... which allocates them)")

    def update_at_(self, input_dict_or_td, index, clone: bool = False):
        """Write the entries of ``input_dict_or_td`` (existing keys only, nested allowed) at
        ``index`` in place, text columns included; returns self. Every key is checked first,
        so a missing one writes nothing.

        Example:
            >>> td = TensorDict({"x": torch.zeros(3), "s": ["a", "b", "c"]}, [3])
            >>> td.update_at_({"x": 1.0, "s": "z"}, 1)["x"].tolist(), list(td["s"])
            ([0.0, 1.0, 0.0], ['a', 'z', 'c'])
        """
        self._check_existing(input_dict_or_td, "update_at_")
        value = input_dict_or_td
        if clone:
            value = value.clone() if isinstance(value, type(self)) else {
                k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in value.items()}
        self[index] = value
        return self

    def copy_at_(self, tensordict, idx, *, fast: bool = False):
        """Copy ``tensordict``'s entries (existing keys only) into ``self[idx]`` in place, text
        columns included; returns self (``fast`` is accepted for tensordict's signature).

        Example:
            >>> td = TensorDict({"x": torch.zeros(3), "s": ["a", "b", "c"]}, [3])
            >>> list(td.copy_at_(TensorDict({"x": torch.ones(2), "s": ["p", "q"]}, [2]), slice(1, 3))["s"])
            ['a', 'p', 'q']
        """
        if not isinstance(tensordict, type(self)):
            raise TypeError(f"copy_at_ copies a TensorDict, got {type(tensordict).__name__} (a dict: use update_at_)")
        self._check_existing(tensordict, "copy_at_")
        self[idx] = tensordict
        return self

    def get_item_shape(self, key):
        """The shape of the entry at ``key``: a tensor's shape, the batch size of a nested
        collection or a text leaf (KeyError when missing).

        Example:
            >>> td = TensorDict({"x": torch.zeros(2, 5), "s": ["a", "b"]}, [2])
            >>> td.get_item_shape("x"), td.get_item_shape("s")
            (torch.Size([2, 5]), torch.Size([2]))
        """
        entry = self._get_raw(key)
        return entry.shape if isinstance(entry, torch.Tensor) else entry.batch_size

    def numpy(self):
        """Nested dicts of numpy arrays (tensors detached, on the CPU); a text constant gives its
        value, a text column its values as (nested) lists.

        Example:
            >>> TensorDict({"x": torch.arange(2), "s": ["a", "b"], "c": "k"}, [2]).numpy()
            {'x': array([0, 1]), 's': ['a', 'b'], 'c': 'k'}
        """
        out = {}
        for k, v in self._tensordict.items():
            if isinstance(v, torch.Tensor):
                out[k] = v.detach().cpu().numpy()
            elif isinstance(v, NonTensorData):
                out[k] = v.data
            elif isinstance(v, NonTensorStack):
                out[k] = v.tolist()
            elif hasattr(v, "numpy"):
                out[k] = v.numpy()
            else:
                raise TypeError(f"numpy(): entry {k!r} is a {type(v).__name__}, which has no numpy form")
        return out
