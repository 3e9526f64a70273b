"""Checks and timestamps every record shares: names, storable text, JSON values, UTC instants.

Names (namespace, session) go into file names, URLs and CLI arguments; text must
be storable as UTF-8 without NULs; timestamps are aware datetimes kept in UTC
and written in one canonical form (:func:`format_timestamp`).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from ..errors import InvalidTurnError, ValidationError

__all__ = ["check_name", "check_text", "format_timestamp", "parse_timestamp"]

# Namespace and session names go into file names, URLs and CLI arguments.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@+=-]{0,127}$")


def check_name(value: object, what: str) -> str:
    """Validate a namespace or session name and return it.

    Raises:
        ValidationError: The name is not a 1–128 character string of letters,
            digits and ``_.:@+=-`` starting with a letter or digit.
    """
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ValidationError(
            f"invalid {what} name {value!r}: use 1-128 characters from "
            "letters, digits and _.:@+=-, starting with a letter or digit"
        )
    return value


def check_text(value: object, path: str) -> str:
    """Return ``value`` if it is a string that can be stored, else raise.

    Stored text must be valid Unicode (no lone surrogates, which cannot be
    encoded as UTF-8) and contain no NUL characters (which C-level text
    search and many terminals truncate at).

    Raises:
        InvalidTurnError: ``value`` is not a ``str``, holds a lone surrogate or a NUL.
    """
    if not isinstance(value, str):
        raise InvalidTurnError(f"expected a string, got {type(value).__name__}", path=path)
    if "\x00" in value:
        raise InvalidTurnError("text contains a NUL character", path=path)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidTurnError(f"text is not valid Unicode (lone surrogate at index {exc.start})", path=path) from None
    return value


def format_timestamp(ts: datetime) -> str:
    """Render an aware datetime as the canonical UTC string ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.

    The year is always four digits: ``strftime("%Y")`` gives ``999`` for the
    year 999 on glibc, which :func:`parse_timestamp` (ISO 8601) cannot read back.

    Raises:
        InvalidTurnError: ``ts`` falls outside years 1–9999 once converted to UTC.
    """
    u = _to_utc(ts, "timestamp")
    return f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}.{u.microsecond:06d}Z"


def _to_utc(ts: datetime, path: str) -> datetime:
    """``ts`` in UTC; an instant outside datetime's range is a caller error, not an ``OverflowError``."""
    try:
        return ts.astimezone(UTC)
    except OverflowError:
        raise InvalidTurnError(f"timestamp {ts.isoformat()} is outside years 1-9999 in UTC", path=path) from None


def parse_timestamp(value: object, path: str = "timestamp") -> datetime:
    """Parse an ISO 8601 timestamp (a string or a ``datetime``); naive values are taken as UTC.

    Raises:
        InvalidTurnError: The value is not an ISO 8601 date-time, or it lies
            outside years 1–9999 once converted to UTC.
    """
    if isinstance(value, datetime):
        ts = value
    elif isinstance(value, str):
        try:
            ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidTurnError(f"not an ISO 8601 timestamp: {value!r}", path=path) from None
    else:
        raise InvalidTurnError(f"expected a timestamp, got {type(value).__name__}", path=path)
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return _to_utc(ts, path)


def _now() -> datetime:
    return datetime.now(UTC)


def _check_json(value: Any, path: str) -> None:
    """Reject values that JSON cannot carry (so the store round-trips them).

    NaN and infinities are refused: Python's ``json`` writes them as bare
    ``NaN``/``Infinity``, which is not JSON, so a stored turn holding one could
    not be read back by strict readers (the store's own included).
    """
    try:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as exc:
        raise InvalidTurnError(f"not JSON-serializable: {exc}", path=path) from None
