"""SQLite storage of memory items: the SQL behind :mod:`stratamem.items`.

A feature store (see :class:`~stratamem.store.sqlite.SQLiteStore`) on the
store's :class:`~stratamem.store.sql.Sql`. Reads and writes are shared with
PostgreSQL (:mod:`stratamem.store.item_reads`, :mod:`stratamem.store.item_store`);
the FTS5 search and the migrations that rebuilt the table are here. Every method takes the
namespace and touches only that namespace's rows; an item id from another
namespace behaves exactly like an id that does not exist. The rules (when to
spill, what to promote) live in :mod:`stratamem.items`; this module only reads
and writes rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..ddl import create_table
from ..item_store import ITEM_COLUMNS, METRIC_COLUMNS, ItemStore
from ..item_view import view_clause
from ..sql import SQLITE

if TYPE_CHECKING:
    from .store import SQLiteStore

__all__ = ["SQLiteItemStore", "m005_items", "m007_item_ids", "m013_item_scope"]


class SQLiteItemStore(ItemStore):
    """Rows of ``memory_items`` (plus its FTS5 index and metrics) for one SQLite store.

    The writes are :class:`~stratamem.store.item_store.ItemStore`'s with no
    hooks: ``BEGIN IMMEDIATE`` serializes writers, and triggers keep the FTS5
    index and the vector log in step. FTS5 search is here.

    Args:
        store: The owning store (its :attr:`~stratamem.store.sqlite.SQLiteStore.sql`).
    """

    def __init__(self, store: SQLiteStore) -> None:
        super().__init__(store.sql)

    def lexical(
        self, namespace: str, match: str, *, limit: int, view: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """``(id, bm25)`` of the namespace's items in ``view`` matching an FTS5 expression, best first.

        bm25 is FTS5's score (more negative is better). Tier and liveness are
        filtered by the caller, which over-fetches; the session view is filtered
        here, so other sessions' items do not crowd the top ``limit``.
        """
        ns_id = self._sql.tenant_key(namespace)
        if ns_id is None or not match:
            return []
        seen, params = view_clause(view)
        rows = self._sql.rows(
            "SELECT m.id, bm25(memory_items_fts) AS score FROM memory_items_fts "
            "JOIN memory_items m ON m.id = memory_items_fts.rowid "
            f"WHERE memory_items_fts MATCH ? AND m.namespace_id = ? AND {seen} ORDER BY score LIMIT ?",
            (match, ns_id, *params, int(limit)),
        )
        return [(int(r[0]), float(r[1])) for r in rows]


# Columns of memory_items in m005's order; m007 copies them across unchanged.
_M005_COLUMNS = (
    "id, namespace_id, session, content, type, tier, tokens, access_count, last_accessed_at, created_at, "
    "relevance, source, provenance, review, key, valid_from, valid_to, superseded_by, promoted_at, "
    "demoted_at, metadata, embedding, embedding_model"
)

_INDEXES = (
    "CREATE INDEX memory_items_tier ON memory_items (namespace_id, tier, relevance, created_at)",
    "CREATE INDEX memory_items_key ON memory_items (namespace_id, key) WHERE key IS NOT NULL",
    "CREATE INDEX memory_items_superseded ON memory_items (superseded_by) WHERE superseded_by IS NOT NULL",
)

# Item content never changes, so insert and delete triggers keep the external-content
# FTS5 index in step inside the same transaction.
_FTS_TRIGGERS = (
    """CREATE TRIGGER memory_items_ai AFTER INSERT ON memory_items BEGIN
        INSERT INTO memory_items_fts (rowid, content) VALUES (new.id, new.content);
    END""",
    """CREATE TRIGGER memory_items_ad AFTER DELETE ON memory_items BEGIN
        INSERT INTO memory_items_fts (memory_items_fts, rowid, content) VALUES ('delete', old.id, old.content);
    END""",
)


def m005_items(conn: sqlite3.Connection) -> None:
    """Memory items (seed 003): tiers, access tracking, supersession, vectors, FTS5, metrics."""
    for sql in (
        create_table(
            SQLITE,
            "memory_items",
            ("id INTEGER PRIMARY KEY", "{tenant_column}", *ITEM_COLUMNS),
            superseded_ref=" REFERENCES memory_items(id)",
        ),
        *_INDEXES,
        """CREATE VIRTUAL TABLE memory_items_fts USING fts5(
            content, content='memory_items', content_rowid='id', tokenize='unicode61 remove_diacritics 2')""",
        *_FTS_TRIGGERS,
        create_table(SQLITE, "memory_item_metrics", METRIC_COLUMNS),
    ):
        conn.execute(sql)


def m007_item_ids(conn: sqlite3.Connection) -> None:
    """Item ids are never reused; changed and deleted vectors are logged for in-memory indexes.

    Without AUTOINCREMENT SQLite hands out ``max(id) + 1``, so pruning the
    newest item gave its id to the next one, and a process that had loaded the
    old vector under that id kept scoring it. The table is rebuilt with
    AUTOINCREMENT (rows, ids and the FTS5 index carried over: its rowids are
    the same ids). ``superseded_by`` loses its foreign key: an item superseded
    by a since-pruned item keeps pointing at that id and stays superseded.
    """
    for sql in (
        "DROP TRIGGER memory_items_ai",
        "DROP TRIGGER memory_items_ad",
        create_table(
            SQLITE,
            "memory_items_v7",
            ("id INTEGER PRIMARY KEY AUTOINCREMENT", "{tenant_column}", *ITEM_COLUMNS),
            superseded_ref="",
        ),
        # Explicit ids: AUTOINCREMENT's counter starts above the highest one copied.
        f"INSERT INTO memory_items_v7 ({_M005_COLUMNS}) SELECT {_M005_COLUMNS} FROM memory_items",
        "DROP TABLE memory_items",
        "ALTER TABLE memory_items_v7 RENAME TO memory_items",
        *_INDEXES,
        *_FTS_TRIGGERS,
        # One row per vector that changed or vanished after it was written: in-memory
        # indexes (any process) replay the log instead of reloading every vector.
        """CREATE TABLE memory_item_vector_log (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            namespace_id INTEGER NOT NULL,
            item_id INTEGER NOT NULL
        )""",
        "CREATE INDEX memory_item_vector_log_ns ON memory_item_vector_log (namespace_id, seq)",
        # Triggers, not store code, so that no write path can forget the log.
        """CREATE TRIGGER memory_items_vector_ad AFTER DELETE ON memory_items
            WHEN old.embedding IS NOT NULL BEGIN
            INSERT INTO memory_item_vector_log (namespace_id, item_id) VALUES (old.namespace_id, old.id);
        END""",
        """CREATE TRIGGER memory_items_vector_au AFTER UPDATE OF embedding ON memory_items
            WHEN old.embedding IS NOT new.embedding BEGIN
            INSERT INTO memory_item_vector_log (namespace_id, item_id) VALUES (new.namespace_id, new.id);
        END""",
    ):
        conn.execute(sql)


def m013_item_scope(conn: sqlite3.Connection) -> None:
    """Items may be scoped to their session: ``scope`` is ``namespace`` (every existing item) or ``session``.

    A column and an index, nothing rebuilt: existing items stay visible to the
    whole namespace, as they were.
    """
    conn.execute(
        "ALTER TABLE memory_items ADD COLUMN scope TEXT NOT NULL DEFAULT 'namespace' "
        "CHECK (scope IN ('namespace', 'session'))"
    )
    conn.execute("CREATE INDEX memory_items_scope ON memory_items (namespace_id, session) WHERE scope = 'session'")
