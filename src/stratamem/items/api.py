"""Memory items and their tiers: add, spill, recall, promote, supersede, review, status.

The hot/cold memory API of seed 003, for one namespace. Hot items are what an
agent keeps in its prompt, within ``hot_token_limit`` tokens (exact counts);
warm and cold items wait to be recalled. :class:`Items` is assembled from one
module per concept: shared state in :mod:`stratamem.items.core`, spill and
promotion in :mod:`stratamem.items.tiers`, search and recall in
:mod:`stratamem.items.recall`, supersession, review and prune in
:mod:`stratamem.items.review`; adding items and status are here. Records are in
:mod:`stratamem.records.items`, the search signals in :mod:`stratamem.items.search`,
counters in :mod:`stratamem.items.metrics`, SQL in :mod:`stratamem.store.sqlite.items`.

The rules:

* **add** puts an item in hot; when that would pass the hot limit, it first
  spills (``auto_spill``) at least ``spill_count`` items, more if needed to fit.
* **spill** moves hot items out, lowest relevance then oldest first; an item
  accessed more than ``warm_access_threshold`` times goes warm, others cold.
* **recall** searches warm and cold (lexical always, semantic when an embedder
  is configured), scores each hit 0–1, and for every returned item adds one
  access and sets ``relevance = (relevance + score) / 2``. **search** ranks
  the same way and writes nothing (for context assembly, read-only stores).
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
  the same ``key``); the older stay, marked, leave hot (before the newer one
  makes room there) and are out of recall by default — for good, even once the
  newer item is pruned.
* **ids** are never reused (not even after a prune), so an id names one item forever.
* **session scope**: an item is namespace-wide (``scope="namespace"``, the
  default) or belongs to its session (``scope="session"``). A read made in a
  session (``session=``) sees namespace-wide items plus that session's own; a
  read without one sees namespace-wide items only. That holds for what reaches
  an agent (``hot``, ``search``, ``recall``, the context); the inventory reads
  (``get``, ``list``, ``status``) see every item unless given a session. The
  hot tier's token limit is one budget for the namespace.
* **promotion spills the minimum**: making room for a promoted item spills the
  shortest run of hot items, in spill order, that frees enough tokens (an
  ``add`` spills at least ``spill_count``, seed 003's batch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import ValidationError
from ..records import check_name, format_timestamp, parse_timestamp
from ..records.items import (
    ITEM_TYPES,
    TIERS,
    ItemMetrics,
    ItemStatus,
    MemoryItem,
    TierStatus,
    check_choice,
    check_content,
    check_item_id,
    check_metadata,
    check_scope,
)
from ..store.new_rows import NewItem
from .extraction import ExtractOps
from .recall import RecallOps

__all__ = ["Items"]


class Items(RecallOps, ExtractOps):
    """The memory items of one namespace.

    Thread-safe: one instance may serve several threads (the MCP server's
    worker threads); see :mod:`stratamem.items.core`.

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

    # --- add (extraction: items/extraction.py) ------------------------------------------

    def add(
        self,
        content: str,
        type: str = "fact",
        *,
        session: str | None = None,
        key: str | None = None,
        supersedes: Sequence[int] = (),
        metadata: Mapping[str, Any] | None = None,
        valid_from: datetime | str | None = None,
        tier: str = "hot",
        scope: str = "namespace",
    ) -> MemoryItem:
        """Add an item (to hot by default), spilling first if it would not fit.

        Args:
            content: The knowledge, as text.
            type: One of ``fact``, ``decision``, ``entity``, ``preference``, ``event``, ``context``, ``message``.
            session: Session the item was added in (the one it belongs to with ``scope="session"``).
            key: Subject key; live items with the same key and the same scope (and, for
                session-scoped items, the same session) are superseded by this one.
            supersedes: Ids of older items this one replaces.
            metadata: JSON-serializable metadata.
            valid_from: When the knowledge starts to hold (default: now).
            tier: Where to put it (``hot``, ``warm`` or ``cold``).
            scope: ``namespace`` (every session sees it) or ``session`` (only reads in
                ``session`` see it; needs ``session``).

        Returns:
            The stored item.

        Raises:
            ValidationError: Empty or invalid content, unknown type/tier/scope, bad key,
                ``scope="session"`` without a session.
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
        scope = check_scope(scope, session)
        if key is not None and (not isinstance(key, str) or not key.strip() or len(key) > 200):
            raise ValidationError("key must be a non-empty string of at most 200 characters", path="key")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ValidationError("metadata must be a mapping", path="metadata")
        older = [check_item_id(i) for i in supersedes]
        tokens = self.tokenizer.count(text)
        now = self._now()
        start = parse_timestamp(valid_from, "valid_from") if valid_from is not None else now
        ((vector, model),) = self._embed_for_storage([text])
        new = NewItem(
            content=text,
            type=kind,
            tier=tier,
            tokens=tokens,
            relevance=1.0,
            source="api",
            created_at=format_timestamp(now),
            session=session,
            key=key,
            valid_from=format_timestamp(start),
            metadata=check_metadata(metadata),
            embedding=vector,
            embedding_model=model,
            scope=scope,
        )
        with self._db.transaction():
            targets = self._supersession_targets(older, key, scope, session)
            # Replaced items leave hot first, so their room counts before anything else is spilled.
            self._demote_replaced(targets)
            spill = self._make_room(tokens) if tier == "hot" else None
            item_id = self._db.insert(self.namespace, new)
            replaced = self._mark_superseded(item_id, targets, start)
        if spill and spill.spilled:
            self._emit_spill(spill, automatic=True)
        self._emit("items.added", id=item_id, tier=tier, tokens=tokens, superseded=list(replaced))
        return self.get(item_id)

    # --- status and metrics -----------------------------------------------------------

    def metrics(self) -> ItemMetrics:
        """Counters and rates of this namespace (persisted; shared by every process)."""
        hot_tokens = self._db.tier_totals(self.namespace).get("hot", (0, 0))[1]
        return ItemMetrics.from_values(
            self.namespace, self._db.metrics(self.namespace), hot_tokens, self.config.hot_token_limit
        )

    def status(self, session: str | None = None) -> ItemStatus:
        """Per-tier items and tokens, hot utilization, flags, the review queue, suggestions and metrics.

        Args:
            session: Count only the items a read in this session sees (namespace-wide
                ones and its own); default every item. Flags, suggestions and metrics
                are the namespace's either way (the tiers are one budget).

        Raises:
            ValidationError: Invalid session name.
        """
        view = None if session is None else (check_name(session, "session"),)
        totals = self._db.tier_totals(self.namespace, view)

        def tier(name: str) -> TierStatus:
            n, t = totals.get(name, (0, 0))
            return TierStatus(n, t)

        return ItemStatus(
            self.namespace,
            tier("hot"),
            tier("warm"),
            tier("cold"),
            self.config.hot_token_limit,
            self._db.flag_counts(self.namespace),
            tuple(self._suggestions()),
            self.metrics(),
            self.embedder is not None,
            self.config.max_pending_review,
        )
