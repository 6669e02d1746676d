"""The text and the exact bytes of single sampled tokens, for an answer's ``logprobs``.

OpenAI's ``logprobs.content[].bytes`` are the token's own UTF-8 bytes, so that a client can join
the bytes of the tokens a character is split across (an emoji, a CJK character in a byte-level
vocabulary) and get the text back. ``tokenizer.decode([id])`` cannot give them: a token that
holds part of a character decodes to U+FFFD, whose bytes (``ef bf bd``) are not the token's,
and the joined bytes of an answer were then not its text. The bytes come from the vocabulary
instead: a byte-level BPE token's characters each stand for one byte
(:func:`~chatdata.templates.tiktoken_bpe.byte_level_chars`), a byte-fallback token ``<0xE6>`` is
that byte, an added (special) token is its content; any other token is its decoded text.

Example:
    >>> from chatdata.data import load_sample_tokenizer
    >>> tok = load_sample_tokenizer()
    >>> pieces = TokenBytes(tok)(tok.encode(" 🌍", add_special_tokens=False))
    >>> [b for _, b in pieces], b"".join(b for _, b in pieces).decode()
    ([b' \\xf0\\x9f', b'\\x8c', b'\\x8d'], ' 🌍')
"""
from __future__ import annotations

import json
import re
from typing import Any

from ..templates.backend import rust_backend
from ..templates.tiktoken_bpe import byte_level_chars

__all__ = ["TokenBytes", "longest_token"]

_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _decoder_kinds(backend: Any) -> set[str]:
    """The types of the backend's decoder steps (a ``Sequence`` is opened)."""
    decoder = getattr(backend, "decoder", None)
    if decoder is None:
        return set()
    try:
        state = json.loads(decoder.__getstate__())
    except (TypeError, ValueError, AttributeError):
        return set()
    steps = state.get("decoders", [state]) if isinstance(state, dict) else []
    return {s.get("type") for s in steps if isinstance(s, dict)}


def longest_token(tokenizer: Any) -> int:
    """The most characters one token of ``tokenizer`` can stand for: its longest vocabulary
    entry (a byte-level entry has a character per byte, a byte-fallback ``<0xE6>`` more
    characters than its byte), so a text of ``n`` characters is at least ``n / longest_token``
    tokens.

    Example:
        >>> from chatdata.data import load_sample_tokenizer
        >>> longest_token(load_sample_tokenizer())
        128
    """
    return max(1, max(map(len, tokenizer.get_vocab()), default=1))


class TokenBytes:
    """``(text, bytes)`` of single token ids of ``tokenizer`` (see the module docstring); the
    pieces of ids asked once are kept, so an answer costs a dictionary look-up per token."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        backend = rust_backend(tokenizer)
        kinds = _decoder_kinds(backend) if backend is not None else set()
        self._backend = backend
        self._chars = byte_level_chars() if "ByteLevel" in kinds else None
        self._fallback = "ByteFallback" in kinds
        self._added = ({i: t.content for i, t in backend.get_added_tokens_decoder().items()}
                       if backend is not None and hasattr(backend, "get_added_tokens_decoder") else {})
        self._kept: dict[int, tuple[str, bytes]] = {}

    def _bytes(self, i: int, text: str) -> bytes:
        if i in self._added:
            return self._added[i].encode("utf-8")
        piece = self._backend.id_to_token(i) if self._backend is not None else None
        if piece is not None:
            if self._chars is not None and all(c in self._chars for c in piece):
                return bytes(self._chars[c] for c in piece)
            if self._fallback and (m := _BYTE_FALLBACK.fullmatch(piece)):
                return bytes([int(m.group(1), 16)])
        return text.encode("utf-8", "surrogatepass")

    def __call__(self, ids: list[int]) -> list[tuple[str, bytes]]:
        out, kept = [], self._kept
        for i in ids:
            got = kept.get(i)
            if got is None:
                text = self.tokenizer.decode([i], skip_special_tokens=False)
                got = kept[i] = (text, self._bytes(i, text))
            out.append(got)
        return out
