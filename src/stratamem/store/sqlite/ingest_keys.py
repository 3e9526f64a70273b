"""SQLite storage of ingest dedupe keys: which source records a namespace already holds.

A feature store (see :class:`~stratamem.store.sqlite.SQLiteStore`): it shares
the store's connection, lock and ``transaction()``. One row per stored turn
that came from an importer, keyed by namespace, session and the record's key
(a provider message id, or a hash of its position and content; see
:mod:`stratamem.ingest`). ``Memory.ingest`` reads and writes it inside the
transaction that stores the turns, so a key exists exactly when its turn was
committed. The PostgreSQL twin is :mod:`stratamem.store.postgres_ingest_keys`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .store import SQLiteStore

__all__ = ["SQLiteIngestKeys", "m008_ingest_keys"]

# SQLite's default limit on bound parameters is 999 on old builds; stay below it.
_CHUNK = 500


def m008_ingest_keys(conn: sqlite3.Connection) -> None:
    """Dedupe keys of ingested records, one per stored turn; an index of system turns."""
    conn.execute("""CREATE TABLE ingest_keys (
        namespace TEXT NOT NULL,
        session TEXT NOT NULL,
        key TEXT NOT NULL,
        turn_id INTEGER NOT NULL,
        PRIMARY KEY (namespace, session, key)
    ) WITHOUT ROWID""")
    # System prompts are read on every context (sources.system_blocks): a partial
    # index finds the few system turns without scanning the namespace.
    conn.execute("CREATE INDEX turns_system ON turns (namespace_id, session_id) WHERE role = 'system'")


class SQLiteIngestKeys:
    """Rows of ``ingest_keys`` for one SQLite store.

    Args:
        store: The owning store; its connection, lock and transaction are used.
    """

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def known(self, namespace: str, session: str, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` the session already holds."""
        found: set[str] = set()
        unique = list(dict.fromkeys(keys))
        with self._store.lock, self._store._errors():
            for start in range(0, len(unique), _CHUNK):
                chunk = unique[start:start + _CHUNK]
                marks = ",".join("?" * len(chunk))
                found.update(r[0] for r in self._store.connection.execute(
                    f"SELECT key FROM ingest_keys WHERE namespace = ? AND session = ? AND key IN ({marks})",
                    (namespace, session, *chunk)))
        return found

    def record(self, namespace: str, rows: Iterable[tuple[str, str, int]]) -> None:
        """Record ``(session, key, turn_id)`` rows, in the caller's transaction or one of their own.

        Raises:
            BackendError: A key is already recorded (a concurrent ingest of the
                same records) or the database failed; nothing was recorded.
        """
        with self._store.transaction():
            self._store.connection.executemany(
                "INSERT INTO ingest_keys (namespace, session, key, turn_id) VALUES (?, ?, ?, ?)",
                [(namespace, s, k, t) for s, k, t in rows])
