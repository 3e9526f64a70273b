"""Storage of context manifests: every assembled prompt, explained (seed 004).

Migrations ``m006_manifests`` (the table) and ``m022_compact_manifests`` (the compact form).

One feature store for every backend (it speaks :mod:`stratamem.store.sql`).
Each row is one :class:`~stratamem.records.manifests.Manifest` in its stored
form (:func:`~stratamem.store.manifest_rows.encode_manifest`: ids, tokens,
reasons and scores, compressed, at most ``max_bytes``), with the namespace,
session and a few columns to list by, and its size. Retention counts both:
a namespace keeps its newest ``keep`` manifests as long as their bytes sum
to at most ``keep_bytes`` (the newest one is always kept), and, with a
store-wide cap, the whole store's manifests sum to at most ``keep_store_bytes``
(each namespace's newest stays; of the rest, the oldest of any namespace go first).
"""

from __future__ import annotations

import json
from typing import Any

from ..records.manifests import Manifest
from .manifest_rows import StoredManifest, brief_manifest, check_keep, decode_manifest, encode_manifest
from .sql import Sql, dialect_of, run_ddl

__all__ = ["Manifests", "m006_manifests", "m022_compact_manifests", "m026_brief_manifests"]

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

_COMPACT_DDL = {
    "sqlite": [
        """CREATE TABLE manifests_new (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        namespace TEXT NOT NULL,
        session TEXT,
        created_at TEXT NOT NULL,
        budget INTEGER NOT NULL,
        total_tokens INTEGER NOT NULL,
        items INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        body BLOB NOT NULL
    )""",
    ],
    "postgres": [
        """CREATE TABLE manifests_new (
        namespace TEXT NOT NULL,
        id BIGINT GENERATED ALWAYS AS IDENTITY,
        session TEXT,
        created_at TIMESTAMPTZ NOT NULL,
        budget INTEGER NOT NULL,
        total_tokens INTEGER NOT NULL,
        items INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        body BYTEA NOT NULL,
        PRIMARY KEY (namespace, id)
    )"""
    ],
}

_SELECT = "SELECT id, namespace, session, body FROM manifests WHERE namespace = ?"
_BATCH = 500


def m006_manifests(conn: Any) -> None:
    """Context manifests, newest last per namespace."""
    run_ddl(conn, _DDL)


def m022_compact_manifests(conn: Any) -> None:
    """Manifests stored in their compact form (both backends): the table is rebuilt with ``bytes`` and ``body``.

    Every stored JSON manifest is re-encoded (:func:`encode_manifest`, the
    default size cap) under its id; retention by bytes applies from the next
    recorded manifest on.
    """
    d = dialect_of(conn)
    sqlite = d.name == "sqlite"
    # Ids are never reused: the new table's counter starts where the old one was.
    if sqlite:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'manifests'").fetchone()
    else:
        row = conn.execute("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM manifests_id_seq").fetchone()
    counter = int(row[0]) if row else 0
    run_ddl(conn, _COMPACT_DDL)
    insert = (
        "INSERT INTO manifests_new (id, namespace, session, created_at, budget, total_tokens, items, bytes, body) "
        f"{'' if sqlite else 'OVERRIDING SYSTEM VALUE '}VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    last = 0
    while True:
        rows = conn.execute(
            d.sql(
                "SELECT id, namespace, session, created_at, budget, total_tokens, items, manifest FROM manifests "
                f"WHERE id > ? ORDER BY id LIMIT {_BATCH}"
            ),
            (last,),
        ).fetchall()
        if not rows:
            break
        last = int(rows[-1][0])
        out = []
        for *cols, manifest in rows:
            body = encode_manifest(json.loads(manifest))
            out.append((*cols, len(body), body))
        conn.cursor().executemany(d.sql(insert), out)
    conn.execute("DROP TABLE manifests")
    conn.execute("ALTER TABLE manifests_new RENAME TO manifests")
    counter = max(counter, last)
    if sqlite:
        conn.execute("CREATE INDEX manifests_namespace ON manifests (namespace, id)")
        conn.execute("DELETE FROM sqlite_sequence WHERE name = 'manifests'")
        if counter:
            conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('manifests', ?)", (counter,))
        return
    conn.execute("ALTER TABLE manifests RENAME CONSTRAINT manifests_new_pkey TO manifests_pkey")
    conn.execute("ALTER SEQUENCE manifests_new_id_seq RENAME TO manifests_id_seq")
    if counter:
        conn.execute(d.sql("SELECT setval('manifests_id_seq', ?)"), (counter,))


def m026_brief_manifests(conn: Any, keep_full: int = 3) -> None:
    """Every stored manifest but each namespace's newest ``keep_full`` (the default
    ``context.keep_full_manifests``) re-stored in its brief form (both backends).

    What a store of the previous retention would otherwise do on its next
    recorded manifest is drop its oldest whole, to fit the smaller byte caps;
    brief, they stay (each entry's reason and fused score; the breakdowns go).
    """
    d = dialect_of(conn)
    last = 0
    while True:
        rows = conn.execute(
            d.sql(
                "SELECT id, body FROM manifests m WHERE id > ? AND (SELECT COUNT(*) FROM manifests n "
                f"WHERE n.namespace = m.namespace AND n.id > m.id) >= ? ORDER BY id LIMIT {_BATCH}"
            ),
            (last, keep_full),
        ).fetchall()
        if not rows:
            return
        last = int(rows[-1][0])
        out = [(body, len(body), int(mid)) for mid, blob in rows if (body := brief_manifest(bytes(blob))) is not None]
        if out:
            conn.cursor().executemany(d.sql("UPDATE manifests SET body = ?, bytes = ? WHERE id = ?"), out)


def _demote(w: Any, namespace: str, keep_full: int, max_bytes: int) -> None:
    """Store the namespace's manifest just past its newest ``keep_full`` in the brief form (once: a brief one
    stays as it is). One row per recorded manifest, so every older one was made brief when it passed."""
    row = w.execute(
        "SELECT id, body FROM manifests WHERE namespace = ? ORDER BY id DESC LIMIT 1 OFFSET ?", (namespace, keep_full)
    ).fetchone()
    body = None if row is None else brief_manifest(bytes(row[1]), max_bytes)
    if body is not None:
        w.execute(
            "UPDATE manifests SET body = ?, bytes = ? WHERE namespace = ? AND id = ?",
            (body, len(body), namespace, row[0]),
        )


class Manifests:
    """Rows of ``manifests`` for one store.

    Args:
        sql: The owning store's SQL layer.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def add(
        self,
        namespace: str,
        session: str | None,
        manifest: Manifest,
        *,
        keep: int = 1000,
        keep_bytes: int = 262144,
        max_bytes: int = 16384,
        keep_store_bytes: int | None = None,
        keep_full: int | None = None,
    ) -> int:
        """Record a manifest, then drop the namespace's oldest beyond ``keep`` rows or ``keep_bytes`` bytes.

        With ``keep_full``, only the namespace's newest ``keep_full`` manifests
        keep their score breakdowns: the one this add pushes past them is
        stored again in its brief form (:func:`~stratamem.store.manifest_rows.brief_manifest`,
        ~40% of the bytes) before the byte limits are applied, so they count
        what is kept.

        The manifest is stored compactly, trimmed to ``max_bytes``
        (:func:`~stratamem.store.manifest_rows.encode_manifest`); the newest
        manifest is kept even when it alone is over ``keep_bytes``. With
        ``keep_store_bytes``, the manifests of every namespace together are
        then held to that many bytes too: each namespace keeps its newest (so
        ``stratamem manifests`` always has one to show), and of the rest the
        store's oldest go first. Returns its id.

        Raises:
            ValueError: ``keep``, ``keep_bytes``, ``max_bytes`` or ``keep_store_bytes`` is below 1, or
                ``keep_full`` below 0.
            BackendError: The database failed; nothing was recorded.
        """
        check_keep(keep)
        if keep_full is not None and (isinstance(keep_full, bool) or not isinstance(keep_full, int) or keep_full < 0):
            raise ValueError(f"keep_full must be an integer of at least 0, got {keep_full!r}")
        check_keep(keep_bytes, "keep_bytes")
        check_keep(max_bytes, "max_bytes")
        if keep_store_bytes is not None:
            check_keep(keep_store_bytes, "keep_store_bytes")
        body = encode_manifest(manifest.to_dict(), max_bytes)
        with self._sql.write() as w:
            mid = w.execute(
                "INSERT INTO manifests (namespace, session, created_at, budget, total_tokens, items, bytes, body) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    namespace,
                    session,
                    self._sql.dialect.stamp(manifest.created_at),
                    manifest.budget,
                    manifest.total_tokens,
                    len(manifest.items),
                    len(body),
                    body,
                ),
            ).fetchone()[0]
            if keep_full is not None:
                _demote(w, namespace, keep_full, max_bytes)
            # The oldest kept: the last of the newest rows whose running byte total stays in the limit.
            w.execute(
                "DELETE FROM manifests WHERE namespace = ? AND id < (SELECT MIN(id) FROM (SELECT id, "
                "SUM(bytes) OVER (ORDER BY id DESC) AS total, ROW_NUMBER() OVER (ORDER BY id DESC) AS n "
                "FROM manifests WHERE namespace = ?) kept WHERE (total <= ? OR n = 1) AND n <= ?)",
                (namespace, namespace, keep_bytes, keep),
            )
            if keep_store_bytes is not None:
                # Each namespace's newest counts first; the others, newest first across the store (ids rise
                # across namespaces), keep what fits in the rest: the running total cuts off an oldest suffix.
                newest = "SELECT MAX(id) FROM manifests GROUP BY namespace"
                w.execute(
                    "DELETE FROM manifests WHERE id IN (SELECT id FROM (SELECT id, SUM(bytes) OVER (ORDER BY id DESC) "
                    f"AS total FROM manifests WHERE id NOT IN ({newest})) rest WHERE total > ? - "
                    f"(SELECT SUM(bytes) FROM manifests WHERE id IN ({newest})))",
                    (keep_store_bytes,),
                )
        return int(mid)

    def size(self, namespace: str) -> tuple[int, int]:
        """``(manifests, stored bytes)`` of the namespace."""
        rows = self._sql.rows(
            "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM manifests WHERE namespace = ?", (namespace,)
        )
        return int(rows[0][0]), int(rows[0][1])

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
                f"SELECT id, body FROM manifests WHERE namespace = ? AND {same} ORDER BY id DESC LIMIT 1",
                (namespace,) if session is None else (namespace, session),
            ).fetchone()
            if row is None:
                return None
            data = decode_manifest(bytes(row[1]))
            data["cache"] = {**(data.get("cache") or {}), "reported": reported}
            body = encode_manifest(data)
            w.execute(
                "UPDATE manifests SET body = ?, bytes = ? WHERE namespace = ? AND id = ?",
                (body, len(body), namespace, row[0]),
            )
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
        return StoredManifest(id=int(row[0]), namespace=row[1], session=row[2], data=decode_manifest(bytes(row[3])))
