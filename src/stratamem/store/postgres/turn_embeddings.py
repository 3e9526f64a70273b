"""The persisted recall index of the PostgreSQL store (``m010_recall_index``).

The mirror of :mod:`stratamem.store.sqlite.turn_embeddings`, with the same
methods and semantics: per turn, analysed terms and an int8 vector blob;
per namespace, the model and analyser they were made with. Rows are keyed
by ``(namespace, turn_id)`` with the tenant column first, like every other
table, so deleting turns or a namespace is one statement. Vectors are
``bytea``: the index is loaded whole into the process and scored there,
never searched in the database. Reach it as ``store.embeddings.turns``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import psycopg

from ..base_turn_index import IndexMeta, TurnIndexRow, TurnKey

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["PostgresTurnIndex", "m010_recall_index"]


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


class PostgresTurnIndex:
    """Terms and vectors of indexed turns, per namespace.

    Shares the store's pool and transactions.

    Args:
        store: The owning store.
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def meta(self, namespace: str) -> IndexMeta | None:
        """The model, dimensions and analyser the namespace's rows were made with (``None``: none yet)."""
        rows = self._store._query("SELECT model, dims, analyzer FROM recall_index_meta WHERE namespace = %s",
                                  (namespace,))
        return IndexMeta(rows[0][0], int(rows[0][1]), rows[0][2]) if rows else None

    def set_meta(self, namespace: str, meta: IndexMeta) -> None:
        """Record the settings of the namespace's rows, discarding rows they invalidate.

        Another analyser makes every row's terms stale (all rows are deleted);
        another model makes the vectors stale (they are cleared, terms kept).
        One transaction.

        Raises:
            BackendError: The write failed (nothing changed).
        """
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            row = conn.execute("SELECT model, dims, analyzer FROM recall_index_meta WHERE namespace = %s "
                               "FOR UPDATE", (namespace,)).fetchone()
            if row is not None and row[2] != meta.analyzer:
                conn.execute("DELETE FROM recall_index WHERE namespace = %s", (namespace,))
            elif row is not None and (row[0], int(row[1])) != (meta.model, meta.dims):
                conn.execute("UPDATE recall_index SET vector = NULL WHERE namespace = %s", (namespace,))
            conn.execute("INSERT INTO recall_index_meta (namespace, model, dims, analyzer) VALUES (%s, %s, %s, %s) "
                         "ON CONFLICT (namespace) DO UPDATE SET model = EXCLUDED.model, dims = EXCLUDED.dims, "
                         "analyzer = EXCLUDED.analyzer", (namespace, meta.model, meta.dims, meta.analyzer))

    def put(self, namespace: str, rows: Sequence[TurnIndexRow]) -> None:
        """Store rows (replacing existing ones of the same turns), in one transaction.

        Raises:
            BackendError: The write failed (nothing was stored).
        """
        if not rows:
            return
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            conn.cursor().executemany(
                "INSERT INTO recall_index (namespace, turn_id, terms, vector) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (namespace, turn_id) DO UPDATE SET terms = EXCLUDED.terms, vector = EXCLUDED.vector",
                [(namespace, r.turn_id, r.terms, r.vector) for r in rows])

    def load(self, namespace: str, turn_ids: Sequence[int] | None = None) -> dict[int, TurnIndexRow]:
        """The rows of the namespace (or of some of its turns), by turn id."""
        if turn_ids is None:
            rows = self._store._query("SELECT turn_id, terms, vector FROM recall_index WHERE namespace = %s",
                                      (namespace,))
        else:
            rows = self._store._query("SELECT turn_id, terms, vector FROM recall_index WHERE namespace = %s "
                                      "AND turn_id = ANY(%s)", (namespace, [int(i) for i in turn_ids]))
        return {int(r[0]): TurnIndexRow(int(r[0]), r[1], None if r[2] is None else bytes(r[2])) for r in rows}

    def keys(self, namespace: str) -> list[TurnKey]:
        """Id, session, speaker and timestamp of every turn of the namespace, in (session, sequence) order.

        The order of :meth:`~stratamem.store.postgres.PostgresStore.iter_turns`; no content is read.
        """
        rows = self._store._query(
            "SELECT t.id, s.name, t.name, t.ts FROM turns t JOIN sessions s ON s.namespace = t.namespace "
            "AND s.id = t.session_id WHERE t.namespace = %s ORDER BY t.session_id, t.seq", (namespace,))
        return [TurnKey(int(r[0]), namespace, r[1], r[2], r[3]) for r in rows]

    def open_rows(self, namespace: str) -> tuple[list[TurnKey], list[str | None], list[bytes | None]]:
        """:meth:`keys` with each turn's stored terms and vector (``None``: no row), in one read.

        What opening the index reads: one ordered scan instead of two reads and a lookup per turn.
        """
        rows = self._store._query(
            "SELECT t.id, s.name, t.name, t.ts, r.terms, r.vector FROM turns t JOIN sessions s "
            "ON s.namespace = t.namespace AND s.id = t.session_id LEFT JOIN recall_index r "
            "ON r.namespace = t.namespace AND r.turn_id = t.id WHERE t.namespace = %s ORDER BY t.session_id, t.seq",
            (namespace,))
        return ([TurnKey(int(r[0]), namespace, r[1], r[2], r[3]) for r in rows], [r[4] for r in rows],
                [None if r[5] is None else bytes(r[5]) for r in rows])

    def counts(self, namespace: str) -> tuple[int, int]:
        """``(rows, rows with a vector)`` of the namespace."""
        rows = self._store._query("SELECT COUNT(*), COUNT(vector) FROM recall_index WHERE namespace = %s",
                                  (namespace,))
        return int(rows[0][0]), int(rows[0][1])

    def delete(self, namespace: str, turn_ids: Sequence[int] | None = None) -> int:
        """Delete the rows of some turns (or all of the namespace, with its settings); returns rows deleted.

        Raises:
            BackendError: The delete failed (nothing was deleted).
        """
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            if turn_ids is None:
                conn.execute("DELETE FROM recall_index_meta WHERE namespace = %s", (namespace,))
                return int(conn.execute("DELETE FROM recall_index WHERE namespace = %s", (namespace,)).rowcount)
            return int(conn.execute("DELETE FROM recall_index WHERE namespace = %s AND turn_id = ANY(%s)",
                                    (namespace, [int(i) for i in turn_ids])).rowcount)
