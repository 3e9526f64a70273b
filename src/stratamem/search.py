"""Search: ranked turns and summaries of one namespace, with their score breakdowns.

:func:`search` asks the two indexes the context assembler already uses — the
hybrid turn index (:class:`~stratamem.retrieve.HybridIndex`: BM25 + vectors +
session structure) and the pyramid's summary index
(:class:`~stratamem.context.sources.SummaryIndex`) — and merges their rankings. The
two scores are on different scales, so each list is scaled by its own best
score and the merged order follows that relative score (a turn first on a
tie). :attr:`SearchHit.score` is the relative score; :attr:`SearchHit.scores`
keeps every raw signal the index reported. Searching reads only: nothing is
promoted, counted or recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .errors import ValidationError
from .records import check_name

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["SearchHit", "search"]

MAX_K = 1000
"""Most hits one search returns."""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One ranked result: a verbatim turn or a pyramid summary."""

    id: str
    """``turn:<id>`` or ``node:<id>``."""
    kind: str
    """``turn``, ``segment`` (a summary of consecutive turns) or ``consolidation`` (a summary of summaries)."""
    score: float
    """Score relative to the best hit of its kind (1.0 = the best); the merged order."""
    text: str
    """The turn's text (``Speaker: text``) or the summary line."""
    turn_ids: tuple[int, ...]
    """Turns it covers (a turn covers itself; a summary its provenance)."""
    session: str | None = None
    """Session of the turn or segment (``None`` for a consolidation)."""
    timestamp: datetime | None = None
    """When the turn was said, or when the summarized stretch began."""
    tier: str | None = None
    """A summary's tier (``warm`` or ``cold``); ``None`` for a turn."""
    scores: Mapping[str, float] = field(default_factory=dict)
    """Raw signal breakdown from the index (``fused`` is the index's own total)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "id": self.id,
            "kind": self.kind,
            "score": round(self.score, 6),
            "text": self.text,
            "turn_ids": list(self.turn_ids),
            "session": self.session,
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "tier": self.tier,
            "scores": {k: round(v, 6) for k, v in self.scores.items()},
        }


def _check(query: object, k: object) -> tuple[str, int]:
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("query must be a non-empty string", path="query")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise ValidationError(f"k must be an integer from 1 to {MAX_K}, got {k!r}", path="k")
    return query, k


def search(mem: Memory, query: str, *, k: int = 10, session: str | None = None) -> list[SearchHit]:
    """The ``k`` best turns and summaries of ``mem``'s namespace for ``query``, best first.

    Args:
        mem: The memory to search.
        query: What to look for.
        k: Most hits to return (1 to 1,000).
        session: Only this session's turns and segment summaries.

    Raises:
        ValidationError: Empty query, ``k`` out of range, bad session name.
        NotFoundError: Unknown namespace or session.
    """
    query, k = _check(query, k)
    if session is not None:
        check_name(session, "session")
        mem.store.session(mem.namespace, session)  # NotFoundError
    elif not mem.store.has_namespace(mem.namespace):
        from .errors import NotFoundError

        raise NotFoundError(f"unknown namespace {mem.namespace!r}")
    index = mem._recall_index()
    # With a session, rank every turn and keep the session's: a few candidates
    # from the whole namespace could all belong to other sessions.
    wide = k if session is None else max(len(index), 1)
    turns = []
    for h in index.search(query, k=wide):
        if h.score.get("fused", 0.0) <= 0:
            continue
        st = index.turn(h.turn_ids[0])
        if session is not None and st.session != session:
            continue
        turns.append((st, h))
        if len(turns) == k:
            break
    summaries = []
    if mem.config.pyramid.enabled:
        for u in mem._summary_index.rank(mem.pyramid, query, limit=max(k * 4, 40)):
            if u.score.get("lexical", 0.0) <= 0:
                continue  # the index keeps consolidations for context even without a match; search does not
            node = mem.pyramid.node(int(u.id.split(":", 1)[1]))
            if session is not None and node.session != session:
                continue
            summaries.append((u, node))
            if len(summaries) == k:
                break
    best_turn = max((h.score["fused"] for _, h in turns), default=0.0) or 1.0
    best_summary = max((u.score["lexical"] for u, _ in summaries), default=0.0) or 1.0
    hits = [
        SearchHit(
            h.id,
            "turn",
            h.score["fused"] / best_turn,
            f"{st.turn.name or st.role}: {st.text}",
            h.turn_ids,
            st.session,
            st.timestamp,
            None,
            dict(h.score),
        )
        for st, h in turns
    ]
    hits += [
        SearchHit(
            u.id,
            u.kind,
            u.score["lexical"] / best_summary,
            u.text,
            tuple(u.turn_ids),
            node.session,
            node.start,
            node.tier,
            dict(u.score),
        )
        for u, node in summaries
    ]
    # Stable: turns were added first, so a turn wins a tie.
    hits.sort(key=lambda h: -h.score)
    return hits[:k]
