"""Errors the gateway answers with: an HTTP status and an OpenAI-shaped body.

Every bad input ends as one :class:`GatewayError`; the app turns it into
``{"error": {"message", "type", "param", "code"}}`` with its status, the body the official
``openai`` client reads (``BadRequestError`` for 400, ``NotFoundError`` for 404, ...).

Example:
    >>> err = GatewayError(400, "'temperature' must be a number", param="temperature")
    >>> err.status, err.body()["error"]["param"]
    (400, 'temperature')
"""
from __future__ import annotations

__all__ = ["GatewayError", "error_body"]


def error_body(message: str, type: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict:
    """The OpenAI error body.

    Example:
        >>> error_body("no such session", "not_found_error")["error"]["type"]
        'not_found_error'
    """
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class GatewayError(Exception):
    """A request the gateway refuses (4xx) or could not serve (5xx), with a message that says
    what to fix."""

    def __init__(self, status: int, message: str, type: str | None = None, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type or ("invalid_request_error" if status < 500 else "server_error")
        self.param = param
        self.code = code

    def body(self) -> dict:
        return error_body(self.message, self.type, self.param, self.code)
