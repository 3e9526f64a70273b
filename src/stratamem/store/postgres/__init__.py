"""The PostgreSQL + pgvector backend: :class:`PostgresStore` and what is PostgreSQL's own (``postgres`` extra).

A connection pool with thread-pinned transactions (:mod:`~stratamem.store.postgres.store`),
the migrations under an advisory lock (:mod:`~stratamem.store.postgres.schema`),
``tsvector`` item search (:mod:`~stratamem.store.postgres.items`), advisory locks and
``VACUUM FULL`` for forgetting (:mod:`~stratamem.store.postgres.forget`), the pgvector
codec (:mod:`~stratamem.store.postgres.search`) and the SQLite → PostgreSQL copy
(:mod:`~stratamem.store.postgres.migrate`). Importing it needs ``psycopg``;
:func:`stratamem.store.open_store` imports it only for a ``postgresql://`` URL.
"""

from __future__ import annotations

from .store import PostgresStore

__all__ = ["PostgresStore"]
