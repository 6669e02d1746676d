"""A History from a TensorDict and back through state dicts: ``History.from_tensordict``,
``h.state_dict()``, ``h.load_state_dict(sd)``. A mixin of :class:`~chatdata.history.History`.

``to_tensordict()`` and ``state_dict()`` hold the ``_flags`` column (which message keys were given,
:mod:`chatdata.history.columns`) beside the fields; ``from_tensordict`` and ``load_state_dict`` take
it back, so both round trips give the History back. The values are checked as the setters check
them (``ValueError`` naming the field and message), and a refused ``load_state_dict`` leaves the
History as it was.

Example:
    >>> from chatdata import History
    >>> h = History.from_chats([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
    >>> History.from_tensordict(h.to_tensordict()).to_chats() == h.to_chats()
    True
    >>> g = History.from_chats([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    >>> g.load_state_dict(h.state_dict()).content
    ['hi', 'yo']
"""
from __future__ import annotations

import torch

from ..td import RaggedTensorDict
from .columns import FLAGS_KEY, normalize_storage
from .field_checks import check_message_columns, message_column

__all__ = ["StateMethods"]

_RAGGED = ("a batch of conversations of different lengths has no state dict (a state dict holds one batch "
           "size); save it with memmap() / save(), or take its messages with to_chats()")


def _check_storage(td, fields) -> None:
    """Normalise the message TensorDict ``td`` and check its values and flags as
    ``from_message_columns`` checks given columns."""
    if "role" not in td._tensordict:
        raise ValueError("History: 'role' must be a str (one per message), got None (the TensorDict has no 'role')")
    flags = td._tensordict.get(FLAGS_KEY)
    if flags is not None:
        if not isinstance(flags, torch.Tensor):
            raise ValueError(f"History: {FLAGS_KEY!r} must be an int8 tensor, got {type(flags).__name__}")
        td._tensordict[FLAGS_KEY] = message_column(FLAGS_KEY, flags.reshape(-1), flags.numel()).reshape(flags.shape)
    given = [k for k in td._tensordict if k in fields or k == FLAGS_KEY]
    normalize_storage(td)
    check_message_columns(td, given)


class StateMethods:
    """``from_tensordict``, ``state_dict`` and ``load_state_dict`` of History."""

    @classmethod
    def from_tensordict(cls, tensordict, non_tensordict=None, safe: bool = True):
        """A History over ``tensordict`` (no copy: tensordict's wrapper), whose entries are the
        fields (and ``_flags``), one value per message; the values are checked as ``History(...)``
        checks them (``ValueError`` naming the field and message)."""
        obj = super().from_tensordict(tensordict, non_tensordict, safe)
        storage = obj._storage
        _check_storage(storage.values if isinstance(storage, RaggedTensorDict) else storage, cls._field_names)
        return obj

    def state_dict(self, destination=None, prefix: str = "", keep_vars: bool = False, flatten: bool = True):
        """The ``_flags`` tensor by key; the class, batch size and field values in ``_metadata``
        (tensordict's layout). A batch of conversations of different lengths raises ``TypeError``."""
        if isinstance(self._storage, RaggedTensorDict):
            raise TypeError(_RAGGED)
        return super().state_dict(destination, prefix, keep_vars, flatten)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False, from_flatten: bool = False):
        """Load a state dict (of a History of the same batch size) in place. It is loaded into a
        copy and checked there first: a refused one (``ValueError`` / ``KeyError`` / ...) leaves
        this History unchanged."""
        if isinstance(self._storage, RaggedTensorDict):
            raise TypeError(_RAGGED)
        trial = self.copy()
        trial.__dict__["_building"] = True  # the content rule is checked once, on the whole result
        try:
            super(StateMethods, trial).load_state_dict(state_dict, strict, assign, from_flatten)
        finally:
            trial.__dict__.pop("_building", None)
        _check_storage(trial._storage, type(self)._field_names)
        storage = self._storage
        if trial._storage.batch_size != storage.batch_size:
            storage.batch_size = trial._storage.batch_size
        storage._tensordict.update(trial._storage._tensordict)
        return self
