"""Which turns a model trains on, and how much: roles, the last turn only, float loss weights.

A :class:`TrainSelection` gives every message of a conversation a weight (a float >= 0; 0 means
"not trained"):

1. ``train_on``: the roles whose turns are trained, weight 1.0 (default: ``"assistant"``; add
   ``"tool"``, ``"user"``, ``"system"`` or any role name your chats use).
2. ``loss_weights`` (optional) sets the weights instead:

   * a dict ``{role: weight}`` -- a role it names gets that weight (trained if > 0, whether or not
     it is in ``train_on``); other roles keep step 1's weight;
   * ``True`` -- step 1's weights, written out as a float column;
   * a callable ``fn(chat, k) -> float`` -- called for every message ``k`` whose role is in
     ``train_on``; its value is that message's weight (other messages: 0).

   With a dict or ``True``, a message's own ``"weight"`` key (a number >= 0), when it has one,
   is its weight whatever its role (axolotl's per-message flag).
3. ``last_turn_only=True``: of the messages with a weight > 0, only the last keeps it
   (LLaMA-Factory's ``mask_history``; AReno's "last assistant" mode).

:func:`final_answer` is a ready callable for AReno's "final answer" mode.

Example:
    >>> chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
    ...         {"role": "tool", "content": "t"}, {"role": "assistant", "content": "b"}]
    >>> TrainSelection(loss_weights={"tool": 0.2}).message_weights(chat)
    [0.0, 1.0, 0.2, 1.0]
    >>> TrainSelection(last_turn_only=True).message_weights(chat)
    [0.0, 0.0, 0.0, 1.0]
"""
from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any, Callable, Sequence

__all__ = ["TrainSelection", "final_answer", "loss_weight"]

WEIGHT_KEY = "weight"


def _roles(train_on: Any) -> tuple[str, ...]:
    if isinstance(train_on, str):
        train_on = (train_on,)
    if isinstance(train_on, Mapping) or not hasattr(train_on, "__iter__"):
        raise TypeError(f"train_on must be a role name or a list of role names, got {train_on!r}")
    roles = tuple(train_on)
    bad = [r for r in roles if not isinstance(r, str) or not r]
    if bad:
        raise TypeError(f"train_on must hold role names (non-empty strings), got {bad[0]!r}")
    return roles


def loss_weight(value: Any, what: str) -> float:
    """``value`` as a loss weight: a finite number >= 0 (not a bool); TypeError / ValueError
    naming ``what`` otherwise.

    Example:
        >>> loss_weight(1, "w"), loss_weight(0.5, "w")
        (1.0, 0.5)
        >>> loss_weight(-1, "message 1's 'weight'")
        Traceback (most recent call last):
        ...
        ValueError: message 1's 'weight' must be a finite number >= 0, got -1
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TypeError(f"{what} must be a number >= 0, got {value!r:.40}")
    try:
        w = float(value)
    except OverflowError:  # an integer too large for a float
        w = math.inf
    except (TypeError, ValueError):  # an array of several numbers: torch's / numpy's message named nothing
        raise TypeError(f"{what} must be one number >= 0, got {value!r:.40}") from None
    if not math.isfinite(w) or w < 0:
        raise ValueError(f"{what} must be a finite number >= 0, got {value!r:.40}")
    return w


class TrainSelection:
    """The turns to train and their weights; see the module docstring.

    ``writes_weights`` says whether a float ``loss_weights`` column is asked for (``loss_weights``
    given); ``is_default`` whether this is the plain assistant mask (every assistant turn, 1.0).

    Example:
        >>> TrainSelection(train_on=["assistant", "tool"]).message_weights(
        ...     [{"role": "tool", "content": "x"}, {"role": "user", "content": "y"}])
        [1.0, 0.0]
    """

    __slots__ = ("train_on", "last_turn_only", "loss_weights")

    def __init__(self, train_on: str | Sequence[str] = "assistant", last_turn_only: bool = False,
                 loss_weights: bool | Mapping[str, float] | Callable[[list, int], float] | None = None) -> None:
        self.train_on = _roles(train_on)
        if not isinstance(last_turn_only, bool):
            raise TypeError(f"last_turn_only must be True or False, got {last_turn_only!r}")
        self.last_turn_only = last_turn_only
        if loss_weights is False:
            loss_weights = None
        if isinstance(loss_weights, Mapping):
            bad = [r for r in loss_weights if not isinstance(r, str) or not r]
            if bad:
                raise TypeError(f"loss_weights maps role names (non-empty strings) to weights, got the key {bad[0]!r}")
            loss_weights = {r: loss_weight(w, f"loss_weights[{r!r}]") for r, w in loss_weights.items()}
        elif not (loss_weights is None or loss_weights is True or callable(loss_weights)):
            raise TypeError("loss_weights must be a dict {role: weight}, True, or a callable (chat, k) -> weight; "
                            f"got {type(loss_weights).__name__}")
        self.loss_weights = loss_weights

    @property
    def writes_weights(self) -> bool:
        return self.loss_weights is not None

    @property
    def is_default(self) -> bool:
        return self.train_on == ("assistant",) and not self.last_turn_only and self.loss_weights is None

    def message_weights(self, chat: Sequence[Mapping]) -> list[float]:
        """One weight per message of ``chat`` (a list of message dicts)."""
        lw = self.loss_weights
        out = []
        for k, m in enumerate(chat):
            role = m.get("role")
            if callable(lw):
                w = loss_weight(lw(chat, k), f"loss_weights({k}) for message {k}") if role in self.train_on else 0.0
            else:
                w = 1.0 if role in self.train_on else 0.0
                if isinstance(lw, Mapping):
                    w = lw.get(role, w)
                if lw is not None and m.get(WEIGHT_KEY) is not None:
                    w = loss_weight(m[WEIGHT_KEY], f"message {k}'s {WEIGHT_KEY!r}")
            out.append(w)
        if self.last_turn_only:
            last = max((k for k, w in enumerate(out) if w > 0), default=-1)
            out = [w if k == last else 0.0 for k, w in enumerate(out)]
        return out

    def check_named_roles(self, present) -> None:
        """Raise ValueError for a role that ``train_on`` or a ``loss_weights`` dict names, that no
        message has (``present``: the roles of the chats), while a role spelt almost the same is
        there: a misspelt role (``"asistant"``, ``"Assistant"``) silently trains nothing.

        Example:
            >>> TrainSelection(train_on=["asistant"]).check_named_roles({"user", "assistant"})
            Traceback (most recent call last):
            ...
            ValueError: train_on names the role 'asistant', which no message has; the chats have 'assistant': a misspelt role trains nothing
        """
        roles = sorted(r for r in present if isinstance(r, str))
        for what, named in (("train_on", self.train_on),
                            ("loss_weights", self.loss_weights if isinstance(self.loss_weights, Mapping) else ())):
            for role in named:
                if role in present:
                    continue
                close = [r for r in roles if r.casefold() == role.casefold()] or \
                    difflib.get_close_matches(role, roles, n=1, cutoff=0.8)
                if close:
                    raise ValueError(f"{what} names the role {role!r}, which no message has; the chats have "
                                     f"{close[0]!r}: a misspelt role trains nothing")

    def __repr__(self) -> str:
        return (f"TrainSelection(train_on={list(self.train_on)!r}, last_turn_only={self.last_turn_only}, "
                f"loss_weights={self.loss_weights!r})")


def final_answer(chat: Sequence[Mapping], k: int) -> float:
    """1.0 for the conversation's final answer, else 0.0: the last message, when it is an
    assistant message without tool calls (AReno's "final answer" mode: nothing is trained when a
    conversation ends on a tool call). Use it as ``loss_weights=final_answer``.

    Example:
        >>> chat = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "", "tool_calls": [{}]},
        ...         {"role": "tool", "content": "t"}, {"role": "assistant", "content": "done"}]
        >>> [final_answer(chat, k) for k in range(len(chat))]
        [0.0, 0.0, 0.0, 1.0]
    """
    last = len(chat) - 1
    m = chat[k]
    ok = k == last and m.get("role") == "assistant" and not m.get("tool_calls")
    return 1.0 if ok else 0.0
