"""Field annotations of a tensorclass, resolved to objects, and what they mean for casting.

Annotations written as strings (``from __future__ import annotations``, or ``y: "MyClass"``)
are evaluated in the namespace of the module that defines the class, with the class's own name
added, as ``typing.get_type_hints`` does; a name that cannot be resolved yet (a class defined
later, inside a function) is looked up among the tensorclasses defined so far, and otherwise
stays a string and is retried at the next use. Annotations are code from the class's source,
never data.

Example:
    >>> from chatdata.td import TensorClass
    >>> class Pair(TensorClass):
    ...     a: "torch.Tensor | None"
    ...     b: "Pair"
    >>> field_hints(Pair)["b"] is Pair, is_tensor_hint(field_hints(Pair)["a"])
    (True, True)
"""
from __future__ import annotations

import sys
import types
import typing

import torch

from ..core import TensorDict
from ..nontensor import Batched, NonTensorData, NonTensorStack
from .registry import _REGISTRY

__all__ = ["field_hints", "union_args", "plain_class", "is_tensor_hint", "is_tensordict_hint",
           "is_non_tensor_hint"]

_UNION_ORIGINS = (typing.Union, types.UnionType)
_TENSORTYPE = type(torch.IntTensor)  # torch.IntTensor, torch.LongTensor... are not Tensor subclasses


def _namespace(cls) -> tuple[dict, dict]:
    module = sys.modules.get(cls.__module__)
    globalns = dict(vars(module)) if module is not None else {}
    return globalns, {cls.__name__: cls}


def _registry_names() -> dict:
    return {c.__name__: c for c in _REGISTRY.values()}


def _evaluate(text: str, globalns: dict, localns: dict):
    out = _evaluate_once(text, globalns, localns)
    if isinstance(out, str) and out != text:  # ``y: "MyClass"`` under ``from __future__ import annotations``
        out = _evaluate_once(out, globalns, localns)
    return out


def _evaluate_once(text: str, globalns: dict, localns: dict):
    try:
        return eval(text, globalns, localns)  # noqa: S307 - the class's own annotation source
    except NameError:
        pass
    except Exception:  # noqa: BLE001 - an annotation Python cannot evaluate here (e.g. old-style syntax)
        return text
    fallback = {"typing": typing, "Optional": typing.Optional, "Union": typing.Union, "Any": typing.Any,
                "torch": torch, **_registry_names(), **localns}
    try:
        return eval(text, globalns, fallback)  # noqa: S307
    except Exception:  # noqa: BLE001
        return text


def field_hints(cls) -> dict:
    """Field name -> annotation object for tensorclass ``cls`` (unresolvable ones stay strings).

    Cached on the class once every annotation resolved.

    Example:
        >>> @tensorclass
        ... class Box:
        ...     a: "torch.Tensor | None"
        >>> field_hints(Box)["a"]
        torch.Tensor | None
    """
    cached = cls.__dict__.get("_resolved_hints")
    if cached is not None:
        return cached
    globalns = localns = None
    hints = {}
    for name, ann in cls._field_types.items():
        if isinstance(ann, str):
            if globalns is None:
                globalns, localns = _namespace(cls)
            ann = _evaluate(ann, globalns, localns)
        hints[name] = ann
    if not any(isinstance(h, str) for h in hints.values()):
        setattr(cls, "_resolved_hints", hints)
    return hints


def union_args(hint) -> tuple | None:
    """The members of ``X | Y`` / ``Optional[X]`` / ``Union[...]``; None for other hints.

    Example:
        >>> union_args(torch.Tensor | None)
        (<class 'torch.Tensor'>, <class 'NoneType'>)
    """
    if typing.get_origin(hint) in _UNION_ORIGINS:
        return typing.get_args(hint)
    return None


def plain_class(hint):
    """The class a hint names (``TensorDict[str, Tensor]`` -> TensorDict); None for unions,
    ``Any``, strings and other typing forms.

    Example:
        >>> plain_class(TensorDict[str, torch.Tensor]) is TensorDict
        True
    """
    if isinstance(hint, type):
        return hint
    origin = typing.get_origin(hint)
    if origin is not None and origin not in _UNION_ORIGINS and isinstance(origin, type):
        return origin
    return None


def _is_none(hint) -> bool:
    return hint is None or hint is type(None)


def is_tensor_hint(hint) -> bool:
    """True for hints ``tensor_only`` accepts: Tensor (and ``torch.IntTensor``-style types),
    TensorDict, tensorclasses, non-tensor wrappers, None, and unions or generics of those.

    Example:
        >>> is_tensor_hint(torch.IntTensor | None), is_tensor_hint(str)
        (True, False)
    """
    if _is_none(hint):
        return True
    members = union_args(hint)
    if members is not None:
        return all(is_tensor_hint(m) for m in members)
    cls = plain_class(hint)
    if cls is None:
        return False
    return isinstance(cls, _TENSORTYPE) or issubclass(cls, (torch.Tensor, Batched))


def _mentions(hint, predicate) -> bool:
    members = union_args(hint)
    if members is not None:
        return any(_mentions(m, predicate) for m in members)
    cls = plain_class(hint)
    return cls is not None and predicate(cls)


def is_tensordict_hint(hint) -> bool:
    """True when the hint is TensorDict (or a subclass), possibly parameterized or in a union.

    Example:
        >>> is_tensordict_hint(TensorDict[str, torch.Tensor] | None)
        True
    """
    return _mentions(hint, lambda c: issubclass(c, TensorDict))


def is_non_tensor_hint(hint) -> bool:
    """True when the hint is ``NonTensorData`` / ``NonTensorStack`` (possibly in a union): such a
    field is read as the stored wrapper, not its value.

    Example:
        >>> is_non_tensor_hint(NonTensorData)
        True
    """
    return _mentions(hint, lambda c: issubclass(c, (NonTensorData, NonTensorStack)))
