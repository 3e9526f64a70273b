"""SQLite tables and queries of the pyramid: nodes and the turns each node covers.

Only SQL lives here; the rules (when to seal, consolidate, demote) are in
:mod:`stratamem.pyramid` and :mod:`stratamem.pyramid.tiers`. The feature store shares
the :class:`~stratamem.store.sqlite.SQLiteStore` connection, lock and
transactions; reach it as ``store.nodes``.

``node_turns`` has the primary key ``(level, turn_id)``: the database itself
refuses a turn in two nodes of one level.

Every query names the namespace, including those by node id: the pyramid
resolves ids inside its namespace first, and the store checks again (defence
in depth), so an id of another namespace reads as absent and a write to it
raises :class:`~stratamem.errors.NotFoundError`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from ...errors import NotFoundError
from ..new_rows import NewNode
from ..vectors import pack_vector, unpack_vector
from ...pyramid.nodes import Node
from ...records import format_timestamp, parse_timestamp
from ...summarize import Summary

if TYPE_CHECKING:
    from .store import SQLiteStore

__all__ = ["NewNode", "SQLiteNodeStore", "m003_pyramid", "m014_summary_spend"]


def m003_pyramid(conn: sqlite3.Connection) -> None:
    """Pyramid nodes (segments and consolidations) and their turn coverage."""
    for sql in (
        """CREATE TABLE nodes (
            id INTEGER PRIMARY KEY,
            namespace_id INTEGER NOT NULL REFERENCES namespaces(id),
            level INTEGER NOT NULL CHECK (level >= 1),
            kind TEXT NOT NULL,
            session_id INTEGER REFERENCES sessions(id),
            seq_lo INTEGER,
            seq_hi INTEGER,
            turn_count INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            first_turn_id INTEGER NOT NULL,
            last_turn_id INTEGER NOT NULL,
            ts_start TEXT NOT NULL,
            ts_end TEXT NOT NULL,
            parent_id INTEGER REFERENCES nodes(id),
            reason TEXT NOT NULL,
            tier TEXT CHECK (tier IN ('hot', 'warm', 'cold')),
            tier_at TEXT,
            summary TEXT,
            summary_tokens INTEGER,
            summary_status TEXT NOT NULL DEFAULT 'pending' CHECK (summary_status IN ('pending', 'ok', 'failed')),
            summary_error TEXT,
            view_tokens INTEGER,
            warm_content TEXT,
            warm_format TEXT,
            archive_ref TEXT,
            archived_at TEXT,
            embedding BLOB,
            created_at TEXT NOT NULL
        )""",
        "CREATE INDEX nodes_level ON nodes (namespace_id, level, id)",
        "CREATE INDEX nodes_session ON nodes (session_id, seq_hi)",
        "CREATE INDEX nodes_parent ON nodes (parent_id)",
        """CREATE TABLE node_turns (
            level INTEGER NOT NULL,
            turn_id INTEGER NOT NULL,
            node_id INTEGER NOT NULL REFERENCES nodes(id),
            PRIMARY KEY (level, turn_id)
        ) WITHOUT ROWID""",
        "CREATE INDEX node_turns_node ON node_turns (node_id)",
    ):
        conn.execute(sql)


def m014_summary_spend(conn: sqlite3.Connection) -> None:
    """What summarizing cost, per namespace and level: model calls and the provider's token usage."""
    conn.execute("""CREATE TABLE summary_spend (
        namespace_id INTEGER NOT NULL REFERENCES namespaces(id),
        level INTEGER NOT NULL CHECK (level >= 1),
        calls INTEGER NOT NULL DEFAULT 0,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (namespace_id, level)
    )""")


_COLS = ("n.id, ns.name, n.level, n.kind, s.name, n.seq_lo, n.seq_hi, n.turn_count, n.tokens, n.first_turn_id, "
         "n.last_turn_id, n.ts_start, n.ts_end, n.parent_id, n.reason, n.tier, n.summary, n.summary_status, "
         "n.summary_error, n.summary_tokens, n.view_tokens, n.archive_ref, n.embedding IS NOT NULL, n.created_at")
_FROM = "FROM nodes n JOIN namespaces ns ON ns.id = n.namespace_id LEFT JOIN sessions s ON s.id = n.session_id"


def _row(r: Sequence[Any]) -> Node:
    return Node(
        id=r[0], namespace=r[1], level=r[2], kind=r[3], session=r[4],
        seq_range=(r[5], r[6]) if r[5] is not None else None, turn_count=r[7], tokens=r[8],
        first_turn_id=r[9], last_turn_id=r[10], start=parse_timestamp(r[11]), end=parse_timestamp(r[12]),
        parent_id=r[13], reason=r[14], tier=r[15],
        summary=Summary.from_dict(json.loads(r[16])) if r[16] else None, summary_status=r[17],
        summary_error=r[18], summary_tokens=r[19], view_tokens=r[20], archive_ref=r[21],
        has_embedding=bool(r[22]), created_at=parse_timestamp(r[23]))


def _now() -> str:
    return format_timestamp(datetime.now(timezone.utc))


_NS = "(SELECT id FROM namespaces WHERE name=?)"


class SQLiteNodeStore:
    """Node rows of every namespace in a :class:`~stratamem.store.sqlite.SQLiteStore`.

    Write methods must run inside ``store.transaction()`` when several must
    commit together; each is atomic on its own.
    """

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def _q(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._store.lock, self._store._errors():
            return self._store.connection.execute(sql, params).fetchall()

    def _ns_id(self, namespace: str) -> int | None:
        rows = self._q("SELECT id FROM namespaces WHERE name=?", (namespace,))
        return int(rows[0][0]) if rows else None

    # --- reading -----------------------------------------------------------------------

    def sealed_seq(self, namespace: str, session: str) -> int:
        """Highest session sequence number already sealed into a segment (0 if none)."""
        rows = self._q(
            "SELECT COALESCE(MAX(n.seq_hi), 0) FROM nodes n JOIN sessions s ON s.id = n.session_id "
            "JOIN namespaces ns ON ns.id = s.namespace_id WHERE ns.name=? AND s.name=? AND n.level=1",
            (namespace, session))
        return int(rows[0][0])

    def get(self, namespace: str, node_id: int) -> Node:
        """One node of the namespace.

        Raises:
            NotFoundError: No such node in this namespace.
        """
        rows = self._q(f"SELECT {_COLS} {_FROM} WHERE ns.name=? AND n.id=?", (namespace, int(node_id)))
        if not rows:
            raise NotFoundError(f"no node {node_id} in namespace {namespace!r}")
        return _row(rows[0])

    def list(self, namespace: str, *, level: int | None = None, tier: str | None = None,
             session: str | None = None, status: str | None = None, unparented: bool = False,
             parent_id: int | None = None, newest_first: bool = False, limit: int | None = None,
             tier_not: str | None = None, after_id: int | None = None) -> list[Node]:
        """Nodes of the namespace matching every given filter, in creation order.

        ``tier_not`` keeps nodes with a tier other than the one named (the
        ``nodes_level`` index narrows the scan to the namespace and level);
        ``after_id`` keeps nodes with larger ids (an index range with ``level``).
        """
        where, params = ["ns.name = ?"], [namespace]
        for clause, value in (("n.level = ?", level), ("n.tier = ?", tier), ("s.name = ?", session),
                              ("n.tier != ?", tier_not), ("n.id > ?", after_id),
                              ("n.summary_status = ?", status), ("n.parent_id = ?", parent_id)):
            if value is not None:
                where.append(clause)
                params.append(value)
        if unparented:
            where.append("n.parent_id IS NULL")
        sql = f"SELECT {_COLS} {_FROM} WHERE {' AND '.join(where)} ORDER BY n.id {'DESC' if newest_first else 'ASC'}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_row(r) for r in self._q(sql, params)]

    def last_child_id(self, namespace: str, level: int) -> int:
        """Highest id among the children of the namespace's newest node at ``level`` (0 if none).

        Consolidations take the oldest pending nodes of the level below, so
        every node of ``level - 1`` above this id is still unparented.
        """
        rows = self._q(f"SELECT COALESCE(MAX(c.id), 0) FROM nodes c WHERE c.parent_id = "
                       f"(SELECT MAX(id) FROM nodes WHERE namespace_id={_NS} AND level=?) AND c.namespace_id={_NS}",
                       (namespace, level, namespace))
        return int(rows[0][0])

    def levels(self, namespace: str) -> list[int]:
        """Levels that have nodes, ascending."""
        return [r[0] for r in self._q(
            "SELECT DISTINCT n.level FROM nodes n JOIN namespaces ns ON ns.id = n.namespace_id "
            "WHERE ns.name=? ORDER BY n.level", (namespace,))]

    def turn_ids(self, namespace: str, node_id: int) -> list[int]:
        """Ids of the turns a node of the namespace covers, ascending (empty for an unknown node)."""
        return [r[0] for r in self._q(
            f"SELECT nt.turn_id FROM node_turns nt JOIN nodes n ON n.id = nt.node_id "
            f"WHERE nt.node_id=? AND n.namespace_id={_NS} ORDER BY nt.turn_id", (int(node_id), namespace))]

    def coverage(self, namespace: str, level: int) -> dict[int, int]:
        """``turn_id -> node_id`` for every covered turn of the namespace at ``level``."""
        return {r[0]: r[1] for r in self._q(
            "SELECT nt.turn_id, nt.node_id FROM node_turns nt JOIN nodes n ON n.id = nt.node_id "
            "JOIN namespaces ns ON ns.id = n.namespace_id WHERE ns.name=? AND nt.level=?", (namespace, level))}

    def covered(self, namespace: str, level: int, turn_ids: Iterable[int]) -> set[int]:
        """Which of ``turn_ids`` a node of the namespace at ``level`` covers (primary-key lookups)."""
        ids = json.dumps([int(t) for t in turn_ids])
        return {r[0] for r in self._q(
            f"SELECT nt.turn_id FROM node_turns nt JOIN nodes n ON n.id = nt.node_id "
            f"WHERE nt.level=? AND nt.turn_id IN (SELECT value FROM json_each(?)) AND n.namespace_id={_NS}",
            (level, ids, namespace))}

    def warm_content(self, namespace: str, node_id: int) -> tuple[str, str] | None:
        """``(format, content)`` of a warm segment of the namespace, or ``None``."""
        rows = self._q(f"SELECT warm_format, warm_content FROM nodes WHERE id=? AND namespace_id={_NS} "
                       "AND warm_content IS NOT NULL", (int(node_id), namespace))
        return (rows[0][0], rows[0][1]) if rows else None

    def embedding(self, namespace: str, node_id: int) -> bytes | None:
        """The stored embedding (float32 bytes, see :mod:`stratamem.store.vectors`) of a node of the namespace, or ``None``."""
        rows = self._q(f"SELECT embedding FROM nodes WHERE id=? AND namespace_id={_NS}", (int(node_id), namespace))
        return unpack_vector(rows[0][0]) if rows and rows[0][0] is not None else None

    def archive_refs(self, namespace: str) -> set[str]:
        """Archive references the namespace's nodes still hold."""
        return {r[0] for r in self._q(
            f"SELECT DISTINCT archive_ref FROM nodes WHERE namespace_id={_NS} AND archive_ref IS NOT NULL",
            (namespace,))}

    def newest_turn_time(self, namespace: str) -> datetime | None:
        """Timestamp of the namespace's newest turn (by timestamp), or ``None``."""
        rows = self._q("SELECT MAX(t.ts) FROM turns t JOIN namespaces ns ON ns.id = t.namespace_id "
                       "WHERE ns.name=?", (namespace,))
        return parse_timestamp(rows[0][0]) if rows and rows[0][0] else None

    def newest_turn_after(self, namespace: str, after_id: int) -> tuple[int, datetime] | None:
        """``(highest id, newest timestamp)`` over the namespace's turns with ids above ``after_id``, or ``None``.

        A range scan of the ``turns_namespace`` index: the cost follows the
        number of new turns, not the namespace's history.
        """
        rows = self._q(f"SELECT MAX(id), MAX(ts) FROM turns WHERE namespace_id={_NS} AND id > ?",
                       (namespace, int(after_id)))
        return (int(rows[0][0]), parse_timestamp(rows[0][1])) if rows and rows[0][0] is not None else None

    def turn_time(self, namespace: str, turn_id: int) -> datetime | None:
        """Timestamp of one turn of the namespace, or ``None`` if there is no such turn."""
        rows = self._q(f"SELECT ts FROM turns WHERE id=? AND namespace_id={_NS}", (int(turn_id), namespace))
        return parse_timestamp(rows[0][0]) if rows else None

    def tier_sizes(self, namespace: str) -> list[tuple[Any, ...]]:
        """Per tier of level-1 nodes: tier, nodes, turns, tokens, view tokens, warm bytes, summary bytes."""
        return self._q(
            "SELECT n.tier, COUNT(*), SUM(n.turn_count), SUM(n.tokens), SUM(COALESCE(n.view_tokens, 0)), "
            "SUM(COALESCE(LENGTH(CAST(n.warm_content AS BLOB)), 0)), "
            "SUM(COALESCE(LENGTH(CAST(n.summary AS BLOB)), 0)) "
            "FROM nodes n JOIN namespaces ns ON ns.id = n.namespace_id WHERE ns.name=? AND n.level=1 "
            "GROUP BY n.tier", (namespace,))

    def tier_raw_bytes(self, namespace: str) -> dict[str, int]:
        """UTF-8 bytes of the canonical content of the turns each tier covers."""
        rows = self._q(
            "SELECT n.tier, SUM(LENGTH(CAST(t.text AS BLOB)) + COALESCE(LENGTH(CAST(t.content AS BLOB)), 0)) "
            "FROM nodes n JOIN namespaces ns ON ns.id = n.namespace_id "
            "JOIN node_turns nt ON nt.node_id = n.id JOIN turns t ON t.id = nt.turn_id "
            "WHERE ns.name=? AND n.level=1 GROUP BY n.tier", (namespace,))
        return {r[0]: int(r[1] or 0) for r in rows}

    # --- writing -----------------------------------------------------------------------

    def insert(self, namespace: str, node: NewNode) -> int:
        """Insert a node and its coverage rows; returns the node id.

        Raises:
            BackendError: A covered turn already belongs to a node of this level
                (the primary key refuses it), or the write failed.
        """
        with self._store.transaction():
            conn = self._store.connection
            ns_id = self._ns_id(namespace)
            sid = None
            if node.session is not None:
                sid = conn.execute("SELECT id FROM sessions WHERE namespace_id=? AND name=?",
                                   (ns_id, node.session)).fetchone()[0]
            seq_lo, seq_hi = node.seq_range or (None, None)
            node_id = int(conn.execute(
                "INSERT INTO nodes (namespace_id, level, kind, session_id, seq_lo, seq_hi, turn_count, tokens, "
                "first_turn_id, last_turn_id, ts_start, ts_end, reason, tier, tier_at, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (ns_id, node.level, node.kind, sid, seq_lo, seq_hi, len(node.turn_ids), node.tokens,
                 min(node.turn_ids), max(node.turn_ids), format_timestamp(node.start), format_timestamp(node.end),
                 node.reason, node.tier, _now() if node.tier else None, _now())).fetchone()[0])
            conn.executemany("INSERT INTO node_turns (level, turn_id, node_id) VALUES (?, ?, ?)",
                             [(node.level, t, node_id) for t in node.turn_ids])
        return node_id

    def _update(self, namespace: str, sql: str, params: Sequence[Any], expect: int = 1) -> None:
        """Run an UPDATE of the namespace's nodes; fewer rows than ``expect`` means an unknown id."""
        cur = self._store.connection.execute(f"{sql} AND namespace_id={_NS}", (*params, namespace))
        if cur.rowcount < expect:
            raise NotFoundError(f"{expect - cur.rowcount} of the nodes are not in namespace {namespace!r}")

    def set_parent(self, namespace: str, child_ids: Iterable[int], parent_id: int) -> None:
        """Record that ``parent_id`` consolidates the children.

        Raises:
            NotFoundError: A child is not a node of the namespace (nothing changes).
        """
        ids = [int(c) for c in child_ids]
        with self._store.transaction():
            self._update(namespace, "UPDATE nodes SET parent_id=? WHERE id IN (SELECT value FROM json_each(?))",
                         (int(parent_id), json.dumps(ids)), expect=len(ids))

    def set_summary(self, namespace: str, node_id: int, summary: Summary, *, tokens: int, status: str,
                    error: str | None, view_tokens: int | None = None, embedding: bytes | None = None) -> None:
        """Store a node's summary, its status and (optionally) its embedding.

        Raises:
            NotFoundError: No such node in the namespace.
        """
        with self._store.transaction():
            self._update(namespace,
                         "UPDATE nodes SET summary=?, summary_tokens=?, summary_status=?, summary_error=?, "
                         "view_tokens=COALESCE(?, view_tokens), embedding=COALESCE(?, embedding) WHERE id=?",
                         (json.dumps(summary.to_dict(), ensure_ascii=False, separators=(",", ":")), tokens, status,
                          error, view_tokens, None if embedding is None else pack_vector(embedding), int(node_id)))

    def set_status(self, namespace: str, node_id: int, status: str, error: str | None) -> None:
        """Set a node's summary status and error, leaving its summary as it is.

        Raises:
            NotFoundError: No such node in the namespace.
        """
        with self._store.transaction():
            self._update(namespace, "UPDATE nodes SET summary_status=?, summary_error=? WHERE id=?",
                         (status, error, int(node_id)))

    def set_tier(self, namespace: str, node_id: int, tier: str, *, at: datetime, view_tokens: int | None,
                 warm: tuple[str, str] | None = None, archive_ref: str | None = None) -> None:
        """Move a segment to ``tier`` at instant ``at`` (also its ``archived_at`` when an archive ref is given).

        Warm content replaces nothing canonical; cold clears it for the archive ref.

        Raises:
            NotFoundError: No such node in the namespace.
        """
        fmt, content = warm if warm else (None, None)
        when = format_timestamp(at)
        with self._store.transaction():
            self._update(namespace,
                         "UPDATE nodes SET tier=?, tier_at=?, view_tokens=?, warm_format=?, warm_content=?, "
                         "archive_ref=COALESCE(?, archive_ref), "
                         "archived_at=CASE WHEN ? IS NULL THEN archived_at ELSE ? END WHERE id=?",
                         (tier, when, view_tokens, fmt, content, archive_ref, archive_ref, when, int(node_id)))

    def clear_archive(self, namespace: str, node_ids: Iterable[int]) -> None:
        """Forget archive references of the namespace's nodes (retention expired the content)."""
        with self._store.transaction():
            self._store.connection.execute(
                f"UPDATE nodes SET archive_ref=NULL WHERE id IN (SELECT value FROM json_each(?)) "
                f"AND namespace_id={_NS}", (json.dumps([int(i) for i in node_ids]), namespace))

    def archived_before(self, namespace: str, cutoff: datetime) -> list[tuple[int, str]]:
        """``(node_id, archive_ref)`` of cold segments archived before ``cutoff``."""
        return [(r[0], r[1]) for r in self._q(
            "SELECT n.id, n.archive_ref FROM nodes n JOIN namespaces ns ON ns.id = n.namespace_id "
            "WHERE ns.name=? AND n.archive_ref IS NOT NULL AND n.archived_at < ? ORDER BY n.id",
            (namespace, format_timestamp(cutoff)))]

    def delete_turns(self, namespace: str, turn_ids: Sequence[int]) -> int:
        """Delete canonical turns of the namespace (retention only); returns how many were deleted."""
        with self._store.transaction():
            cur = self._store.connection.execute(
                f"DELETE FROM turns WHERE id IN (SELECT value FROM json_each(?)) AND namespace_id={_NS}",
                (json.dumps([int(t) for t in turn_ids]), namespace))
            return cur.rowcount

    def lock(self, namespace: str) -> None:
        """Serialize the namespace's pyramid writers for the current transaction.

        Nothing to do on SQLite: ``BEGIN IMMEDIATE`` already takes the database's
        write lock at the start of every write transaction.
        """

    # --- summarization spend (m014_summary_spend) ---------------------------------------

    def add_spend(self, namespace: str, level: int, *, calls: int, input_tokens: int, output_tokens: int) -> None:
        """Add one summarization's model calls and provider-reported tokens to the level's totals."""
        with self._store.transaction():
            self._store.connection.execute(
                f"INSERT INTO summary_spend (namespace_id, level, calls, input_tokens, output_tokens) "
                f"VALUES ({_NS}, ?, ?, ?, ?) ON CONFLICT (namespace_id, level) DO UPDATE SET "
                "calls = calls + excluded.calls, input_tokens = input_tokens + excluded.input_tokens, "
                "output_tokens = output_tokens + excluded.output_tokens",
                (namespace, int(level), int(calls), int(input_tokens), int(output_tokens)))

    def spend(self, namespace: str) -> list[tuple[int, int, int, int]]:
        """``(level, calls, input_tokens, output_tokens)`` per level with any spend, ascending."""
        return [tuple(r) for r in self._q(  # type: ignore[misc]
            f"SELECT level, calls, input_tokens, output_tokens FROM summary_spend WHERE namespace_id={_NS} "
            "ORDER BY level", (namespace,))]

    def failed_count(self, namespace: str) -> int:
        """Nodes whose summary is ``failed`` (the model failed; an extractive fallback stands in)."""
        return int(self._q(f"SELECT COUNT(*) FROM nodes WHERE namespace_id={_NS} AND summary_status='failed'",
                           (namespace,))[0][0])

    def summarized_tokens(self, namespace: str) -> tuple[int, int]:
        """``(turn tokens, summary tokens)`` over the summarized segments (level 1) of the namespace."""
        row = self._q(f"SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(summary_tokens), 0) FROM nodes "
                      f"WHERE namespace_id={_NS} AND level = 1 AND summary_tokens IS NOT NULL", (namespace,))[0]
        return int(row[0]), int(row[1])
