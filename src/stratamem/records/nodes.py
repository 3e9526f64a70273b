"""Records of the pyramid: nodes (segments and consolidations) and per-tier statistics.

A :class:`Node` is one node of the tree. Level 1 nodes are *segments*: sealed
runs of consecutive turns of one session. Nodes of level 2 and up are
*consolidations* of consecutive nodes of the level below (seed 000's mini and
macro chunks, seed 002's bulks); they merge one session's nodes (the default
``consolidation_scope``) or may span sessions of the namespace.
Every turn belongs to at most one node per level; the covered turns of each
level form a gap-free prefix (see :mod:`stratamem.pyramid`). Nodes are built
and stored by :mod:`stratamem.pyramid`; their SQL lives in
:mod:`stratamem.store.node_store`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, TypeAlias

from .checks import format_timestamp
from .summaries import Summary

__all__ = ["SUMMARY_STATUSES", "TIERS", "Node", "SummaryStatus", "Tier", "TierStats"]

Tier: TypeAlias = Literal["hot", "warm", "cold"]
TIERS: tuple[str, ...] = ("hot", "warm", "cold")
SummaryStatus: TypeAlias = Literal["pending", "ok", "failed"]
SUMMARY_STATUSES: tuple[str, ...] = ("pending", "ok", "failed")


@dataclass(frozen=True, slots=True)
class Node:
    """A segment (level 1) or a consolidation (level >= 2), as stored."""

    id: int
    """Store-wide node id."""
    namespace: str
    """Owning namespace."""
    level: int
    """1 for segments; 2, 3 … for consolidations."""
    kind: str
    """``micro``, ``topic`` or ``request`` (segments); ``mini``, ``macro``, ``bulk`` … (consolidations)."""
    session: str | None
    """Session of a segment, and of a per-session consolidation; ``None`` for a namespace-wide one."""
    seq_range: tuple[int, int] | None
    """First and last session sequence numbers of a segment; ``None`` for consolidations."""
    turn_count: int
    """Turns covered."""
    tokens: int
    """Sum of the covered turns' exact token counts."""
    first_turn_id: int
    """Lowest covered turn id."""
    last_turn_id: int
    """Highest covered turn id."""
    start: datetime
    """Timestamp of the first covered turn."""
    end: datetime
    """Timestamp of the last covered turn."""
    parent_id: int | None
    """Consolidation that covers this node, once there is one."""
    reason: str
    """Why it was sealed (``size``, ``phrase``, ``gap``, ``subject``, ``tokens``, ``manual``, ``idle``, ``user_turn``,
    ``consolidation``)."""
    tier: Tier | None
    """How a segment is held (hot/warm/cold); ``None`` for consolidations, which hold summaries only."""
    summary: Summary | None
    """Summary, key facts and themes; ``None`` while pending."""
    summary_status: SummaryStatus
    """``pending`` (not yet summarized), ``ok``, or ``failed``.

    ``failed``: the model failed; the summary is the extractive fallback."""
    summary_error: str | None
    """What went wrong when ``summary_status`` is ``failed`` (never shown as a summary)."""
    summary_tokens: int | None
    """Tokens of the summary text."""
    view_tokens: int | None
    """Tokens of the tier's compact representation (warm content; cold summary and facts)."""
    archive_ref: str | None
    """Where the full content of a cold segment sits in the archive."""
    has_embedding: bool
    """Whether an embedding of the summary is stored."""
    created_at: datetime
    """When the node was created."""
    settled_turn: int | None = None
    """The namespace's newest turn id when the node's summary was first stored (``None``: not yet,
    or stored before this was recorded); the cache layout's ledger orders its changes by it."""

    @property
    def key_facts(self) -> tuple[str, ...]:
        """Key facts as text (empty while the summary is pending)."""
        return tuple(f.text for f in self.summary.key_facts) if self.summary else ()

    @property
    def themes(self) -> tuple[str, ...]:
        """Themes (empty while the summary is pending)."""
        return self.summary.themes if self.summary else ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form (timestamps as canonical strings)."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if isinstance(value, datetime):
                value = format_timestamp(value)
            elif isinstance(value, Summary):
                value = value.to_dict()
            elif isinstance(value, tuple):
                value = list(value)
            out[name] = value
        return out


@dataclass(frozen=True, slots=True)
class TierStats:
    """Storage statistics of one tier of segments in a namespace."""

    tier: str
    """``hot``, ``warm``, ``cold`` or ``open`` (turns not yet sealed into a segment)."""
    nodes: int
    """Segments in the tier."""
    turns: int
    """Turns they cover."""
    tokens: int
    """Exact tokens of those turns."""
    view_tokens: int
    """Tokens of the tier's representation (full turns, warm content, or summary + facts)."""
    bytes: int
    """Bytes the tier's representation occupies (turn text, warm content, archive frames + summaries)."""
    raw_bytes: int
    """UTF-8 bytes of the covered turns' canonical content."""

    @property
    def compression_ratio(self) -> float:
        """``tokens / view_tokens``: how many times smaller the tier's view is (1.0 when empty)."""
        return self.tokens / self.view_tokens if self.view_tokens else 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form, including the compression ratio."""
        out = {k: getattr(self, k) for k in self.__slots__}
        out["compression_ratio"] = round(self.compression_ratio, 3)
        return out
