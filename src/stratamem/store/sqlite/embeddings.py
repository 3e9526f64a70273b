"""SQLite table of the persistent embedding cache (``m002_embeddings``).

The statements are in :mod:`stratamem.store.embedding_cache`, one implementation for
every backend; only the DDL, which differs, is here.
"""

from __future__ import annotations

import sqlite3

__all__ = ["m002_embeddings"]


def m002_embeddings(conn: sqlite3.Connection) -> None:
    """The content-addressed embedding cache: ``(model, hash) -> dims + float32 blob``."""
    # No namespace column on purpose: rows are keyed by content, shared by all
    # namespaces, and hold no text.
    conn.execute("""CREATE TABLE embeddings (
        model TEXT NOT NULL,
        hash TEXT NOT NULL,
        dims INTEGER NOT NULL,
        vector BLOB NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (model, hash)
    ) WITHOUT ROWID""")
