"""Memory items and their tiers: add, spill, recall, promote, supersede, review, status.

The hot/cold memory API of seed 003, for one namespace. Hot items are what an
agent keeps in its prompt, within ``hot_token_limit`` tokens (exact counts);
warm and cold items wait to be recalled. Records are in
:mod:`stratamem.item_records`, search in :mod:`stratamem.item_search`,
counters in :mod:`stratamem.metrics`, SQL in :mod:`stratamem.store.sqlite_items`.

The rules:

* **add** puts an item in hot; when that would pass the hot limit, it first
  spills (``auto_spill``) at least ``spill_count`` items, more if needed to fit.
* **spill** moves hot items out, lowest relevance then oldest first; an item
  accessed more than ``warm_access_threshold`` times goes warm, others cold.
* **recall** searches warm and cold (lexical always, semantic when an embedder
  is configured), scores each hit 0–1, and for every returned item adds one
  access and sets ``relevance = (relevance + score) / 2``.
* **promotion** on recall (seed 003 promoted on one similarity score, which
  thrashes; here): an item is a candidate when its score reaches
  ``promote_threshold`` or it has been accessed more than
  ``warm_access_threshold`` times. Room is made only by spilling hot items that
  were not themselves promoted within ``promote_cooldown_s`` (hysteresis: a
  promoted item holds its place for the cooldown); if that is not enough, the
  promotion is refused (``hot_full``). So within one cooldown each hot slot
  changes hands at most once, however the recalls alternate: two items
  competing for one slot swap at most once per cooldown.
* **supersession**: a newer item replaces older ones (named, or live items with
  the same ``key``); the older stay, marked, leave hot and are out of recall by default.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from .config import ItemsConfig
from .errors import BudgetError, ConfigError, ModelError, NotFoundError, ValidationError
from .events import Event, EventBus
from .item_records import (
    ITEM_TYPES,
    check_choice,
    check_content,
    check_item_id,
    check_metadata,
    TIERS,
    ItemStatus,
    MemoryItem,
    RecallResult,
    Refusal,
    SpillResult,
    Suggestion,
    TierStatus,
)
from .item_search import Embedder, VectorIndex, content_terms, embed_texts, fts_query, lexical_score
from .item_status import suggest
from .metrics import ItemMetrics, latency_deltas
from .records import check_name, format_timestamp, parse_timestamp
from .tokens import Tokenizer

__all__ = ["Items", "MemoryItem", "RecallResult", "SpillResult", "ItemStatus"]

log = logging.getLogger("stratamem.items")

# Weight of the semantic signal in a hybrid score; lexical coverage takes the rest.
# Cosine carries paraphrase, word coverage carries exact names and numbers.
_SEMANTIC_WEIGHT = 0.6


class Items:
    """The memory items of one namespace.

    Args:
        store: A store with an ``items`` feature store (SQLite has one).
        namespace: Whose items.
        config: Tier limits and thresholds (default: seed 003's).
        tokenizer: Exact token counter (the store's tokenizer).
        embedder: Anything with ``embed_batch(texts)`` returning unit vectors; without
            one, recall is lexical and says so (``mode == "lexical"``).
        events: Bus for ``items.*`` events (ids and counts only).
        clock: Returns "now" as an aware datetime (tests pass a fake clock).

    Raises:
        ConfigError: The store keeps no memory items.
        ValidationError: Invalid namespace name.
    """

    def __init__(self, store: Any, namespace: str, *, tokenizer: Tokenizer, config: ItemsConfig | None = None,
                 embedder: Embedder | None = None, events: EventBus | None = None,
                 clock: Callable[[], datetime] | None = None) -> None:
        if not hasattr(store, "items"):
            raise ConfigError(f"the {getattr(store, 'backend', '?')} store does not keep memory items")
        self._db = store.items
        self._store = store
        self.namespace = check_name(namespace, "namespace")
        self.config = config or ItemsConfig()
        self.tokenizer = tokenizer
        self.embedder = embedder
        self.events = events or EventBus()
        self._clock = clock or (lambda: datetime.now(timezone.utc))
        self._index = VectorIndex()

    # --- helpers ----------------------------------------------------------------------

    def _now(self) -> datetime:
        return self._clock()

    def _emit(self, kind: str, **data: Any) -> None:
        self.events.emit(Event(kind, data, namespace=self.namespace))

    def _hot(self) -> list[MemoryItem]:
        return self._db.select(self.namespace, tiers=("hot",), order="spill")

    def _embed_one(self, text: str) -> tuple[bytes | None, str | None]:
        if self.embedder is None:
            return None, None
        vec = embed_texts(self.embedder, [text])[0]
        return vec.astype(np.float32).tobytes(), _embedder_name(self.embedder)

    def get(self, item_id: int) -> MemoryItem:
        """One item of this namespace.

        Raises:
            NotFoundError: No such item here (items of other namespaces are not visible).
        """
        found = self._db.get(self.namespace, [check_item_id(item_id)])
        if not found:
            raise NotFoundError(f"no memory item {item_id} in namespace {self.namespace!r}")
        return found[0]

    def list(self, tier: str | None = None, *, include_dead: bool = True) -> list[MemoryItem]:
        """Items of this namespace by id, optionally one tier; ``include_dead=False`` drops superseded/rejected.

        Raises:
            ValidationError: Unknown tier.
        """
        tiers = None if tier is None else (check_choice(tier, TIERS, "tier"),)
        return self._db.select(self.namespace, tiers=tiers, live_only=not include_dead)

    def hot(self) -> list[MemoryItem]:
        """The hot items (what belongs in the prompt), newest first."""
        return sorted(self._hot(), key=lambda i: (i.created_at, i.id), reverse=True)

    # --- add / extract ----------------------------------------------------------------

    def add(self, content: str, type: str = "fact", *, session: str | None = None, key: str | None = None,
            supersedes: Sequence[int] = (), metadata: Mapping[str, Any] | None = None,
            valid_from: datetime | str | None = None, tier: str = "hot") -> MemoryItem:
        """Add an item (to hot by default), spilling first if it would not fit.

        Args:
            content: The knowledge, as text.
            type: One of ``fact``, ``decision``, ``entity``, ``preference``, ``context``.
            session: Session label to record.
            key: Subject key; live items with the same key are superseded by this one.
            supersedes: Ids of older items this one replaces.
            metadata: JSON-serializable metadata.
            valid_from: When the knowledge starts to hold (default: now).
            tier: Where to put it (``hot``, ``warm`` or ``cold``).

        Returns:
            The stored item.

        Raises:
            ValidationError: Empty or invalid content, unknown type/tier, bad key.
            BudgetError: The item is larger than the hot limit, or hot is full and
                ``auto_spill`` is off. Nothing is stored.
            NotFoundError: A ``supersedes`` id is not an item of this namespace.
            BackendError: The store failed; nothing is stored.
        """
        text = check_content(content)
        kind = check_choice(type, ITEM_TYPES, "type")
        tier = check_choice(tier, TIERS, "tier")
        if session is not None:
            check_name(session, "session")
        if key is not None and (not isinstance(key, str) or not key.strip() or len(key) > 200):
            raise ValidationError("key must be a non-empty string of at most 200 characters", path="key")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ValidationError("metadata must be a mapping", path="metadata")
        older = [check_item_id(i) for i in supersedes]
        tokens = self.tokenizer.count(text)
        now = self._now()
        start = parse_timestamp(valid_from, "valid_from") if valid_from is not None else now
        vector, model = self._embed_safely(text)
        from .store.sqlite_items import NewItem

        new = NewItem(content=text, type=kind, tier=tier, tokens=tokens, relevance=1.0, source="api",
                      created_at=format_timestamp(now), session=session, key=key, valid_from=format_timestamp(start),
                      metadata=check_metadata(metadata), embedding=vector, embedding_model=model)
        with self._db.transaction():
            spill = self._make_room(tokens) if tier == "hot" else None
            item_id = self._db.insert(self.namespace, new)
            replaced = self._supersede(item_id, older, key, start)
        if spill and spill.spilled:
            self._emit_spill(spill, automatic=True)
        self._emit("items.added", id=item_id, tier=tier, tokens=tokens, superseded=list(replaced))
        return self.get(item_id)

    def _embed_safely(self, text: str) -> tuple[bytes | None, str | None]:
        """Embed for storage; a failing embedder must not lose the item, so store it unembedded and say so."""
        try:
            return self._embed_one(text)
        except ModelError as exc:
            log.warning("item embedding failed (%s); stored without a vector, see status flags.unembedded",
                        type(exc.__cause__ or exc).__name__)
            self._emit("items.embed_failed", error=str(exc)[:200])
            return None, None

    def extract_from(self, facts: Sequence[str], provenance: Sequence[int], *, type: str = "fact",
                     session: str | None = None, tier: str = "cold") -> list[MemoryItem]:
        """Store facts extracted from a segment as auto-extracted items awaiting review.

        All facts share ``type`` and ``provenance``; :meth:`extract_facts` takes
        them one by one. Duplicates are skipped as :meth:`extract_facts` says.

        Args:
            facts: The key facts (one item each).
            provenance: Ids of the turns they were extracted from (must be turns of
                this namespace).
            type: Item type for all of them.
            session: Session label.
            tier: Where they go (default cold: extraction must not crowd the hot tier).

        Returns:
            The new items (``source == "extracted"``, ``review == "pending"``).

        Raises:
            ValidationError: Bad fact text, type or tier; no provenance.
            NotFoundError: A provenance id is not a turn of this namespace.
            BudgetError: ``tier="hot"`` and the facts do not fit.
        """
        if not provenance:
            raise ValidationError("extracted items need the turn ids they come from", path="provenance")
        return self.extract_facts([(f, type, provenance) for f in facts], session=session, tier=tier)

    def extract_facts(self, facts: Sequence[tuple[str, str, Sequence[int]]], *, session: str | None = None,
                      tier: str = "cold") -> list[MemoryItem]:
        """Store ``(text, type, provenance)`` facts as auto-extracted items awaiting review.

        A fact whose text (ignoring case, spacing and a final period) is already
        an item of the namespace — live, superseded or rejected — is skipped:
        re-extracting a segment adds nothing twice, and a fact the user rejected
        or that was superseded does not come back. All facts are embedded in one
        batch and stored in one transaction.

        Args:
            facts: Each fact's text, item type and the ids of the turns it was
                extracted from (at least one; turns of this namespace).
            session: Session label.
            tier: Where they go (default cold: extraction must not crowd the hot tier).

        Returns:
            The new items (``source == "extracted"``, ``review == "pending"``).

        Raises:
            ValidationError: Bad fact text, type or tier; a fact without provenance.
            NotFoundError: A provenance id is not a turn of this namespace.
            BudgetError: ``tier="hot"`` and the facts do not fit.
        """
        tier = check_choice(tier, TIERS, "tier")
        checked: list[tuple[str, str, tuple[int, ...]]] = []
        for text, kind, provenance in facts:
            turn_ids = tuple(sorted({check_item_id(t) for t in provenance}))
            if not turn_ids:
                raise ValidationError("extracted items need the turn ids they come from", path="provenance")
            checked.append((check_content(text), check_choice(kind, ITEM_TYPES, "type"), turn_ids))
        all_ids = sorted({t for _, _, ids in checked for t in ids})
        known = {t.id for t in self._store.turns(self.namespace, ids=all_ids)} if all_ids else set()
        missing = [t for t in all_ids if t not in known]
        if missing:
            raise NotFoundError(f"turns {missing[:5]} are not in namespace {self.namespace!r}")
        unique: dict[str, tuple[str, str, tuple[int, ...]]] = {}
        for fact in checked:
            unique.setdefault(_fact_key(fact[0]), fact)
        new = [f for f in unique.values() if not self._has_fact(f[0])]
        vectors: list[tuple[bytes | None, str | None]] = [(None, None)] * len(new)
        if self.embedder is not None and new:
            try:
                mat = embed_texts(self.embedder, [f[0] for f in new])
                name = _embedder_name(self.embedder)
                vectors = [(row.tobytes(), name) for row in mat]
            except ModelError as exc:
                log.warning("embedding %d extracted items failed; stored without vectors", len(new))
                self._emit("items.embed_failed", error=str(exc)[:200], count=len(new))
        from .store.sqlite_items import NewItem

        now = format_timestamp(self._now())
        ids: list[int] = []
        with self._db.transaction():
            for (text, kind, turn_ids), (vec, model) in zip(new, vectors, strict=True):
                tokens = self.tokenizer.count(text)
                if tier == "hot":
                    self._make_room(tokens)
                ids.append(self._db.insert(self.namespace, NewItem(
                    content=text, type=kind, tier=tier, tokens=tokens, relevance=1.0, source="extracted",
                    created_at=now, session=session, provenance=turn_ids, review="pending",
                    valid_from=now, embedding=vec, embedding_model=model)))
        self._emit("items.extracted", ids=ids, turns=len(all_ids))
        return self._db.get(self.namespace, ids)

    def _has_fact(self, text: str) -> bool:
        """Whether any item of the namespace (live or not) already says ``text``."""
        terms = content_terms(text)
        if terms:
            # FTS5 narrows to items holding every content word; the exact comparison decides.
            hits = self._db.lexical(self.namespace, " AND ".join(f'"{t}"' for t in terms), limit=200)
            candidates = self._db.get(self.namespace, [i for i, _ in hits])
        else:
            candidates = self._db.select(self.namespace)
        key = _fact_key(text)
        return any(_fact_key(c.content) == key for c in candidates)

    # --- spill / promote --------------------------------------------------------------

    def _spill_rows(self, items: Sequence[MemoryItem], now: datetime) -> SpillResult:
        warm = [i.id for i in items if i.access_count > self.config.warm_access_threshold]
        cold = [i.id for i in items if i.access_count <= self.config.warm_access_threshold]
        ts = format_timestamp(now)
        self._db.update(self.namespace, warm, tier="warm", demoted_at=ts)
        self._db.update(self.namespace, cold, tier="cold", demoted_at=ts)
        self._db.add_metrics(self.namespace, {"spills": 1, "spilled_items": len(items)})
        return SpillResult(tuple(i.id for i in items), tuple(warm), tuple(cold), sum(i.tokens for i in items))

    def _make_room(self, tokens: int) -> SpillResult | None:
        """Inside a transaction: spill so ``tokens`` more fit in hot, or raise BudgetError."""
        limit = self.config.hot_token_limit
        if tokens > limit:
            raise BudgetError(f"item has {tokens} tokens, more than the hot limit of {limit}")
        hot = self._hot()
        need = sum(i.tokens for i in hot) + tokens - limit
        if need <= 0:
            return None
        if not self.config.auto_spill:
            raise BudgetError(f"hot memory is full ({limit} tokens) and auto_spill is off: spill first")
        chosen: list[MemoryItem] = []
        freed = 0
        for item in hot:
            if freed >= need and len(chosen) >= self.config.spill_count:
                break
            chosen.append(item)
            freed += item.tokens
        return self._spill_rows(chosen, self._now())

    def _emit_spill(self, result: SpillResult, *, automatic: bool) -> None:
        self._emit("items.spilled", ids=list(result.spilled), to_warm=len(result.to_warm),
                   to_cold=len(result.to_cold), tokens=result.tokens, automatic=automatic)

    def spill(self, count: int | None = None, *, ids: Sequence[int] | None = None) -> SpillResult:
        """Move hot items to warm or cold: the given ``ids``, or ``count`` chosen by spill order.

        Args:
            count: How many to spill (default ``spill_count``); ignored when ``ids`` is given.
            ids: Specific hot items to spill.

        Raises:
            ValidationError: ``count`` is not a positive integer, or an id is not hot.
            NotFoundError: An id is not an item of this namespace.
        """
        with self._db.transaction():
            if ids is not None:
                chosen = [self.get(i) for i in ids]
                not_hot = [i.id for i in chosen if i.tier != "hot"]
                if not_hot:
                    raise ValidationError(f"items {not_hot} are not hot", path="ids")
            else:
                n = self.config.spill_count if count is None else count
                if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                    raise ValidationError(f"count must be a positive integer, got {count!r}", path="count")
                chosen = self._hot()[:n]
            result = self._spill_rows(chosen, self._now()) if chosen else SpillResult((), (), (), 0)
        if result.spilled:
            self._emit_spill(result, automatic=False)
        return result

    def promote(self, item_id: int) -> MemoryItem:
        """Move an item to hot on request, spilling others (lowest relevance first) to make room.

        An explicit promotion ignores the cooldown (the caller asked for it) but
        never exceeds the hot limit.

        Raises:
            NotFoundError: No such item here.
            ValidationError: The item is superseded or rejected.
            BudgetError: The item is larger than the hot limit.
        """
        with self._db.transaction():
            item = self.get(item_id)
            if not item.live:
                raise ValidationError(f"item {item.id} is superseded or rejected; it cannot be hot")
            if item.tier == "hot":
                return item
            spill = self._make_room(item.tokens)
            self._db.update(self.namespace, [item.id], tier="hot", relevance=1.0,
                            promoted_at=format_timestamp(self._now()))
            self._db.add_metrics(self.namespace, {"promotions": 1})
        if spill and spill.spilled:
            self._emit_spill(spill, automatic=True)
        self._emit("items.promoted", ids=[item.id], explicit=True)
        return self.get(item.id)

    def _try_promote(self, item: MemoryItem, now: datetime, protected: set[int]) -> tuple[str | None, list[int]]:
        """Recall-driven promotion under the anti-thrash rules; returns (refusal reason, spilled ids)."""
        cfg = self.config
        cooldown = timedelta(seconds=cfg.promote_cooldown_s)
        if item.tokens > cfg.hot_token_limit:
            return "too_large", []
        hot = self._hot()
        need = sum(i.tokens for i in hot) + item.tokens - cfg.hot_token_limit
        evict: list[MemoryItem] = []
        for h in hot:
            if need <= 0:
                break
            recently = h.promoted_at is not None and now - h.promoted_at < cooldown
            if recently or h.id in protected:
                continue
            evict.append(h)
            need -= h.tokens
        if need > 0:
            return "hot_full", []
        if evict:
            self._spill_rows(evict, now)
        self._db.update(self.namespace, [item.id], tier="hot", relevance=1.0, promoted_at=format_timestamp(now))
        return None, [e.id for e in evict]

    # --- recall -----------------------------------------------------------------------

    def _refresh_index(self) -> None:
        self._index.extend(self._db.vectors_after(self.namespace, self._index.last_id))

    def _candidates(self, query: str, terms: list[str], qvec: np.ndarray | None, want: int,
                    eligible: Callable[[MemoryItem], bool]) -> list[MemoryItem]:
        """Union of lexical and semantic top lists, widened until ``want`` eligible items or exhaustion."""
        fetch = max(30, want * 5)
        match = fts_query(query) if terms else ""
        while True:
            lex = self._db.lexical(self.namespace, match, limit=fetch) if match else []
            sem = self._index.search(qvec, fetch) if qvec is not None else []
            ids = {i for i, _ in lex} | {i for i, _ in sem}
            found = [it for it in self._db.get(self.namespace, ids) if eligible(it)]
            exhausted = len(lex) < fetch and len(sem) < fetch
            if len(found) >= want or exhausted:
                return found
            fetch *= 4

    def recall(self, query: str, limit: int = 3, *, auto_promote: bool | None = None,
               types: Sequence[str] | None = None, include_superseded: bool = False,
               as_of: datetime | str | None = None) -> RecallResult:
        """Find the warm and cold items that match ``query``; track access; promote by the rules above.

        Args:
            query: What to look for.
            limit: Most items to return.
            auto_promote: Override ``config.auto_promote`` for this call.
            types: Only these item types.
            include_superseded: Also return superseded (not rejected) items.
            as_of: Only items valid at this time.

        Returns:
            Items best first (their state after the recall), scores, promotions and refusals.

        Raises:
            ValidationError: Empty query, bad limit or type.
            ModelError: The embedder failed on the query.
        """
        started = time.perf_counter()
        query = check_content(query, "query")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValidationError(f"limit must be a positive integer, got {limit!r}", path="limit")
        kinds = None if types is None else {check_choice(t, ITEM_TYPES, "types") for t in types}
        when = parse_timestamp(as_of, "as_of") if as_of is not None else None
        promote = self.config.auto_promote if auto_promote is None else auto_promote
        terms = content_terms(query)
        embed_started = time.perf_counter()
        qvec = embed_texts(self.embedder, [query])[0] if self.embedder is not None else None
        embed_ms = (time.perf_counter() - embed_started) * 1000 if qvec is not None else 0.0

        def eligible(it: MemoryItem) -> bool:
            if it.tier == "hot" or it.review == "rejected":
                return False
            if it.superseded_by is not None and not include_superseded:
                return False
            if kinds is not None and it.type not in kinds:
                return False
            if when is not None and ((it.valid_from and it.valid_from > when) or (it.valid_to and it.valid_to <= when)):
                return False
            return True

        with self._db.transaction():
            if qvec is not None:
                self._refresh_index()
            found = self._candidates(query, terms, qvec, limit, eligible)
            sem = dict(self._index.scores_for([i.id for i in found], qvec)) if qvec is not None else {}
            lex = {i.id: lexical_score(terms, i.content) for i in found}
            score = {i.id: (_SEMANTIC_WEIGHT * max(sem.get(i.id, 0.0), 0.0) + (1 - _SEMANTIC_WEIGHT) * lex[i.id]
                            if qvec is not None else lex[i.id]) for i in found}
            ranked = sorted((i for i in found if score[i.id] >= self.config.recall_min_score),
                            key=lambda i: (-score[i.id], -i.id))[:limit]
            now = self._now()
            self._db.record_access(self.namespace, {i.id: (i.relevance + score[i.id]) / 2 for i in ranked},
                                   format_timestamp(now))
            promoted: list[int] = []
            refused: list[Refusal] = []
            spilled: list[int] = []
            if promote:
                for it in ranked:
                    if score[it.id] >= self.config.promote_threshold or \
                            it.access_count + 1 > self.config.warm_access_threshold:
                        reason, out = self._try_promote(self.get(it.id), now, set(promoted))
                        if reason is None:
                            promoted.append(it.id)
                            spilled.extend(out)
                        else:
                            refused.append(Refusal(it.id, reason))
            latency = (time.perf_counter() - started) * 1000
            self._db.add_metrics(self.namespace, {"recalls": 1, "recall_hits": 1 if ranked else 0,
                                                  "promotions": len(promoted), "promotions_refused": len(refused),
                                                  **latency_deltas(latency)})
        after = {i.id: i for i in self._db.get(self.namespace, [i.id for i in ranked])}
        if spilled:
            self._emit("items.spilled", ids=spilled, automatic=True, reason="promotion")
        if promoted:
            self._emit("items.promoted", ids=promoted, explicit=False)
        self._emit("items.recalled", hits=len(ranked), promoted=len(promoted), refused=len(refused),
                   latency_ms=round(latency, 3))
        keep = [i.id for i in ranked]
        return RecallResult(
            query=query, items=tuple(after[i] for i in keep), scores={i: score[i] for i in keep},
            semantic={i: sem[i] for i in keep if i in sem}, lexical={i: lex[i] for i in keep},
            promoted=tuple(promoted), refused=tuple(refused), spilled=tuple(spilled),
            mode="hybrid" if qvec is not None else "lexical", latency_ms=latency, embed_ms=embed_ms)

    def embed_missing(self, batch_size: int = 64) -> int:
        """Embed items stored without a vector (e.g. after an embedder failure); returns how many.

        Raises:
            ConfigError: No embedder is configured.
            ModelError: The embedder failed (items embedded so far are kept).
        """
        if self.embedder is None:
            raise ConfigError("no embedder configured")
        todo = [i for i in self._db.select(self.namespace) if not i.embedded]
        name = _embedder_name(self.embedder)
        for start in range(0, len(todo), batch_size):
            chunk = todo[start:start + batch_size]
            mat = embed_texts(self.embedder, [i.content for i in chunk])
            with self._db.transaction():
                for item, row in zip(chunk, mat, strict=True):
                    self._db.update(self.namespace, [item.id], embedding=row.tobytes(), embedding_model=name)
        # Backfilled vectors have ids below the index's high-water mark: reload from scratch.
        self._index = VectorIndex()
        return len(todo)

    # --- supersession and review ------------------------------------------------------

    def _supersede(self, new_id: int, older: Sequence[int], key: str | None, start: datetime) -> list[int]:
        """Inside a transaction: mark ``older`` (and live same-key items) as replaced by ``new_id``."""
        targets = [self.get(i) for i in older]
        if key is not None:
            targets += [i for i in self._db.select(self.namespace, key=key, live_only=True) if i.id != new_id]
        ids = sorted({t.id for t in targets} - {new_id})
        if not ids:
            return []
        ts = format_timestamp(start)
        for t in targets:
            if t.id in ids and t.valid_to is None:
                self._db.update(self.namespace, [t.id], valid_to=ts)
        hot = [t.id for t in targets if t.tier == "hot"]
        self._db.update(self.namespace, ids, superseded_by=new_id)
        # A replaced item must not stay in the prompt beside its replacement.
        self._db.update(self.namespace, hot, tier="cold", demoted_at=format_timestamp(self._now()))
        self._emit("items.superseded", ids=ids, by=new_id)
        return ids

    def supersede(self, old_id: int, new_id: int) -> MemoryItem:
        """Mark ``old_id`` as replaced by ``new_id`` (both of this namespace); returns the old item.

        Raises:
            NotFoundError: Either id is not an item here.
            ValidationError: The ids are equal.
        """
        if check_item_id(old_id) == check_item_id(new_id):
            raise ValidationError("an item cannot supersede itself")
        with self._db.transaction():
            new = self.get(new_id)
            self._supersede(new.id, [old_id], None, new.valid_from or self._now())
        return self.get(old_id)

    def _review(self, item_id: int, state: str) -> MemoryItem:
        with self._db.transaction():
            item = self.get(item_id)
            if item.source != "extracted":
                raise ValidationError(f"item {item.id} was added through the API; only extracted items are reviewed")
            self._db.update(self.namespace, [item.id], review=state)
            if state == "rejected" and item.tier == "hot":
                self._db.update(self.namespace, [item.id], tier="cold", demoted_at=format_timestamp(self._now()))
        self._emit("items.reviewed", id=item.id, review=state)
        return self.get(item.id)

    def confirm(self, item_id: int) -> MemoryItem:
        """Confirm an auto-extracted item.

        Raises:
            NotFoundError: No such item here.
            ValidationError: The item was not auto-extracted.
        """
        return self._review(item_id, "confirmed")

    def reject(self, item_id: int) -> MemoryItem:
        """Reject an auto-extracted item: it is kept, marked, and leaves hot and recall.

        Raises:
            NotFoundError: No such item here.
            ValidationError: The item was not auto-extracted.
        """
        return self._review(item_id, "rejected")

    def prune(self, ids: Sequence[int] | None = None) -> int:
        """Delete cold items: ``ids``, or those the ``prune`` suggestion names; returns how many.

        Raises:
            NotFoundError: An id is not an item here.
            ValidationError: An id is not cold.
        """
        with self._db.transaction():
            if ids is None:
                ids = next((s.item_ids for s in self._suggestions() if s.type == "prune"), ())
            items = [self.get(i) for i in ids]
            not_cold = [i.id for i in items if i.tier != "cold"]
            if not_cold:
                raise ValidationError(f"only cold items are pruned; {not_cold} are not cold", path="ids")
            n = self._db.delete(self.namespace, [i.id for i in items])
        self._emit("items.pruned", count=n)
        return n

    # --- status and metrics -----------------------------------------------------------

    def _suggestions(self) -> list[Suggestion]:
        cold_count = self._db.tier_totals(self.namespace).get("cold", (0, 0))[0]
        return suggest(self.config, self._hot(), self._db.select(self.namespace, tiers=("warm",), live_only=True),
                       cold_count, lambda: self._db.select(self.namespace, tiers=("cold",), order="prune"))

    def metrics(self) -> ItemMetrics:
        """Counters and rates of this namespace (persisted; shared by every process)."""
        hot_tokens = self._db.tier_totals(self.namespace).get("hot", (0, 0))[1]
        return ItemMetrics.from_values(self.namespace, self._db.metrics(self.namespace), hot_tokens,
                                       self.config.hot_token_limit)

    def status(self) -> ItemStatus:
        """Per-tier items and tokens, hot utilization, flags, suggestions and metrics."""
        totals = self._db.tier_totals(self.namespace)

        def tier(name: str) -> TierStatus:
            n, t = totals.get(name, (0, 0))
            return TierStatus(n, t)
        return ItemStatus(self.namespace, tier("hot"), tier("warm"), tier("cold"), self.config.hot_token_limit,
                          self._db.flag_counts(self.namespace), tuple(self._suggestions()), self.metrics(),
                          self.embedder is not None)

    def __repr__(self) -> str:
        return f"Items({self.namespace!r})"


def _fact_key(text: str) -> str:
    """What two extracted facts must share to be the same fact: words, not case, spacing or a final period."""
    return " ".join(text.lower().split()).rstrip(".!")


def _embedder_name(embedder: Embedder) -> str:
    """Label stored beside each vector, so vectors of different models are not compared blindly."""
    return str(getattr(embedder, "name", None) or embedder.__class__.__name__)
