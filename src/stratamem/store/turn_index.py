"""The persisted recall index (``m010_recall_index``), one implementation for every backend.

What a new process needs to answer its first query without re-embedding or
re-analysing anything: per turn, its analysed index terms (space-joined)
and its vector (int8 codes + scale, :mod:`stratamem.embed.quantize`), and
per namespace, which model made the vectors and which analyser made the
terms. Window, neighbour and session vectors are not stored: the index
derives them from the turn vectors in O(N) numpy when it opens.

Rows are keyed by ``(tenant, turn_id)`` — the namespace's id on SQLite (a
clustered ``WITHOUT ROWID`` key), its name on PostgreSQL — so a namespace
loads as one range scan and deleting turns, or a whole namespace, is one
statement. Every statement is here, and the tables' DDL, one column list
for both backends (:mod:`stratamem.store.ddl`).
Reach it as ``store.embeddings.turns``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import BackendError
from .base_turn_index import IndexMeta, TurnIndexRow, TurnKey
from .ddl import run_tables
from .sql import Sql, chunks, upsert

__all__ = ["TurnIndex", "m010_recall_index", "m019_recall_events"]


def m010_recall_index(conn: Any) -> None:
    """Per-turn index terms and compact vectors, and per-namespace index settings.

    Vectors are plain bytes: the index is loaded whole into the process and
    scored there, never searched in the database.
    """
    run_tables(
        conn,
        (
            "recall_index",
            [
                "{tenant_column}",
                "turn_id {bigint} NOT NULL",
                "terms TEXT NOT NULL",
                "vector {blob}",
                "PRIMARY KEY ({tenant}, turn_id)",
            ],
            True,
        ),
        (
            "recall_index_meta",
            ["{tenant_pk}", "model TEXT NOT NULL", "dims INTEGER NOT NULL", "analyzer TEXT NOT NULL"],
            False,
        ),
    )


def m019_recall_events(conn: Any) -> None:
    """Per turn, the days it tells of, resolved when it was written, and how many sentence vectors it
    has (``NULL``: not made; rows written before this)."""
    conn.execute("ALTER TABLE recall_index ADD COLUMN events TEXT")
    conn.execute("ALTER TABLE recall_index ADD COLUMN sentences INTEGER")


def _blob(value: object) -> bytes | None:
    return None if value is None else bytes(value)  # type: ignore[call-overload]


class TurnIndex:
    """Terms and vectors of indexed turns, per namespace.

    Shares the owning store's connection handling and transactions.

    Args:
        sql: The owning store's SQL layer.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql
        self._ns = sql.dialect.tenant

    def meta(self, namespace: str) -> IndexMeta | None:
        """The model, dimensions and analyser the namespace's rows were made with (``None``: none yet)."""
        key = self._sql.tenant_key(namespace)
        rows = (
            []
            if key is None
            else self._sql.rows(f"SELECT model, dims, analyzer FROM recall_index_meta WHERE {self._ns} = ?", (key,))
        )
        return IndexMeta(rows[0][0], int(rows[0][1]), rows[0][2]) if rows else None

    def set_meta(self, namespace: str, meta: IndexMeta) -> None:
        """Record the settings of the namespace's rows, discarding rows they invalidate.

        Another analyser makes every row's terms stale (all rows are deleted);
        another model makes the vectors stale (they are cleared, terms kept).
        One transaction.

        Raises:
            BackendError: The write failed (nothing changed).
        """
        with self._sql.write() as w:
            key = self._sql.tenant_key(namespace)
            if key is None:
                return
            # FOR UPDATE on PostgreSQL: two writers of one namespace must not both pass the check.
            lock = "" if self._sql.dialect.name == "sqlite" else " FOR UPDATE"
            row = w.execute(
                f"SELECT model, dims, analyzer FROM recall_index_meta WHERE {self._ns} = ?{lock}", (key,)
            ).fetchone()
            if row is not None and row[2] != meta.analyzer:
                w.execute(f"DELETE FROM recall_index WHERE {self._ns} = ?", (key,))
            elif row is not None and (row[0], int(row[1])) != (meta.model, meta.dims):
                w.execute(f"UPDATE recall_index SET vector = NULL WHERE {self._ns} = ?", (key,))
            w.execute(
                upsert("recall_index_meta", (self._ns,), ("model", "dims", "analyzer")),
                (key, meta.model, meta.dims, meta.analyzer),
            )

    def put(self, namespace: str, rows: Sequence[TurnIndexRow]) -> None:
        """Store rows (replacing existing ones of the same turns), in one transaction.

        Raises:
            BackendError: The write failed (nothing was stored).
        """
        self._sql.put_turn_rows(
            "recall_index",
            namespace,
            ("terms", "vector", "events", "sentences"),
            [(r.turn_id, r.terms, r.vector, r.events, r.sentences) for r in rows],
        )

    def load(self, namespace: str, turn_ids: Sequence[int] | None = None) -> dict[int, TurnIndexRow]:
        """The rows of the namespace (or of some of its turns), by turn id."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return {}
        if turn_ids is None:
            rows = self._index_rows("", (key,))
        else:
            rows = []
            for part in chunks([int(i) for i in turn_ids]):
                rows += self._index_rows(f" AND {self._sql.dialect.in_list('turn_id', len(part))}", [key, *part])
        return {
            int(r[0]): TurnIndexRow(int(r[0]), r[1], _blob(r[2]), r[3], None if r[4] is None else int(r[4]))
            for r in rows
        }

    def _index_rows(self, where: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        """Rows ``(turn_id, terms, vector, events, sentences)`` of the namespace, ``where`` narrowing them."""
        select = "SELECT turn_id, terms, vector, {} FROM recall_index WHERE " + f"{self._ns} = ?{where}"
        try:
            return self._sql.rows(select.format("events, sentences"), params)
        except BackendError as exc:
            if "no such column" not in str(exc):
                raise
            # A read-only SQLite file of a version before m019_recall_events is read without
            # migrating: its rows have no event dates or sentence counts yet (NULL: not made).
            return self._sql.rows(select.format("NULL, NULL"), params)

    def _key_rows(self, namespace: str, key: object) -> list[tuple[object, ...]]:
        # The namespace name rides along as a parameter, so each row is a TurnKey as read (TurnKey._make).
        return self._sql.rows(
            f"SELECT t.id, CAST(? AS TEXT), s.name, t.name, t.ts FROM turns t JOIN sessions s "
            f"ON s.{self._ns} = t.{self._ns} AND s.id = t.session_id WHERE t.{self._ns} = ? "
            "ORDER BY t.session_id, t.seq",
            (namespace, key),
        )

    def keys(self, namespace: str) -> list[TurnKey]:
        """Id, session, speaker and timestamp of every turn of the namespace, in (session, sequence) order.

        The order of the store's ``iter_turns``; no content is read.
        """
        key = self._sql.tenant_key(namespace)
        return [] if key is None else list(map(TurnKey._make, self._key_rows(namespace, key)))

    def open_rows(
        self, namespace: str
    ) -> tuple[list[TurnKey], list[str | None], list[bytes | None], list[str | None], list[int | None]]:
        """:meth:`keys` with each turn's stored terms, vector, events and sentence count (``None``:
        no row, or not stored), in one read.

        What opening the index reads: two ordered scans instead of two reads and a lookup per turn.
        """
        key = self._sql.tenant_key(namespace)
        if key is None:
            return [], [], [], [], []
        # Two range scans, joined here: joined in SQL, SQLite's planner sorts the rows (vectors
        # included) in a temporary B-tree, which took twice as long at 100k turns.
        keys = self._key_rows(namespace, key)
        rows = {r[0]: r for r in self._index_rows("", (key,))}
        got = [rows.get(k[0]) for k in keys]
        return (
            list(map(TurnKey._make, keys)),
            [None if r is None else r[1] for r in got],
            [None if r is None else _blob(r[2]) for r in got],
            [None if r is None else r[3] for r in got],
            [None if r is None or r[4] is None else int(r[4]) for r in got],
        )

    def missing(self, namespace: str, *, vectors: bool) -> list[int]:
        """Ids of the namespace's turns without a row (or, with ``vectors``, without a stored vector), ascending.

        What a crash between a commit and its indexing left behind (see
        :meth:`stratamem.memory.derived.Derived.repair`); one anti-join.
        """
        key = self._sql.tenant_key(namespace)
        if key is None:
            return []
        lacking = "r.turn_id IS NULL" + (" OR r.vector IS NULL" if vectors else "")
        return [
            int(r[0])
            for r in self._sql.rows(
                f"SELECT t.id FROM turns t LEFT JOIN recall_index r ON r.{self._ns} = t.{self._ns} "
                f"AND r.turn_id = t.id WHERE t.{self._ns} = ? AND ({lacking}) ORDER BY t.id",
                (key,),
            )
        ]

    def counts(self, namespace: str) -> tuple[int, int]:
        """``(rows, rows with a vector)`` of the namespace."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return 0, 0
        rows = self._sql.rows(f"SELECT COUNT(*), COUNT(vector) FROM recall_index WHERE {self._ns} = ?", (key,))
        return int(rows[0][0]), int(rows[0][1])

    def delete(self, namespace: str, turn_ids: Sequence[int] | None = None) -> int:
        """Delete the rows of some turns (or all of the namespace, with its settings); returns rows deleted.

        Raises:
            BackendError: The delete failed (nothing was deleted).
        """
        with self._sql.write() as w:
            key = self._sql.tenant_key(namespace)
            if key is None:
                return 0
            if turn_ids is None:
                w.execute(f"DELETE FROM recall_index_meta WHERE {self._ns} = ?", (key,))
                return int(w.execute(f"DELETE FROM recall_index WHERE {self._ns} = ?", (key,)).rowcount)
            deleted = 0
            for part in chunks([int(i) for i in turn_ids]):
                deleted += int(
                    w.execute(
                        f"DELETE FROM recall_index WHERE {self._ns} = ? "
                        f"AND {self._sql.dialect.in_list('turn_id', len(part))}",
                        [key, *part],
                    ).rowcount
                )
            return deleted
