"""Library errors as HTTP responses: one status per branch of the exception tree, one JSON body.

Every error answer has the body ``{"error": {"type": ..., "message": ...}}``
(plus ``path`` when the library says where in the input the problem is).
The mapping follows what the caller can do about it:

================================  ======  =====================================
error                             status  meaning
================================  ======  =====================================
``ValidationError`` (+ subclasses)  400   the request is wrong; fix it
``ConfigError``, ``DecodeError``    400   the request asks for what the setup or file cannot give
``Forbidden``                       403   the token may not use that namespace / origin refused
``NotFoundError``                   404   unknown namespace, session, node, item, manifest
``Conflict``                        409   the request clashes with stored state (existing sessions,
                                          an item already superseded)
``PayloadTooLarge``                 413   the body is over the server's limit
``BackendError``, ``ModelError``    503   the store or a model failed; retry later
``Busy``                            503   too many calls wait for the store, or the work queue
                                          is full; retry after ``Retry-After`` seconds
================================  ======  =====================================
"""

from __future__ import annotations

from typing import Any

from ..errors import (
    BackendError,
    CompactionCancelled,
    ConfigError,
    ConflictError,
    DecodeError,
    ModelError,
    NotFoundError,
    StratamemError,
    ValidationError,
)

__all__ = ["Busy", "Conflict", "Forbidden", "PayloadTooLarge", "Unauthorized", "error_body", "status_for"]


class Forbidden(StratamemError):
    """The caller is authenticated but may not do this (namespace outside its allow-list, foreign origin)."""


class Unauthorized(StratamemError):
    """No valid bearer token was presented."""


class Conflict(StratamemError):
    """The request clashes with what is stored."""


class PayloadTooLarge(StratamemError):
    """The request body is larger than the server accepts."""


class Busy(StratamemError):
    """The server is busy: too many calls wait for the store, or the long-work queue is full.

    Answered 503 with ``Retry-After: retry_after``.
    """

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


# Order matters: subclasses before their bases.
_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (Unauthorized, 401),
    (Forbidden, 403),
    (Conflict, 409),
    (ConflictError, 409),
    (CompactionCancelled, 409),
    (PayloadTooLarge, 413),
    (ValidationError, 400),
    (ConfigError, 400),
    (DecodeError, 400),
    (NotFoundError, 404),
    (Busy, 503),
    (BackendError, 503),
    (ModelError, 503),
)


def status_for(exc: BaseException) -> int:
    """The HTTP status for a library (or shell) error; 500 for anything unexpected."""
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def error_body(kind: str, message: str, path: str | None = None) -> dict[str, Any]:
    """The one JSON error body."""
    err: dict[str, Any] = {"type": kind, "message": message}
    if path:
        err["path"] = path
    return {"error": err}
