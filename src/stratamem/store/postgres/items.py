"""PostgreSQL storage of memory items (``m005_items``): the SQL behind :mod:`stratamem.items`.

Reads and writes are shared with SQLite (:mod:`stratamem.store.item_reads`,
:mod:`stratamem.store.item_store`): every method takes the namespace and
touches only that namespace's rows; an item id from another namespace
behaves exactly like an id that does not exist. What differs — how it
searches and how it stays safe with many writers — is here, as the shared
writes' hooks and the searches:

* **Lexical search** — a ``tsvector`` of the item's folded words under a GIN
  index stands in for FTS5; :meth:`PostgresItemStore.lexical` takes the same
  FTS5 expression (see :mod:`stratamem.store.postgres.search` for the subset)
  and returns ``-ts_rank``, so, as with FTS5's bm25, more negative is better.
* **Vectors** — pgvector ``vector`` values. :meth:`~PostgresItemStore.vectors_after`
  feeds :class:`stratamem.items.search.VectorIndex` exactly as on SQLite;
  :meth:`~PostgresItemStore.nearest` is an exact server-side k-NN for callers that
  would rather not hold the vectors (no HNSW index: see ``docs/postgres.md``
  for the measurement and why).
* **Changed vectors** — ``memory_item_vector_log`` (``m007_item_ids``) gets a
  row, written here (a hook of the shared writes) beside the change, whenever a stored vector is replaced
  or deleted; in-memory indexes replay it (SQLite uses triggers for the same
  log). Identity columns never hand out an id twice, so ids need no change.
* **Id order** — ``vectors_after`` loads incrementally by id, which is only
  safe if a namespace's ids become visible in id order. PostgreSQL hands out
  identity values before commit, so every item write takes a per-namespace
  transaction-scoped advisory lock first: item writers of one namespace
  commit one at a time, as SQLite's single writer does, and because the lock
  is always the first lock they take they cannot deadlock on each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from psycopg import sql

from ..ddl import create_table
from ..item_store import ITEM_COLUMNS, METRIC_COLUMNS, ItemStore
from ..item_view import view_clause
from ..sql import POSTGRES, Writer
from .search import fts_to_tsquery, index_terms, require_pgvector, vector_literal

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["PostgresItemStore", "m005_items", "m007_item_ids", "m013_item_scope"]

# First key of the two-key advisory lock serializing one namespace's item writers ("It").
_LOCK_CLASS = 0x4974


def m005_items(conn: psycopg.Connection) -> None:
    """Memory items (seed 003): tiers, access tracking, supersession, vectors, full-text terms, metrics."""
    require_pgvector(conn)
    for statement in (
        create_table(
            POSTGRES,
            "memory_items",
            (
                "{tenant_column}",
                "id BIGINT GENERATED ALWAYS AS IDENTITY",
                *ITEM_COLUMNS,
                "terms tsvector NOT NULL",
                "PRIMARY KEY (namespace, id)",
                "FOREIGN KEY (namespace, superseded_by) REFERENCES memory_items (namespace, id)",
            ),
            superseded_ref="",
        ),
        "CREATE INDEX memory_items_tier ON memory_items (namespace, tier, relevance, created_at)",
        "CREATE INDEX memory_items_key ON memory_items (namespace, key) WHERE key IS NOT NULL",
        "CREATE INDEX memory_items_superseded ON memory_items (namespace, superseded_by) "
        "WHERE superseded_by IS NOT NULL",
        "CREATE INDEX memory_items_terms ON memory_items USING gin (terms)",
        create_table(POSTGRES, "memory_item_metrics", METRIC_COLUMNS),
    ):
        conn.execute(statement)


def m007_item_ids(conn: psycopg.Connection) -> None:
    """The vector log, and ``superseded_by`` without its foreign key (see the SQLite twin).

    An item superseded by a since-pruned item keeps pointing at that id (never
    handed out again) and so stays superseded; the foreign key would forbid it.
    """
    for (name,) in conn.execute(
        "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass('memory_items') AND contype = 'f'"
    ).fetchall():
        conn.execute(sql.SQL("ALTER TABLE memory_items DROP CONSTRAINT {}").format(sql.Identifier(name)))
    conn.execute("""CREATE TABLE memory_item_vector_log (
        namespace TEXT NOT NULL,
        seq BIGINT GENERATED ALWAYS AS IDENTITY,
        item_id BIGINT NOT NULL,
        PRIMARY KEY (namespace, seq)
    )""")


def m013_item_scope(conn: psycopg.Connection) -> None:
    """Items may be scoped to their session (see the SQLite twin): a column and an index."""
    conn.execute(
        "ALTER TABLE memory_items ADD COLUMN scope TEXT NOT NULL DEFAULT 'namespace' "
        "CHECK (scope IN ('namespace', 'session'))"
    )
    conn.execute("CREATE INDEX memory_items_scope ON memory_items (namespace, session) WHERE scope = 'session'")


class PostgresItemStore(ItemStore):
    """Rows of ``memory_items`` (plus full-text terms and metrics) for one PostgreSQL store.

    The writes are :class:`~stratamem.store.item_store.ItemStore`'s; this class
    supplies its hooks (advisory lock, ``tsvector`` terms, explicit vector log)
    and the searches.

    Args:
        store: The owning store (its :attr:`~stratamem.store.postgres.PostgresStore.sql`).
    """

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(store.sql)

    # --- hooks of the shared writes ----------------------------------------------------

    def _guard(self, w: Writer, namespace: str) -> None:
        w.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (_LOCK_CLASS, namespace))

    def _search_columns(self, content: str) -> tuple[str, str, tuple[Any, ...]]:
        return ", terms", ", array_to_tsvector(CAST(? AS text[]))", (index_terms(content),)

    def _log_vectors(self, w: Writer, key: Any, ids: Sequence[int], *, stored_only: bool) -> None:
        stored = " AND embedding IS NOT NULL" if stored_only else ""
        w.execute(
            "INSERT INTO memory_item_vector_log (namespace, item_id) SELECT namespace, id FROM memory_items "
            f"WHERE namespace = ? AND id = ANY(?){stored} ORDER BY id",
            (key, list(ids)),
        )

    # --- reads ------------------------------------------------------------------------

    def lexical(
        self, namespace: str, match: str, *, limit: int, view: Sequence[str] | None = None
    ) -> list[tuple[int, float]]:
        """``(id, score)`` of the namespace's items in ``view`` matching an FTS5 expression, best first.

        The score is ``-ts_rank`` (more negative is better, like FTS5's bm25).
        Tier and liveness are filtered by the caller, which over-fetches.

        Raises:
            ValidationError: ``match`` uses FTS5 syntax the mirror does not translate.
        """
        query = fts_to_tsquery(match) if match else ""
        if not query:
            return []
        seen, params = view_clause(view)
        rows = self._sql.rows(
            "SELECT id, -ts_rank(terms, q, 1) AS score FROM memory_items, CAST(? AS tsquery) AS q "
            f"WHERE namespace = ? AND terms @@ q AND {seen} ORDER BY score, id LIMIT ?",
            (query, namespace, *params, int(limit)),
        )
        return [(int(r[0]), float(r[1])) for r in rows]

    def nearest(self, namespace: str, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` items whose vectors are most cosine-similar to ``query``: ``(id, cosine)``, best first.

        Exact (a scan of the namespace's vectors of the query's dimension);
        PostgreSQL-only, beside :meth:`vectors_after`, which the in-process
        index uses on both backends.

        Raises:
            ValueError: ``query`` is not a one-dimensional finite vector.
        """
        vec = np.asarray(query, dtype="<f4")
        if vec.ndim != 1:
            raise ValueError(f"query must be one-dimensional, got shape {vec.shape}")
        if k <= 0:
            return []
        literal = vector_literal(vec.tobytes())
        rows = self._sql.rows(
            "SELECT id, 1 - (embedding <=> q) AS cosine FROM memory_items, CAST(? AS vector) AS q "
            "WHERE namespace = ? AND embedding IS NOT NULL AND vector_dims(embedding) = ? "
            "ORDER BY embedding <=> q, id LIMIT ?",
            (literal, namespace, int(vec.shape[0]), int(k)),
        )
        return [(int(r[0]), float(r[1])) for r in rows]
