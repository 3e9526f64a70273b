"""SQLite storage of context manifests: every assembled prompt, explained (seed 004).

A feature store (see :class:`~stratamem.store.sqlite.SQLiteStore`): it shares
the store's connection, lock and ``transaction()``. Each row is one
:class:`~stratamem.manifest.Manifest` as JSON, with the namespace, session and
a few columns to list by. Only the newest ``keep`` manifests of a namespace
are kept. The PostgreSQL twin is :mod:`stratamem.store.postgres_manifests`.
"""

from __future__ import annotations

import json
import sqlite3
from typing import TYPE_CHECKING, Any

from ...context.manifest import Manifest
from ...records import format_timestamp
from ..manifest_rows import StoredManifest, check_keep

if TYPE_CHECKING:
    from .store import SQLiteStore

__all__ = ["SQLiteManifests", "m006_manifests"]


def m006_manifests(conn: sqlite3.Connection) -> None:
    """Context manifests, newest last per namespace."""
    conn.execute("""CREATE TABLE manifests (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        namespace TEXT NOT NULL,
        session TEXT,
        created_at TEXT NOT NULL,
        budget INTEGER NOT NULL,
        total_tokens INTEGER NOT NULL,
        items INTEGER NOT NULL,
        manifest TEXT NOT NULL
    )""")
    conn.execute("CREATE INDEX manifests_namespace ON manifests (namespace, id)")


class SQLiteManifests:
    """Rows of ``manifests`` for one SQLite store.

    Args:
        store: The owning store; its connection, lock and transaction are used.
    """

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def add(self, namespace: str, session: str | None, manifest: Manifest, *, keep: int = 1000) -> int:
        """Record a manifest and drop the namespace's oldest beyond ``keep``; returns its id.

        Raises:
            ValueError: ``keep`` is below 1.
            BackendError: The database failed; nothing was recorded.
        """
        check_keep(keep)
        body = json.dumps(manifest.to_dict(), ensure_ascii=False, separators=(",", ":"))
        with self._store.transaction():
            conn = self._store.connection
            mid = conn.execute(
                "INSERT INTO manifests (namespace, session, created_at, budget, total_tokens, items, manifest) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (namespace, session, format_timestamp(manifest.created_at), manifest.budget,
                 manifest.total_tokens, len(manifest.items), body)).fetchone()[0]
            conn.execute(
                "DELETE FROM manifests WHERE namespace = ? AND id <= (SELECT id FROM manifests WHERE namespace = ? "
                "ORDER BY id DESC LIMIT 1 OFFSET ?)", (namespace, namespace, keep))
        return int(mid)

    def latest(self, namespace: str, limit: int = 20) -> list[StoredManifest]:
        """The namespace's newest manifests, newest first."""
        return [self._row(r) for r in self._rows(
            "SELECT id, namespace, session, manifest FROM manifests WHERE namespace = ? ORDER BY id DESC LIMIT ?",
            (namespace, int(limit)))]

    def get(self, namespace: str, manifest_id: int) -> StoredManifest | None:
        """One manifest of the namespace by id (``None`` if it is not there)."""
        rows = self._rows("SELECT id, namespace, session, manifest FROM manifests WHERE namespace = ? AND id = ?",
                          (namespace, int(manifest_id)))
        return self._row(rows[0]) if rows else None

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._store.lock, self._store._errors():
            return self._store.connection.execute(sql, params).fetchall()

    @staticmethod
    def _row(row: tuple[Any, ...]) -> StoredManifest:
        return StoredManifest(id=int(row[0]), namespace=row[1], session=row[2], data=json.loads(row[3]))
