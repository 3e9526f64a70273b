"""Rows a feature asks the store to insert: one record per table, defined above both backends.

The pyramid hands the store a :class:`NewNode`, the item API a
:class:`NewItem`; :mod:`stratamem.store.sqlite` and
:mod:`stratamem.store.postgres` both write them. They are inputs only: what
a store reads back is :class:`~stratamem.records.nodes.Node` or
:class:`~stratamem.records.items.MemoryItem`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["NewItem", "NewNode"]


@dataclass(frozen=True, slots=True)
class NewNode:
    """A node to insert (the pyramid computes every field)."""

    level: int
    """Pyramid level: 1 for a segment, 2 and up for consolidations."""
    kind: str
    """``micro``, ``topic`` or ``request`` (segments); ``mini``, ``macro``, ``bulk`` … (consolidations)."""
    session: str | None
    """Session of a segment or per-session consolidation; ``None`` for a namespace-wide one."""
    seq_range: tuple[int, int] | None
    """First and last session sequence number a segment covers."""
    turn_ids: tuple[int, ...]
    """Ids of every turn the node covers (one coverage row each)."""
    tokens: int
    """Tokens of the covered turns."""
    start: datetime
    """Timestamp of the oldest covered turn."""
    end: datetime
    """Timestamp of the newest covered turn."""
    reason: str
    """Why it was sealed (``size``, ``phrase``, ``gap``, ``subject``, ``tokens``, ``manual``, ``idle``, ``user_turn``,
    ``consolidation``)."""
    tier: str | None
    """Starting tier of a segment; ``None`` for consolidations."""


@dataclass(frozen=True, slots=True)
class NewItem:
    """The columns of an item about to be inserted (validated by the caller)."""

    content: str
    """The item's text."""
    type: str
    """One of :data:`stratamem.records.items.ITEM_TYPES`."""
    tier: str
    """``hot`` or ``cold``."""
    tokens: int
    """Tokens of ``content``."""
    relevance: float
    """Starting relevance."""
    source: str
    """Who made it: ``api``, an extractor name, ..."""
    created_at: str
    """ISO-8601 creation time."""
    session: str | None = None
    """Session the item came from, if any."""
    provenance: tuple[int, ...] = ()
    """Ids of the turns it was extracted from."""
    review: str | None = None
    """Review state of an extracted item; ``None`` for API items."""
    key: str | None = None
    """Supersession key (a newer item with the same key replaces it)."""
    valid_from: str | None = None
    """ISO-8601 start of validity."""
    valid_to: str | None = None
    """ISO-8601 end of validity."""
    metadata: Mapping[str, Any] | None = None
    """Caller metadata (JSON-serialisable)."""
    embedding: bytes | None = None
    """Float32 vector bytes (the store keeps them as int8 codes plus a scale)."""
    embedding_model: str | None = None
    """Name of the embedder that made ``embedding``."""
    scope: str = "namespace"
    """``namespace`` or ``session`` (visible only in its own session)."""
    fact_key: str | None = None
    """Uniqueness key of an extracted item's text (:func:`stratamem.records.items.fact_key`); ``None`` for API items."""
    salience: float | None = None
    """The extractor's score (0-1) of an extracted item; ``None`` for API items."""
