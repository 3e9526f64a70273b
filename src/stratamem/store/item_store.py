"""Writing memory items, written once for every backend (the reads are :mod:`stratamem.store.item_reads`).

:class:`ItemStore` is the base of both backends' item stores
(:class:`~stratamem.store.sqlite.items.SQLiteItemStore`,
:class:`~stratamem.store.postgres.items.PostgresItemStore`). Every write takes
the namespace and touches only that namespace's rows; an item id from another
namespace behaves exactly like an id that does not exist. Each write joins the
caller's transaction, if any.

What differs between the backends is three hooks, each a no-op on SQLite:

* :meth:`ItemStore._guard` — PostgreSQL takes a per-namespace advisory lock
  first, so one namespace's item writers commit one at a time and ids become
  visible in id order (SQLite's ``BEGIN IMMEDIATE`` already does that);
* :meth:`ItemStore._search_columns` — PostgreSQL stores the item's
  ``tsvector`` terms beside it (SQLite's FTS5 index follows by trigger);
* :meth:`ItemStore._log_vectors` — PostgreSQL writes the vector log before a
  vector is replaced or deleted (SQLite's triggers write it).

Lexical search (FTS5 vs ``tsvector``) stays in the backend classes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from ..errors import BackendError
from . import data_version
from .item_reads import ItemReads
from .new_rows import NewItem
from .sql import Writer, chunks
from .vectors import vector_placeholder, write_vector

__all__ = ["ITEM_COLUMNS", "ItemStore", "METRIC_COLUMNS"]

# --- the tables' columns (the migrations are per backend: their keys and search columns differ) ---

ITEM_COLUMNS: tuple[str, ...] = (
    "session TEXT",
    "content TEXT NOT NULL",
    "type TEXT NOT NULL",
    "tier TEXT NOT NULL",
    "tokens INTEGER NOT NULL",
    "access_count INTEGER NOT NULL DEFAULT 0",
    "last_accessed_at {stamp}",
    "created_at {stamp} NOT NULL",
    "relevance {real} NOT NULL",
    "source TEXT NOT NULL",
    "provenance TEXT NOT NULL DEFAULT '[]'",
    "review TEXT",
    "key TEXT",
    "valid_from {stamp}",
    "valid_to {stamp}",
    "superseded_by {bigint}{superseded_ref}",
    "promoted_at {stamp}",
    "demoted_at {stamp}",
    "metadata TEXT",
    "embedding {vector}",
    "embedding_model TEXT",
)
"""``memory_items``' columns after its key columns, as :func:`~stratamem.store.ddl.create_table` spells them.

``provenance`` is a JSON list of turn ids (empty when added through the API);
``review`` is NULL for API items, else pending / confirmed / rejected / dropped.
``fact_key`` and ``salience`` are added by ``m018_item_facts`` (:mod:`stratamem.store.item_facts`).
``{superseded_ref}`` is the migration's: m005 on SQLite had a foreign key there.
"""

METRIC_COLUMNS: tuple[str, ...] = (
    "{tenant_column}",
    "name TEXT NOT NULL",
    "value {real} NOT NULL",
    "PRIMARY KEY ({tenant}, name)",
)
"""``memory_item_metrics``: counters and latency histogram buckets, persisted so every process sees them."""

_UPDATABLE = frozenset(
    {
        "tier",
        "access_count",
        "last_accessed_at",
        "relevance",
        "review",
        "valid_to",
        "superseded_by",
        "promoted_at",
        "demoted_at",
        "embedding",
        "embedding_model",
        "provenance",
        "salience",
    }
)

_INSERTED = (
    "session, content, type, tier, tokens, access_count, created_at, relevance, source, provenance, "
    "review, key, valid_from, valid_to, metadata, embedding, embedding_model, scope, fact_key, salience"
)


class ItemStore(ItemReads):
    """Reads and writes of ``memory_items`` and its metrics; backends add lexical search and the hooks."""

    # --- per-backend hooks ---------------------------------------------------------------

    def _guard(self, w: Writer, namespace: str) -> None:
        """Serialize the namespace's item writers until the transaction ends (first thing every write does)."""

    def _search_columns(self, content: str) -> tuple[str, str, tuple[Any, ...]]:
        """Extra ``(columns, placeholders, values)`` an insert stores for lexical search (each part led by ``, ``)."""
        return "", "", ()

    def _log_vectors(self, w: Writer, key: Any, ids: Sequence[int], *, stored_only: bool) -> None:
        """Log that these items' vectors change or go (``stored_only``: only items that have one)."""

    # --- writes ---------------------------------------------------------------------------

    def transaction(self) -> AbstractContextManager[Any]:
        """The owning store's write transaction."""
        return self._sql.write()

    def lock(self, namespace: str) -> None:
        """Inside a transaction: hold the namespace's item guard until it ends (before reads that decide a write).

        On SQLite the transaction's ``BEGIN IMMEDIATE`` already holds the write
        lock; PostgreSQL takes the namespace's advisory lock.
        """
        with self._sql.write() as w:
            self._guard(w, namespace)

    def insert(self, namespace: str, item: NewItem) -> int:
        """Insert one item; returns its id.

        Raises:
            BackendError: The store failed, or an extracted item's ``fact_key`` is
                already taken in the namespace (use :meth:`insert_fact`).
        """
        found = self._insert(namespace, item, on_conflict="")
        if found is None:  # without ON CONFLICT a clash raises; no row back is the driver's fault
            raise BackendError("the item insert returned no id")
        return found

    def insert_fact(self, namespace: str, item: NewItem) -> int | None:
        """Insert an extracted item unless its ``fact_key`` is taken in the namespace; its id, or ``None``."""
        return self._insert(
            namespace,
            item,
            on_conflict=f" ON CONFLICT ({self._tenant}, fact_key) WHERE fact_key IS NOT NULL DO NOTHING",
        )

    def _insert(self, namespace: str, item: NewItem, *, on_conflict: str) -> int | None:
        columns, marks, values = self._search_columns(item.content)
        with self._sql.write() as w:
            self._guard(w, namespace)
            key = w.tenant(namespace)
            row = w.execute(
                f"INSERT INTO memory_items ({self._tenant}, {_INSERTED}{columns}) "
                f"VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, {vector_placeholder(self._d)}, ?, ?, ?, ?"
                f"{marks}){on_conflict} RETURNING id",
                (
                    key,
                    item.session,
                    item.content,
                    item.type,
                    item.tier,
                    item.tokens,
                    item.created_at,
                    item.relevance,
                    item.source,
                    json.dumps(list(item.provenance)),
                    item.review,
                    item.key,
                    item.valid_from,
                    item.valid_to,
                    json.dumps(dict(item.metadata), ensure_ascii=False) if item.metadata else None,
                    write_vector(self._d, item.embedding),
                    item.embedding_model,
                    item.scope,
                    item.fact_key,
                    item.salience,
                    *values,
                ),
            ).fetchone()
            if row is None:  # ON CONFLICT DO NOTHING: the fact was there, nothing changed
                return None
            data_version.bump(w, namespace)
            return int(row[0])

    def update(self, namespace: str, ids: Sequence[int], **columns: Any) -> int:
        """Set columns on the namespace's items ``ids``; returns how many rows changed.

        Raises:
            ValueError: A column is not one that may change.
        """
        bad = set(columns) - _UPDATABLE
        if bad:
            raise ValueError(f"cannot update item columns {sorted(bad)}")
        if not ids or not columns:
            return 0
        key = self._sql.tenant_key(namespace)
        if key is None:
            return 0
        values = dict(columns)
        if "provenance" in values:
            values["provenance"] = json.dumps(sorted(int(t) for t in values["provenance"]))
        if "embedding" in values:
            values["embedding"] = write_vector(self._d, values["embedding"])
        sets = ", ".join(f"{c} = {vector_placeholder(self._d)}" if c == "embedding" else f"{c} = ?" for c in values)
        changed = 0
        with self._sql.write() as w:
            self._guard(w, namespace)
            for part in chunks([int(i) for i in ids]):
                if "embedding" in values:
                    self._log_vectors(w, key, part, stored_only=False)
                clause, params = self._d.one_of("id", part)
                changed += w.execute(
                    f"UPDATE memory_items SET {sets} WHERE {self._tenant} = ? AND {clause}",
                    [*values.values(), key, *params],
                ).rowcount
            if changed:
                data_version.bump(w, namespace)
        return changed

    def record_access(self, namespace: str, updates: Mapping[int, float], at: str) -> None:
        """One recall hit per id: access count + 1, last access = ``at``, relevance = new value."""
        key = self._sql.tenant_key(namespace) if updates else None
        if key is None:
            return
        with self._sql.write() as w:
            self._guard(w, namespace)
            w.executemany(
                f"UPDATE memory_items SET access_count = access_count + 1, last_accessed_at = ?, "
                f"relevance = ? WHERE {self._tenant} = ? AND id = ?",
                [(at, float(rel), key, int(i)) for i, rel in updates.items()],
            )

    def delete(self, namespace: str, ids: Sequence[int]) -> int:
        """Delete items (and their lexical terms), logging their vectors as gone.

        Items they superseded keep ``superseded_by`` pointing at the deleted id
        (ids are never reused), so they stay superseded and out of recall.
        """
        key = self._sql.tenant_key(namespace) if ids else None
        if key is None:
            return 0
        deleted = 0
        with self._sql.write() as w:
            self._guard(w, namespace)
            for part in chunks([int(i) for i in ids]):
                self._log_vectors(w, key, part, stored_only=True)
                clause, params = self._d.one_of("id", part)
                deleted += w.execute(
                    f"DELETE FROM memory_items WHERE {self._tenant} = ? AND {clause}", (key, *params)
                ).rowcount
            if deleted:
                data_version.bump(w, namespace, destructive=True)
        return deleted

    def add_spend(
        self, namespace: str, *, calls: int = 0, input_tokens: int = 0, output_tokens: int = 0, failures: int = 0
    ) -> None:
        """Add a model extractor's calls, provider-reported tokens and failures to the namespace's ``item_spend``."""
        with self._sql.write() as w:
            key = w.tenant(namespace)
            w.execute(
                f"INSERT INTO item_spend ({self._tenant}, calls, input_tokens, output_tokens, failures) "
                f"VALUES (?, ?, ?, ?, ?) ON CONFLICT ({self._tenant}) DO UPDATE SET "
                "calls = item_spend.calls + excluded.calls, "
                "input_tokens = item_spend.input_tokens + excluded.input_tokens, "
                "output_tokens = item_spend.output_tokens + excluded.output_tokens, "
                "failures = item_spend.failures + excluded.failures",
                (key, int(calls), int(input_tokens), int(output_tokens), int(failures)),
            )

    def add_metrics(self, namespace: str, deltas: Mapping[str, float]) -> None:
        """Add ``deltas`` to the namespace's metric values (created at 0)."""
        if not deltas:
            return
        with self._sql.write() as w:
            self._guard(w, namespace)
            key = w.tenant(namespace)
            w.executemany(
                f"INSERT INTO memory_item_metrics ({self._tenant}, name, value) VALUES (?, ?, ?) "
                f"ON CONFLICT ({self._tenant}, name) DO UPDATE SET "
                "value = memory_item_metrics.value + excluded.value",
                [(key, k, float(v)) for k, v in deltas.items()],
            )
