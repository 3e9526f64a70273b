"""Moving memory items between tiers: spill out of hot, promote into it, without thrashing.

Part of :class:`stratamem.items.Items` (the rules are stated in full in
:mod:`stratamem.items`). Spill order is lowest relevance, then oldest; a
spilled item accessed more than ``warm_access_threshold`` times goes warm,
others cold. An explicit :meth:`TierOps.promote` ignores the promotion
cooldown; a recall-driven promotion (:meth:`TierOps._try_promote`) may only
evict hot items not themselves promoted within ``promote_cooldown_s``. Either
promotion spills only the shortest run of hot items, in spill order, that
frees the tokens it needs; an add spills at least ``spill_count`` (seed 003's
batch), more if needed to fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from ..errors import BudgetError, ValidationError
from ..records import check_name, format_timestamp
from ..records.items import MemoryItem, SpillResult
from .core import ItemsCore

__all__ = ["TierOps"]


class TierOps(ItemsCore):
    """Spill and promotion (a part of :class:`stratamem.items.Items`)."""

    def _spill_rows(self, items: Sequence[MemoryItem], now: datetime) -> SpillResult:
        warm = [i.id for i in items if i.access_count > self.config.warm_access_threshold]
        cold = [i.id for i in items if i.access_count <= self.config.warm_access_threshold]
        ts = format_timestamp(now)
        self._db.update(self.namespace, warm, tier="warm", demoted_at=ts)
        self._db.update(self.namespace, cold, tier="cold", demoted_at=ts)
        self._db.add_metrics(self.namespace, {"spills": 1, "spilled_items": len(items)})
        return SpillResult(tuple(i.id for i in items), tuple(warm), tuple(cold), sum(i.tokens for i in items))

    def _make_room(self, tokens: int, *, batch: bool = True) -> SpillResult | None:
        """Inside a transaction: spill so ``tokens`` more fit in hot, or raise BudgetError.

        The hot items go in spill order until enough tokens are free; with ``batch``
        (an add) at least ``spill_count`` of them go, as seed 003 spills, without it
        (a promotion) no more than are needed.
        """
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
        at_least = self.config.spill_count if batch else 0
        for item in hot:
            if freed >= need and len(chosen) >= at_least:
                break
            chosen.append(item)
            freed += item.tokens
        return self._spill_rows(chosen, self._now())

    def _emit_spill(self, result: SpillResult, *, automatic: bool) -> None:
        self._emit(
            "items.spilled",
            ids=list(result.spilled),
            to_warm=len(result.to_warm),
            to_cold=len(result.to_cold),
            tokens=result.tokens,
            automatic=automatic,
        )

    def spill(
        self, count: int | None = None, *, ids: Sequence[int] | None = None, session: str | None = None
    ) -> SpillResult:
        """Move hot items to warm or cold: the given ``ids``, or ``count`` chosen by spill order.

        Args:
            count: How many to spill (default ``spill_count``); ignored when ``ids`` is given.
            ids: Specific hot items to spill.
            session: Choose the ``count`` items among those a read in this session sees
                (namespace-wide items and its own); default among every hot item.

        Raises:
            ValidationError: ``count`` is not a positive integer, an id is not hot, or
                the session name is invalid.
            NotFoundError: An id is not an item of this namespace.
        """
        view = None if session is None else (check_name(session, "session"),)
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
                chosen = self._db.select(self.namespace, tiers=("hot",), order="spill", limit=n, view=view)
            result = self._spill_rows(chosen, self._now()) if chosen else SpillResult((), (), (), 0)
        if result.spilled:
            self._emit_spill(result, automatic=False)
        return result

    def promote(self, item_id: int) -> MemoryItem:
        """Move an item to hot on request, spilling others (lowest relevance first) to make room.

        An explicit promotion ignores the cooldown (the caller asked for it) but
        never exceeds the hot limit. It spills only as many hot items, in spill
        order, as free the tokens the item needs (not a ``spill_count`` batch).

        Raises:
            NotFoundError: No such item here.
            ValidationError: The item is superseded or rejected.
            BudgetError: The item is larger than the hot limit.
        """
        with self._db.transaction():
            item = self.get(item_id)
            if not item.live:
                raise ValidationError(f"item {item.id} is superseded, rejected or dropped; it cannot be hot")
            if item.tier == "hot":
                return item
            spill = self._make_room(item.tokens, batch=False)
            self._db.update(
                self.namespace, [item.id], tier="hot", relevance=1.0, promoted_at=format_timestamp(self._now())
            )
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
