"""SQLite storage of memory items: the SQL behind :mod:`stratamem.items`.

A feature store (see :class:`~stratamem.store.sqlite.SQLiteStore`): it shares the
store's connection, lock and ``transaction()``. Every method takes the
namespace and touches only that namespace's rows; an item id from another
namespace behaves exactly like an id that does not exist. The rules (when to
spill, what to promote) live in :mod:`stratamem.items`; this module only reads
and writes rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...records import format_timestamp, parse_timestamp
from ..item_view import view_clause
from ..new_rows import NewItem
from ..vectors import pack_vector, unpack_vector

if TYPE_CHECKING:
    from ...items.records import MemoryItem
    from .store import SQLiteStore

__all__ = ["NewItem", "SQLiteItemStore", "m007_item_ids", "m013_item_scope", "view_clause"]

_COLUMNS = ("id, session, content, type, tier, tokens, access_count, last_accessed_at, created_at, relevance, "
            "source, provenance, review, key, valid_from, valid_to, superseded_by, promoted_at, demoted_at, "
            "metadata, embedding IS NOT NULL, scope")


def _ts(value: str | None) -> Any:
    return parse_timestamp(value) if value else None


class SQLiteItemStore:
    """Rows of ``memory_items`` (plus its FTS5 index and metrics) for one SQLite store.

    Args:
        store: The owning store; its connection, lock and transaction are used.
    """

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    # --- plumbing ---------------------------------------------------------------------

    def transaction(self) -> Any:
        """The owning store's write transaction."""
        return self._store.transaction()

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._store.lock, self._store._errors():
            return self._store.connection.execute(sql, params).fetchall()

    def _exec(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run a write inside a transaction; returns the changed row count."""
        with self._store.transaction():
            return self._store.connection.execute(sql, params).rowcount

    def _ns(self, namespace: str, *, create: bool = False) -> int | None:
        with self._store.lock, self._store._errors():
            if create:
                with self._store.transaction():
                    return self._store._namespace_id(namespace, create=True)
            return self._store._namespace_id(namespace, create=False)

    def _to_item(self, namespace: str, row: Sequence[Any], supersedes: tuple[int, ...] = ()) -> MemoryItem:
        from ...items.records import MemoryItem

        return MemoryItem(
            id=int(row[0]), namespace=namespace, session=row[1], content=row[2], type=row[3], tier=row[4],
            tokens=int(row[5]), access_count=int(row[6]), last_accessed_at=_ts(row[7]),
            created_at=parse_timestamp(row[8]), relevance=float(row[9]), source=row[10],
            provenance=tuple(json.loads(row[11])), review=row[12], key=row[13], valid_from=_ts(row[14]),
            valid_to=_ts(row[15]), superseded_by=row[16], promoted_at=_ts(row[17]), demoted_at=_ts(row[18]),
            metadata=json.loads(row[19]) if row[19] else {}, embedded=bool(row[20]), supersedes=supersedes,
            scope=row[21])

    def _items(self, namespace: str, where: str, params: Sequence[Any], order: str = "id") -> list[MemoryItem]:
        ns_id = self._ns(namespace)
        if ns_id is None:
            return []
        rows = self._rows(f"SELECT {_COLUMNS} FROM memory_items WHERE namespace_id = ? AND ({where}) ORDER BY {order}",
                          [ns_id, *params])
        if not rows:
            return []
        ids = [r[0] for r in rows]
        older: dict[int, list[int]] = {}
        for chunk in _chunks(ids, 900):
            for old_id, newer in self._rows(
                    # "+namespace_id" keeps the planner on the superseded_by index; on the
                    # namespace index this lookup scanned the whole namespace.
                    f"SELECT id, superseded_by FROM memory_items WHERE +namespace_id = ? AND superseded_by IN "
                    f"({','.join('?' * len(chunk))}) ORDER BY id", [ns_id, *chunk]):
                older.setdefault(int(newer), []).append(int(old_id))
        return [self._to_item(namespace, r, tuple(older.get(int(r[0]), ()))) for r in rows]

    # --- reads ------------------------------------------------------------------------

    def get(self, namespace: str, ids: Iterable[int]) -> list[MemoryItem]:
        """Items with these ids in ``namespace`` (ids elsewhere are silently absent), by id."""
        ids = [int(i) for i in ids]
        out: list[MemoryItem] = []
        for chunk in _chunks(ids, 900):
            out.extend(self._items(namespace, f"id IN ({','.join('?' * len(chunk))})", chunk))
        return sorted(out, key=lambda i: i.id)

    def select(self, namespace: str, *, tiers: Sequence[str] | None = None, key: str | None = None,
             live_only: bool = False, order: str = "id", limit: int | None = None,
             view: Sequence[str] | None = None) -> list[MemoryItem]:
        """Items of the namespace, optionally by tier, key or session view (see :func:`view_clause`);
        ``live_only`` drops superseded and rejected."""
        seen, params = view_clause(view)
        where = ["1", seen]
        if tiers is not None:
            where.append(f"tier IN ({','.join('?' * len(tiers))})")
            params.extend(tiers)
        if key is not None:
            where.append("key = ?")
            params.append(key)
        if live_only:
            where.append("superseded_by IS NULL AND COALESCE(review, '') != 'rejected'")
        orders = {"id": "id", "spill": "relevance ASC, created_at ASC, id ASC",
                  "prune": "access_count ASC, COALESCE(last_accessed_at, created_at) ASC, id ASC"}
        sql_order = orders[order]
        if limit is not None:
            sql_order += f" LIMIT {int(limit)}"
        return self._items(namespace, " AND ".join(where), params, sql_order)

    def tier_totals(self, namespace: str, view: Sequence[str] | None = None) -> dict[str, tuple[int, int]]:
        """``{tier: (items, tokens)}`` over the namespace's items (those in ``view``, see :func:`view_clause`)."""
        ns_id = self._ns(namespace)
        if ns_id is None:
            return {}
        seen, params = view_clause(view)
        rows = self._rows("SELECT tier, COUNT(*), COALESCE(SUM(tokens), 0) FROM memory_items "
                          f"WHERE namespace_id = ? AND {seen} GROUP BY tier", (ns_id, *params))
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}

    def flag_counts(self, namespace: str) -> dict[str, int]:
        """Counts of superseded, pending-review, rejected and not-embedded items."""
        ns_id = self._ns(namespace)
        if ns_id is None:
            return {"superseded": 0, "pending_review": 0, "rejected": 0, "unembedded": 0}
        row = self._rows(
            "SELECT COALESCE(SUM(superseded_by IS NOT NULL), 0), COALESCE(SUM(review = 'pending'), 0), "
            "COALESCE(SUM(review = 'rejected'), 0), COALESCE(SUM(embedding IS NULL), 0) "
            "FROM memory_items WHERE namespace_id = ?", (ns_id,))[0]
        return {"superseded": int(row[0]), "pending_review": int(row[1]), "rejected": int(row[2]),
                "unembedded": int(row[3])}

    def lexical(self, namespace: str, match: str, *, limit: int,
                view: Sequence[str] | None = None) -> list[tuple[int, float]]:
        """``(id, bm25)`` of the namespace's items in ``view`` matching an FTS5 expression, best first.

        bm25 is FTS5's score (more negative is better). Tier and liveness are
        filtered by the caller, which over-fetches; the session view is filtered
        here, so other sessions' items do not crowd the top ``limit``.
        """
        ns_id = self._ns(namespace)
        if ns_id is None or not match:
            return []
        seen, params = view_clause(view)
        rows = self._rows(
            "SELECT m.id, bm25(memory_items_fts) AS score FROM memory_items_fts "
            "JOIN memory_items m ON m.id = memory_items_fts.rowid "
            f"WHERE memory_items_fts MATCH ? AND m.namespace_id = ? AND {seen} ORDER BY score LIMIT ?",
            (match, ns_id, *params, int(limit)))
        return [(int(r[0]), float(r[1])) for r in rows]

    def vectors_after(self, namespace: str, after_id: int) -> list[tuple[int, bytes, str | None]]:
        """``(id, float32 blob, model)`` of embedded items with id > ``after_id``, by id."""
        ns_id = self._ns(namespace)
        if ns_id is None:
            return []
        rows = self._rows("SELECT id, embedding, embedding_model FROM memory_items "
                          "WHERE namespace_id = ? AND id > ? AND embedding IS NOT NULL ORDER BY id",
                          (ns_id, int(after_id)))
        return [(int(r[0]), unpack_vector(r[1]), r[2]) for r in rows]

    def vector_log_head(self, namespace: str) -> int:
        """The namespace's latest vector-log position (0 when it has none)."""
        ns_id = self._ns(namespace)
        if ns_id is None:
            return 0
        row = self._rows("SELECT MAX(seq) FROM memory_item_vector_log WHERE namespace_id = ?", (ns_id,))[0]
        return int(row[0] or 0)

    def vector_changes(self, namespace: str, after_seq: int) -> tuple[int, list[tuple[int, bytes | None]]]:
        """Vectors changed or deleted since log position ``after_seq``.

        Returns:
            The log position reached and ``(id, current float32 blob or None)``
            per changed item, in log order; ``None`` means the item or its
            vector is gone.
        """
        ns_id = self._ns(namespace)
        if ns_id is None:
            return int(after_seq), []
        rows = self._rows(
            "SELECT l.seq, l.item_id, m.embedding FROM memory_item_vector_log l "
            "LEFT JOIN memory_items m ON m.id = l.item_id AND m.namespace_id = l.namespace_id "
            "WHERE l.namespace_id = ? AND l.seq > ? ORDER BY l.seq", (ns_id, int(after_seq)))
        if not rows:
            return int(after_seq), []
        return int(rows[-1][0]), [(int(r[1]), unpack_vector(r[2]) if r[2] is not None else None) for r in rows]

    def metrics(self, namespace: str) -> dict[str, float]:
        """The namespace's persisted metric values by name."""
        ns_id = self._ns(namespace)
        if ns_id is None:
            return {}
        return {r[0]: float(r[1]) for r in
                self._rows("SELECT name, value FROM memory_item_metrics WHERE namespace_id = ?", (ns_id,))}

    # --- writes (each joins the caller's transaction, if any) -------------------------

    def insert(self, namespace: str, item: NewItem) -> int:
        """Insert one item; returns its id."""
        with self._store.transaction():
            ns_id = self._store._namespace_id(namespace, create=True)
            row = self._store.connection.execute(
                "INSERT INTO memory_items (namespace_id, session, content, type, tier, tokens, access_count, "
                "created_at, relevance, source, provenance, review, key, valid_from, valid_to, metadata, "
                "embedding, embedding_model, scope) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "RETURNING id",
                (ns_id, item.session, item.content, item.type, item.tier, item.tokens, item.created_at,
                 item.relevance, item.source, json.dumps(list(item.provenance)), item.review, item.key,
                 item.valid_from, item.valid_to,
                 json.dumps(dict(item.metadata), ensure_ascii=False) if item.metadata else None,
                 None if item.embedding is None else pack_vector(item.embedding), item.embedding_model,
                 item.scope)).fetchone()
            return int(row[0])

    def update(self, namespace: str, ids: Sequence[int], **columns: Any) -> int:
        """Set columns on the namespace's items ``ids``; returns how many rows changed."""
        allowed = {"tier", "access_count", "last_accessed_at", "relevance", "review", "valid_to",
                   "superseded_by", "promoted_at", "demoted_at", "embedding", "embedding_model"}
        bad = set(columns) - allowed
        if bad:
            raise ValueError(f"cannot update item columns {sorted(bad)}")
        if not ids or not columns:
            return 0
        ns_id = self._ns(namespace)
        if ns_id is None:
            return 0
        if columns.get("embedding") is not None:
            columns["embedding"] = pack_vector(columns["embedding"])
        sets = ", ".join(f"{c} = ?" for c in columns)
        changed = 0
        with self._store.transaction():
            for chunk in _chunks([int(i) for i in ids], 900):
                changed += self._store.connection.execute(
                    f"UPDATE memory_items SET {sets} WHERE namespace_id = ? AND id IN ({','.join('?' * len(chunk))})",
                    [*columns.values(), ns_id, *chunk]).rowcount
        return changed

    def record_access(self, namespace: str, updates: Mapping[int, float], at: str) -> None:
        """One recall hit per id: access count + 1, last access = ``at``, relevance = new value."""
        ns_id = self._ns(namespace)
        if ns_id is None or not updates:
            return
        with self._store.transaction():
            self._store.connection.executemany(
                "UPDATE memory_items SET access_count = access_count + 1, last_accessed_at = ?, relevance = ? "
                "WHERE namespace_id = ? AND id = ?",
                [(at, float(rel), ns_id, int(i)) for i, rel in updates.items()])

    def delete(self, namespace: str, ids: Sequence[int]) -> int:
        """Delete items (their FTS rows and vector-log entries follow by trigger).

        Items they superseded keep ``superseded_by`` pointing at the deleted id
        (ids are never reused), so they stay superseded and out of recall.
        """
        ns_id = self._ns(namespace)
        if ns_id is None or not ids:
            return 0
        n = 0
        with self._store.transaction():
            for chunk in _chunks([int(i) for i in ids], 900):
                n += self._store.connection.execute(
                    f"DELETE FROM memory_items WHERE namespace_id = ? AND id IN ({','.join('?' * len(chunk))})",
                    [ns_id, *chunk]).rowcount
        return n

    def add_metrics(self, namespace: str, deltas: Mapping[str, float]) -> None:
        """Add ``deltas`` to the namespace's metric values (created at 0)."""
        if not deltas:
            return
        with self._store.transaction():
            ns_id = self._store._namespace_id(namespace, create=True)
            self._store.connection.executemany(
                "INSERT INTO memory_item_metrics (namespace_id, name, value) VALUES (?, ?, ?) "
                "ON CONFLICT (namespace_id, name) DO UPDATE SET value = value + excluded.value",
                [(ns_id, k, float(v)) for k, v in deltas.items()])

    @staticmethod
    def timestamp(value: Any) -> str:
        """Canonical timestamp text for a datetime column."""
        return format_timestamp(value)


# Columns of memory_items in m005's order; m007 copies them across unchanged.
_M005_COLUMNS = ("id, namespace_id, session, content, type, tier, tokens, access_count, last_accessed_at, created_at, "
                 "relevance, source, provenance, review, key, valid_from, valid_to, superseded_by, promoted_at, "
                 "demoted_at, metadata, embedding, embedding_model")


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
        """CREATE TABLE memory_items_v7 (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            namespace_id INTEGER NOT NULL REFERENCES namespaces(id),
            session TEXT,
            content TEXT NOT NULL,
            type TEXT NOT NULL,
            tier TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            access_count INTEGER NOT NULL DEFAULT 0,
            last_accessed_at TEXT,
            created_at TEXT NOT NULL,
            relevance REAL NOT NULL,
            source TEXT NOT NULL,
            provenance TEXT NOT NULL DEFAULT '[]',
            review TEXT,
            key TEXT,
            valid_from TEXT,
            valid_to TEXT,
            superseded_by INTEGER,
            promoted_at TEXT,
            demoted_at TEXT,
            metadata TEXT,
            embedding BLOB,
            embedding_model TEXT
        )""",
        # Explicit ids: AUTOINCREMENT's counter starts above the highest one copied.
        f"INSERT INTO memory_items_v7 ({_M005_COLUMNS}) SELECT {_M005_COLUMNS} FROM memory_items",
        "DROP TABLE memory_items",
        "ALTER TABLE memory_items_v7 RENAME TO memory_items",
        "CREATE INDEX memory_items_tier ON memory_items (namespace_id, tier, relevance, created_at)",
        "CREATE INDEX memory_items_key ON memory_items (namespace_id, key) WHERE key IS NOT NULL",
        "CREATE INDEX memory_items_superseded ON memory_items (superseded_by) WHERE superseded_by IS NOT NULL",
        """CREATE TRIGGER memory_items_ai AFTER INSERT ON memory_items BEGIN
            INSERT INTO memory_items_fts (rowid, content) VALUES (new.id, new.content);
        END""",
        """CREATE TRIGGER memory_items_ad AFTER DELETE ON memory_items BEGIN
            INSERT INTO memory_items_fts (memory_items_fts, rowid, content) VALUES ('delete', old.id, old.content);
        END""",
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
    conn.execute("ALTER TABLE memory_items ADD COLUMN scope TEXT NOT NULL DEFAULT 'namespace' "
                 "CHECK (scope IN ('namespace', 'session'))")
    conn.execute("CREATE INDEX memory_items_scope ON memory_items (namespace_id, session) WHERE scope = 'session'")


def _chunks(values: Sequence[int], size: int) -> Iterable[Sequence[int]]:
    for i in range(0, len(values), size):
        yield values[i:i + size]
