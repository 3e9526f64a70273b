"""The feature stores every backend exposes the same way, written once.

A backend store (:class:`~stratamem.store.sqlite.SQLiteStore`,
:class:`~stratamem.store.postgres.PostgresStore`) inherits
:class:`SharedFeatures` and provides ``sql`` (its :class:`~stratamem.store.sql.Sql`
handle); each property below builds its feature store on that handle on
first use. Memory items and forgetting are shared classes with a per-backend
subclass (lexical search; secure delete or ``VACUUM FULL``): the backend
names those subclasses in :attr:`SharedFeatures.item_store_class` and
:attr:`SharedFeatures.forget_class`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from .conversations import Conversations
    from .embedding_cache import EmbeddingCache
    from .forget_rows import ForgetRows
    from .idempotency import IdempotencyKeys
    from .ingest_keys import IngestKeys
    from .item_store import ItemStore
    from .manifests import Manifests
    from .node_store import NodeStore
    from .sql import Sql

__all__ = ["SharedFeatures"]


class SharedFeatures:
    """Cached properties for the feature stores that speak :mod:`stratamem.store.sql`."""

    @property
    def sql(self) -> Sql:
        """The backend's SQL handle; every backend store overrides this."""
        raise NotImplementedError

    # Each is built from the backend store itself (``Self``), not from its ``sql`` handle.
    item_store_class: Callable[[Self], ItemStore]
    """The backend's item store (the shared reads and writes plus its lexical search)."""
    forget_class: Callable[[Self], ForgetRows]
    """The backend's forgetting (the shared plan statements plus what makes the bytes go)."""

    @functools.cached_property
    def items(self: Self) -> ItemStore:
        """Memory items of every namespace (:mod:`stratamem.store.item_store`, search per backend)."""
        return self.item_store_class(self)

    @functools.cached_property
    def forgetting(self: Self) -> ForgetRows:
        """Deleting turns and everything derived from them (:mod:`stratamem.store.forget_rows`)."""
        return self.forget_class(self)

    @functools.cached_property
    def embeddings(self) -> EmbeddingCache:
        """The content-addressed embedding cache, recall index and passages (:mod:`stratamem.store.embedding_cache`)."""
        from .embedding_cache import EmbeddingCache

        return EmbeddingCache(self.sql)

    @functools.cached_property
    def manifests(self) -> Manifests:
        """Recorded context manifests (:mod:`stratamem.store.manifests`)."""
        from .manifests import Manifests

        return Manifests(self.sql)

    @functools.cached_property
    def nodes(self) -> NodeStore:
        """Pyramid nodes of every namespace (:mod:`stratamem.store.node_store`)."""
        from .node_store import NodeStore

        return NodeStore(self.sql)

    @functools.cached_property
    def conversations(self) -> Conversations:
        """Agent-loop conversation states (:mod:`stratamem.store.conversations`)."""
        from .conversations import Conversations

        return Conversations(self.sql)

    @functools.cached_property
    def ingest_keys(self) -> IngestKeys:
        """Dedupe keys of ingested records (:mod:`stratamem.store.ingest_keys`)."""
        from .ingest_keys import IngestKeys

        return IngestKeys(self.sql)

    @functools.cached_property
    def idempotency(self) -> IdempotencyKeys:
        """Idempotency keys of writes (:mod:`stratamem.store.idempotency`)."""
        from .idempotency import IdempotencyKeys

        return IdempotencyKeys(self.sql)
