"""Reading pyramid nodes: the queries of :class:`~stratamem.store.node_store.NodeStore`.

Every query names the namespace, including those by node id (see
:mod:`stratamem.store.node_store` for the tables and their per-backend shapes);
:class:`_Shape` holds the fragments in which the two backends' node tables differ.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import NotFoundError
from ..records import Summary
from ..records.nodes import Node
from .sql import SQLITE, Sql, chunks
from .summary_refs import resolve
from .vectors import read_vector, vector_select

__all__ = ["NodeReads"]


@dataclass(frozen=True)
class _Shape:
    """The fragments in which the two backends' node tables differ."""

    session: str
    """The session name of node ``n`` in a select list."""
    join: str
    """What the select list needs joined to ``nodes n``."""
    session_column: str
    """The nodes column naming the session."""
    node_turns_tenant: bool
    """Whether ``node_turns`` has the tenant column."""


_SHAPES = {
    "sqlite": _Shape(
        session="s.name",
        join=" LEFT JOIN sessions s ON s.id = n.session_id",
        session_column="session_id",
        node_turns_tenant=False,
    ),
    "postgres": _Shape(session="n.session", join="", session_column="session", node_turns_tenant=True),
}


# --- the statements ------------------------------------------------------------------------

_COLS = (
    "n.id, n.level, n.kind, {session}, n.seq_lo, n.seq_hi, n.turn_count, n.tokens, n.first_turn_id, "
    "n.last_turn_id, n.ts_start, n.ts_end, n.parent_id, n.reason, n.tier, n.summary, n.summary_status, "
    "n.summary_error, n.summary_tokens, n.view_tokens, n.archive_ref, n.embedding IS NOT NULL, n.created_at, "
    "n.settled_turn"
)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


class NodeReads:
    """The read queries of the node store (its writes: :class:`~stratamem.store.node_store.NodeStore`).

    Args:
        sql: The owning store's SQL layer.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql
        self._d = sql.dialect
        self._shape = _SHAPES[sql.dialect.name]
        self._ns = sql.dialect.tenant
        self._cols = _COLS.format(session=self._shape.session)
        self._from = f"FROM nodes n{self._shape.join}"

    # --- per-backend pieces ------------------------------------------------------------

    def _same(self, a: str, b: str) -> str:
        """A join condition tying ``node_turns`` alias ``a`` to alias ``b``'s namespace (PostgreSQL only)."""
        return f" AND {a}.{self._ns} = {b}.{self._ns}" if self._shape.node_turns_tenant else ""

    def _session_filter(self, key: Any, session: str) -> tuple[str, list[Any]]:
        if self._d is SQLITE:
            return "n.session_id = (SELECT id FROM sessions WHERE namespace_id = ? AND name = ?)", [key, session]
        return "n.session = ?", [session]

    def _rows(self, namespace: str, key: Any, rows: Sequence[Sequence[Any]]) -> list[Node]:
        """Nodes of fetched rows, the turns their summaries quote read in one pass (:mod:`.summary_refs`)."""
        summaries = resolve(self._q, self._d, key, [r[15] for r in rows])
        return [self._row(namespace, r, d) for r, d in zip(rows, summaries, strict=True)]

    def _row(self, namespace: str, r: Sequence[Any], summary: dict[str, Any] | None) -> Node:
        stamp = self._d.read_stamp
        return Node(
            id=int(r[0]),
            namespace=namespace,
            level=r[1],
            kind=r[2],
            session=r[3],
            seq_range=(int(r[4]), int(r[5])) if r[4] is not None else None,
            turn_count=r[6],
            tokens=int(r[7]),
            first_turn_id=int(r[8]),
            last_turn_id=int(r[9]),
            start=stamp(r[10]),
            end=stamp(r[11]),
            parent_id=_int(r[12]),
            reason=r[13],
            tier=r[14],
            summary=Summary.from_dict(summary) if summary is not None else None,
            summary_status=r[16],
            summary_error=r[17],
            summary_tokens=r[18],
            view_tokens=r[19],
            archive_ref=r[20],
            has_embedding=bool(r[21]),
            created_at=stamp(r[22]),
            settled_turn=_int(r[23]),
        )

    def _key(self, namespace: str) -> Any | None:
        return self._sql.tenant_key(namespace)

    def _q(self, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._sql.rows(statement, params)

    # --- reading -----------------------------------------------------------------------

    def sealed_seq(self, namespace: str, session: str) -> int:
        """Highest session sequence number already sealed into a segment (0 if none)."""
        key = self._key(namespace)
        if key is None:
            return 0
        where, params = self._session_filter(key, session)
        rows = self._q(
            f"SELECT COALESCE(MAX(n.seq_hi), 0) FROM nodes n WHERE n.{self._ns} = ? AND {where} AND n.level = 1",
            (key, *params),
        )
        return int(rows[0][0])

    def get(self, namespace: str, node_id: int) -> Node:
        """One node of the namespace.

        Raises:
            NotFoundError: No such node in this namespace.
        """
        key = self._key(namespace)
        rows = (
            []
            if key is None
            else self._q(f"SELECT {self._cols} {self._from} WHERE n.{self._ns} = ? AND n.id = ?", (key, int(node_id)))
        )
        if not rows:
            raise NotFoundError(f"no node {node_id} in namespace {namespace!r}")
        return self._rows(namespace, key, rows)[0]

    def list(
        self,
        namespace: str,
        *,
        level: int | None = None,
        tier: str | None = None,
        session: str | None = None,
        status: str | None = None,
        unparented: bool = False,
        parent_id: int | None = None,
        newest_first: bool = False,
        limit: int | None = None,
        tier_not: str | None = None,
        after_id: int | None = None,
    ) -> list[Node]:
        """Nodes of the namespace matching every given filter, in creation order.

        ``tier_not`` keeps nodes with a tier other than the one named (the
        ``nodes_level`` index narrows the scan to the namespace and level);
        ``after_id`` keeps nodes with larger ids (an index range with ``level``).
        """
        key = self._key(namespace)
        if key is None:
            return []
        where, params = [f"n.{self._ns} = ?"], [key]
        for clause, value in (
            ("n.level = ?", level),
            ("n.tier = ?", tier),
            ("n.tier <> ?", tier_not),
            ("n.id > ?", after_id),
            ("n.summary_status = ?", status),
            ("n.parent_id = ?", parent_id),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        if session is not None:
            clause, more = self._session_filter(key, session)
            where.append(clause)
            params += more
        if unparented:
            where.append("n.parent_id IS NULL")
        statement = (
            f"SELECT {self._cols} {self._from} WHERE {' AND '.join(where)} "
            f"ORDER BY n.id {'DESC' if newest_first else 'ASC'}"
        )
        if limit is not None:
            statement += f" LIMIT {int(limit)}"
        return self._rows(namespace, key, self._q(statement, params))

    def last_child_id(self, namespace: str, level: int) -> int:
        """Highest id among the children of the namespace's newest node at ``level`` (0 if none).

        Consolidations take the oldest pending nodes of the level below, so
        every node of ``level - 1`` above this id is still unparented.
        """
        key = self._key(namespace)
        if key is None:
            return 0
        rows = self._q(
            f"SELECT COALESCE(MAX(id), 0) FROM nodes WHERE {self._ns} = ? AND parent_id = "
            f"(SELECT MAX(id) FROM nodes WHERE {self._ns} = ? AND level = ?)",
            (key, key, level),
        )
        return int(rows[0][0])

    def levels(self, namespace: str) -> builtins.list[int]:
        """Levels that have nodes, ascending."""
        key = self._key(namespace)
        return (
            []
            if key is None
            else [
                r[0] for r in self._q(f"SELECT DISTINCT level FROM nodes WHERE {self._ns} = ? ORDER BY level", (key,))
            ]
        )

    def _covering(self) -> str:
        return f"FROM node_turns nt JOIN nodes n ON n.id = nt.node_id{self._same('nt', 'n')} WHERE n.{self._ns} = ?"

    def turn_ids(self, namespace: str, node_id: int) -> builtins.list[int]:
        """Ids of the turns a node of the namespace covers, ascending (empty for an unknown node)."""
        key = self._key(namespace)
        return (
            []
            if key is None
            else [
                int(r[0])
                for r in self._q(
                    f"SELECT nt.turn_id {self._covering()} AND nt.node_id = ? ORDER BY nt.turn_id", (key, int(node_id))
                )
            ]
        )

    def coverage(self, namespace: str, level: int) -> dict[int, int]:
        """``turn_id -> node_id`` for every covered turn of the namespace at ``level``."""
        key = self._key(namespace)
        return (
            {}
            if key is None
            else {
                int(r[0]): int(r[1])
                for r in self._q(f"SELECT nt.turn_id, nt.node_id {self._covering()} AND nt.level = ?", (key, level))
            }
        )

    def covered(self, namespace: str, level: int, turn_ids: Iterable[int]) -> set[int]:
        """Which of ``turn_ids`` a node of the namespace at ``level`` covers (primary-key lookups)."""
        key = self._key(namespace)
        if key is None:
            return set()
        found: set[int] = set()
        for part in chunks([int(t) for t in turn_ids]):
            found.update(
                int(r[0])
                for r in self._q(
                    f"SELECT nt.turn_id {self._covering()} AND nt.level = ? AND "
                    f"{self._d.in_list('nt.turn_id', len(part))}",
                    (key, level, *part),
                )
            )
        return found

    def warm_content(self, namespace: str, node_id: int) -> tuple[str, str] | None:
        """``(format, content)`` of a warm segment of the namespace, or ``None``."""
        rows = self._q(
            f"SELECT format, content FROM node_views WHERE {self._ns} = ? AND node_id = ?",
            (self._key(namespace), int(node_id)),
        )
        return (rows[0][0], rows[0][1]) if rows else None

    def embedding(self, namespace: str, node_id: int) -> bytes | None:
        """The stored embedding of a node of the namespace, or ``None``.

        Float32 bytes (see :mod:`stratamem.store.vectors`)."""
        rows = self._q(
            f"SELECT {vector_select(self._d, 'embedding')} FROM nodes WHERE {self._ns} = ? AND id = ?",
            (self._key(namespace), int(node_id)),
        )
        return read_vector(self._d, rows[0][0]) if rows and rows[0][0] is not None else None

    def archive_refs(self, namespace: str) -> set[str]:
        """Archive references the namespace's nodes still hold."""
        return {
            r[0]
            for r in self._q(
                f"SELECT DISTINCT archive_ref FROM nodes WHERE {self._ns} = ? AND archive_ref IS NOT NULL",
                (self._key(namespace),),
            )
        }

    def newest_turn_time(self, namespace: str) -> datetime | None:
        """Timestamp of the namespace's newest turn (by timestamp), or ``None``."""
        rows = self._q(f"SELECT MAX(ts) FROM turns WHERE {self._ns} = ?", (self._key(namespace),))
        return self._d.read_stamp(rows[0][0]) if rows and rows[0][0] else None

    def newest_turn_after(self, namespace: str, after_id: int) -> tuple[int, datetime] | None:
        """``(highest id, newest timestamp)`` over the namespace's turns with ids above ``after_id``, or ``None``.

        A range scan of the turns' ``(namespace, id)`` index: the cost follows
        the number of new turns, not the namespace's history.
        """
        rows = self._q(
            f"SELECT MAX(id), MAX(ts) FROM turns WHERE {self._ns} = ? AND id > ?", (self._key(namespace), int(after_id))
        )
        return (int(rows[0][0]), self._d.read_stamp(rows[0][1])) if rows and rows[0][0] is not None else None

    def turn_time(self, namespace: str, turn_id: int) -> datetime | None:
        """Timestamp of one turn of the namespace, or ``None`` if there is no such turn."""
        rows = self._q(f"SELECT ts FROM turns WHERE {self._ns} = ? AND id = ?", (self._key(namespace), int(turn_id)))
        return self._d.read_stamp(rows[0][0]) if rows else None

    def tier_sizes(self, namespace: str) -> builtins.list[tuple[Any, ...]]:
        """Per tier of level-1 nodes: tier, nodes, turns, tokens, view tokens, warm bytes, summary bytes."""
        octets = self._d.octets
        return [
            tuple(int(v) if i else v for i, v in enumerate(r))
            for r in self._q(
                "SELECT n.tier, COUNT(*), SUM(n.turn_count), SUM(n.tokens), SUM(COALESCE(n.view_tokens, 0)), "
                f"SUM(COALESCE({octets('v.content')}, 0)), SUM(COALESCE({octets('n.summary')}, 0)) "
                f"FROM nodes n LEFT JOIN node_views v ON v.{self._ns} = n.{self._ns} AND v.node_id = n.id "
                f"WHERE n.{self._ns} = ? AND n.level = 1 GROUP BY n.tier",
                (self._key(namespace),),
            )
        ]

    def tier_raw_bytes(self, namespace: str) -> dict[str, int]:
        """UTF-8 bytes of the canonical content of the turns each tier covers."""
        octets = self._d.octets
        rows = self._q(
            f"SELECT n.tier, SUM({octets('t.text')} + COALESCE({octets('t.content')}, 0)) "
            f"FROM nodes n JOIN node_turns nt ON nt.node_id = n.id{self._same('nt', 'n')} "
            f"JOIN turns t ON t.id = nt.turn_id{self._same('t', 'nt')} "
            f"WHERE n.{self._ns} = ? AND n.level = 1 GROUP BY n.tier",
            (self._key(namespace),),
        )
        return {r[0]: int(r[1] or 0) for r in rows}

    def archived_before(self, namespace: str, cutoff: datetime) -> builtins.list[tuple[int, str]]:
        """``(node_id, archive_ref)`` of cold segments archived before ``cutoff``."""
        return [
            (int(r[0]), r[1])
            for r in self._q(
                f"SELECT id, archive_ref FROM nodes WHERE {self._ns} = ? AND archive_ref IS NOT NULL "
                "AND archived_at < ? ORDER BY id",
                (self._key(namespace), self._d.stamp(cutoff)),
            )
        ]

    def spend(self, namespace: str) -> builtins.list[tuple[int, int, int, int]]:
        """``(level, calls, input_tokens, output_tokens)`` per level with any spend, ascending."""
        return [
            (int(r[0]), int(r[1]), int(r[2]), int(r[3]))
            for r in self._q(
                f"SELECT level, calls, input_tokens, output_tokens FROM summary_spend WHERE {self._ns} = ? "
                "ORDER BY level",
                (self._key(namespace),),
            )
        ]

    def failed_count(self, namespace: str) -> int:
        """Nodes whose summary is ``failed`` (the model failed; an extractive fallback stands in)."""
        return int(
            self._q(
                f"SELECT COUNT(*) FROM nodes WHERE {self._ns} = ? AND summary_status = 'failed'",
                (self._key(namespace),),
            )[0][0]
        )

    def summarized_tokens(self, namespace: str) -> tuple[int, int]:
        """``(turn tokens, summary tokens)`` over the summarized segments (level 1) of the namespace."""
        row = self._q(
            f"SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(summary_tokens), 0) FROM nodes "
            f"WHERE {self._ns} = ? AND level = 1 AND summary_tokens IS NOT NULL",
            (self._key(namespace),),
        )[0]
        return int(row[0]), int(row[1])
