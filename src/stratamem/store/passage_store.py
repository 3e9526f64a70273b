"""Passage vectors of long turns (``m011_passages``), one implementation for every backend.

One row per long turn (:mod:`stratamem.retrieve.passages`): the model that
made the vectors and all its passages' int8 vectors
(:mod:`stratamem.embed.quantize`) concatenated in one blob — a blob's length
gives the passage count. Short turns (all of LoCoMo) have no row, so a store
of short turns does not grow. Rows made by another model are ignored on
read and replaced on the next write. Keyed like ``recall_index``
(:mod:`stratamem.store.turn_index`), so a forget deletes a turn's passages
with its row. The table's DDL is here too, one column list for both
backends (:mod:`stratamem.store.ddl`).
Reach it as ``store.embeddings.passages``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .ddl import run_tables
from .sql import Sql, chunks

__all__ = ["Passages", "m011_passages"]


def m011_passages(conn: Any) -> None:
    """Per long turn: its passages' int8 vectors in one blob, with the model that made them."""
    run_tables(
        conn,
        (
            "recall_passages",
            [
                "{tenant_column}",
                "turn_id {bigint} NOT NULL",
                "model TEXT NOT NULL",
                "vectors {blob} NOT NULL",
                "PRIMARY KEY ({tenant}, turn_id)",
            ],
            True,
        ),
    )


class Passages:
    """Passage vector blobs of long turns, per namespace (shares the store's transactions).

    Args:
        sql: The owning store's SQL layer.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql
        self._ns = sql.dialect.tenant

    def put(self, namespace: str, model: str, blobs: dict[int, bytes]) -> None:
        """Store the passage blobs of turns (turn id -> blob), replacing theirs, in one transaction.

        Raises:
            BackendError: The write failed (nothing was stored).
        """
        self._sql.put_turn_rows(
            "recall_passages", namespace, ("model", "vectors"), [(int(t), model, b) for t, b in blobs.items()]
        )

    def load(self, namespace: str, model: str, turn_ids: Sequence[int] | None = None) -> dict[int, bytes]:
        """Blobs made by ``model`` of the namespace's long turns (or of some of them), by turn id."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return {}
        select = f"SELECT turn_id, vectors FROM recall_passages WHERE {self._ns} = ? AND model = ?"
        if turn_ids is None:
            rows = self._sql.rows(select, (key, model))
        else:
            rows = []
            for part in chunks([int(i) for i in turn_ids]):
                rows += self._sql.rows(
                    f"{select} AND {self._sql.dialect.in_list('turn_id', len(part))}", [key, model, *part]
                )
        return {int(r[0]): bytes(r[1]) for r in rows}

    def size(self, namespace: str) -> tuple[int, int]:
        """``(rows, bytes of vector blobs)`` of the namespace."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return 0, 0
        rows = self._sql.rows(
            f"SELECT COUNT(*), COALESCE(SUM(LENGTH(vectors)), 0) FROM recall_passages WHERE {self._ns} = ?", (key,)
        )
        return int(rows[0][0]), int(rows[0][1])
