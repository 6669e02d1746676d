"""The Rust backend of a fast Hugging Face tokenizer, free of padding and truncation.

``transformers`` keeps padding and truncation as state on the backend (``tokenizers.Tokenizer``):
``tok(texts, padding="max_length", truncation=True, max_length=40)`` leaves both switched on, and
every later direct ``backend.encode`` pads and cuts its text. ``tok(...)`` itself resets them per
call from its arguments; chatdata's direct calls (the full batch encode of ``tokenize_chats``,
the tiktoken twin's probes, a rollout's turns) go through :func:`unpadded` so that they give
``tok.encode(text, add_special_tokens=False)``'s ids whatever the tokenizer was used for before.

Example:
    >>> from chatdata.data import load_sample_tokenizer
    >>> tok = load_sample_tokenizer()
    >>> _ = tok(["a", "b c"], padding="max_length", max_length=8)   # leaves padding on the backend
    >>> tok.backend_tokenizer.encode("hi").ids
    [6023, 151643, 151643, 151643, 151643, 151643, 151643, 151643]
    >>> unpadded(tok.backend_tokenizer).encode("hi").ids
    [6023]
"""
from __future__ import annotations

from typing import Any

__all__ = ["rust_backend", "unpadded"]


def rust_backend(tokenizer: Any):
    """``tokenizer``'s ``tokenizers.Tokenizer`` (a fast tokenizer's backend), or None.

    Example:
        >>> rust_backend(object()) is None
        True
    """
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    return backend if backend is not None and hasattr(backend, "encode_batch") else None


def unpadded(backend):
    """``backend`` with padding and truncation switched off (two attribute reads when they are
    off already), see the module docstring."""
    if backend.truncation is not None:
        backend.no_truncation()
    if backend.padding is not None:
        backend.no_padding()
    return backend
