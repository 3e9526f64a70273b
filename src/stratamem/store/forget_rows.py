"""The rows a :class:`~stratamem.store.forgetting.ForgetPlan` deletes or rewrites, one implementation for every backend.

:class:`ForgetRows` is the base of both backends' forgetting
(:class:`~stratamem.store.sqlite.forget.SQLiteForget`,
:class:`~stratamem.store.postgres.forget.PostgresForget`), which wrap
:meth:`ForgetRows._apply` in what makes the bytes go on their backend —
SQLite's secure delete and WAL truncation; PostgreSQL's advisory locks and
``VACUUM FULL`` — see their modules. What still differs inside the plan's
statements is small and named here: ``node_turns`` carries the namespace only
on PostgreSQL, the item vector log is written by trigger on SQLite and
explicitly on PostgreSQL, and SQLite merges its FTS5 index so deleted terms go.

The archive journal (``store_meta`` key ``forget.archive.<namespace>``) is
written in the plan's transaction and finished by :mod:`stratamem.forget`
after the commit, or on the next open after a crash.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from . import data_version
from .forgetting import ForgetPlan
from .node_views import delete_views, put_view
from .sql import SQLITE, SqlFeature, Writer, chunks, upsert
from .turn_index import prune_terms

__all__ = ["ForgetRows"]

# Tables keyed by the tenant column, in the order a whole namespace is deleted (children first).
_BY_TENANT = (
    "summary_spend",
    "memory_items",
    "memory_item_metrics",
    "recall_index",
    "recall_index_meta",
    "recall_terms",
    "recall_passages",
    "turns",
)


def _sorted(values: Iterable[Any]) -> list[Any]:
    return sorted(set(values))


class ForgetRows(SqlFeature):
    """Applying a forget plan's deletes and rewrites, and the archive journal (made on the store's ``sql``)."""

    def _in(self, w: Writer, statement: str, params: Sequence[Any], column: str, values: Sequence[Any]) -> None:
        """Run ``statement`` (ending in ``AND``) once per slice of ``values`` as ``column IN (...)``."""
        for part in chunks(values):
            w.execute(f"{statement} {self._d.in_list(column, len(part))}", (*params, *part))

    def _node_turns_of(self) -> str:
        # node_turns holds the namespace on PostgreSQL; on SQLite it is found through nodes.
        if self._d is SQLITE:
            return "node_id IN (SELECT id FROM nodes WHERE namespace_id = ?)"
        return "namespace = ?"

    def _log_vectors(self, w: Writer, key: Any, ids: Sequence[int] | None) -> None:
        """Log the item vectors about to go (PostgreSQL; SQLite's delete trigger does it)."""
        if self._d is SQLITE:
            return
        select = (
            "INSERT INTO memory_item_vector_log (namespace, item_id) SELECT namespace, id FROM memory_items "
            "WHERE namespace = ? AND embedding IS NOT NULL"
        )
        if ids is None:
            w.execute(f"{select} ORDER BY id", (key,))
            return
        for part in chunks(ids):
            w.execute(f"{select} AND {self._d.in_list('id', len(part))} ORDER BY id", (key, *part))

    def _apply(self, w: Writer, p: ForgetPlan) -> None:
        ns = p.namespace
        key = self._sql.tenant_key(ns)
        name = "name" if self._d is SQLITE else "namespace"
        if key is None or not w.execute(f"SELECT 1 FROM namespaces WHERE {name} = ?", (ns,)).fetchall():
            return
        if p.whole_namespace:
            self._delete_namespace(w, ns, key)
        else:
            self._delete_parts(w, p, key)
        if p.delete_manifests:
            self._in(
                w,
                "DELETE FROM manifests WHERE namespace = ? AND",
                (ns,),
                "id",
                _sorted(int(i) for i in p.delete_manifests),
            )
        if p.conversations:
            self._in(w, "DELETE FROM conversations WHERE namespace = ? AND", (ns,), "session", _sorted(p.conversations))
        if p.embedding_hashes:
            self._in(w, "DELETE FROM embeddings WHERE", (), "hash", _sorted(p.embedding_hashes))
        if self._d is SQLITE and (p.delete_items or p.whole_namespace):
            # FTS5 keeps a deleted row's terms in its index segments until they are
            # merged; 'optimize' merges them all now (secure delete zeroes the old pages).
            w.execute("INSERT INTO memory_items_fts (memory_items_fts) VALUES ('optimize')")
        if p.archive_pending:
            journal = f"forget.archive.{ns}"
            row = w.execute("SELECT value FROM store_meta WHERE key = ?", (journal,)).fetchone()
            pending = {**(json.loads(row[0]) if row else {}), **p.archive_pending}
            w.execute(upsert("store_meta", ("key",), ("value",)), (journal, json.dumps(pending, sort_keys=True)))
        # Last, after every row this transaction locks: every open Memory drops what it derived.
        data_version.bump(w, ns, destructive=True)

    def _delete_namespace(self, w: Writer, ns: str, key: Any) -> None:
        t = self._tenant
        self._log_vectors(w, key, None)
        w.execute(f"DELETE FROM node_turns WHERE {self._node_turns_of()}", (key,))
        w.execute(f"UPDATE nodes SET parent_id = NULL WHERE {t} = ?", (key,))
        w.execute(f"DELETE FROM nodes WHERE {t} = ?", (key,))
        delete_views(w, self._d, key)
        for table in _BY_TENANT:
            w.execute(f"DELETE FROM {table} WHERE {t} = ?", (key,))
        w.execute("DELETE FROM ingest_keys WHERE namespace = ?", (ns,))
        w.execute(f"DELETE FROM sessions WHERE {t} = ?", (key,))
        # The shared feature stores' tables name the namespace on every backend.
        w.execute("DELETE FROM manifests WHERE namespace = ?", (ns,))
        w.execute("DELETE FROM conversations WHERE namespace = ?", (ns,))
        w.execute(f"DELETE FROM namespaces WHERE {'id' if self._d is SQLITE else 'namespace'} = ?", (key,))

    def _delete_parts(self, w: Writer, p: ForgetPlan, key: Any) -> None:
        t, stamp = self._tenant, self._d.stamp
        turns = _sorted(int(x) for x in p.turn_ids)
        self._in(w, f"DELETE FROM node_turns WHERE {self._node_turns_of()} AND", (key,), "turn_id", turns)
        for node_id in p.delete_nodes:  # children first: parent_id references them
            w.execute(f"DELETE FROM node_turns WHERE {self._node_turns_of()} AND node_id = ?", (key, int(node_id)))
            w.execute(f"DELETE FROM nodes WHERE {t} = ? AND id = ?", (key, int(node_id)))
        delete_views(w, self._d, key, list(p.delete_nodes))
        for r in p.rewrite_nodes:
            lo, hi = r.seq_range if r.seq_range is not None else (None, None)
            if r.warm is not None:  # re-encoded from the turns that remain
                put_view(w, self._d, key, r.node_id, r.warm)
            w.execute(
                "UPDATE nodes SET turn_count = ?, tokens = ?, first_turn_id = ?, last_turn_id = ?, ts_start = ?, "
                "ts_end = ?, seq_lo = COALESCE(?, seq_lo), seq_hi = COALESCE(?, seq_hi), summary = NULL, "
                "summary_tokens = NULL, summary_status = 'pending', summary_error = NULL, embedding = NULL, "
                f"view_tokens = ? WHERE {t} = ? AND id = ?",
                (
                    r.turn_count,
                    r.tokens,
                    r.first_turn_id,
                    r.last_turn_id,
                    stamp(r.start),
                    stamp(r.end),
                    lo,
                    hi,
                    r.view_tokens,
                    key,
                    r.node_id,
                ),
            )
        for node_id, (lo, hi) in p.segment_spans.items():
            w.execute(
                f"UPDATE nodes SET seq_lo = ?, seq_hi = ? WHERE {t} = ? AND id = ?",
                (int(lo), int(hi), key, int(node_id)),
            )
        for node_id, ref in p.archive_refs.items():
            w.execute(f"UPDATE nodes SET archive_ref = ? WHERE {t} = ? AND id = ?", (ref, key, int(node_id)))
        if p.delete_items:
            items = _sorted(int(i) for i in p.delete_items)
            self._log_vectors(w, key, items)
            self._in(w, f"DELETE FROM memory_items WHERE {t} = ? AND", (key,), "id", items)
        for item_id, prov in p.item_provenance.items():
            w.execute(
                f"UPDATE memory_items SET provenance = ? WHERE {t} = ? AND id = ?",
                (json.dumps(list(prov)), key, int(item_id)),
            )
        # The stored recall index holds each turn's analysed terms and vector.
        for table in ("recall_index", "recall_passages"):
            self._in(w, f"DELETE FROM {table} WHERE {t} = ? AND", (key,), "turn_id", turns)
        prune_terms(w, self._d, key)  # a term only forgotten turns used leaves the vocabulary
        self._in(w, f"DELETE FROM turns WHERE {t} = ? AND", (key,), "id", turns)
        # A forgotten message may be ingested again: its dedupe key goes with it.
        self._in(w, "DELETE FROM ingest_keys WHERE namespace = ? AND", (p.namespace,), "turn_id", turns)
        if p.sessions:
            self._in(w, f"DELETE FROM sessions WHERE {t} = ? AND", (key,), "name", _sorted(p.sessions))

    # --- the archive journal ------------------------------------------------------------

    def pending_archive(self, namespace: str) -> dict[str, str]:
        """Archive files a committed forget still has to finish: ``file -> "replace" | "delete"``."""
        rows = self._sql.rows("SELECT value FROM store_meta WHERE key = ?", (f"forget.archive.{namespace}",))
        return dict(json.loads(rows[0][0])) if rows else {}

    def clear_pending_archive(self, namespace: str, done: Sequence[str]) -> None:
        """Drop finished files from the journal (the key goes when none is left)."""
        journal = f"forget.archive.{namespace}"
        lock = "" if self._d is SQLITE else " FOR UPDATE"
        with self._sql.write() as w:
            row = w.execute(f"SELECT value FROM store_meta WHERE key = ?{lock}", (journal,)).fetchone()
            left = {k: v for k, v in (json.loads(row[0]) if row else {}).items() if k not in done}
            if left:
                w.execute("UPDATE store_meta SET value = ? WHERE key = ?", (json.dumps(left, sort_keys=True), journal))
            else:
                w.execute("DELETE FROM store_meta WHERE key = ?", (journal,))
