"""Passage vectors of long turns in the SQLite store (``m011_passages``).

One row per long turn (:mod:`stratamem.retrieve.passages`): the model that
made the vectors and all its passages' int8 vectors
(:mod:`stratamem.embed.quantize`) concatenated in one blob — a blob's length
gives the passage count. Short turns (all of LoCoMo) have no row, so a store
of short turns does not grow. Rows made by another model are ignored on
read and replaced on the next write. Keyed like ``recall_index``, so a
forget deletes a turn's passages with its row. Reach it as
``store.embeddings.passages``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import SQLiteStore

__all__ = ["SQLitePassages", "m011_passages"]

_CHUNK = 900


def m011_passages(conn: sqlite3.Connection) -> None:
    """Per long turn: its passages' int8 vectors in one blob, with the model that made them."""
    conn.execute("""CREATE TABLE recall_passages (
        namespace_id INTEGER NOT NULL REFERENCES namespaces(id),
        turn_id INTEGER NOT NULL,
        model TEXT NOT NULL,
        vectors BLOB NOT NULL,
        PRIMARY KEY (namespace_id, turn_id)
    ) WITHOUT ROWID""")


class SQLitePassages:
    """Passage vector blobs of long turns, per namespace (shares the store's connection and transactions).

    Args:
        store: The owning store.
    """

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def _ns_id(self, namespace: str) -> int | None:
        rows = self._store._query("SELECT id FROM namespaces WHERE name=?", (namespace,))
        return int(rows[0][0]) if rows else None

    def put(self, namespace: str, model: str, blobs: dict[int, bytes]) -> None:
        """Store the passage blobs of turns (turn id -> blob), replacing theirs, in one transaction.

        Raises:
            BackendError: The write failed (nothing was stored).
        """
        if not blobs:
            return
        with self._store.transaction():
            ns = self._ns_id(namespace)
            if ns is None:
                return
            self._store.connection.executemany(
                "INSERT OR REPLACE INTO recall_passages (namespace_id, turn_id, model, vectors) VALUES (?, ?, ?, ?)",
                [(ns, int(t), model, b) for t, b in blobs.items()])

    def load(self, namespace: str, model: str, turn_ids: Sequence[int] | None = None) -> dict[int, bytes]:
        """Blobs made by ``model`` of the namespace's long turns (or of some of them), by turn id."""
        ns = self._ns_id(namespace)
        if ns is None:
            return {}
        if turn_ids is None:
            rows = self._store._query("SELECT turn_id, vectors FROM recall_passages WHERE namespace_id=? AND model=?",
                                      (ns, model))
        else:
            ids, rows = [int(i) for i in turn_ids], []
            for i in range(0, len(ids), _CHUNK):
                part = ids[i:i + _CHUNK]
                rows += self._store._query(
                    "SELECT turn_id, vectors FROM recall_passages WHERE namespace_id=? AND model=? "
                    f"AND turn_id IN ({','.join('?' * len(part))})", [ns, model, *part])
        return {int(r[0]): bytes(r[1]) for r in rows}

    def size(self, namespace: str) -> tuple[int, int]:
        """``(rows, bytes of vector blobs)`` of the namespace."""
        rows = self._store._query(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(p.vectors)), 0) FROM recall_passages p "
            "JOIN namespaces n ON n.id = p.namespace_id WHERE n.name=?", (namespace,))
        return int(rows[0][0]), int(rows[0][1])
