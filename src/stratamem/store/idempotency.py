"""Storage of idempotency keys: what a write sent with a key already did (``m017_idempotency_keys``).

One feature store for every backend (it speaks :mod:`stratamem.store.sql`).
One row per namespace and key: a digest of the request the key was first
used with, when, and what the write produced as a small JSON reference (turn
ids, an item id; never the content itself, so a forget leaves no copy here);
``NULL`` while a write that could not share its transaction is under way.

A key is claimed with ``INSERT ... ON CONFLICT DO NOTHING`` inside the
caller's transaction: on PostgreSQL a concurrent claim of the same key waits
for the first transaction and then finds its row; on SQLite the write lock
already serializes them. Rows older than :data:`RETENTION` are ignored and
deleted by the next claim.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from .ddl import run_tables
from .sql import SqlFeature

__all__ = ["RETENTION", "KeyRecord", "IdempotencyKeys", "m017_idempotency_keys"]

RETENTION = timedelta(hours=24)
"""How long a key is remembered: a retry later than this is a new request."""

# The namespace is named here (not the tenant column) on both backends, as in ingest_keys:
# a key may be claimed before its namespace's first write creates the namespace row.
_COLUMNS = (
    "namespace TEXT NOT NULL",
    "key TEXT NOT NULL",
    "digest TEXT NOT NULL",
    "created_at {stamp} NOT NULL",
    "result TEXT",
    "PRIMARY KEY (namespace, key)",
)


def m017_idempotency_keys(conn: Any) -> None:
    """Idempotency keys of writes, with the digest of their request and what they produced."""
    run_tables(conn, ("idempotency_keys", _COLUMNS, False))
    conn.execute("CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at)")


@dataclass(frozen=True, slots=True)
class KeyRecord:
    """What a key was used for."""

    digest: str
    """Digest of the request the key was first used with."""
    created_at: datetime
    """When it was claimed."""
    result: Any
    """What the write produced (JSON), ``None`` while it is under way."""


class IdempotencyKeys(SqlFeature):
    """Rows of ``idempotency_keys`` for one store."""

    def get(self, namespace: str, key: str, *, now: datetime | None = None) -> KeyRecord | None:
        """The live record of ``key`` (claimed less than :data:`RETENTION` ago), or ``None``."""
        cutoff = (now or datetime.now(UTC)) - RETENTION
        rows = self._sql.rows(
            "SELECT digest, created_at, result FROM idempotency_keys "
            "WHERE namespace = ? AND key = ? AND created_at >= ?",
            (namespace, key, self._d.stamp(cutoff)),
        )
        if not rows:
            return None
        digest, created, result = rows[0]
        return KeyRecord(digest, self._d.read_stamp(created), None if result is None else json.loads(result))

    def claim(self, namespace: str, key: str, digest: str, *, now: datetime | None = None) -> bool:
        """Claim ``key`` for a request with ``digest``, in the caller's transaction; ``False`` if it is taken.

        Expired keys (of every namespace) are deleted first.

        Raises:
            BackendError: The database failed.
        """
        at = now or datetime.now(UTC)
        with self._sql.write() as w:
            w.execute("DELETE FROM idempotency_keys WHERE created_at < ?", (self._d.stamp(at - RETENTION),))
            cur = w.execute(
                "INSERT INTO idempotency_keys (namespace, key, digest, created_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (namespace, key) DO NOTHING",
                (namespace, key, digest, self._d.stamp(at)),
            )
            return bool(cur.rowcount == 1)

    def finish(self, namespace: str, key: str, result: Any) -> None:
        """Record what the write of ``key`` produced (JSON-serializable)."""
        with self._sql.write() as w:
            w.execute(
                "UPDATE idempotency_keys SET result = ? WHERE namespace = ? AND key = ?",
                (json.dumps(result, sort_keys=True), namespace, key),
            )

    def release(self, namespace: str, key: str) -> None:
        """Forget an unfinished claim (its write failed and stored nothing): a retry runs again."""
        with self._sql.write() as w:
            w.execute(
                "DELETE FROM idempotency_keys WHERE namespace = ? AND key = ? AND result IS NULL", (namespace, key)
            )
