"""Message content made of parts (text, image, audio, ...): :class:`ContentBase`.

A message's content is either a string or a list of *parts*, the list-of-dicts form Hugging
Face chat templates expect (``[{"type": "text", "text": "hi"}, {"type": "image", "url": ...}]``).
:class:`ContentBase` is the tensorclass view of such parts (one element per part); a History
stores parts as the plain dicts, so they reach templates unchanged and round-trip exactly.

Example:
    >>> parts = [{"type": "text", "text": "look"}, {"type": "image", "url": "http://x/cat.png"}]
    >>> c = ContentBase.from_parts(parts)
    >>> c.batch_size, c.type
    (torch.Size([2]), ['text', 'image'])
    >>> c.to_parts() == parts
    True
"""
from __future__ import annotations

from typing import Any

from ..td import TensorClass
from .message_checks import type_name

__all__ = ["ContentBase", "PART_TYPES", "check_parts"]

#: Part types accepted in list-of-parts content: ContentBase's types, plus OpenAI's names for
#: image URLs and input audio (``image_url``, ``input_audio``), which templates also receive.
PART_TYPES = frozenset({"text", "image", "audio", "video", "file", "function_call", "image_url", "input_audio"})


def check_parts(parts: Any) -> str | None:
    """``None`` if ``parts`` is a valid list of content parts, else what is wrong with it.

    Example:
        >>> check_parts([{"type": "text", "text": "hi"}]) is None
        True
        >>> check_parts([{"type": "smell"}])
        "content part 0 has unknown type 'smell' (known: audio, file, function_call, image, image_url, input_audio, text, video)"
    """
    if not isinstance(parts, list):
        return f"content must be a str, None or a list of parts, got {type_name(parts)}"
    for k, part in enumerate(parts):
        if not isinstance(part, dict):
            return f"content part {k} must be a dict, got {type_name(part)}"
        kind = part.get("type")
        if kind not in PART_TYPES:
            return f"content part {k} has unknown type {kind!r} (known: {', '.join(sorted(PART_TYPES))})"
        if kind == "text" and not isinstance(part.get("text"), str):
            return f"content part {k} of type 'text' needs a str 'text'"
    return None


class ContentBase(TensorClass["nocast", "shadow"]):  # as torchrl: values stored as given
    """Parts of a message's content, one batch element per part.

    Fields: ``type`` (one of ``text``, ``image``, ``audio``, ``video``, ``file``,
    ``function_call``), ``text``, ``url``, ``data`` (e.g. base64), ``mime_type``, ``name``,
    ``size``, ``function_name``, ``function_args``. Unset fields are ``None``.

    ``History(role="user", content=ContentBase(...), batch_size=())`` stores the parts as
    template-ready dicts (:meth:`to_parts`).

    Example:
        >>> ContentBase(type="text", text="Hello, world!").to_parts()
        [{'type': 'text', 'text': 'Hello, world!'}]
    """

    type: str
    text: str | None = None
    url: str | None = None
    data: str | None = None
    mime_type: str | None = None
    name: str | None = None
    size: int | None = None
    function_name: str | None = None
    function_args: dict | None = None

    def __init__(self, *args, batch_size=None, device=None, names=None, **kwargs):
        super().__init__(*args, batch_size=() if batch_size is None else batch_size, device=device, **kwargs)

    @classmethod
    def from_parts(cls, parts: list[dict]) -> "ContentBase":
        """A ContentBase of batch ``(len(parts),)`` from template-style part dicts.

        Keys of a part that are not ContentBase fields are not kept (use the dicts directly in
        a History to keep everything).
        """
        err = check_parts(parts)
        if err is not None:
            raise ValueError(err)
        fields = {}
        for name in cls._field_names:
            col = [p.get(name) for p in parts]
            if any(v is not None for v in col):
                fields[name] = col
        fields.setdefault("type", [p["type"] for p in parts])
        return cls(**fields, batch_size=(len(parts),))

    def to_parts(self) -> list[dict]:
        """Template-style part dicts (``None`` fields left out), one per part (a ContentBase
        without batch dims is one part)."""
        n = self.batch_size
        cols = {}
        for name in self._field_names:
            val = getattr(self, name)
            if val is None:
                continue
            if not n:
                cols[name] = [val]
            elif isinstance(val, list):
                cols[name] = val
            else:  # one value shared by all parts
                cols[name] = [val] * n[0]
        if len(n) > 1:
            raise ValueError(f"to_parts needs a ContentBase of at most one batch dim, got {tuple(n)}")
        count = n[0] if n else 1
        parts = [{k: v[i] for k, v in cols.items() if v[i] is not None} for i in range(count)]
        return parts
