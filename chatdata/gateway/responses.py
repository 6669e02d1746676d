"""OpenAI response bodies: ``chat.completion`` and the ``chat.completion.chunk`` SSE stream.

The stream is the one the official client reads: a first chunk with the role, content (and
``reasoning_content``) in pieces, each tool call as one delta with its index, id, name and
arguments, a last chunk with the ``finish_reason``, an optional usage chunk
(``stream_options.include_usage``), then ``data: [DONE]``. Joined, the deltas equal the
non-streaming message.

Example:
    >>> msg = {"role": "assistant", "content": "Hi there"}
    >>> body = completion_body("chatcmpl-1", 0, "m", msg, "stop", (3, 2))
    >>> body["choices"][0]["message"]["content"], body["usage"]["total_tokens"]
    ('Hi there', 5)
    >>> chunks = list(sse_chunks("chatcmpl-1", 0, "m", msg, "stop", (3, 2), include_usage=False))
    >>> chunks[-1]
    b'data: [DONE]\\n\\n'
"""
from __future__ import annotations

import json
from collections.abc import Iterator

__all__ = ["completion_body", "sse_chunks", "finish_reason", "chat_logprobs"]

_PIECE = 64  # characters per content delta


def finish_reason(message: dict, backend_finish: str) -> str:
    """``"length"`` for a truncated turn, ``"tool_calls"`` when the answer calls tools, else ``"stop"``."""
    if backend_finish == "length":
        return "length"
    return "tool_calls" if message.get("tool_calls") else "stop"


def _usage(counts: tuple[int, int]) -> dict:
    return {"prompt_tokens": counts[0], "completion_tokens": counts[1], "total_tokens": counts[0] + counts[1]}


def chat_logprobs(pieces: list[tuple[str, bytes]], logprobs: list[float]) -> dict:
    """The ``choices[0].logprobs`` object of a chat completion (sampled tokens only): each
    token's text and its own bytes (:class:`~chatdata.gateway.token_bytes.TokenBytes`; a token
    holding part of a character has the bytes of that part, so the joined bytes are the text).

    Example:
        >>> chat_logprobs([("Hi", b"Hi")], [-0.25])["content"][0]
        {'token': 'Hi', 'logprob': -0.25, 'bytes': [72, 105], 'top_logprobs': []}
    """
    return {"content": [{"token": t, "logprob": lp, "bytes": list(b), "top_logprobs": []}
                        for (t, b), lp in zip(pieces, logprobs)]}


def completion_body(cid: str, created: int, model: str, message: dict, finish: str, counts: tuple[int, int],
                    logprobs: dict | None = None, extra: dict | None = None) -> dict:
    """A ``chat.completion`` object (``message`` in its OpenAI form, ``finish`` already mapped)."""
    body = {"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish}],
            "usage": _usage(counts)}
    if extra:
        body.update(extra)
    return body


def _event(obj: dict) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n\n"


def sse_chunks(cid: str, created: int, model: str, message: dict, finish: str, counts: tuple[int, int],
               include_usage: bool, logprobs: dict | None = None) -> Iterator[bytes]:
    """The SSE events of a streamed answer (see the module docstring)."""
    def chunk(delta: dict, reason: str | None = None, lp: dict | None = None) -> bytes:
        return _event({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                       "choices": [{"index": 0, "delta": delta, "logprobs": lp, "finish_reason": reason}]})

    yield chunk({"role": "assistant", "content": ""})
    reasoning = message.get("reasoning_content") or ""
    for a in range(0, len(reasoning), _PIECE):
        yield chunk({"reasoning_content": reasoning[a:a + _PIECE]})
    content = message.get("content") or ""
    for a in range(0, len(content), _PIECE):
        yield chunk({"content": content[a:a + _PIECE]})
    for k, call in enumerate(message.get("tool_calls") or ()):
        yield chunk({"tool_calls": [{"index": k, "id": call["id"], "type": "function",
                                     "function": {"name": call["function"]["name"],
                                                  "arguments": call["function"]["arguments"]}}]})
    yield chunk({}, finish, logprobs)
    if include_usage:
        yield _event({"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                      "choices": [], "usage": _usage(counts)})
    yield b"data: [DONE]\n\n"
