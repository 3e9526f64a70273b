"""PostgreSQL tables and queries of the pyramid (``m003_pyramid``): nodes and the turns each covers.

The mirror of :mod:`stratamem.store.sqlite.nodes`, with the same methods and
semantics; the rules live in :mod:`stratamem.pyramid` and :mod:`stratamem.pyramid.tiers`.
Differences in form, not behaviour:

* Every row carries the tenant column ``namespace``; segments name their
  session directly (sessions are never renamed), so no query needs a join to
  find a namespace's nodes.
* ``node_turns`` has the primary key ``(namespace, level, turn_id)`` — turn
  ids are unique store-wide, so, as on SQLite, the database itself refuses a
  turn in two nodes of one level.
* Summary embeddings are pgvector ``vector`` values (see
  :mod:`stratamem.store.postgres.search`); callers still get float32 bytes.
* No foreign keys into the canonical tables: retention deletes turns while
  their coverage rows stay, and derived rows must never block a change to
  the canonical record. Node-to-node links are enforced within the
  namespace (``(namespace, parent_id)`` and ``(namespace, node_id)``).

Every query names the namespace, including those by node id (the pyramid
resolves ids inside its namespace first; the store checks again), as on
SQLite. Pyramid writers of one namespace serialize on a transaction-scoped
advisory lock (:meth:`PostgresNodeStore.lock`), the way item writers do.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import psycopg

from ...errors import NotFoundError
from ...pyramid.nodes import Node
from ...summarize import Summary
from ..vectors import quantized
from .search import require_pgvector, vector_from_binary, vector_literal
from ..new_rows import NewNode

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["NewNode", "PostgresNodeStore", "m003_pyramid", "m014_summary_spend"]

# First key of the two-key advisory lock serializing one namespace's pyramid writers ("Py").
_LOCK_CLASS = 0x5079


def m003_pyramid(conn: psycopg.Connection) -> None:
    """Pyramid nodes (segments and consolidations) and their turn coverage."""
    require_pgvector(conn)
    for statement in (
        """CREATE TABLE nodes (
            namespace TEXT NOT NULL,
            id BIGINT GENERATED ALWAYS AS IDENTITY,
            level INTEGER NOT NULL CHECK (level >= 1),
            kind TEXT NOT NULL,
            session TEXT,
            seq_lo BIGINT,
            seq_hi BIGINT,
            turn_count INTEGER NOT NULL,
            tokens BIGINT NOT NULL,
            first_turn_id BIGINT NOT NULL,
            last_turn_id BIGINT NOT NULL,
            ts_start TIMESTAMPTZ NOT NULL,
            ts_end TIMESTAMPTZ NOT NULL,
            parent_id BIGINT,
            reason TEXT NOT NULL,
            tier TEXT CHECK (tier IN ('hot', 'warm', 'cold')),
            tier_at TIMESTAMPTZ,
            summary TEXT,
            summary_tokens INTEGER,
            summary_status TEXT NOT NULL DEFAULT 'pending' CHECK (summary_status IN ('pending', 'ok', 'failed')),
            summary_error TEXT,
            view_tokens INTEGER,
            warm_content TEXT,
            warm_format TEXT,
            archive_ref TEXT,
            archived_at TIMESTAMPTZ,
            embedding vector,
            created_at TIMESTAMPTZ NOT NULL,
            PRIMARY KEY (namespace, id),
            FOREIGN KEY (namespace, parent_id) REFERENCES nodes (namespace, id)
        )""",
        # Store-wide id index (early versions looked nodes up by bare id; migrations are never edited).
        "CREATE INDEX nodes_id ON nodes (id)",
        "CREATE INDEX nodes_level ON nodes (namespace, level, id)",
        "CREATE INDEX nodes_session ON nodes (namespace, session, seq_hi)",
        "CREATE INDEX nodes_parent ON nodes (parent_id)",
        """CREATE TABLE node_turns (
            namespace TEXT NOT NULL,
            level INTEGER NOT NULL,
            turn_id BIGINT NOT NULL,
            node_id BIGINT NOT NULL,
            PRIMARY KEY (namespace, level, turn_id),
            FOREIGN KEY (namespace, node_id) REFERENCES nodes (namespace, id)
        )""",
        "CREATE INDEX node_turns_node ON node_turns (node_id, turn_id)",
    ):
        conn.execute(statement)  # type: ignore[arg-type]


_COLS = ("id, namespace, level, kind, session, seq_lo, seq_hi, turn_count, tokens, first_turn_id, last_turn_id, "
         "ts_start, ts_end, parent_id, reason, tier, summary, summary_status, summary_error, summary_tokens, "
         "view_tokens, archive_ref, embedding IS NOT NULL, created_at")


def m014_summary_spend(conn: psycopg.Connection) -> None:
    """What summarizing cost, per namespace and level: model calls and the provider's token usage."""
    conn.execute("""CREATE TABLE summary_spend (
        namespace TEXT NOT NULL,
        level INTEGER NOT NULL CHECK (level >= 1),
        calls BIGINT NOT NULL DEFAULT 0,
        input_tokens BIGINT NOT NULL DEFAULT 0,
        output_tokens BIGINT NOT NULL DEFAULT 0,
        PRIMARY KEY (namespace, level)
    )""")


def _utc(value: datetime) -> datetime:
    return value.astimezone(timezone.utc)


def _row(r: Sequence[Any]) -> Node:
    return Node(
        id=int(r[0]), namespace=r[1], level=r[2], kind=r[3], session=r[4],
        seq_range=(int(r[5]), int(r[6])) if r[5] is not None else None, turn_count=r[7], tokens=int(r[8]),
        first_turn_id=int(r[9]), last_turn_id=int(r[10]), start=_utc(r[11]), end=_utc(r[12]),
        parent_id=int(r[13]) if r[13] is not None else None, reason=r[14], tier=r[15],
        summary=Summary.from_dict(json.loads(r[16])) if r[16] else None, summary_status=r[17],
        summary_error=r[18], summary_tokens=r[19], view_tokens=r[20], archive_ref=r[21],
        has_embedding=bool(r[22]), created_at=_utc(r[23]))


def _now() -> datetime:
    return datetime.now(timezone.utc)


class PostgresNodeStore:
    """Node rows of every namespace in a :class:`~stratamem.store.postgres.PostgresStore`.

    Write methods must run inside ``store.transaction()`` when several must
    commit together; each is atomic on its own.
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def _q(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._store._query(query, params)

    # --- reading -----------------------------------------------------------------------

    def sealed_seq(self, namespace: str, session: str) -> int:
        """Highest session sequence number already sealed into a segment (0 if none)."""
        rows = self._q("SELECT COALESCE(MAX(seq_hi), 0) FROM nodes WHERE namespace = %s AND session = %s "
                       "AND level = 1", (namespace, session))
        return int(rows[0][0])

    def get(self, namespace: str, node_id: int) -> Node:
        """One node of the namespace.

        Raises:
            NotFoundError: No such node in this namespace.
        """
        rows = self._q(f"SELECT {_COLS} FROM nodes WHERE namespace = %s AND id = %s", (namespace, int(node_id)))
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
        where, params = ["namespace = %s"], [namespace]
        for clause, value in (("level = %s", level), ("tier = %s", tier), ("session = %s", session),
                              ("tier <> %s", tier_not), ("id > %s", after_id),
                              ("summary_status = %s", status), ("parent_id = %s", parent_id)):
            if value is not None:
                where.append(clause)
                params.append(value)
        if unparented:
            where.append("parent_id IS NULL")
        query = f"SELECT {_COLS} FROM nodes WHERE {' AND '.join(where)} ORDER BY id {'DESC' if newest_first else 'ASC'}"
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        return [_row(r) for r in self._q(query, params)]

    def last_child_id(self, namespace: str, level: int) -> int:
        """Highest id among the children of the namespace's newest node at ``level`` (0 if none).

        Consolidations take the oldest pending nodes of the level below, so
        every node of ``level - 1`` above this id is still unparented.
        """
        rows = self._q("SELECT COALESCE(MAX(id), 0) FROM nodes WHERE namespace = %s AND parent_id = "
                       "(SELECT MAX(id) FROM nodes WHERE namespace = %s AND level = %s)",
                       (namespace, namespace, level))
        return int(rows[0][0])

    def levels(self, namespace: str) -> list[int]:
        """Levels that have nodes, ascending."""
        return [r[0] for r in self._q("SELECT DISTINCT level FROM nodes WHERE namespace = %s ORDER BY level",
                                      (namespace,))]

    def turn_ids(self, namespace: str, node_id: int) -> list[int]:
        """Ids of the turns a node of the namespace covers, ascending (empty for an unknown node)."""
        return [int(r[0]) for r in self._q(
            "SELECT turn_id FROM node_turns WHERE namespace = %s AND node_id = %s ORDER BY turn_id",
            (namespace, int(node_id)))]

    def coverage(self, namespace: str, level: int) -> dict[int, int]:
        """``turn_id -> node_id`` for every covered turn of the namespace at ``level``."""
        return {int(r[0]): int(r[1]) for r in self._q(
            "SELECT turn_id, node_id FROM node_turns WHERE namespace = %s AND level = %s", (namespace, level))}

    def covered(self, namespace: str, level: int, turn_ids: Iterable[int]) -> set[int]:
        """Which of ``turn_ids`` a node of the namespace at ``level`` covers (primary-key lookups)."""
        return {int(r[0]) for r in self._q(
            "SELECT turn_id FROM node_turns WHERE namespace = %s AND level = %s AND turn_id = ANY(%s)",
            (namespace, level, [int(t) for t in turn_ids]))}

    def warm_content(self, namespace: str, node_id: int) -> tuple[str, str] | None:
        """``(format, content)`` of a warm segment of the namespace, or ``None``."""
        rows = self._q("SELECT warm_format, warm_content FROM nodes WHERE namespace = %s AND id = %s "
                       "AND warm_content IS NOT NULL", (namespace, int(node_id)))
        return (rows[0][0], rows[0][1]) if rows else None

    def embedding(self, namespace: str, node_id: int) -> bytes | None:
        """The stored embedding (float32 bytes) of a node of the namespace, or ``None``."""
        with self._store.connection() as conn, self._store._errors():
            row = conn.cursor(binary=True).execute(
                "SELECT vector_send(embedding) FROM nodes WHERE namespace = %s AND id = %s",
                (namespace, int(node_id))).fetchone()
        return vector_from_binary(row[0]) if row and row[0] is not None else None

    def archive_refs(self, namespace: str) -> set[str]:
        """Archive references the namespace's nodes still hold."""
        return {r[0] for r in self._q(
            "SELECT DISTINCT archive_ref FROM nodes WHERE namespace = %s AND archive_ref IS NOT NULL", (namespace,))}

    def newest_turn_time(self, namespace: str) -> datetime | None:
        """Timestamp of the namespace's newest turn (by timestamp), or ``None``."""
        rows = self._q("SELECT MAX(ts) FROM turns WHERE namespace = %s", (namespace,))
        return _utc(rows[0][0]) if rows and rows[0][0] else None

    def newest_turn_after(self, namespace: str, after_id: int) -> tuple[int, datetime] | None:
        """``(highest id, newest timestamp)`` over the namespace's turns with ids above ``after_id``, or ``None``.

        A range scan of the turns' primary key ``(namespace, id)``: the cost
        follows the number of new turns, not the namespace's history.
        """
        rows = self._q("SELECT MAX(id), MAX(ts) FROM turns WHERE namespace = %s AND id > %s",
                       (namespace, int(after_id)))
        return (int(rows[0][0]), _utc(rows[0][1])) if rows and rows[0][0] is not None else None

    def turn_time(self, namespace: str, turn_id: int) -> datetime | None:
        """Timestamp of one turn of the namespace, or ``None`` if there is no such turn."""
        rows = self._q("SELECT ts FROM turns WHERE namespace = %s AND id = %s", (namespace, int(turn_id)))
        return _utc(rows[0][0]) if rows else None

    def tier_sizes(self, namespace: str) -> list[tuple[Any, ...]]:
        """Per tier of level-1 nodes: tier, nodes, turns, tokens, view tokens, warm bytes, summary bytes."""
        return [tuple(int(v) if i else v for i, v in enumerate(r)) for r in self._q(
            "SELECT tier, COUNT(*), SUM(turn_count), SUM(tokens), SUM(COALESCE(view_tokens, 0)), "
            "SUM(COALESCE(octet_length(warm_content), 0)), SUM(COALESCE(octet_length(summary), 0)) "
            "FROM nodes WHERE namespace = %s AND level = 1 GROUP BY tier", (namespace,))]

    def tier_raw_bytes(self, namespace: str) -> dict[str, int]:
        """UTF-8 bytes of the canonical content of the turns each tier covers."""
        rows = self._q(
            "SELECT n.tier, SUM(octet_length(t.text) + COALESCE(octet_length(t.content), 0)) "
            "FROM nodes n JOIN node_turns nt ON nt.namespace = n.namespace AND nt.node_id = n.id "
            "JOIN turns t ON t.namespace = nt.namespace AND t.id = nt.turn_id "
            "WHERE n.namespace = %s AND n.level = 1 GROUP BY n.tier", (namespace,))
        return {r[0]: int(r[1] or 0) for r in rows}

    # --- writing -----------------------------------------------------------------------

    def insert(self, namespace: str, node: NewNode) -> int:
        """Insert a node and its coverage rows; returns the node id.

        Raises:
            BackendError: A covered turn already belongs to a node of this level
                (the primary key refuses it), or the write failed.
        """
        seq_lo, seq_hi = node.seq_range or (None, None)
        now = _now()
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            node_id = int(conn.execute(
                "INSERT INTO nodes (namespace, level, kind, session, seq_lo, seq_hi, turn_count, tokens, "
                "first_turn_id, last_turn_id, ts_start, ts_end, reason, tier, tier_at, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                (namespace, node.level, node.kind, node.session, seq_lo, seq_hi, len(node.turn_ids), node.tokens,
                 min(node.turn_ids), max(node.turn_ids), node.start, node.end, node.reason, node.tier,
                 now if node.tier else None, now)).fetchone()[0])
            conn.execute(
                "INSERT INTO node_turns (namespace, level, turn_id, node_id) "
                "SELECT %s, %s, t, %s FROM unnest(%s::bigint[]) AS t",
                (namespace, node.level, node_id, [int(t) for t in node.turn_ids]))
        return node_id

    def _update(self, namespace: str, query: str, params: Sequence[Any], expect: int = 1) -> None:
        """Run an UPDATE of the namespace's nodes; fewer rows than ``expect`` means an unknown id."""
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            count = conn.execute(f"{query} AND namespace = %s", (*params, namespace)).rowcount  # type: ignore[arg-type]
            if count < expect:
                raise NotFoundError(f"{expect - count} of the nodes are not in namespace {namespace!r}")

    def set_parent(self, namespace: str, child_ids: Iterable[int], parent_id: int) -> None:
        """Record that ``parent_id`` consolidates the children.

        Raises:
            NotFoundError: A child is not a node of the namespace (nothing changes).
        """
        ids = [int(c) for c in child_ids]
        self._update(namespace, "UPDATE nodes SET parent_id = %s WHERE id = ANY(%s)", (int(parent_id), ids),
                     expect=len(ids))

    def set_summary(self, namespace: str, node_id: int, summary: Summary, *, tokens: int, status: str,
                    error: str | None, view_tokens: int | None = None, embedding: bytes | None = None) -> None:
        """Store a node's summary, its status and (optionally) its embedding.

        Raises:
            NotFoundError: No such node in the namespace.
        """
        vector = vector_literal(quantized(embedding)) if embedding else None
        self._update(namespace,
                     "UPDATE nodes SET summary = %s, summary_tokens = %s, summary_status = %s, summary_error = %s, "
                     "view_tokens = COALESCE(%s, view_tokens), embedding = COALESCE(%s::vector, embedding) "
                     "WHERE id = %s",
                     (json.dumps(summary.to_dict(), ensure_ascii=False, separators=(",", ":")), tokens, status,
                      error, view_tokens, vector, int(node_id)))

    def set_status(self, namespace: str, node_id: int, status: str, error: str | None) -> None:
        """Set a node's summary status and error, leaving its summary as it is.

        Raises:
            NotFoundError: No such node in the namespace.
        """
        self._update(namespace, "UPDATE nodes SET summary_status = %s, summary_error = %s WHERE id = %s",
                     (status, error, int(node_id)))

    def set_tier(self, namespace: str, node_id: int, tier: str, *, at: datetime, view_tokens: int | None,
                 warm: tuple[str, str] | None = None, archive_ref: str | None = None) -> None:
        """Move a segment to ``tier`` at instant ``at`` (also its ``archived_at`` when an archive ref is given).

        Warm content replaces nothing canonical; cold clears it for the archive ref.

        Raises:
            NotFoundError: No such node in the namespace.
        """
        fmt, content = warm if warm else (None, None)
        self._update(namespace,
                     "UPDATE nodes SET tier = %s, tier_at = %s, view_tokens = %s, warm_format = %s, "
                     "warm_content = %s, archive_ref = COALESCE(%s, archive_ref), "
                     "archived_at = CASE WHEN %s::text IS NULL THEN archived_at ELSE %s END WHERE id = %s",
                     (tier, at, view_tokens, fmt, content, archive_ref, archive_ref, at, int(node_id)))

    def clear_archive(self, namespace: str, node_ids: Iterable[int]) -> None:
        """Forget archive references of the namespace's nodes (retention expired the content)."""
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            conn.execute("UPDATE nodes SET archive_ref = NULL WHERE namespace = %s AND id = ANY(%s)",
                         (namespace, [int(i) for i in node_ids]))

    def archived_before(self, namespace: str, cutoff: datetime) -> list[tuple[int, str]]:
        """``(node_id, archive_ref)`` of cold segments archived before ``cutoff``."""
        return [(int(r[0]), r[1]) for r in self._q(
            "SELECT id, archive_ref FROM nodes WHERE namespace = %s AND archive_ref IS NOT NULL "
            "AND archived_at < %s ORDER BY id", (namespace, cutoff))]

    def delete_turns(self, namespace: str, turn_ids: Sequence[int]) -> int:
        """Delete canonical turns of the namespace (retention only); returns how many were deleted."""
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            return int(conn.execute("DELETE FROM turns WHERE namespace = %s AND id = ANY(%s)",
                                    (namespace, [int(t) for t in turn_ids])).rowcount)

    def lock(self, namespace: str) -> None:
        """Serialize the namespace's pyramid writers until the current transaction ends.

        Concurrent writers of one namespace would otherwise seal the same open
        turns (a duplicate key on ``node_turns``) or deadlock on each other's
        node rows. Must run inside ``store.transaction()``; other namespaces
        are not blocked (the second key is ``hashtext(namespace)``).
        """
        with self._store.connection() as conn, self._store._errors():
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (_LOCK_CLASS, namespace))

    # --- summarization spend (m014_summary_spend) ---------------------------------------

    def add_spend(self, namespace: str, level: int, *, calls: int, input_tokens: int, output_tokens: int) -> None:
        """Add one summarization's model calls and provider-reported tokens to the level's totals."""
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            conn.execute(
                "INSERT INTO summary_spend (namespace, level, calls, input_tokens, output_tokens) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, level) DO UPDATE SET "
                "calls = summary_spend.calls + excluded.calls, "
                "input_tokens = summary_spend.input_tokens + excluded.input_tokens, "
                "output_tokens = summary_spend.output_tokens + excluded.output_tokens",
                (namespace, int(level), int(calls), int(input_tokens), int(output_tokens)))

    def spend(self, namespace: str) -> list[tuple[int, int, int, int]]:
        """``(level, calls, input_tokens, output_tokens)`` per level with any spend, ascending."""
        return [(int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in self._q(
            "SELECT level, calls, input_tokens, output_tokens FROM summary_spend WHERE namespace = %s "
            "ORDER BY level", (namespace,))]

    def failed_count(self, namespace: str) -> int:
        """Nodes whose summary is ``failed`` (the model failed; an extractive fallback stands in)."""
        return int(self._q("SELECT COUNT(*) FROM nodes WHERE namespace = %s AND summary_status = 'failed'",
                           (namespace,))[0][0])

    def summarized_tokens(self, namespace: str) -> tuple[int, int]:
        """``(turn tokens, summary tokens)`` over the summarized segments (level 1) of the namespace."""
        row = self._q("SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(summary_tokens), 0) FROM nodes "
                      "WHERE namespace = %s AND level = 1 AND summary_tokens IS NOT NULL", (namespace,))[0]
        return int(row[0]), int(row[1])
