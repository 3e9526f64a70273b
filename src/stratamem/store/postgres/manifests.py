"""PostgreSQL storage of context manifests (``m006_manifests``).

The mirror of :mod:`stratamem.store.sqlite_manifests`: one row per assembled
context, the manifest kept as JSON text, only the newest ``keep`` per namespace.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import psycopg

from ...context.manifest import Manifest
from ..manifest_rows import StoredManifest, check_keep

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["PostgresManifests", "m006_manifests"]


def m006_manifests(conn: psycopg.Connection) -> None:
    """Context manifests, newest last per namespace."""
    conn.execute("""CREATE TABLE manifests (
        namespace TEXT NOT NULL,
        id BIGINT GENERATED ALWAYS AS IDENTITY,
        session TEXT,
        created_at TIMESTAMPTZ NOT NULL,
        budget INTEGER NOT NULL,
        total_tokens INTEGER NOT NULL,
        items INTEGER NOT NULL,
        manifest TEXT NOT NULL,
        PRIMARY KEY (namespace, id)
    )""")


class PostgresManifests:
    """Rows of ``manifests`` for one PostgreSQL store.

    Args:
        store: The owning store; its pool and transactions are used.
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def add(self, namespace: str, session: str | None, manifest: Manifest, *, keep: int = 1000) -> int:
        """Record a manifest and drop the namespace's oldest beyond ``keep``; returns its id.

        Raises:
            ValueError: ``keep`` is below 1.
            BackendError: The database failed; nothing was recorded.
        """
        check_keep(keep)
        body = json.dumps(manifest.to_dict(), ensure_ascii=False, separators=(",", ":"))
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            mid = conn.execute(
                "INSERT INTO manifests (namespace, session, created_at, budget, total_tokens, items, manifest) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (namespace, session, manifest.created_at, manifest.budget, manifest.total_tokens,
                 len(manifest.items), body)).fetchone()[0]
            conn.execute(
                "DELETE FROM manifests WHERE namespace = %s AND id <= (SELECT id FROM manifests WHERE namespace = %s "
                "ORDER BY id DESC LIMIT 1 OFFSET %s)", (namespace, namespace, keep))
        return int(mid)

    def latest(self, namespace: str, limit: int = 20) -> list[StoredManifest]:
        """The namespace's newest manifests, newest first."""
        return [self._row(r) for r in self._store._query(
            "SELECT id, namespace, session, manifest FROM manifests WHERE namespace = %s ORDER BY id DESC LIMIT %s",
            (namespace, int(limit)))]

    def get(self, namespace: str, manifest_id: int) -> StoredManifest | None:
        """One manifest of the namespace by id (``None`` if it is not there)."""
        rows = self._store._query(
            "SELECT id, namespace, session, manifest FROM manifests WHERE namespace = %s AND id = %s",
            (namespace, int(manifest_id)))
        return self._row(rows[0]) if rows else None

    @staticmethod
    def _row(row: tuple[Any, ...]) -> StoredManifest:
        return StoredManifest(id=int(row[0]), namespace=row[1], session=row[2], data=json.loads(row[3]))
