"""Tensor specs for what sits beside a History in an environment: token ids, masks, rewards.

``Unbounded`` (any value of a dtype), ``Bounded`` (``low <= x <= high``), ``Categorical``
(``0 <= x < n``) and ``Binary`` (0/1 with a last dim of ``n``). ``Unbounded(...)`` and
``Bounded(...)`` give ``UnboundedContinuous`` / ``UnboundedDiscrete`` (``BoundedContinuous`` /
``BoundedDiscrete``) instances according to the dtype, as torchrl does.

This module gathers them under one name; each lives in its own module: :mod:`.unbounded`,
:mod:`.bounded`, :mod:`.categorical`, on the base every tensor spec shares
(:mod:`._tensor_leaf`) and the dtype and number helpers (:mod:`._numbers`).

Example:
    >>> spec = Bounded(low=-1.0, high=1.0, shape=(3,))
    >>> spec.is_in(spec.rand()), spec.is_in(torch.full((3,), 2.0))
    (True, False)
    >>> spec.project(torch.full((3,), 2.0)).tolist()
    [1.0, 1.0, 1.0]
"""
from .bounded import Bounded, BoundedContinuous, BoundedDiscrete
from .categorical import Binary, Categorical
from .unbounded import Unbounded, UnboundedContinuous, UnboundedDiscrete

__all__ = [
    "Unbounded", "UnboundedContinuous", "UnboundedDiscrete", "Bounded", "BoundedContinuous",
    "BoundedDiscrete", "Categorical", "Binary",
]
