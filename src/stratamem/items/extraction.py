"""Storing what an extractor found: one item per fact, supersession only when it is one, a bounded review queue.

Part of :class:`stratamem.items.Items`. An extractor
(:mod:`stratamem.items.extract`) proposes :class:`~stratamem.records.candidates.Candidate`
statements; :meth:`ExtractOps.extract` stores them as auto-extracted items
(``source="extracted"``, ``review="pending"``, cold by default):

* **One item per fact.** A candidate whose text is already an item of the
  namespace (:func:`~stratamem.records.items.fact_key`: case, accents, spacing
  and punctuation ignored; live, superseded, rejected or dropped) adds its turns
  to that item's provenance instead of a second item, so re-extraction adds
  nothing and a rejected fact stays rejected. So does a *restatement*: the same
  subject, attribute and value as a live item, or, without an attribute, the
  same content words (Jaccard at least :data:`RESTATEMENT_OVERLAP`) as an item.
  The check runs inside the write transaction under the namespace's item guard,
  and the stores' unique index on ``fact_key`` holds whatever a writer forgets:
  concurrent writers cannot duplicate a fact.
* **Supersession only when it is one.** A candidate that gives its subject's
  attribute a *different* value (``Caroline:residence`` Denver, then Austin)
  supersedes the live items holding the old value (their ``valid_to`` closes);
  the time order is the facts' (``valid_from``: an event's day), not the order
  they were told in. No attribute, no automatic supersession.
* **A bounded review queue.** At most ``items.max_pending_review`` items wait
  for review per namespace; past it, the least salient pending items (oldest
  first among equals) become ``dropped``: kept, out of recall and contexts,
  never extracted again. Their turns stay where recall finds them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from ..errors import NotFoundError, ValidationError
from ..records import format_timestamp
from ..records.candidates import Candidate
from ..records.items import ITEM_TYPES, TIERS, MemoryItem, check_choice, check_content, check_item_id, fact_key
from ..store.new_rows import NewItem
from .review import ReviewOps
from .search import content_terms
from .tiers import TierOps

__all__ = ["RESTATEMENT_OVERLAP", "ExtractOps"]

RESTATEMENT_OVERLAP = 0.8
"""Content-word Jaccard from which a candidate without an attribute restates an item of the same words."""


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


class ExtractOps(ReviewOps, TierOps):
    """Extraction writes (a part of :class:`stratamem.items.Items`)."""

    def extract_from(
        self,
        facts: Sequence[str],
        provenance: Sequence[int],
        *,
        type: str = "fact",
        session: str | None = None,
        tier: str = "cold",
    ) -> list[MemoryItem]:
        """Store facts extracted from a segment as auto-extracted items awaiting review.

        All facts share ``type`` and ``provenance``; :meth:`extract_facts` takes
        them one by one. Duplicates are merged as :meth:`extract` says.

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

    def extract_facts(
        self, facts: Sequence[tuple[str, str, Sequence[int]]], *, session: str | None = None, tier: str = "cold"
    ) -> list[MemoryItem]:
        """Store ``(text, type, provenance)`` facts (already curated: salience 1) as auto-extracted items.

        Args:
            facts: Each fact's text, item type and the ids of the turns it was
                extracted from (at least one; turns of this namespace).
            session: Session label.
            tier: Where they go (default cold: extraction must not crowd the hot tier).

        Returns:
            The new items (a fact the namespace already holds adds its turns to that item instead).

        Raises:
            ValidationError: Bad fact text, type or tier; a fact without provenance.
            NotFoundError: A provenance id is not a turn of this namespace.
            BudgetError: ``tier="hot"`` and the facts do not fit.
        """
        return self.extract(
            [Candidate(text, kind, tuple(provenance)) for text, kind, provenance in facts], session=session, tier=tier
        )

    def extract(
        self, candidates: Sequence[Candidate], *, session: str | None = None, tier: str = "cold"
    ) -> list[MemoryItem]:
        """Store an extractor's candidates: one item per fact, superseding old values, the queue capped.

        All candidates are checked first, the new texts embedded in one batch,
        and everything written in one transaction (the rules are the module's).

        Args:
            candidates: What the extractor found (texts, types, source turns, salience,
                subject / attribute / value, valid time).
            session: Session label of the new items.
            tier: Where new items go (default cold: extraction must not crowd the hot tier).

        Returns:
            The items this call created, by id (restatements merged into existing items
            are not among them; an item the cap dropped at once is, as ``dropped``).

        Raises:
            ValidationError: Bad text, type, salience or tier; a candidate without provenance.
            NotFoundError: A provenance id is not a turn of this namespace.
            BudgetError: ``tier="hot"`` and the items do not fit.
            BackendError: The store failed; nothing is stored.
        """
        tier = check_choice(tier, TIERS, "tier")
        batch = _merge_batch([_checked(c) for c in candidates])
        turn_ids = sorted({t for c in batch for t in c.turn_ids})
        known_turns = {t.id for t in self._store.turns(self.namespace, ids=turn_ids)} if turn_ids else set()
        missing = [t for t in turn_ids if t not in known_turns]
        if missing:
            raise NotFoundError(f"turns {missing[:5]} are not in namespace {self.namespace!r}")
        keys = [fact_key(c.text) for c in batch]
        # Embed only what looks new (the store is asked again, authoritatively, under the guard).
        seen = self._db.by_fact_keys(self.namespace, keys)
        fresh = [(k, c) for k, c in zip(keys, batch, strict=True) if k not in seen]
        vectors = dict(zip((k for k, _ in fresh), self._embed_for_storage([c.text for _, c in fresh]), strict=True))
        now = self._now()

        def write() -> tuple[list[int], list[int], list[int]]:
            created: list[int] = []
            merged: list[int] = []
            with self._db.transaction():
                self._db.lock(self.namespace)
                seen = self._db.by_fact_keys(self.namespace, keys)
                for key, cand in zip(keys, batch, strict=True):
                    same = seen.get(key) or self._restated(cand)
                    if same is None:
                        tokens = self.tokenizer.count(cand.text)
                        if tier == "hot":
                            self._make_room(tokens)
                        item = self._new_item(cand, key, tier, session, now, vectors.get(key, (None, None)))
                        new_id = self._db.insert_fact(self.namespace, item)
                        if new_id is not None:
                            created.append(new_id)
                            self._supersede_old_values(cand, new_id)
                            continue
                        # Only a writer that skipped the guard gets here: the unique index kept the fact single.
                        same = self._db.by_fact_keys(self.namespace, [key])[key]
                    self._merge_into(same, cand)
                    merged.append(same.id)
                return created, merged, self._cap_review_queue()

        # Two writers' transactions can deadlock on PostgreSQL; the one rolled back runs again.
        created, merged, dropped = self._store.retrying(write)
        self._emit("items.extracted", ids=created, merged=merged, turns=len(turn_ids))
        if dropped:
            self._emit("items.dropped", ids=dropped, cap=self.config.max_pending_review)
        return self._db.get(self.namespace, created)

    # --- inside the transaction ------------------------------------------------------------

    def _new_item(
        self,
        cand: Candidate,
        key: str,
        tier: str,
        session: str | None,
        now: datetime,
        vector: tuple[bytes | None, str | None],
    ) -> NewItem:
        stamp = format_timestamp(now)
        meta = {k: v for k, v in (("subject", cand.subject), ("attribute", cand.attribute), ("value", cand.value)) if v}
        return NewItem(
            content=cand.text,
            type=cand.type,
            tier=tier,
            tokens=self.tokenizer.count(cand.text),
            relevance=1.0,
            source="extracted",
            created_at=stamp,
            session=session,
            provenance=cand.turn_ids,
            review="pending",
            key=cand.slot,
            valid_from=format_timestamp(cand.valid_from) if cand.valid_from is not None else stamp,
            metadata=meta or None,
            fact_key=key,
            salience=cand.salience,
            embedding=vector[0],
            embedding_model=vector[1],
        )

    def _restated(self, cand: Candidate) -> MemoryItem | None:
        """An item ``cand`` restates in other words: same subject, attribute and value, or the same content words."""
        if cand.slot is not None:
            for item in self._db.select(self.namespace, key=cand.slot, live_only=True):
                if item.source == "extracted" and _same_value(item.metadata.get("value"), cand.value):
                    return item
            return None
        terms = content_terms(cand.text)
        if not terms:
            return None
        hits = self._db.lexical(self.namespace, " AND ".join(f'"{t}"' for t in terms), limit=50)
        for item in self._db.get(self.namespace, [i for i, _ in hits]):
            # Numbers are values: "door 1 in round 0" and "door 1 in round 1" (or "door 0 in
            # round 1") share most words but are other facts, so a restatement by overlap must
            # carry the same numbers in the same order.
            if (
                item.source == "extracted"
                and _numbers(cand.text) == _numbers(item.content)
                and _jaccard(terms, content_terms(item.content)) >= RESTATEMENT_OVERLAP
            ):
                return item
        return None

    def _merge_into(self, item: MemoryItem, cand: Candidate) -> None:
        """Add ``cand``'s turns to ``item``'s provenance; keep the higher salience."""
        provenance = sorted(set(item.provenance) | set(cand.turn_ids))
        changes: dict[str, object] = {}
        if provenance != sorted(item.provenance):
            changes["provenance"] = provenance
        if item.salience is not None and cand.salience > item.salience:
            changes["salience"] = cand.salience
        if changes:
            self._db.update(self.namespace, [item.id], **changes)

    def _supersede_old_values(self, cand: Candidate, new_id: int) -> None:
        """A new value of a subject's attribute replaces the live items holding another value (time order of facts)."""
        if cand.slot is None:
            return
        others = [
            i
            for i in self._db.select(self.namespace, key=cand.slot, live_only=True)
            if i.id != new_id and i.source == "extracted" and not _same_value(i.metadata.get("value"), cand.value)
        ]
        if not others:
            return
        new = self._db.get(self.namespace, [new_id])[0]
        start = new.valid_from or self._now()
        older = [i for i in others if (i.valid_from or start) <= start]
        later = [i for i in others if (i.valid_from or start) > start]
        if older:
            self._demote_replaced(older)
            self._mark_superseded(new_id, older, start)
        if later:  # told late: the new item states a value that had already changed
            newest = max(later, key=lambda i: (i.valid_from or start, i.id))
            self._mark_superseded(newest.id, [new], newest.valid_from or start)

    def _cap_review_queue(self) -> list[int]:
        """Past ``max_pending_review`` pending items, the least salient (oldest first) become ``dropped``."""
        limit = self.config.max_pending_review
        over = self._db.pending_count(self.namespace) - limit
        if over <= 0:
            return []
        victims = self._db.select(self.namespace, review="pending", order="salience", limit=over)
        ids = [i.id for i in victims]
        self._db.update(self.namespace, ids, review="dropped")
        hot = [i.id for i in victims if i.tier == "hot"]
        self._db.update(self.namespace, hot, tier="cold", demoted_at=format_timestamp(self._now()))
        return ids


def _checked(cand: Candidate) -> Candidate:
    """``cand`` with its fields checked (text, type, turn ids, salience), else ValidationError."""
    if not isinstance(cand, Candidate):
        raise ValidationError(f"expected a Candidate, got {type(cand).__name__}", path="candidates")
    turn_ids = tuple(sorted({check_item_id(t) for t in cand.turn_ids}))
    if not turn_ids:
        raise ValidationError("extracted items need the turn ids they come from", path="provenance")
    salience = cand.salience
    if isinstance(salience, bool) or not isinstance(salience, int | float) or not 0.0 <= salience <= 1.0:
        raise ValidationError(f"salience must be a number from 0 to 1, got {salience!r}", path="salience")
    if cand.valid_from is not None and (not isinstance(cand.valid_from, datetime) or cand.valid_from.tzinfo is None):
        raise ValidationError("valid_from must be an aware datetime", path="valid_from")
    return Candidate(
        check_content(cand.text),
        check_choice(cand.type, ITEM_TYPES, "type"),
        turn_ids,
        float(salience),
        cand.subject,
        cand.attribute,
        cand.value,
        cand.valid_from,
    )


def _merge_batch(batch: Sequence[Candidate]) -> list[Candidate]:
    """One candidate per fact key in a batch (first wins, turns and salience merged), in order."""
    out: dict[str, Candidate] = {}
    for cand in batch:
        key = fact_key(cand.text)
        first = out.get(key)
        if first is None:
            out[key] = cand
            continue
        out[key] = Candidate(
            first.text,
            first.type,
            tuple(sorted(set(first.turn_ids) | set(cand.turn_ids))),
            max(first.salience, cand.salience),
            first.subject,
            first.attribute,
            first.value,
            first.valid_from,
        )
    return list(out.values())


def _same_value(a: object, b: object) -> bool:
    return _value_text(a) == _value_text(b)


def _value_text(value: object) -> str:
    return " ".join(str(value).lower().split()) if value is not None else ""


def _numbers(text: str) -> list[str]:
    return _NUMBER.findall(text)


def _jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    sa, sb = set(a), set(b)
    return len(sa & sb) / len(sa | sb) if sa or sb else 0.0
