"""PostgreSQL table of the passage vectors of long turns (``m011_passages``).

The statements are in :mod:`stratamem.store.passage_store`, one implementation for
every backend; only the DDL, which differs, is here.
"""

from __future__ import annotations

import psycopg

__all__ = ["m011_passages"]


def m011_passages(conn: psycopg.Connection) -> None:
    """Per long turn: its passages' int8 vectors in one blob, with the model that made them."""
    conn.execute("""CREATE TABLE recall_passages (
        namespace TEXT NOT NULL,
        turn_id BIGINT NOT NULL,
        model TEXT NOT NULL,
        vectors BYTEA NOT NULL,
        PRIMARY KEY (namespace, turn_id)
    )""")
