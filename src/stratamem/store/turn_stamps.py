"""Turn timestamps on SQLite as 8-byte integers (issue 28, ``m028_compact_rows``).

SQLite has no date type: a turn's ``ts`` was the canonical UTC text
``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (:func:`~stratamem.records.format_timestamp`),
27 bytes a turn, ~26 KB per 1,000 LoCoMo turns. It is now a BLOB of 8 bytes:
the microseconds since ``0001-01-01T00:00:00Z``, big-endian. That is exactly
what the text said (the text has microsecond precision and is always UTC), and
SQLite compares BLOBs byte by byte, so ``MAX(ts)`` still finds the newest turn
(a big-endian count of a non-negative number sorts like the number).

The column keeps its ``TEXT`` declaration (SQLite keeps each value's own
type; rebuilding the largest table to change a word of DDL would cost an
upgrade its whole size again). ``m028_compact_rows`` converts every stored
row, so a column never mixes the two forms (a BLOB sorts after any TEXT);
both are read. PostgreSQL keeps ``TIMESTAMPTZ``, already an 8-byte integer.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from ..errors import DecodeError
from ..records import format_timestamp, parse_timestamp

__all__ = ["m028_turn_stamps", "pack_stamp", "unpack_stamp"]

_EPOCH = datetime(1, 1, 1, tzinfo=UTC)
_SIZE = 8


def pack_stamp(at: datetime) -> bytes:
    """``at`` (aware) as 8 big-endian bytes of microseconds since ``0001-01-01T00:00:00Z``.

    Raises:
        InvalidTurnError: ``at`` falls outside years 1–9999 once converted to UTC.
    """
    try:
        delta = at.astimezone(UTC) - _EPOCH
    except OverflowError:
        format_timestamp(at)  # raises the text form's error for the same instant
        raise
    return ((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds).to_bytes(_SIZE, "big")


def unpack_stamp(value: Any) -> datetime:
    """A stored turn timestamp (the 8-byte form, or the ISO text written before it) as an aware UTC datetime.

    Raises:
        DecodeError: A BLOB of another length (a damaged row).
        InvalidTurnError: A text that is not an ISO 8601 timestamp.
    """
    if type(value) is bytes or isinstance(value, bytearray | memoryview):  # (the exact type first: hot)
        if len(value) != _SIZE:
            raise DecodeError(f"stored turn timestamp is {len(value)} bytes, not {_SIZE}")
        seconds, micros = divmod(int.from_bytes(value, "big"), 1_000_000)
        return _EPOCH + timedelta(0, seconds, micros)
    return parse_timestamp(value)


def m028_turn_stamps(conn: Any) -> None:
    """Every SQLite turn timestamp stored as text re-stored as 8 bytes (:func:`pack_stamp`); PostgreSQL: nothing.

    In batches of 2,000 turns in id order; idempotent (a packed stamp is a BLOB and is not read again).
    """
    import sqlite3

    if not isinstance(conn, sqlite3.Connection):  # (not sql.dialect_of: sql reads stamps through this module)
        return
    last = 0
    while True:
        rows = conn.execute(
            "SELECT id, ts FROM turns WHERE id > ? AND typeof(ts) = 'text' ORDER BY id LIMIT 2000", (last,)
        ).fetchall()
        if not rows:
            return
        last = int(rows[-1][0])
        packed = [(pack_stamp(parse_timestamp(ts)), tid) for tid, ts in rows]
        conn.executemany("UPDATE turns SET ts = ? WHERE id = ?", packed)
