"""The feature stores every backend exposes the same way, written once.

A backend store (:class:`~stratamem.store.sqlite.SQLiteStore`,
:class:`~stratamem.store.postgres.PostgresStore`) inherits
:class:`SharedFeatures` and provides ``sql`` (its :class:`~stratamem.store.sql.Sql`
handle); each property below builds its feature store on that handle on
first use. Feature stores still written per backend (memory items,
forgetting) stay as properties of the backend class.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .conversations import Conversations
    from .embedding_cache import EmbeddingCache
    from .ingest_keys import IngestKeys
    from .manifests import Manifests
    from .node_store import NodeStore
    from .sql import Sql

__all__ = ["SharedFeatures"]


class SharedFeatures:
    """Cached properties for the feature stores that speak :mod:`stratamem.store.sql`."""

    sql: Sql

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
