"""Storage of context manifests: every assembled prompt, explained (seed 004; ``m006_manifests``).

One feature store for every backend (it speaks :mod:`stratamem.store.sql`).
Each row is one :class:`~stratamem.records.manifests.Manifest` as JSON text,
with the namespace, session and a few columns to list by. Only the newest
``keep`` manifests of a namespace are kept.
"""

from __future__ import annotations

import json
from typing import Any

from ..records.manifests import Manifest
from .manifest_rows import StoredManifest, check_keep
from .sql import Sql, run_ddl

__all__ = ["Manifests", "m006_manifests"]

_DDL = {
    "sqlite": [
        """CREATE TABLE manifests (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        namespace TEXT NOT NULL,
        session TEXT,
        created_at TEXT NOT NULL,
        budget INTEGER NOT NULL,
        total_tokens INTEGER NOT NULL,
        items INTEGER NOT NULL,
        manifest TEXT NOT NULL
    )""",
        "CREATE INDEX manifests_namespace ON manifests (namespace, id)",
    ],
    "postgres": [
        """CREATE TABLE manifests (
        namespace TEXT NOT NULL,
        id BIGINT GENERATED ALWAYS AS IDENTITY,
        session TEXT,
        created_at TIMESTAMPTZ NOT NULL,
        budget INTEGER NOT NULL,
        total_tokens INTEGER NOT NULL,
        items INTEGER NOT NULL,
        manifest TEXT NOT NULL,
        PRIMARY KEY (namespace, id)
    )"""
    ],
}

_SELECT = "SELECT id, namespace, session, manifest FROM manifests WHERE namespace = ?"


def m006_manifests(conn: Any) -> None:
    """Context manifests, newest last per namespace."""
    run_ddl(conn, _DDL)


class Manifests:
    """Rows of ``manifests`` for one store.

    Args:
        sql: The owning store's SQL layer.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def add(self, namespace: str, session: str | None, manifest: Manifest, *, keep: int = 1000) -> int:
        """Record a manifest and drop the namespace's oldest beyond ``keep``; returns its id.

        Raises:
            ValueError: ``keep`` is below 1.
            BackendError: The database failed; nothing was recorded.
        """
        check_keep(keep)
        body = json.dumps(manifest.to_dict(), ensure_ascii=False, separators=(",", ":"))
        with self._sql.write() as w:
            mid = w.execute(
                "INSERT INTO manifests (namespace, session, created_at, budget, total_tokens, items, manifest) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    namespace,
                    session,
                    self._sql.dialect.stamp(manifest.created_at),
                    manifest.budget,
                    manifest.total_tokens,
                    len(manifest.items),
                    body,
                ),
            ).fetchone()[0]
            w.execute(
                "DELETE FROM manifests WHERE namespace = ? AND id <= (SELECT id FROM manifests WHERE namespace = ? "
                "ORDER BY id DESC LIMIT 1 OFFSET ?)",
                (namespace, namespace, keep),
            )
        return int(mid)

    def set_reported(self, namespace: str, session: str | None, reported: dict[str, Any]) -> int | None:
        """Record a provider's reported usage on the session's newest manifest (its ``cache.reported``).

        Returns:
            The manifest's id, or ``None`` when the session has none.

        Raises:
            BackendError: The database failed; nothing was changed.
        """
        same = "session IS NULL" if session is None else "session = ?"
        with self._sql.write() as w:
            row = w.execute(
                f"SELECT id, manifest FROM manifests WHERE namespace = ? AND {same} ORDER BY id DESC LIMIT 1",
                (namespace,) if session is None else (namespace, session),
            ).fetchone()
            if row is None:
                return None
            data = json.loads(row[1])
            data["cache"] = {**(data.get("cache") or {}), "reported": reported}
            body = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
            w.execute("UPDATE manifests SET manifest = ? WHERE namespace = ? AND id = ?", (body, namespace, row[0]))
        return int(row[0])

    def latest(self, namespace: str, limit: int = 20) -> list[StoredManifest]:
        """The namespace's newest manifests, newest first."""
        return [self._row(r) for r in self._sql.rows(f"{_SELECT} ORDER BY id DESC LIMIT ?", (namespace, int(limit)))]

    def get(self, namespace: str, manifest_id: int) -> StoredManifest | None:
        """One manifest of the namespace by id (``None`` if it is not there)."""
        rows = self._sql.rows(f"{_SELECT} AND id = ?", (namespace, int(manifest_id)))
        return self._row(rows[0]) if rows else None

    @staticmethod
    def _row(row: tuple[Any, ...]) -> StoredManifest:
        return StoredManifest(id=int(row[0]), namespace=row[1], session=row[2], data=json.loads(row[3]))
