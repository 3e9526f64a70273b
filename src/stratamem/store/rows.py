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

from ..records import Role, Turn, block_from_dict
from ..records.checks import clip_json
from .text_codec import unpack_text
from .turn_stamps import unpack_stamp

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
    text: str | bytes,
    content: str | None,
    name: str | None,
    model: str | None,
    ts: str | bytes | datetime,
    metadata: str | None,
) -> Turn:
    """Inverse of :func:`turn_columns`.

    A value nested deeper than :data:`~stratamem.records.checks.MAX_JSON_DEPTH`
    (stored before that limit existed) is read back clipped
    (:func:`~stratamem.records.checks.clip_json`), so reads never fail on it.

    Raises:
        ValueError: The row is corrupt (its JSON does not parse, or its fields are not a turn's).
    """
    body: str | tuple[Any, ...] = (
        unpack_text(text) if content is None else tuple(block_from_dict(_clip_input(b)) for b in json.loads(content))
    )
    return Turn(
        role=role,
        content=body,
        timestamp=unpack_stamp(ts),
        name=name,
        model=model,
        metadata=clip_json(json.loads(metadata)) if metadata else {},
    )


def _clip_input(block: Any) -> Any:
    """A stored block dict with its tool input clipped to the depth limit (see :func:`turn_from_columns`)."""
    if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
        clipped = clip_json(block["input"])
        if clipped is not block["input"]:
            return {**block, "input": clipped}
    return block
