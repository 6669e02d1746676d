"""The prompt a request sends to the backend, serialised in O(new ids).

Both backends take the whole prompt as a JSON list of token ids on every request. Turning a
branch's ids into Python ints and JSON text anew each turn costs O(turns) per request, O(T²)
over a session. A branch keeps instead the JSON text of its *committed* ids (those no rollback
can take back, :attr:`~chatdata.rollout.Conversation.committed`) in an :class:`IdsText`; a request
appends what was committed since its last request and adds its own new prompt ids behind it.
Committed ids never change (the conversation only appends past them), so the text stays true.

Example:
    >>> import torch
    >>> text = IdsText()
    >>> p = text.prompt(torch.tensor([5, 6, 7, 8]), committed=2)
    >>> p.json(), len(p), p.tolist()
    (b'[5,6,7,8]', 4, [5, 6, 7, 8])
    >>> text.n  # the committed ids are kept as text, the rest is per request
    2
    >>> p.equals([5, 6, 7, 8]), p.equals([5, 6, 7, 9]), p.equals("5678")
    (True, False, False)
"""
from __future__ import annotations

import json
from array import array

import torch

__all__ = ["IdsText", "PromptIds"]

_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def _text(ids: torch.Tensor) -> bytes:
    """``1,2,3`` for the ids (no brackets)."""
    return _ENCODE(ids.numpy().tolist())[1:-1].encode()


class PromptIds:
    """The ids of one prompt (a 1-D int64 tensor) and their JSON text (built once, on demand).

    Example:
        >>> import torch
        >>> p = PromptIds(torch.tensor([1, 2]))
        >>> p.json(), len(p)
        (b'[1,2]', 2)
    """

    __slots__ = ("ids", "_json")

    def __init__(self, ids: torch.Tensor, json_text: bytes | None = None) -> None:
        self.ids = ids
        self._json = json_text

    def __len__(self) -> int:
        return len(self.ids)

    def json(self) -> bytes:
        """The ids as a JSON array (no spaces)."""
        if self._json is None:
            self._json = b"[" + _text(self.ids) + b"]"
        return self._json

    def tolist(self) -> list[int]:
        """The ids as Python ints (O(ids): for tests and small prompts)."""
        return self.ids.tolist()

    def equals(self, values) -> bool:
        """Whether ``values`` (a backend's echo, parsed from JSON) is this prompt, id for id.
        Compares machine integers in bulk: no Python int per id is built on our side."""
        if not isinstance(values, list) or len(values) != len(self.ids):
            return False
        try:
            got = array("q", values)  # TypeError for a non-integer
        except (TypeError, OverflowError):
            return False
        return got.tobytes() == self.ids.numpy().tobytes()


class IdsText:
    """A branch's committed ids as JSON text, grown by what each request committed since.

    Example:
        >>> import torch
        >>> t = IdsText()
        >>> t.prompt(torch.tensor([1, 2, 3]), committed=3).json()
        b'[1,2,3]'
        >>> t.prompt(torch.tensor([1, 2, 3, 4, 5]), committed=4).json()
        b'[1,2,3,4,5]'
    """

    __slots__ = ("text", "n")

    def __init__(self) -> None:
        self.text = bytearray()
        self.n = 0  # ids the text holds

    def prompt(self, ids: torch.Tensor, committed: int) -> PromptIds:
        """The prompt ``ids`` (a branch's whole prompt); ``ids[:committed]`` are committed and
        are appended to the kept text; the rest is serialised for this request only."""
        if committed < self.n or committed > len(ids):
            raise RuntimeError(f"the kept text holds {self.n} committed ids, the prompt has {committed} of "
                               f"{len(ids)}: the branch's committed ids went back (a gateway bug)")
        if committed > self.n:
            if self.n:
                self.text += b","
            self.text += _text(ids[self.n:committed])
            self.n = committed
        rest = _text(ids[committed:]) if committed < len(ids) else b""
        sep = b"," if self.text and rest else b""
        return PromptIds(ids, b"".join((b"[", self.text, sep, rest, b"]")))
