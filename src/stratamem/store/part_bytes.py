"""Bytes per part of a store: which tables (and their indexes) hold what, on either backend.

``stratamem status`` shows where a store's bytes go — the turns, the recall
index, memory items, the pyramid, manifests — so a store that grows can be
explained. The split is by table and covers every namespace of the store
(tables are shared). SQLite reads it from the ``dbstat`` virtual table (page
counts per b-tree, aggregated: a few milliseconds); the WAL and free pages
are ``free``. PostgreSQL sums ``pg_total_relation_size`` per table (heap,
indexes and TOAST). A pyramid archive's files are counted by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["PARTS", "part_of", "postgres_part_bytes", "sqlite_part_bytes"]

PARTS: Mapping[str, tuple[str, ...]] = {
    "turns": ("turns", "sessions", "namespaces", "ingest_keys", "idempotency_keys"),
    "recall_index": ("recall_index", "recall_index_meta", "recall_terms", "recall_passages", "recall_models"),
    "items": ("memory_items", "memory_item_metrics", "memory_item_vector_log"),
    "pyramid": ("nodes", "node_views", "node_turns", "summary_spend"),
    "manifests": ("manifests",),
    "embedding_cache": ("embeddings",),
    "conversations": ("conversations",),
}
"""Each part and the tables that hold it; any other table (the schema, migrations, settings) is ``other``."""

_TABLE_PART = {table: part for part, tables in PARTS.items() for table in tables}


def part_of(table: str) -> str:
    """The part a table belongs to (``memory_items_fts*`` go with the items)."""
    if table in _TABLE_PART:
        return _TABLE_PART[table]
    if table.startswith("memory_items"):
        return "items"
    return "other"


def sqlite_part_bytes(conn: Any, file_bytes: int) -> dict[str, int]:
    """Bytes per part of a SQLite database (``free``: WAL and unused pages), or ``{}`` without ``dbstat``.

    Args:
        conn: A connection to the database.
        file_bytes: The database file and its WAL, in bytes.
    """
    import sqlite3

    try:
        rows = conn.execute("SELECT name, pgsize FROM dbstat WHERE aggregate = TRUE").fetchall()
    except sqlite3.Error:  # a SQLite built without the dbstat table: no split
        return {}
    owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE tbl_name IS NOT NULL").fetchall())
    out: dict[str, int] = dict.fromkeys([*PARTS, "other"], 0)
    for name, size in rows:
        out[part_of(owner.get(name, name))] += int(size or 0)
    out["free"] = max(0, file_bytes - sum(out.values()))
    return out


def postgres_part_bytes(rows: list[tuple[Any, ...]]) -> dict[str, int]:
    """Bytes per part from ``(table, pg_total_relation_size)`` rows of the store's schema."""
    out: dict[str, int] = dict.fromkeys([*PARTS, "other"], 0)
    for table, size in rows:
        out[part_of(str(table))] += int(size or 0)
    return out
