"""Specs for RL environments that exchange conversations: ``Composite``, ``NonTensor`` and the
tensor specs (``Unbounded``, ``Bounded``, ``Categorical`` with its optional mask, ``Binary``),
printed as torchrl prints them. docs/compat.md lists where they differ from torchrl's.

Example:
    >>> spec = Composite(role=NonTensor(shape=(-1,), example_data="foo"), shape=(-1,))
    >>> spec.zero()["role"]
    'foo'
"""
from .base import CategoricalBox, ContinuousBox, TensorSpec
from .composite import Composite, history_default_spec
from .nontensor import NonTensor
from .tensor import (
    Binary,
    Bounded,
    BoundedContinuous,
    BoundedDiscrete,
    Categorical,
    Unbounded,
    UnboundedContinuous,
    UnboundedDiscrete,
)

__all__ = [
    "TensorSpec", "Composite", "NonTensor", "Unbounded", "UnboundedContinuous", "UnboundedDiscrete",
    "Bounded", "BoundedContinuous", "BoundedDiscrete", "Categorical", "Binary", "ContinuousBox",
    "CategoricalBox", "history_default_spec",
]
