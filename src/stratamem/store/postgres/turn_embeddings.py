"""PostgreSQL tables of the persisted recall index (``m010_recall_index``).

The statements are in :mod:`stratamem.store.turn_index`, one implementation for every
backend; only the DDL, which differs, is here. Rows are keyed by
``(namespace, turn_id)`` with the tenant column first, like every other table;
vectors are ``bytea``: the index is loaded whole into the process and scored
there, never searched in the database.
"""

from __future__ import annotations

import psycopg

__all__ = ["m010_recall_index"]


def m010_recall_index(conn: psycopg.Connection) -> None:
    """Per-turn index terms and compact vectors, and per-namespace index settings."""
    conn.execute("""CREATE TABLE recall_index (
        namespace TEXT NOT NULL,
        turn_id BIGINT NOT NULL,
        terms TEXT NOT NULL,
        vector BYTEA,
        PRIMARY KEY (namespace, turn_id)
    )""")
    conn.execute("""CREATE TABLE recall_index_meta (
        namespace TEXT PRIMARY KEY,
        model TEXT NOT NULL,
        dims INTEGER NOT NULL,
        analyzer TEXT NOT NULL
    )""")
