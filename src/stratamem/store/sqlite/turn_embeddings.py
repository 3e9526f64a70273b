"""SQLite tables of the persisted recall index (``m010_recall_index``).

The statements are in :mod:`stratamem.store.turn_index`, one implementation for every
backend; only the DDL, which differs, is here. Rows are keyed by
``(namespace_id, turn_id)``, a clustered ``WITHOUT ROWID`` key.
"""

from __future__ import annotations

import sqlite3

__all__ = ["m010_recall_index"]


def m010_recall_index(conn: sqlite3.Connection) -> None:
    """Per-turn index terms and compact vectors, and per-namespace index settings."""
    conn.execute("""CREATE TABLE recall_index (
        namespace_id INTEGER NOT NULL REFERENCES namespaces(id),
        turn_id INTEGER NOT NULL,
        terms TEXT NOT NULL,
        vector BLOB,
        PRIMARY KEY (namespace_id, turn_id)
    ) WITHOUT ROWID""")
    conn.execute("""CREATE TABLE recall_index_meta (
        namespace_id INTEGER PRIMARY KEY REFERENCES namespaces(id),
        model TEXT NOT NULL,
        dims INTEGER NOT NULL,
        analyzer TEXT NOT NULL
    )""")
