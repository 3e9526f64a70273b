"""PostgreSQL storage of ingest dedupe keys (``m008_ingest_keys``).

The mirror of :mod:`stratamem.store.sqlite_ingest_keys`: one row per turn
stored by an importer, keyed by namespace, session and the record's key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import psycopg

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["PostgresIngestKeys", "m008_ingest_keys"]


def m008_ingest_keys(conn: psycopg.Connection) -> None:
    """Dedupe keys of ingested records, one per stored turn; an index of system turns."""
    conn.execute("""CREATE TABLE ingest_keys (
        namespace TEXT NOT NULL,
        session TEXT NOT NULL,
        key TEXT NOT NULL,
        turn_id BIGINT NOT NULL,
        PRIMARY KEY (namespace, session, key)
    )""")
    # System prompts are read on every context (sources.system_blocks): a partial
    # index finds the few system turns without scanning the namespace.
    conn.execute("CREATE INDEX turns_system ON turns (namespace, session_id) WHERE role = 'system'")


class PostgresIngestKeys:
    """Rows of ``ingest_keys`` for one PostgreSQL store.

    Args:
        store: The owning store; its pool and transactions are used.
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def known(self, namespace: str, session: str, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` the session already holds."""
        rows = self._store._query(
            "SELECT key FROM ingest_keys WHERE namespace = %s AND session = %s AND key = ANY(%s)",
            (namespace, session, list(dict.fromkeys(keys))))
        return {r[0] for r in rows}

    def record(self, namespace: str, rows: Iterable[tuple[str, str, int]]) -> None:
        """Record ``(session, key, turn_id)`` rows, in the caller's transaction or one of their own.

        Raises:
            BackendError: A key is already recorded (a concurrent ingest of the
                same records) or the database failed; nothing was recorded.
        """
        data = [(namespace, s, k, t) for s, k, t in rows]
        if not data:
            return
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO ingest_keys (namespace, session, key, turn_id) VALUES (%s, %s, %s, %s)",
                                data)
