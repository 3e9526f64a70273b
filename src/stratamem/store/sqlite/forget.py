"""Executing a :class:`~stratamem.store.forgetting.ForgetPlan` on SQLite so that the bytes go.

A deleted row normally leaves its bytes in the file: in the freed cell of its
page, in free-list pages, in the write-ahead log, and (for the FTS5 index of
memory items) as terms in index segments until they are merged. So the plan is
applied with ``PRAGMA secure_delete = ON`` (SQLite overwrites deleted content
with zeros), the items' FTS5 index is merged with ``'optimize'`` inside the
same transaction (the merge drops deleted terms; secure delete zeroes the old
segments), and after the commit the WAL is checkpointed and truncated
(``wal_checkpoint(TRUNCATE)``), so no older page image stays in ``-wal``.

A checkpoint cannot complete while another connection is reading an older
snapshot; :meth:`SQLiteForget.apply` reports whether the WAL was truncated,
and the next forget (or any checkpoint) finishes the job.

Archive files are not touched here: the plan's ``archive_pending`` map is
recorded in ``store_meta`` in the same transaction (key
``forget.archive.<namespace>``) and :mod:`stratamem.forget` finishes the files
after the commit, or on the next open after a crash.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...records import format_timestamp
from ..forgetting import ForgetPlan

if TYPE_CHECKING:
    import sqlite3

    from .store import SQLiteStore

__all__ = ["SQLiteForget"]

_NS = "(SELECT id FROM namespaces WHERE name=?)"


def _ids(values: Iterable[int]) -> str:
    return json.dumps(sorted({int(v) for v in values}))


def _in(column: str) -> str:
    return f"{column} IN (SELECT value FROM json_each(?))"


class SQLiteForget:
    """Forgetting on one :class:`~stratamem.store.sqlite.SQLiteStore` (reach it as ``store.forgetting``)."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def apply(self, namespace: str, build: Callable[[], ForgetPlan]) -> tuple[ForgetPlan, bool]:
        """Build a plan and apply it in one write transaction, with secure delete on.

        ``build`` runs inside the transaction (``BEGIN IMMEDIATE`` holds the
        database's write lock), so no writer changes what it reads before the
        plan is applied; it may also stage archive files.

        Returns:
            The plan applied, and whether the WAL was truncated afterwards.

        Raises:
            BackendError: The database failed; nothing was changed.
        """
        store = self._store
        with store.lock, store._errors():
            conn = store.connection
            before = conn.execute("PRAGMA secure_delete").fetchone()[0]
            conn.execute("PRAGMA secure_delete = ON")
            try:
                with store.transaction():
                    plan = build()
                    self._apply(conn, plan)
            finally:
                conn.execute(f"PRAGMA secure_delete = {int(before)}")
            return plan, self.checkpoint()

    def checkpoint(self) -> bool:
        """Copy the WAL into the database file and truncate it; ``False`` if a reader kept it from finishing."""
        store = self._store
        if store.path == ":memory:":
            return True
        with store.lock, store._errors():
            busy, _, _ = store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return busy == 0

    def _apply(self, conn: sqlite3.Connection, p: ForgetPlan) -> None:
        ns = p.namespace
        ns_row = conn.execute("SELECT id FROM namespaces WHERE name=?", (ns,)).fetchone()
        if ns_row is None:
            return
        ns_id = int(ns_row[0])
        if p.whole_namespace:
            self._delete_namespace(conn, ns, ns_id)
        else:
            self._delete_parts(conn, p, ns_id)
        if p.delete_manifests:
            conn.execute(f"DELETE FROM manifests WHERE namespace=? AND {_in('id')}", (ns, _ids(p.delete_manifests)))
        if p.conversations:
            conn.execute("DELETE FROM conversations WHERE namespace=? AND session IN (SELECT value FROM json_each(?))",
                         (ns, json.dumps(sorted(set(p.conversations)))))
        if p.embedding_hashes:
            conn.execute("DELETE FROM embeddings WHERE hash IN (SELECT value FROM json_each(?))",
                         (json.dumps(sorted(set(p.embedding_hashes))),))
        if p.delete_items or p.whole_namespace:
            # FTS5 keeps a deleted row's terms in its index segments until they are
            # merged; 'optimize' merges them all now (secure delete zeroes the old pages).
            conn.execute("INSERT INTO memory_items_fts (memory_items_fts) VALUES ('optimize')")
        if p.archive_pending:
            key = f"forget.archive.{ns}"
            row = conn.execute("SELECT value FROM store_meta WHERE key=?", (key,)).fetchone()
            pending = {**(json.loads(row[0]) if row else {}), **p.archive_pending}
            conn.execute("INSERT INTO store_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                         "SET value = excluded.value", (key, json.dumps(pending, sort_keys=True)))

    def _delete_namespace(self, conn: sqlite3.Connection, ns: str, ns_id: int) -> None:
        conn.execute("DELETE FROM node_turns WHERE node_id IN (SELECT id FROM nodes WHERE namespace_id=?)", (ns_id,))
        conn.execute("UPDATE nodes SET parent_id = NULL WHERE namespace_id=?", (ns_id,))
        conn.execute("DELETE FROM nodes WHERE namespace_id=?", (ns_id,))
        conn.execute("DELETE FROM summary_spend WHERE namespace_id=?", (ns_id,))
        conn.execute("DELETE FROM memory_items WHERE namespace_id=?", (ns_id,))
        conn.execute("DELETE FROM memory_item_metrics WHERE namespace_id=?", (ns_id,))
        conn.execute("DELETE FROM recall_index WHERE namespace_id=?", (ns_id,))
        conn.execute("DELETE FROM recall_index_meta WHERE namespace_id=?", (ns_id,))
        conn.execute("DELETE FROM recall_passages WHERE namespace_id=?", (ns_id,))
        conn.execute("DELETE FROM turns WHERE namespace_id=?", (ns_id,))
        conn.execute("DELETE FROM ingest_keys WHERE namespace=?", (ns,))
        conn.execute("DELETE FROM sessions WHERE namespace_id=?", (ns_id,))
        conn.execute("DELETE FROM manifests WHERE namespace=?", (ns,))
        conn.execute("DELETE FROM conversations WHERE namespace=?", (ns,))
        conn.execute("DELETE FROM namespaces WHERE id=?", (ns_id,))

    def _delete_parts(self, conn: sqlite3.Connection, p: ForgetPlan, ns_id: int) -> None:
        turns = _ids(p.turn_ids)
        node_ids = f"node_id IN (SELECT id FROM nodes WHERE namespace_id={ns_id})"
        conn.execute(f"DELETE FROM node_turns WHERE {_in('turn_id')} AND {node_ids}", (turns,))
        for node_id in p.delete_nodes:  # children first: parent_id references them
            conn.execute("DELETE FROM node_turns WHERE node_id=?", (int(node_id),))
            conn.execute("DELETE FROM nodes WHERE id=? AND namespace_id=?", (int(node_id), ns_id))
        for r in p.rewrite_nodes:
            lo, hi = r.seq_range if r.seq_range is not None else (None, None)
            fmt, content = r.warm if r.warm is not None else (None, None)
            conn.execute(
                "UPDATE nodes SET turn_count=?, tokens=?, first_turn_id=?, last_turn_id=?, ts_start=?, ts_end=?, "
                "seq_lo=COALESCE(?, seq_lo), seq_hi=COALESCE(?, seq_hi), summary=NULL, summary_tokens=NULL, "
                "summary_status='pending', summary_error=NULL, embedding=NULL, "
                "view_tokens=CASE WHEN ? IS NULL THEN NULL ELSE ? END, "
                "warm_format=CASE WHEN ? IS NULL THEN warm_format ELSE ? END, "
                "warm_content=CASE WHEN ? IS NULL THEN warm_content ELSE ? END WHERE id=? AND namespace_id=?",
                (r.turn_count, r.tokens, r.first_turn_id, r.last_turn_id, format_timestamp(r.start),
                 format_timestamp(r.end), lo, hi, r.view_tokens, r.view_tokens, fmt, fmt, content, content,
                 r.node_id, ns_id))
        for node_id, (lo, hi) in p.segment_spans.items():
            conn.execute("UPDATE nodes SET seq_lo=?, seq_hi=? WHERE id=? AND namespace_id=?",
                         (int(lo), int(hi), int(node_id), ns_id))
        for node_id, ref in p.archive_refs.items():
            conn.execute("UPDATE nodes SET archive_ref=? WHERE id=? AND namespace_id=?", (ref, int(node_id), ns_id))
        if p.delete_items:
            conn.execute(f"DELETE FROM memory_items WHERE namespace_id=? AND {_in('id')}",
                         (ns_id, _ids(p.delete_items)))
        for item_id, prov in p.item_provenance.items():
            conn.execute("UPDATE memory_items SET provenance=? WHERE id=? AND namespace_id=?",
                         (json.dumps(list(prov)), int(item_id), ns_id))
        # The stored recall index holds each turn's analysed terms and vector.
        conn.execute(f"DELETE FROM recall_index WHERE namespace_id=? AND {_in('turn_id')}", (ns_id, turns))
        conn.execute(f"DELETE FROM recall_passages WHERE namespace_id=? AND {_in('turn_id')}", (ns_id, turns))
        conn.execute(f"DELETE FROM turns WHERE namespace_id=? AND {_in('id')}", (ns_id, turns))
        # A forgotten message may be ingested again: its dedupe key goes with it.
        conn.execute(f"DELETE FROM ingest_keys WHERE namespace=? AND {_in('turn_id')}", (p.namespace, turns))
        if p.sessions:
            conn.execute("DELETE FROM sessions WHERE namespace_id=? AND name IN (SELECT value FROM json_each(?))",
                         (ns_id, json.dumps(sorted(set(p.sessions)))))

    # --- the archive journal ------------------------------------------------------------

    def pending_archive(self, namespace: str) -> dict[str, str]:
        """Archive files a committed forget still has to finish: ``file -> "replace" | "delete"``."""
        rows = self._store._query("SELECT value FROM store_meta WHERE key=?", (f"forget.archive.{namespace}",))
        return dict(json.loads(rows[0][0])) if rows else {}

    def clear_pending_archive(self, namespace: str, done: Sequence[str]) -> None:
        """Drop finished files from the journal (the key goes when none is left)."""
        key = f"forget.archive.{namespace}"
        with self._store.transaction():
            conn = self._store.connection
            row = conn.execute("SELECT value FROM store_meta WHERE key=?", (key,)).fetchone()
            left: Mapping[str, Any] = {k: v for k, v in (json.loads(row[0]) if row else {}).items() if k not in done}
            if left:
                conn.execute("UPDATE store_meta SET value=? WHERE key=?", (json.dumps(left, sort_keys=True), key))
            else:
                conn.execute("DELETE FROM store_meta WHERE key=?", (key,))

    def vacuum(self) -> None:
        """Rebuild the whole file (``VACUUM``): also drops free pages, shrinking the file."""
        with self._store.lock, self._store._errors():
            self._store.connection.execute("VACUUM")
        self.checkpoint()
