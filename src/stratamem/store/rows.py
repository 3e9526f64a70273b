"""Turn rows as both backends store them: one serialization, defined above the backends.

A turn is stored as plain text plus, for block content, compact JSON of its
blocks and of its metadata. Both :class:`~stratamem.store.sqlite.SQLiteStore`
and :class:`~stratamem.store.postgres.PostgresStore` write and read turns
through these two functions, so the stored form cannot drift between them.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from ..records import Role, Turn, block_from_dict, parse_timestamp

__all__ = ["turn_columns", "turn_from_columns"]


def turn_columns(turn: Turn) -> tuple[str, str | None, str | None]:
    """``(text, content_json, metadata_json)`` as stored; content is None for plain text.

    ``allow_nan=False``: the reader is strict JSON, so NaN/Infinity must never be
    written (turns refuse them at validation; this is the last line of defence).
    Both stores (SQLite and PostgreSQL) serialize turns through this function.
    """
    content = (
        None
        if isinstance(turn.content, str)
        else json.dumps([b.to_dict() for b in turn.content], ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    )
    meta = (
        json.dumps(dict(turn.metadata), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        if turn.metadata
        else None
    )
    text = turn.content if isinstance(turn.content, str) else turn.text
    return text, content, meta


def turn_from_columns(
    role: Role,
    text: str,
    content: str | None,
    name: str | None,
    model: str | None,
    ts: str | datetime,
    metadata: str | None,
) -> Turn:
    """Inverse of :func:`turn_columns`."""
    body: str | tuple[Any, ...] = text if content is None else tuple(block_from_dict(b) for b in json.loads(content))
    return Turn(
        role=role,
        content=body,
        timestamp=parse_timestamp(ts),
        name=name,
        model=model,
        metadata=json.loads(metadata) if metadata else {},
    )
