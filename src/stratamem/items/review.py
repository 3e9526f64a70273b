"""The life of a memory item after it is written: supersession, review, prune.

Part of :class:`stratamem.items.Items`.

* **Supersession.** A newer item replaces older ones (named ones, or live
  items with the same ``key``). The older stay, marked ``superseded_by``, with
  ``valid_to`` set to the newer one's ``valid_from``; they leave hot and are out
  of recall by default. They leave hot *before* the newer item makes room
  there, so replacing a hot item never spills an unrelated one.
* **Review.** Auto-extracted items can be confirmed or rejected; a rejected
  item is kept, marked, and leaves hot and recall.
* **Prune** deletes cold items. Supersession is for good: an item superseded
  by a since-pruned item keeps ``superseded_by`` pointing at the pruned id
  (ids are never reused) and stays out of recall, so pruning a newer fact
  never brings the stale one it replaced back to life.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from ..errors import ValidationError
from ..records import format_timestamp
from ..records.items import MemoryItem, Suggestion, check_item_id
from .core import ItemsCore
from .status import suggest

__all__ = ["ReviewOps"]


class ReviewOps(ItemsCore):
    """Supersession, review and prune (a part of :class:`stratamem.items.Items`)."""

    def _supersession_targets(
        self, older: Sequence[int], key: str | None, scope: str = "namespace", session: str | None = None
    ) -> list[MemoryItem]:
        """Inside a transaction: the items a new item replaces (named ones, live same-key ones).

        A key replaces only items of the new item's own scope: a session's item never
        replaces another session's, nor a namespace-wide one (which other sessions see).

        Raises:
            NotFoundError: A named id is not an item here.
        """
        targets = {t.id: t for t in (self.get(i) for i in older)}
        if key is not None:
            targets.update(
                (i.id, i)
                for i in self._db.select(self.namespace, key=key, live_only=True)
                if i.scope == scope and (scope == "namespace" or i.session == session)
            )
        return sorted(targets.values(), key=lambda t: t.id)

    def _demote_replaced(self, targets: Sequence[MemoryItem]) -> None:
        """Inside a transaction: a replaced item must not stay in the prompt beside its replacement."""
        hot = [t.id for t in targets if t.tier == "hot"]
        self._db.update(self.namespace, hot, tier="cold", demoted_at=format_timestamp(self._now()))

    def _mark_superseded(self, new_id: int, targets: Sequence[MemoryItem], start: datetime) -> list[int]:
        """Inside a transaction, after :meth:`_demote_replaced`: mark ``targets`` as replaced by ``new_id``."""
        ids = [t.id for t in targets if t.id != new_id]
        if not ids:
            return []
        open_ended = [t.id for t in targets if t.id != new_id and t.valid_to is None]
        self._db.update(self.namespace, open_ended, valid_to=format_timestamp(start))
        self._db.update(self.namespace, ids, superseded_by=new_id)
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
            targets = self._supersession_targets([old_id], None)
            self._demote_replaced(targets)
            self._mark_superseded(new.id, targets, new.valid_from or self._now())
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

        Items the deleted ones superseded stay superseded (see the module docstring).

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

    def _suggestions(self) -> list[Suggestion]:
        cold_count = self._db.tier_totals(self.namespace).get("cold", (0, 0))[0]
        return suggest(
            self.config,
            self._hot(),
            self._db.select(self.namespace, tiers=("warm",), live_only=True),
            cold_count,
            lambda: self._db.select(self.namespace, tiers=("cold",), order="prune"),
        )
