"""PostgreSQL table of the persistent embedding cache (``m002_embeddings``).

The statements are in :mod:`stratamem.store.embedding_cache`, one implementation for
every backend; only the DDL, which differs, is here. Vectors are ``bytea``
(little-endian float32), not pgvector: the cache is looked up by key, never
searched by similarity.
"""

from __future__ import annotations

import psycopg

__all__ = ["m002_embeddings"]


def m002_embeddings(conn: psycopg.Connection) -> None:
    """The content-addressed embedding cache: ``(model, hash) -> dims + float32 bytes``."""
    conn.execute("""CREATE TABLE embeddings (
        model TEXT NOT NULL,
        hash TEXT NOT NULL,
        dims INTEGER NOT NULL,
        vector BYTEA NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (model, hash)
    )""")
