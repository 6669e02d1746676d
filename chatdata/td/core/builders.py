"""``TensorDict.from_list``: rows (dicts or TensorDicts) stacked into a batch, as tensordict
0.14.3 has it. It builds TensorDicts with ``stack``, so it lives above core/tensordict.py and
core/functional.py, and the core's face installs it (``install()``).

Example:
    >>> td = TensorDict.from_list([{"x": 1, "s": "a"}, {"x": 2, "s": "b"}])
    >>> td.batch_size, list(td["s"])
    (torch.Size([2]), ['a', 'b'])
"""
from __future__ import annotations

from .functional import stack
from .tensordict import TensorDict

__all__ = ["from_list", "install"]


def from_list(cls, input_list, *, auto_batch_size: bool | None = None, batch_size=None, device=None,
              batch_dims: int | None = None, dynamo=None, stack_dim_name=None):
    """A TensorDict of batch ``(len(input_list),)`` from rows: dicts (nested ones become
    nested TensorDicts) or TensorDicts with the same keys. Strings become a text column
    (equal strings a constant), numbers and same-shape tensors are stacked.
    ``auto_batch_size=True`` then finds the longest common batch dims (``batch_dims`` caps
    them), ``batch_size`` sets them; ``dynamo`` and ``stack_dim_name`` are accepted for
    tensordict's signature.

    Example:
        >>> td = TensorDict.from_list([{"x": torch.zeros(3), "n": {"y": 1}}, {"x": torch.ones(3), "n": {"y": 2}}])
        >>> td["x"].shape, td["n", "y"].tolist()
        (torch.Size([2, 3]), [1, 2])
    """
    if not isinstance(input_list, (list, tuple)):
        raise TypeError(f"from_list takes a list of dicts or TensorDicts (one per row), got {type(input_list).__name__}")
    if not input_list:
        raise ValueError("from_list: the list is empty; a batch needs at least one row (its keys set the entries)")
    rows = []
    for i, row in enumerate(input_list):
        if isinstance(row, dict):
            row = cls(row)
        elif not isinstance(row, cls):
            raise TypeError(f"from_list: row {i} is a {type(row).__name__}; every row must be a dict or a "
                            f"TensorDict (a list of lists: call from_list on each inner list and stack them)")
        rows.append(row)
    out = stack(rows)
    if auto_batch_size or batch_dims is not None:
        out.auto_batch_size_(batch_dims)
    if batch_size is not None:
        out.batch_size = batch_size
    return out if device is None else out.to(device)


def install() -> None:
    """Give TensorDict its ``from_list`` classmethod; the core's face calls this once.

    Example: ``install()``
    """
    TensorDict.from_list = classmethod(from_list)
