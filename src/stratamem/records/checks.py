"""Checks and timestamps every record shares: names, storable text, JSON values, UTC instants.

Names (namespace, session) go into file names, URLs and CLI arguments; text must
be storable as UTF-8 without NULs; timestamps are aware datetimes kept in UTC
and written in one canonical form (:func:`format_timestamp`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from ..errors import InvalidTurnError, ValidationError

__all__ = [
    "CLIPPED",
    "MAX_DOCUMENT_DEPTH",
    "MAX_JSON_DEPTH",
    "MAX_JSON_INT",
    "check_json",
    "check_name",
    "check_text",
    "clip_json",
    "format_timestamp",
    "json_problem",
    "parse_timestamp",
]

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


MAX_JSON_DEPTH = 64
"""Deepest nesting of a JSON value stratamem stores: turn metadata, a tool call's input, item metadata.

``{}`` and ``[]`` are one level, ``{"a": {"b": 1}}`` two. Every way in (``Memory.add``,
HTTP, MCP, ingest and import files) meets this one limit before anything is stored,
so every way out can render what is stored: HTTP and MCP answers are serialized by
pydantic, which stops at about 250 levels, and the ``json`` module's recursion at
about 1,000. Real tool inputs and metadata nest a handful of levels.
"""

MAX_JSON_INT = 2**63 - 1
"""Largest integer in a stored JSON value (the smallest is ``-2**63``), and the largest
integer argument (ids, sequence numbers): what both stores' 64-bit integer columns hold."""

MAX_DOCUMENT_DEPTH = MAX_JSON_DEPTH + 16
"""Deepest nesting of a whole JSON document read from outside (a file, a line of one):
a stored value plus the envelope formats wrap it in (a Claude Code line puts a tool
input four levels down). See :mod:`stratamem._jsonio`."""


def json_problem(value: Any, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """What keeps ``value`` from being stored as JSON, or ``None`` when nothing does.

    Checks the limits every JSON value that enters shares: nesting at most
    ``max_depth`` levels, 64-bit integers (up to :data:`MAX_JSON_INT`), finite
    floats. Walks without recursion, so a value nested far deeper than the
    interpreter's recursion limit is measured, not crashed on; only containers
    are stacked (a parsed file is mostly strings), so the walk costs about half
    of what parsing the text did.
    """
    if not isinstance(value, Mapping | list | tuple):
        return _scalar_problem(value)
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            return f"nested more than {max_depth} levels deep"
        for child in item.values() if isinstance(item, Mapping) else item:
            kind = type(child)
            if kind is str or child is None or kind is bool:
                continue
            if kind is dict or kind is list or isinstance(child, Mapping | list | tuple):
                stack.append((child, depth + 1))
            else:
                problem = _scalar_problem(child)
                if problem is not None:
                    return problem
    return None


def _scalar_problem(item: Any) -> str | None:
    """:func:`json_problem` of one scalar: an integer past 64 bits or a float that is not finite."""
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        if not -MAX_JSON_INT - 1 <= item <= MAX_JSON_INT:
            return f"integer {_short(item)} is outside the 64-bit range (-2^63 to 2^63-1)"
    elif isinstance(item, float) and not math.isfinite(item):
        return f"not JSON-serializable: Out of range float values are not JSON compliant: {item!r}"
    return None


def _short(n: int) -> str:
    """An integer for a message: its digits, or how many there are when that is long."""
    return str(n) if abs(n) < 10**30 else f"of {n.bit_length()} bits"


def check_json(value: Any, path: str, *, error: type[ValidationError] = InvalidTurnError) -> None:
    """Refuse a value that cannot be stored as JSON and read back by every shell.

    The limits are :func:`json_problem`'s (:data:`MAX_JSON_DEPTH` levels,
    64-bit integers, finite floats); besides, the value must serialize: NaN
    and infinities are refused, since Python's ``json`` writes them as bare
    ``NaN``/``Infinity``, which is not JSON, and lone surrogates cannot be
    encoded as UTF-8.

    Raises:
        ValidationError: ``error`` (by default :class:`~stratamem.errors.InvalidTurnError`), naming ``path``.
    """
    problem = json_problem(value)
    if problem is not None:
        raise error(problem, path=path)
    try:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as exc:
        raise error(f"not JSON-serializable: {exc}", path=path) from None


CLIPPED = "$nested_json"
"""Key of the object that stands in for levels a stored value holds beyond :data:`MAX_JSON_DEPTH`."""


def clip_json(value: Any, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``value`` read back from a store, with anything nested deeper than ``max_depth`` levels as JSON text.

    Versions before the limit stored values nested several hundred levels deep,
    which no HTTP or MCP answer can carry. Reads never fail on them: the
    container at the last allowed level is replaced by ``{"$nested_json": "<its
    compact JSON>"}``, so nothing is lost and the value fits every shell. A
    value within the limit is returned as it is (the same object).
    """
    if json_problem(value, max_depth) is None:
        return value
    return _clip(value, max_depth)


def _clip(value: Any, room: int) -> Any:
    if not isinstance(value, Mapping | list | tuple):
        return value
    children = value.values() if isinstance(value, Mapping) else value
    if room <= 1 and any(isinstance(c, Mapping | list | tuple) for c in children):
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        except (ValueError, TypeError, RecursionError):
            text = "(nested too deeply to show)"
        return {CLIPPED: text}
    if room <= 1:
        return value
    if isinstance(value, Mapping):
        return {k: _clip(v, room - 1) for k, v in value.items()}
    return [_clip(v, room - 1) for v in value]
