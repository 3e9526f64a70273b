"""Passage vectors of long turns in the PostgreSQL store (``m011_passages``).

The mirror of :mod:`stratamem.store.sqlite.passages`: one row per long
turn, the model and its passages' int8 vectors concatenated in one
``bytea``, keyed ``(namespace, turn_id)`` like ``recall_index``. Reach it as
``store.embeddings.passages``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import psycopg

if TYPE_CHECKING:
    from . import PostgresStore

__all__ = ["PostgresPassages", "m011_passages"]


def m011_passages(conn: psycopg.Connection) -> None:
    """Per long turn: its passages' int8 vectors in one blob, with the model that made them."""
    conn.execute("""CREATE TABLE recall_passages (
        namespace TEXT NOT NULL,
        turn_id BIGINT NOT NULL,
        model TEXT NOT NULL,
        vectors BYTEA NOT NULL,
        PRIMARY KEY (namespace, turn_id)
    )""")


class PostgresPassages:
    """Passage vector blobs of long turns, per namespace (shares the store's pool and transactions).

    Args:
        store: The owning store.
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def put(self, namespace: str, model: str, blobs: dict[int, bytes]) -> None:
        """Store the passage blobs of turns (turn id -> blob), replacing theirs, in one transaction.

        Raises:
            BackendError: The write failed (nothing was stored).
        """
        if not blobs:
            return
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            conn.cursor().executemany(
                "INSERT INTO recall_passages (namespace, turn_id, model, vectors) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (namespace, turn_id) DO UPDATE SET model = EXCLUDED.model, vectors = EXCLUDED.vectors",
                [(namespace, int(t), model, b) for t, b in blobs.items()])

    def load(self, namespace: str, model: str, turn_ids: Sequence[int] | None = None) -> dict[int, bytes]:
        """Blobs made by ``model`` of the namespace's long turns (or of some of them), by turn id."""
        if turn_ids is None:
            rows = self._store._query("SELECT turn_id, vectors FROM recall_passages WHERE namespace = %s "
                                      "AND model = %s", (namespace, model))
        else:
            rows = self._store._query("SELECT turn_id, vectors FROM recall_passages WHERE namespace = %s "
                                      "AND model = %s AND turn_id = ANY(%s)",
                                      (namespace, model, [int(i) for i in turn_ids]))
        return {int(r[0]): bytes(r[1]) for r in rows}

    def size(self, namespace: str) -> tuple[int, int]:
        """``(rows, bytes of vector blobs)`` of the namespace."""
        rows = self._store._query("SELECT COUNT(*), COALESCE(SUM(LENGTH(vectors)), 0) FROM recall_passages "
                                  "WHERE namespace = %s", (namespace,))
        return int(rows[0][0]), int(rows[0][1])
