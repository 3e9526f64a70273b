"""Finding memory items: hybrid ranking, read-only ``search``, and ``recall`` with its side effects.

Part of :class:`stratamem.items.Items`. Both entry points rank the same way
(one function, :meth:`RecallOps._rank`): warm and cold items that are live
(unless ``include_superseded``) and visible in the reading session, found by
FTS and by exact cosine over the namespace's vectors, scored by word coverage
and, with an embedder, the calibrated cosine (:func:`match_score`), kept above
``recall_min_score``, best first. What differs is what happens next:

* :meth:`RecallOps.search` writes nothing: no access counts, no relevance, no
  promotion, no metrics. It works on a store that refuses writes, and is what
  context assembly should use.
* :meth:`RecallOps.recall` records the access (count, time, relevance),
  promotes by the anti-thrash rules of :mod:`stratamem.items.tiers` and adds
  to the persisted metrics, all in one transaction.

The signals themselves are in :mod:`stratamem.items.search`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from ..errors import ConfigError, ValidationError
from ..records import check_name, format_timestamp, parse_timestamp
from ..records.items import (
    DEAD_REVIEWS,
    ITEM_TYPES,
    MemoryItem,
    RecallResult,
    Refusal,
    check_choice,
    check_content,
    visible_in,
)
from .core import embedder_name
from .metrics import latency_deltas
from .search import content_terms, fts_query, lexical_score
from .tiers import TierOps

__all__ = ["COSINE_CEILING", "COSINE_FLOOR", "RecallOps", "match_score"]

COSINE_FLOOR = 0.35
"""MiniLM cosine at or below which a query and an item count as unrelated (calibrated relevance 0): on
600 LoCoMo questions, 90 % of unrelated turns score below 0.32 and half of the evidence turns above 0.30."""
COSINE_CEILING = 0.65
"""Cosine at or above which the vector alone says "the same fact" (calibrated relevance 1): rarer than
1 in 1,000 unrelated pairs, as rare as an unrelated item holding every content word of the query."""


def match_score(lexical: float, cosine: float | None) -> float:
    """An item's match score (0-1) for a query: what decides recall (``recall_min_score``) and promotion.

    Word coverage is the score without an embedder. With one, the cosine is
    first put on the same scale (:data:`COSINE_FLOOR` -> 0, :data:`COSINE_CEILING`
    -> 1, linear between) and the two are joined as independent evidence,
    ``1 - (1 - lexical) * (1 - semantic)``: vectors only add evidence, so an
    item that covers every word of the query scores 1 with or without them
    (seed 003's promotion threshold means the same thing in both modes), and
    a close paraphrase can reach it with no word in common. Measured on 600
    LoCoMo questions: 5.1 % of evidence turns and 0.03 % of unrelated turns
    reach 0.85 (word coverage alone: 1.1 % and 0 %; the earlier
    ``0.6 * cosine + 0.4 * coverage``: none of either).
    """
    if cosine is None:
        return lexical
    semantic = min(1.0, max(0.0, (cosine - COSINE_FLOOR) / (COSINE_CEILING - COSINE_FLOOR)))
    return 1.0 - (1.0 - lexical) * (1.0 - semantic)


@dataclass(frozen=True, slots=True)
class _Ranking:
    """The ranked hits of one query, before any side effect."""

    query: str
    ranked: tuple[MemoryItem, ...]
    score: dict[int, float]
    semantic: dict[int, float]
    lexical: dict[int, float]
    hybrid: bool
    embed_ms: float


class RecallOps(TierOps):
    """Search and recall (a part of :class:`stratamem.items.Items`)."""

    def _candidates(
        self,
        query: str,
        terms: list[str],
        qvec: np.ndarray | None,
        want: int,
        eligible: Callable[[MemoryItem], bool],
        session: str | None,
    ) -> list[MemoryItem]:
        """Union of lexical and semantic top lists, widened until ``want`` eligible items or exhaustion."""
        fetch = max(30, want * 5)
        match = fts_query(query) if terms else ""
        view = () if session is None else (session,)
        while True:
            lex = self._db.lexical(self.namespace, match, limit=fetch, view=view) if match else []
            sem = self._index.search(qvec, fetch) if qvec is not None else []
            ids = {i for i, _ in lex} | {i for i, _ in sem}
            found = [it for it in self._db.get(self.namespace, ids) if eligible(it)]
            exhausted = len(lex) < fetch and len(sem) < fetch
            if len(found) >= want or exhausted:
                return found
            fetch *= 4

    def _query_vector(self, query: str) -> tuple[np.ndarray | None, float]:
        """The query's vector (None without an embedder) and the time it took, in ms."""
        if self.embedder is None:
            return None, 0.0
        started = time.perf_counter()
        qvec = self._embed([query])[0]
        return qvec, (time.perf_counter() - started) * 1000

    def _rank(
        self,
        query: str,
        limit: int,
        qvec: np.ndarray | None,
        embed_ms: float,
        types: Sequence[str] | None,
        include_superseded: bool,
        when: datetime | None,
        session: str | None,
    ) -> _Ranking:
        """Rank eligible items for ``query`` (arguments already checked); reads only."""
        kinds = None if types is None else set(types)
        terms = content_terms(query)

        def eligible(it: MemoryItem) -> bool:
            if it.tier == "hot" or it.review in DEAD_REVIEWS or not visible_in(it, session):
                return False
            if it.superseded_by is not None and not include_superseded:
                return False
            if kinds is not None and it.type not in kinds:
                return False
            if when is not None and ((it.valid_from and it.valid_from > when) or (it.valid_to and it.valid_to <= when)):
                return False
            return True

        found = self._candidates(query, terms, qvec, limit, eligible, session)
        sem = dict(self._index.scores_for([i.id for i in found], qvec)) if qvec is not None else {}
        lex = {i.id: lexical_score(terms, i.content) for i in found}
        score = {i.id: match_score(lex[i.id], sem.get(i.id, 0.0) if qvec is not None else None) for i in found}
        ranked = sorted(
            (i for i in found if score[i.id] >= self.config.recall_min_score), key=lambda i: (-score[i.id], -i.id)
        )[:limit]
        keep = {i.id for i in ranked}
        return _Ranking(
            query,
            tuple(ranked),
            {i: s for i, s in score.items() if i in keep},
            {i: s for i, s in sem.items() if i in keep},
            {i: s for i, s in lex.items() if i in keep},
            qvec is not None,
            embed_ms,
        )

    def _checked(
        self, query: str, limit: int, types: Sequence[str] | None, as_of: datetime | str | None, session: str | None
    ) -> tuple[str, tuple[str, ...] | None, datetime | None]:
        query = check_content(query, "query")
        if session is not None:
            check_name(session, "session")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValidationError(f"limit must be a positive integer, got {limit!r}", path="limit")
        kinds = None if types is None else tuple(check_choice(t, ITEM_TYPES, "types") for t in types)
        when = parse_timestamp(as_of, "as_of") if as_of is not None else None
        return query, kinds, when

    def _prepare(self, query: str) -> tuple[np.ndarray | None, float]:
        """Embed the query and bring the vector index up to date (outside any transaction)."""
        qvec, embed_ms = self._query_vector(query)
        if qvec is not None:
            self._refresh_index()
        return qvec, embed_ms

    def search(
        self,
        query: str,
        limit: int = 3,
        *,
        types: Sequence[str] | None = None,
        include_superseded: bool = False,
        as_of: datetime | str | None = None,
        session: str | None = None,
        vector_text: str | None = None,
    ) -> RecallResult:
        """Rank warm and cold items for ``query`` exactly as :meth:`recall` does, and change nothing.

        No access is recorded, nothing is promoted, no metric is written, so it
        works on a store that refuses writes; use it to look, and
        :meth:`recall` when the agent actually uses what it found.

        Args:
            query: What to look for.
            limit: Most items to return.
            types: Only these item types.
            include_superseded: Also return superseded (not rejected) items.
            as_of: Only items valid at this time.
            session: The reading session: namespace-wide items plus its own; without
                one, namespace-wide items only.
            vector_text: What to embed for the semantic half, when it is not ``query``
                (a context passes the question without the speaker names it mentions,
                which turn recall has embedded already: one model call per question).

        Returns:
            Items best first (as stored) with their scores; ``promoted``,
            ``refused`` and ``spilled`` are always empty.

        Raises:
            ValidationError: Empty query, bad limit or type.
            ModelError: The embedder failed on the query.
        """
        started = time.perf_counter()
        query, kinds, when = self._checked(query, limit, types, as_of, session)
        qvec, embed_ms = self._prepare(vector_text if vector_text and vector_text.strip() else query)
        r = self._rank(query, limit, qvec, embed_ms, kinds, include_superseded, when, session)
        return self._result(r, r.ranked, (), (), (), (time.perf_counter() - started) * 1000)

    def recall(
        self,
        query: str,
        limit: int = 3,
        *,
        auto_promote: bool | None = None,
        types: Sequence[str] | None = None,
        include_superseded: bool = False,
        as_of: datetime | str | None = None,
        session: str | None = None,
    ) -> RecallResult:
        """Find the warm and cold items that match ``query``; track access; promote by the rules.

        Args:
            query: What to look for.
            limit: Most items to return.
            auto_promote: Override ``config.auto_promote`` for this call.
            types: Only these item types.
            include_superseded: Also return superseded (not rejected) items.
            as_of: Only items valid at this time.
            session: The reading session: namespace-wide items plus its own; without
                one, namespace-wide items only.

        Returns:
            Items best first (their state after the recall), scores, promotions and refusals.

        Raises:
            ValidationError: Empty query, bad limit or type.
            ModelError: The embedder failed on the query.
        """
        started = time.perf_counter()
        query, kinds, when = self._checked(query, limit, types, as_of, session)
        promote = self.config.auto_promote if auto_promote is None else auto_promote
        qvec, embed_ms = self._prepare(query)
        promoted: list[int] = []
        refused: list[Refusal] = []
        spilled: list[int] = []
        with self._db.transaction():
            r = self._rank(query, limit, qvec, embed_ms, kinds, include_superseded, when, session)
            now = self._now()
            self._db.record_access(
                self.namespace, {i.id: (i.relevance + r.score[i.id]) / 2 for i in r.ranked}, format_timestamp(now)
            )
            if promote:
                for it in r.ranked:
                    if (
                        r.score[it.id] >= self.config.promote_threshold
                        or it.access_count + 1 > self.config.warm_access_threshold
                    ):
                        reason, out = self._try_promote(self.get(it.id), now, set(promoted))
                        if reason is None:
                            promoted.append(it.id)
                            spilled.extend(out)
                        else:
                            refused.append(Refusal(it.id, reason))
            latency = (time.perf_counter() - started) * 1000
            self._db.add_metrics(
                self.namespace,
                {
                    "recalls": 1,
                    "recall_hits": 1 if r.ranked else 0,
                    "promotions": len(promoted),
                    "promotions_refused": len(refused),
                    **latency_deltas(latency),
                },
            )
        after = {i.id: i for i in self._db.get(self.namespace, [i.id for i in r.ranked])}
        if spilled:
            self._emit("items.spilled", ids=spilled, automatic=True, reason="promotion")
        if promoted:
            self._emit("items.promoted", ids=promoted, explicit=False)
        self._emit(
            "items.recalled",
            hits=len(r.ranked),
            promoted=len(promoted),
            refused=len(refused),
            latency_ms=round(latency, 3),
        )
        return self._result(r, tuple(after[i.id] for i in r.ranked), promoted, refused, spilled, latency)

    @staticmethod
    def _result(
        r: _Ranking,
        items: Sequence[MemoryItem],
        promoted: Sequence[int],
        refused: Sequence[Refusal],
        spilled: Sequence[int],
        latency: float,
    ) -> RecallResult:
        return RecallResult(
            query=r.query,
            items=tuple(items),
            scores=dict(r.score),
            semantic=dict(r.semantic),
            lexical=dict(r.lexical),
            promoted=tuple(promoted),
            refused=tuple(refused),
            spilled=tuple(spilled),
            mode="hybrid" if r.hybrid else "lexical",
            latency_ms=latency,
            embed_ms=r.embed_ms,
        )

    def embed_missing(self, batch_size: int = 64) -> int:
        """Embed items stored without a vector (e.g. after an embedder failure); returns how many.

        The vector index of every ``Items`` on the store (any process) picks the
        new vectors up from the store's vector log on its next search.

        Raises:
            ConfigError: No embedder is configured.
            ModelError: The embedder failed (items embedded so far are kept).
        """
        if self.embedder is None:
            raise ConfigError("no embedder configured")
        todo = [i for i in self._db.select(self.namespace) if not i.embedded]
        name = embedder_name(self.embedder)
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            mat = self._embed([i.content for i in chunk])
            with self._db.transaction():
                for item, row in zip(chunk, mat, strict=True):
                    self._db.update(self.namespace, [item.id], embedding=row.tobytes(), embedding_model=name)
        return len(todo)
