"""The state every memory-item operation shares: store, namespace, clock, embedder, vector index.

:class:`ItemsCore` is the base of :class:`stratamem.items.Items`; the
operations live beside it by concept — tiers (spill, promote) in
:mod:`stratamem.items.tiers`, search and recall in :mod:`stratamem.items.recall`,
supersession, review and prune in :mod:`stratamem.items.review`, add and status
in :mod:`stratamem.items`. The SQL is in :mod:`stratamem.store.sqlite.items`
and its PostgreSQL twin.

Threads. The MCP SDK runs tools in worker threads, so one ``Items`` may be
used by several threads at once. Store access is serialized by the store; the
one mutable cache here, the vector index, is refreshed under :attr:`_index_lock`.
That lock is only ever taken *outside* store transactions (a refresh reads
the store, which takes the store's lock), so the two locks are always taken
in the same order and cannot deadlock.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np

from ..config import ItemsConfig
from ..embed import model_name
from ..errors import ConfigError, ModelError, NotFoundError
from ..events import Event, EventBus
from ..records import check_name
from ..records.items import TIERS, MemoryItem, check_choice, check_item_id
from ..tokens import Tokenizer
from .search import Embedder, VectorIndex, embed_texts

__all__ = ["ItemsCore", "embedder_name"]

log = logging.getLogger("stratamem.items")


class ItemsCore:
    """Shared state and reads of :class:`stratamem.items.Items` (see there for the arguments).

    Raises:
        ConfigError: The store keeps no memory items.
        ValidationError: Invalid namespace name.
    """

    def __init__(
        self,
        store: Any,
        namespace: str,
        *,
        tokenizer: Tokenizer,
        config: ItemsConfig | None = None,
        embedder: Embedder | None = None,
        events: EventBus | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if not hasattr(store, "items"):
            raise ConfigError(f"the {getattr(store, 'backend', '?')} store does not keep memory items")
        self._db = store.items
        self._store = store
        self.namespace = check_name(namespace, "namespace")
        self.config = config or ItemsConfig()
        self.tokenizer = tokenizer
        self.embedder = embedder
        self.events = events or EventBus()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._index = VectorIndex()
        self._index_lock = threading.Lock()

    # --- helpers ----------------------------------------------------------------------

    def _now(self) -> datetime:
        return self._clock()

    def _emit(self, kind: str, **data: Any) -> None:
        self.events.emit(Event(kind, data, namespace=self.namespace))

    def _hot(self) -> list[MemoryItem]:
        return self._db.select(self.namespace, tiers=("hot",), order="spill")

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """The one place items call the embedder: unit float32 rows, any failure a ModelError.

        Raises:
            ConfigError: No embedder is configured.
            ModelError: The embedder failed or returned something unusable.
        """
        if self.embedder is None:
            raise ConfigError("no embedder configured")
        return embed_texts(self.embedder, texts)

    def _embed_for_storage(self, texts: Sequence[str]) -> list[tuple[bytes | None, str | None]]:
        """``(vector blob, model)`` per text; a failing embedder must not lose items, so they go unembedded."""
        if self.embedder is None or not texts:
            return [(None, None)] * len(texts)
        try:
            mat = self._embed(texts)
        except ModelError as exc:
            log.warning(
                "embedding %d item(s) failed (%s); stored without vectors, see status flags.unembedded",
                len(texts),
                type(exc.__cause__ or exc).__name__,
            )
            self._emit("items.embed_failed", error=str(exc)[:200], count=len(texts))
            return [(None, None)] * len(texts)
        name = embedder_name(self.embedder)
        return [(row.astype(np.float32).tobytes(), name) for row in mat]

    def _refresh_index(self) -> VectorIndex:
        """Bring the vector index up to the store: deleted/changed vectors from the log, then new ids.

        Never call inside a store transaction (see the module docstring on locks).
        """
        with self._index_lock:
            index = self._index
            if not index.loaded:
                # A fresh index loads every vector; the log before this point is history.
                seq = self._db.vector_log_head(self.namespace)
                index.extend(self._db.vectors_after(self.namespace, 0))
                index.loaded = True
            else:
                # Log first, then new ids: a change that lands between the two reads is
                # replayed next time, and replaying a current vector is harmless.
                seq, changes = self._db.vector_changes(self.namespace, index.log_seq)
                index.apply(changes)
                index.extend(self._db.vectors_after(self.namespace, index.last_id))
            index.log_seq = seq
            return index

    # --- reads ------------------------------------------------------------------------

    def get(self, item_id: int) -> MemoryItem:
        """One item of this namespace.

        Raises:
            NotFoundError: No such item here (items of other namespaces are not visible).
        """
        found = self._db.get(self.namespace, [check_item_id(item_id)])
        if not found:
            raise NotFoundError(f"no memory item {item_id} in namespace {self.namespace!r}")
        return found[0]

    def list(
        self, tier: str | None = None, *, include_dead: bool = True, session: str | None = None
    ) -> list[MemoryItem]:
        """Items of this namespace by id, optionally one tier; ``include_dead=False`` drops superseded/rejected.

        Args:
            tier: Only this tier.
            include_dead: Keep superseded and rejected items.
            session: Only what a read in this session sees (namespace-wide items and
                its own); default every item of the namespace (an inventory).

        Raises:
            ValidationError: Unknown tier, invalid session name.
        """
        tiers = None if tier is None else (check_choice(tier, TIERS, "tier"),)
        view = None if session is None else _view(session)
        return self._db.select(self.namespace, tiers=tiers, live_only=not include_dead, view=view)

    def hot(self, session: str | None = None) -> builtins.list[MemoryItem]:
        """The hot items a read in ``session`` sees (what belongs in its prompt), newest first.

        Args:
            session: The reading session: namespace-wide items plus its own; without
                one, namespace-wide items only.

        Raises:
            ValidationError: Invalid session name.
        """
        rows = self._db.select(self.namespace, tiers=("hot",), view=_view(session))
        return sorted(rows, key=lambda i: (i.created_at, i.id), reverse=True)

    def __repr__(self) -> str:
        return f"Items({self.namespace!r})"


def _view(session: str | None) -> tuple[str, ...]:
    """The store's view for a read in ``session`` (checked): namespace-wide items, plus its own."""
    return () if session is None else (check_name(session, "session"),)


def embedder_name(embedder: Embedder) -> str:
    """Label stored beside each vector, so vectors of different models are not compared blindly."""
    return model_name(embedder)
