"""Reading memory items: the part of the item store written once for every backend.

Every method takes the namespace and reads only that namespace's rows; an
item id from another namespace behaves exactly like an id that does not
exist. :class:`ItemReads` is the base of the shared writes
(:class:`~stratamem.store.item_store.ItemStore`) and through them of both
backends' item stores, which add lexical search (FTS5 on SQLite, ``tsvector``
terms on PostgreSQL). Vectors come back as float32 bytes from
their int8 (or quantized pgvector) form (:mod:`stratamem.store.vectors`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..records import MemoryItem, format_timestamp
from ..records.checks import clip_json
from .item_view import view_clause
from .sql import SQLITE, SqlFeature, chunks
from .vectors import read_vector, vector_select

__all__ = ["ItemReads"]

_COLUMNS = (
    "id, session, content, type, tier, tokens, access_count, last_accessed_at, created_at, relevance, "
    "source, provenance, review, key, valid_from, valid_to, superseded_by, promoted_at, demoted_at, "
    "metadata, embedding IS NOT NULL, scope, salience"
)

_ORDERS = {
    "id": "id",
    "spill": "relevance ASC, created_at ASC, id ASC",
    "prune": "access_count ASC, COALESCE(last_accessed_at, created_at) ASC, id ASC",
    "salience": "COALESCE(salience, 0) ASC, created_at ASC, id ASC",
}


class ItemReads(SqlFeature):
    """Reads of ``memory_items``, its vector log and metrics for one store (made on the store's ``sql``)."""

    def _stamp(self, value: Any) -> Any:
        return self._d.read_stamp(value) if value is not None else None

    def _to_item(self, namespace: str, row: Sequence[Any], supersedes: tuple[int, ...] = ()) -> MemoryItem:
        stamp = self._stamp
        return MemoryItem(
            id=int(row[0]),
            namespace=namespace,
            session=row[1],
            content=row[2],
            type=row[3],
            tier=row[4],
            tokens=int(row[5]),
            access_count=int(row[6]),
            last_accessed_at=stamp(row[7]),
            created_at=stamp(row[8]),
            relevance=float(row[9]),
            source=row[10],
            provenance=tuple(json.loads(row[11])),
            review=row[12],
            key=row[13],
            valid_from=stamp(row[14]),
            valid_to=stamp(row[15]),
            superseded_by=int(row[16]) if row[16] is not None else None,
            promoted_at=stamp(row[17]),
            demoted_at=stamp(row[18]),
            metadata=clip_json(json.loads(row[19])) if row[19] else {},
            embedded=bool(row[20]),
            supersedes=supersedes,
            scope=row[21],
            salience=float(row[22]) if row[22] is not None else None,
        )

    def _items(self, namespace: str, where: str, params: Sequence[Any], order: str = "id") -> list[MemoryItem]:
        key = self._sql.tenant_key(namespace)
        if key is None:
            return []
        rows = self._sql.rows(
            f"SELECT {_COLUMNS} FROM memory_items WHERE {self._tenant} = ? AND ({where}) ORDER BY {order}",
            [key, *params],
        )
        if not rows:
            return []
        # SQLite: "+namespace_id" keeps the planner on the superseded_by index; on the
        # namespace index this lookup scanned the whole namespace.
        tenant = f"+{self._tenant}" if self._d is SQLITE else self._tenant
        older: dict[int, list[int]] = {}
        for part in chunks([int(r[0]) for r in rows]):
            for old_id, newer in self._sql.rows(
                f"SELECT id, superseded_by FROM memory_items WHERE {tenant} = ? AND "
                f"{self._d.in_list('superseded_by', len(part))} ORDER BY id",
                [key, *part],
            ):
                older.setdefault(int(newer), []).append(int(old_id))
        return [self._to_item(namespace, r, tuple(older.get(int(r[0]), ()))) for r in rows]

    # --- reads ------------------------------------------------------------------------

    def get(self, namespace: str, ids: Iterable[int]) -> list[MemoryItem]:
        """Items with these ids in ``namespace`` (ids elsewhere are silently absent), by id."""
        out: list[MemoryItem] = []
        for part in chunks([int(i) for i in ids]):
            out.extend(self._items(namespace, self._d.in_list("id", len(part)), part))
        return sorted(out, key=lambda i: i.id)

    def select(
        self,
        namespace: str,
        *,
        tiers: Sequence[str] | None = None,
        key: str | None = None,
        live_only: bool = False,
        review: str | None = None,
        order: str = "id",
        limit: int | None = None,
        view: Sequence[str] | None = None,
    ) -> list[MemoryItem]:
        """Items of the namespace, optionally by tier, key, review state or session view (see
        :func:`~stratamem.store.item_view.view_clause`); ``live_only`` drops superseded, rejected and dropped."""
        seen, params = view_clause(view)
        where = ["1 = 1", seen]
        if tiers is not None:
            where.append(self._d.in_list("tier", len(tiers)))
            params.extend(tiers)
        if key is not None:
            where.append("key = ?")
            params.append(key)
        if review is not None:
            where.append("review = ?")
            params.append(review)
        if live_only:
            where.append("superseded_by IS NULL AND COALESCE(review, '') NOT IN ('rejected', 'dropped')")
        sql_order = _ORDERS[order]
        if limit is not None:
            sql_order += f" LIMIT {int(limit)}"
        return self._items(namespace, " AND ".join(where), params, sql_order)

    def tier_totals(self, namespace: str, view: Sequence[str] | None = None) -> dict[str, tuple[int, int]]:
        """``{tier: (items, tokens)}`` over the namespace's items (those in ``view``, see
        :func:`~stratamem.store.item_view.view_clause`)."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return {}
        seen, params = view_clause(view)
        rows = self._sql.rows(
            "SELECT tier, COUNT(*), COALESCE(SUM(tokens), 0) FROM memory_items "
            f"WHERE {self._tenant} = ? AND {seen} GROUP BY tier",
            (key, *params),
        )
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}

    def flag_counts(self, namespace: str) -> dict[str, int]:
        """Counts of superseded, pending-review, rejected, dropped and not-embedded items."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return {"superseded": 0, "pending_review": 0, "rejected": 0, "dropped": 0, "unembedded": 0}
        row = self._sql.rows(
            "SELECT COUNT(superseded_by), COUNT(CASE WHEN review = 'pending' THEN 1 END), "
            "COUNT(CASE WHEN review = 'rejected' THEN 1 END), COUNT(CASE WHEN review = 'dropped' THEN 1 END), "
            f"COUNT(CASE WHEN embedding IS NULL THEN 1 END) FROM memory_items WHERE {self._tenant} = ?",
            (key,),
        )[0]
        return {
            "superseded": int(row[0]),
            "pending_review": int(row[1]),
            "rejected": int(row[2]),
            "dropped": int(row[3]),
            "unembedded": int(row[4]),
        }

    def pending_count(self, namespace: str) -> int:
        """Extracted items waiting for review (``review = 'pending'``)."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return 0
        rows = self._sql.rows(
            f"SELECT COUNT(*) FROM memory_items WHERE {self._tenant} = ? AND review = 'pending'", (key,)
        )
        return int(rows[0][0])

    def by_fact_keys(self, namespace: str, keys: Sequence[str]) -> dict[str, MemoryItem]:
        """The namespace's items holding these fact keys (at most one each: the unique index), by key."""
        tenant = self._sql.tenant_key(namespace)
        if tenant is None or not keys:
            return {}
        pairs: list[tuple[int, str]] = []
        for part in chunks(sorted(set(keys))):
            pairs += [
                (int(r[0]), str(r[1]))
                for r in self._sql.rows(
                    f"SELECT id, fact_key FROM memory_items WHERE {self._tenant} = ? AND "
                    f"{self._d.in_list('fact_key', len(part))}",
                    [tenant, *part],
                )
            ]
        found = {it.id: it for it in self.get(namespace, [i for i, _ in pairs])}
        return {k: found[i] for i, k in pairs}

    def item_spend(self, namespace: str) -> tuple[int, int, int, int]:
        """``(calls, input_tokens, output_tokens, failures)`` of a model extractor on the namespace."""
        key = self._sql.tenant_key(namespace)
        rows = (
            self._sql.rows(
                f"SELECT calls, input_tokens, output_tokens, failures FROM item_spend WHERE {self._tenant} = ?",
                (key,),
            )
            if key is not None
            else []
        )
        return (int(rows[0][0]), int(rows[0][1]), int(rows[0][2]), int(rows[0][3])) if rows else (0, 0, 0, 0)

    def vectors_after(self, namespace: str, after_id: int) -> list[tuple[int, bytes, str | None]]:
        """``(id, float32 bytes, model)`` of embedded items with id > ``after_id``, by id."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return []
        rows = self._sql.rows(
            f"SELECT id, {vector_select(self._d, 'embedding')}, embedding_model FROM memory_items "
            f"WHERE {self._tenant} = ? AND id > ? AND embedding IS NOT NULL ORDER BY id",
            (key, int(after_id)),
        )
        return [(int(r[0]), read_vector(self._d, r[1]), r[2]) for r in rows]

    def vector_log_head(self, namespace: str) -> int:
        """The namespace's latest vector-log position (0 when it has none)."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return 0
        row = self._sql.rows(f"SELECT MAX(seq) FROM memory_item_vector_log WHERE {self._tenant} = ?", (key,))[0]
        return int(row[0] or 0)

    def vector_changes(self, namespace: str, after_seq: int) -> tuple[int, list[tuple[int, bytes | None]]]:
        """Vectors changed or deleted since log position ``after_seq``.

        Log rows of a namespace become visible in ``seq`` order (SQLite has one
        writer; PostgreSQL writes them under the namespace's advisory lock).

        Returns:
            The log position reached and ``(id, current float32 bytes or None)``
            per changed item, in log order; ``None`` means the item or its
            vector is gone.
        """
        key = self._sql.tenant_key(namespace)
        if key is None:
            return int(after_seq), []
        rows = self._sql.rows(
            f"SELECT l.seq, l.item_id, {vector_select(self._d, 'm.embedding')} FROM memory_item_vector_log l "
            f"LEFT JOIN memory_items m ON m.{self._tenant} = l.{self._tenant} AND m.id = l.item_id "
            f"WHERE l.{self._tenant} = ? AND l.seq > ? ORDER BY l.seq",
            (key, int(after_seq)),
        )
        if not rows:
            return int(after_seq), []
        return int(rows[-1][0]), [(int(r[1]), read_vector(self._d, r[2]) if r[2] is not None else None) for r in rows]

    def metrics(self, namespace: str) -> dict[str, float]:
        """The namespace's persisted metric values by name."""
        key = self._sql.tenant_key(namespace)
        return (
            {}
            if key is None
            else {
                r[0]: float(r[1])
                for r in self._sql.rows(f"SELECT name, value FROM memory_item_metrics WHERE {self._tenant} = ?", (key,))
            }
        )

    @staticmethod
    def timestamp(value: Any) -> str:
        """Canonical timestamp text for a datetime column."""
        return format_timestamp(value)
