"""Executing a :class:`~stratamem.store.forgetting.ForgetPlan` on PostgreSQL.

Every row the plan names is deleted or rewritten in one transaction, under
the namespace's pyramid lock and its items lock, so no writer of the
namespace changes what the plan was built from.

What PostgreSQL does with the bytes: a deleted or updated row stays in its
table file as a dead tuple until ``VACUUM`` prunes it, and its space is only
reused, not zeroed; ``VACUUM FULL`` rewrites the table and its indexes (and
TOAST table) into new files and drops the old ones, after which the table
files hold no copy. :meth:`PostgresForget.vacuum_full` does that for the
tables a forget touched (it takes an exclusive lock on each, so it is a
separate, explicit step). The write-ahead log is another matter: WAL
segments keep full-page images and row data until the server recycles them
after checkpoints (``max_wal_size``, ``wal_keep_size``), and archived WAL,
base backups and replicas keep theirs under their own retention. No SQL
erases those; see ``docs/forget.md``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from psycopg import sql

from ..forgetting import ForgetPlan
from .items import _LOCK_CLASS as _ITEMS_LOCK
from ..node_store import _LOCK_CLASS as _NODES_LOCK

if TYPE_CHECKING:
    import psycopg

    from .store import PostgresStore

__all__ = ["FORGET_TABLES", "PostgresForget"]

FORGET_TABLES: tuple[str, ...] = ("turns", "sessions", "nodes", "node_turns", "memory_items",
                                  "memory_item_metrics", "manifests", "conversations", "embeddings",
                                  "namespaces", "store_meta", "recall_index", "recall_index_meta",
                                  "ingest_keys", "recall_passages")
"""Tables a forget may delete from or rewrite (what :meth:`PostgresForget.vacuum_full` rewrites)."""


class PostgresForget:
    """Forgetting on one :class:`~stratamem.store.postgres.PostgresStore` (reach it as ``store.forgetting``)."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def apply(self, namespace: str, build: Callable[[], ForgetPlan]) -> tuple[ForgetPlan, bool]:
        """Build a plan and apply it in one transaction (see the SQLite twin).

        The namespace's pyramid and items locks are taken first, so no writer of
        the namespace changes what ``build`` reads before the plan is applied.

        Returns:
            The plan applied, and ``True`` (there is no WAL file to truncate from here).

        Raises:
            BackendError: The database failed; nothing was changed.
        """
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            for lock_class in (_NODES_LOCK, _ITEMS_LOCK):
                conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (lock_class, namespace))
            plan = build()
            self._apply(conn, plan)
        return plan, True

    def _apply(self, conn: psycopg.Connection, p: ForgetPlan) -> None:
        ns = p.namespace
        if not conn.execute("SELECT 1 FROM namespaces WHERE namespace = %s", (ns,)).fetchall():
            return
        if p.whole_namespace:
            conn.execute("INSERT INTO memory_item_vector_log (namespace, item_id) SELECT namespace, id "
                         "FROM memory_items WHERE namespace = %s AND embedding IS NOT NULL ORDER BY id", (ns,))
            for statement in ("DELETE FROM node_turns WHERE namespace = %s",
                              "UPDATE nodes SET parent_id = NULL WHERE namespace = %s",
                              "DELETE FROM nodes WHERE namespace = %s",
                              "DELETE FROM summary_spend WHERE namespace = %s",
                              "DELETE FROM memory_items WHERE namespace = %s",
                              "DELETE FROM memory_item_metrics WHERE namespace = %s",
                              "DELETE FROM recall_index WHERE namespace = %s",
                              "DELETE FROM recall_index_meta WHERE namespace = %s",
                              "DELETE FROM recall_passages WHERE namespace = %s",
                              "DELETE FROM turns WHERE namespace = %s",
                              "DELETE FROM ingest_keys WHERE namespace = %s",
                              "DELETE FROM sessions WHERE namespace = %s",
                              "DELETE FROM manifests WHERE namespace = %s",
                              "DELETE FROM conversations WHERE namespace = %s",
                              "DELETE FROM namespaces WHERE namespace = %s"):
                conn.execute(statement, (ns,))  # type: ignore[arg-type]
        else:
            self._delete_parts(conn, p)
        if p.delete_manifests:
            conn.execute("DELETE FROM manifests WHERE namespace = %s AND id = ANY(%s)",
                         (ns, [int(i) for i in p.delete_manifests]))
        if p.conversations:
            conn.execute("DELETE FROM conversations WHERE namespace = %s AND session = ANY(%s)",
                         (ns, sorted(set(p.conversations))))
        if p.embedding_hashes:
            conn.execute("DELETE FROM embeddings WHERE hash = ANY(%s)", (sorted(set(p.embedding_hashes)),))
        if p.archive_pending:
            key = f"forget.archive.{ns}"
            rows = conn.execute("SELECT value FROM store_meta WHERE key = %s", (key,)).fetchall()
            pending = {**(json.loads(rows[0][0]) if rows else {}), **p.archive_pending}
            conn.execute("INSERT INTO store_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE "
                         "SET value = excluded.value", (key, json.dumps(pending, sort_keys=True)))

    def _delete_parts(self, conn: psycopg.Connection, p: ForgetPlan) -> None:
        ns, turns = p.namespace, sorted({int(t) for t in p.turn_ids})
        conn.execute("DELETE FROM node_turns WHERE namespace = %s AND turn_id = ANY(%s)", (ns, turns))
        for node_id in p.delete_nodes:  # children first: parent_id references them
            conn.execute("DELETE FROM node_turns WHERE namespace = %s AND node_id = %s", (ns, int(node_id)))
            conn.execute("DELETE FROM nodes WHERE namespace = %s AND id = %s", (ns, int(node_id)))
        for r in p.rewrite_nodes:
            lo, hi = r.seq_range if r.seq_range is not None else (None, None)
            fmt, content = r.warm if r.warm is not None else (None, None)
            conn.execute(
                "UPDATE nodes SET turn_count=%s, tokens=%s, first_turn_id=%s, last_turn_id=%s, ts_start=%s, "
                "ts_end=%s, seq_lo=COALESCE(%s, seq_lo), seq_hi=COALESCE(%s, seq_hi), summary=NULL, "
                "summary_tokens=NULL, summary_status='pending', summary_error=NULL, embedding=NULL, "
                "view_tokens=%s, warm_format=COALESCE(%s, warm_format), warm_content=COALESCE(%s, warm_content) "
                "WHERE namespace=%s AND id=%s",
                (r.turn_count, r.tokens, r.first_turn_id, r.last_turn_id, r.start, r.end, lo, hi, r.view_tokens,
                 fmt, content, ns, r.node_id))
        for node_id, (lo, hi) in p.segment_spans.items():
            conn.execute("UPDATE nodes SET seq_lo=%s, seq_hi=%s WHERE namespace=%s AND id=%s",
                         (int(lo), int(hi), ns, int(node_id)))
        for node_id, ref in p.archive_refs.items():
            conn.execute("UPDATE nodes SET archive_ref=%s WHERE namespace=%s AND id=%s", (ref, ns, int(node_id)))
        if p.delete_items:
            ids = sorted({int(i) for i in p.delete_items})
            conn.execute("INSERT INTO memory_item_vector_log (namespace, item_id) SELECT namespace, id "
                         "FROM memory_items WHERE namespace = %s AND id = ANY(%s) AND embedding IS NOT NULL "
                         "ORDER BY id", (ns, ids))
            conn.execute("DELETE FROM memory_items WHERE namespace = %s AND id = ANY(%s)", (ns, ids))
        for item_id, prov in p.item_provenance.items():
            conn.execute("UPDATE memory_items SET provenance=%s WHERE namespace=%s AND id=%s",
                         (json.dumps(list(prov)), ns, int(item_id)))
        # The stored recall index holds each turn's analysed terms and vector.
        conn.execute("DELETE FROM recall_index WHERE namespace = %s AND turn_id = ANY(%s)", (ns, turns))
        conn.execute("DELETE FROM recall_passages WHERE namespace = %s AND turn_id = ANY(%s)", (ns, turns))
        conn.execute("DELETE FROM turns WHERE namespace = %s AND id = ANY(%s)", (ns, turns))
        # A forgotten message may be ingested again: its dedupe key goes with it.
        conn.execute("DELETE FROM ingest_keys WHERE namespace = %s AND turn_id = ANY(%s)", (ns, turns))
        if p.sessions:
            conn.execute("DELETE FROM sessions WHERE namespace = %s AND name = ANY(%s)", (ns, sorted(set(p.sessions))))

    def pending_archive(self, namespace: str) -> dict[str, str]:
        """Archive files a committed forget still has to finish (see the SQLite twin)."""
        rows = self._store._query("SELECT value FROM store_meta WHERE key = %s", (f"forget.archive.{namespace}",))
        return dict(json.loads(rows[0][0])) if rows else {}

    def clear_pending_archive(self, namespace: str, done: Sequence[str]) -> None:
        """Drop finished files from the journal."""
        key = f"forget.archive.{namespace}"
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            rows = conn.execute("SELECT value FROM store_meta WHERE key = %s FOR UPDATE", (key,)).fetchall()
            left: dict[str, Any] = {k: v for k, v in (json.loads(rows[0][0]) if rows else {}).items()
                                    if k not in done}
            if left:
                conn.execute("UPDATE store_meta SET value = %s WHERE key = %s", (json.dumps(left, sort_keys=True), key))
            else:
                conn.execute("DELETE FROM store_meta WHERE key = %s", (key,))

    def checkpoint(self) -> bool:
        """Nothing to truncate from a client: ``True`` (see the module docstring on WAL retention)."""
        return True

    def vacuum(self) -> None:
        """``VACUUM FULL`` of every table a forget touches: rewrites them (and their indexes) without dead rows.

        Takes an ``ACCESS EXCLUSIVE`` lock on each table while it runs.

        Raises:
            BackendError: The server refused (e.g. inside a transaction, or a lock timeout).
        """
        with self._store.connection() as conn, self._store._errors():
            for table in FORGET_TABLES:
                conn.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(table)))
