"""SQLite table of the passage vectors of long turns (``m011_passages``).

The statements are in :mod:`stratamem.store.passage_store`, one implementation for
every backend; only the DDL, which differs, is here.
"""

from __future__ import annotations

import sqlite3

__all__ = ["m011_passages"]


def m011_passages(conn: sqlite3.Connection) -> None:
    """Per long turn: its passages' int8 vectors in one blob, with the model that made them."""
    conn.execute("""CREATE TABLE recall_passages (
        namespace_id INTEGER NOT NULL REFERENCES namespaces(id),
        turn_id INTEGER NOT NULL,
        model TEXT NOT NULL,
        vectors BLOB NOT NULL,
        PRIMARY KEY (namespace_id, turn_id)
    ) WITHOUT ROWID""")
