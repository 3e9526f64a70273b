"""Storage of ingest dedupe keys: which source records a namespace already holds (``m008_ingest_keys``).

One feature store for every backend (it speaks :mod:`stratamem.store.sql`). One
row per stored turn that came from an importer, keyed by namespace, session
and the record's key (a provider message id, or a hash of its position and
content; see :mod:`stratamem.ingest`). ``Memory.ingest`` reads and writes it
inside the transaction that stores the turns, so a key exists exactly when its
turn was committed.

The same transaction marks the ingest's sessions as waiting for their derived
data (segments, summaries: :meth:`IngestKeys.mark_pending`, a ``store_meta``
row per namespace); the mark is cleared once that work is done. A process
killed in between leaves the mark, and the next ingest or context repairs
those sessions (:meth:`stratamem.memory.derived.Derived.repair`) even though
every turn is already stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from .ddl import run_tables
from .sql import Sql, dialect_of, upsert

__all__ = ["IngestKeys", "m008_ingest_keys"]

# SQLite's default limit on bound parameters is 999 on old builds; stay below it.
_CHUNK = 500

# The namespace is named here (not the tenant column) on both backends: keys are
# looked up by the names an importer holds.
_COLUMNS = (
    "namespace TEXT NOT NULL",
    "session TEXT NOT NULL",
    "key TEXT NOT NULL",
    "turn_id {bigint} NOT NULL",
    "PRIMARY KEY (namespace, session, key)",
)


def m008_ingest_keys(conn: Any) -> None:
    """Dedupe keys of ingested records, one per stored turn; an index of system turns."""
    run_tables(conn, ("ingest_keys", _COLUMNS, True))
    tenant = dialect_of(conn).tenant
    # System prompts are read on every context (sources.system_blocks): a partial
    # index finds the few system turns without scanning the namespace.
    conn.execute(f"CREATE INDEX turns_system ON turns ({tenant}, session_id) WHERE role = 'system'")


class IngestKeys:
    """Rows of ``ingest_keys`` for one store.

    Args:
        sql: The owning store's SQL layer (:attr:`SQLiteStore.sql`, :attr:`PostgresStore.sql`).
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def known(self, namespace: str, session: str, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` the session already holds."""
        found: set[str] = set()
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            found.update(
                r[0]
                for r in self._sql.rows(
                    f"SELECT key FROM ingest_keys WHERE namespace = ? AND session = ? AND key IN ({marks})",
                    (namespace, session, *chunk),
                )
            )
        return found

    def family(self, namespace: str, root: str) -> list[str]:
        """Sessions holding keys whose name is ``root`` or starts with ``root.`` (a conversation and its branches)."""
        like = root.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + ".%"
        rows = self._sql.rows(
            "SELECT DISTINCT session FROM ingest_keys "
            "WHERE namespace = ? AND (session = ? OR session LIKE ? ESCAPE '\\')",
            (namespace, root, like),
        )
        # SQLite's LIKE ignores case: keep the exact prefix only.
        return sorted(r[0] for r in rows if r[0] == root or r[0].startswith(root + "."))

    def tail_keys(self, namespace: str, session: str) -> set[str] | None:
        """Keys of the session's last stored turn.

        ``None`` when the session holds no turn; empty when its last turn came from no import.
        """
        d = self._sql.dialect
        rows = self._sql.rows(
            f"SELECT MAX(t.id) FROM turns t JOIN sessions s ON s.{d.tenant} = t.{d.tenant} AND s.id = t.session_id "
            f"WHERE {d.in_namespace('t')} AND s.name = ?",
            (namespace, session),
        )
        last = rows[0][0] if rows else None
        if last is None:
            return None
        found = self._sql.rows(
            "SELECT key FROM ingest_keys WHERE namespace = ? AND session = ? AND turn_id = ?",
            (namespace, session, last),
        )
        return {r[0] for r in found}

    def record(self, namespace: str, rows: Iterable[tuple[str, str, int]]) -> None:
        """Record ``(session, key, turn_id)`` rows, in the caller's transaction or one of their own.

        Raises:
            BackendError: A key is already recorded (a concurrent ingest of the
                same records) or the database failed; nothing was recorded.
        """
        data = [(namespace, s, k, t) for s, k, t in rows]
        with self._sql.write() as w:
            w.executemany("INSERT INTO ingest_keys (namespace, session, key, turn_id) VALUES (?, ?, ?, ?)", data)

    @staticmethod
    def _pending_key(namespace: str) -> str:
        return f"derived.pending.{namespace}"

    def pending(self, namespace: str) -> list[str]:
        """Sessions whose derived data an ingest committed but has not finished (sorted)."""
        rows = self._sql.rows("SELECT value FROM store_meta WHERE key = ?", (self._pending_key(namespace),))
        return sorted(json.loads(rows[0][0])) if rows else []

    def mark_pending(self, namespace: str, sessions: Iterable[str]) -> None:
        """Add ``sessions`` to the namespace's pending mark, in the caller's transaction or one of their own."""
        names = set(sessions)
        if not names:
            return
        with self._sql.write() as w:
            key = self._pending_key(namespace)
            row = w.execute("SELECT value FROM store_meta WHERE key = ?", (key,)).fetchone()
            names |= set(json.loads(row[0])) if row else set()
            w.execute(upsert("store_meta", ("key",), ("value",)), (key, json.dumps(sorted(names))))

    def clear_pending(self, namespace: str, sessions: Iterable[str]) -> None:
        """Remove ``sessions`` from the mark (the mark goes when none is left)."""
        done = set(sessions)
        if not done:
            return
        with self._sql.write() as w:
            key = self._pending_key(namespace)
            row = w.execute("SELECT value FROM store_meta WHERE key = ?", (key,)).fetchone()
            if row is None:
                return
            left = sorted(set(json.loads(row[0])) - done)
            if left:
                w.execute("UPDATE store_meta SET value = ? WHERE key = ?", (json.dumps(left), key))
            else:
                w.execute("DELETE FROM store_meta WHERE key = ?", (key,))
