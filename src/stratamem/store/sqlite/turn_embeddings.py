"""The persisted recall index of the SQLite store (``m010_recall_index``).

What a new process needs to answer its first query without re-embedding or
re-analysing anything: per turn, its analysed index terms (space-joined)
and its vector (int8 codes + scale, :mod:`stratamem.embed.quantize`), and
per namespace, which model made the vectors and which analyser made the
terms. Window, neighbour and session vectors are not stored: the index
derives them from the turn vectors in O(N) numpy when it opens.

Rows are keyed by ``(namespace_id, turn_id)`` (a clustered ``WITHOUT ROWID``
key, so a namespace loads as one range scan and deleting turns — or a whole
namespace — is one statement). Reach it as ``store.embeddings.turns``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..base_turn_index import IndexMeta, TurnIndexRow, TurnKey

if TYPE_CHECKING:
    from .store import SQLiteStore

__all__ = ["SQLiteTurnIndex", "m010_recall_index"]

_CHUNK = 900


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


class SQLiteTurnIndex:
    """Terms and vectors of indexed turns, per namespace.

    Shares the store's connection, lock and transactions.

    Args:
        store: The owning store.
    """

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def _ns_id(self, namespace: str) -> int | None:
        rows = self._store._query("SELECT id FROM namespaces WHERE name=?", (namespace,))
        return int(rows[0][0]) if rows else None

    def meta(self, namespace: str) -> IndexMeta | None:
        """The model, dimensions and analyser the namespace's rows were made with (``None``: none yet)."""
        rows = self._store._query(
            "SELECT m.model, m.dims, m.analyzer FROM recall_index_meta m JOIN namespaces n ON n.id = m.namespace_id "
            "WHERE n.name=?", (namespace,))
        return IndexMeta(rows[0][0], int(rows[0][1]), rows[0][2]) if rows else None

    def set_meta(self, namespace: str, meta: IndexMeta) -> None:
        """Record the settings of the namespace's rows, discarding rows they invalidate.

        Another analyser makes every row's terms stale (all rows are deleted);
        another model makes the vectors stale (they are cleared, terms kept).
        One transaction.

        Raises:
            BackendError: The write failed (nothing changed).
        """
        with self._store.transaction():
            ns = self._ns_id(namespace)
            if ns is None:
                return
            conn = self._store.connection
            old = self.meta(namespace)
            if old is not None and old.analyzer != meta.analyzer:
                conn.execute("DELETE FROM recall_index WHERE namespace_id=?", (ns,))
            elif old is not None and (old.model, old.dims) != (meta.model, meta.dims):
                conn.execute("UPDATE recall_index SET vector = NULL WHERE namespace_id=?", (ns,))
            conn.execute("INSERT OR REPLACE INTO recall_index_meta (namespace_id, model, dims, analyzer) "
                         "VALUES (?, ?, ?, ?)", (ns, meta.model, meta.dims, meta.analyzer))

    def put(self, namespace: str, rows: Sequence[TurnIndexRow]) -> None:
        """Store rows (replacing existing ones of the same turns), in one transaction.

        Raises:
            BackendError: The write failed (nothing was stored).
        """
        if not rows:
            return
        with self._store.transaction():
            ns = self._ns_id(namespace)
            if ns is None:
                return
            self._store.connection.executemany(
                "INSERT OR REPLACE INTO recall_index (namespace_id, turn_id, terms, vector) VALUES (?, ?, ?, ?)",
                [(ns, r.turn_id, r.terms, r.vector) for r in rows])

    def load(self, namespace: str, turn_ids: Sequence[int] | None = None) -> dict[int, TurnIndexRow]:
        """The rows of the namespace (or of some of its turns), by turn id."""
        ns = self._ns_id(namespace)
        if ns is None:
            return {}
        if turn_ids is None:
            rows = self._store._query("SELECT turn_id, terms, vector FROM recall_index WHERE namespace_id=?", (ns,))
        else:
            ids, rows = [int(i) for i in turn_ids], []
            for i in range(0, len(ids), _CHUNK):
                part = ids[i:i + _CHUNK]
                rows += self._store._query(
                    "SELECT turn_id, terms, vector FROM recall_index WHERE namespace_id=? "
                    f"AND turn_id IN ({','.join('?' * len(part))})", [ns, *part])
        return {r[0]: TurnIndexRow(r[0], r[1], r[2]) for r in rows}

    def keys(self, namespace: str) -> list[TurnKey]:
        """Id, session, speaker and timestamp of every turn of the namespace, in (session, sequence) order.

        The order of :meth:`~stratamem.store.sqlite.SQLiteStore.iter_turns`; no content is read.
        """
        rows = self._store._query(
            "SELECT t.id, s.name, t.name, t.ts FROM turns t JOIN sessions s ON s.id = t.session_id "
            "JOIN namespaces n ON n.id = t.namespace_id WHERE n.name = ? ORDER BY t.session_id, t.seq", (namespace,))
        return [TurnKey(r[0], namespace, r[1], r[2], r[3]) for r in rows]

    def open_rows(self, namespace: str) -> tuple[list[TurnKey], list[str | None], list[bytes | None]]:
        """:meth:`keys` with each turn's stored terms and vector (``None``: no row), in one read.

        What opening the index reads: one ordered scan instead of two reads and a lookup per turn.
        """
        ns = self._ns_id(namespace)
        if ns is None:
            return [], [], []
        # Two range scans, joined here: joined in SQL, the planner sorts the rows (vectors
        # included) in a temporary B-tree, which took twice as long at 100k turns.
        keys = self._store._query(
            "SELECT t.id, ?, s.name, t.name, t.ts FROM turns t JOIN sessions s ON s.id = t.session_id "
            "WHERE t.namespace_id = ? ORDER BY t.session_id, t.seq", (namespace, ns))
        rows = {r[0]: r for r in self._store._query(
            "SELECT turn_id, terms, vector FROM recall_index WHERE namespace_id=?", (ns,))}
        got = [rows.get(k[0]) for k in keys]
        return (list(map(TurnKey._make, keys)),
                [None if r is None else r[1] for r in got], [None if r is None else r[2] for r in got])

    def counts(self, namespace: str) -> tuple[int, int]:
        """``(rows, rows with a vector)`` of the namespace."""
        rows = self._store._query(
            "SELECT COUNT(*), COUNT(r.vector) FROM recall_index r JOIN namespaces n ON n.id = r.namespace_id "
            "WHERE n.name=?", (namespace,))
        return int(rows[0][0]), int(rows[0][1])

    def delete(self, namespace: str, turn_ids: Sequence[int] | None = None) -> int:
        """Delete the rows of some turns (or all of the namespace, with its settings); returns rows deleted.

        Raises:
            BackendError: The delete failed (nothing was deleted).
        """
        with self._store.transaction():
            ns = self._ns_id(namespace)
            if ns is None:
                return 0
            conn = self._store.connection
            if turn_ids is None:
                conn.execute("DELETE FROM recall_index_meta WHERE namespace_id=?", (ns,))
                return int(conn.execute("DELETE FROM recall_index WHERE namespace_id=?", (ns,)).rowcount)
            ids = [int(i) for i in turn_ids]
            deleted = 0
            for i in range(0, len(ids), _CHUNK):
                part = ids[i:i + _CHUNK]
                deleted += int(conn.execute(
                    f"DELETE FROM recall_index WHERE namespace_id=? AND turn_id IN ({','.join('?' * len(part))})",
                    [ns, *part]).rowcount)
            return deleted
