"""Pyramid nodes and the turns each covers, one implementation for every backend.

Only SQL lives here; the rules (when to seal, consolidate, demote) are in
:mod:`stratamem.pyramid` and :mod:`stratamem.pyramid.tiers`. The tables are
created here too (``m003_pyramid``, ``m014_summary_spend``: one column list,
:mod:`stratamem.store.ddl`, with each backend's keys in :data:`_TABLES`); their
shapes differ in form, not in behaviour:

* the namespace column is :attr:`~stratamem.store.sql.Dialect.tenant`
  (``namespace_id`` on SQLite, the name ``namespace`` on PostgreSQL);
* a segment names its session by ``session_id`` on SQLite, by name
  (``session``) on PostgreSQL — :class:`_Shape` holds those fragments;
* ``node_turns`` carries the namespace on PostgreSQL (its key is
  ``(namespace, level, turn_id)``; SQLite's is ``(level, turn_id)``), so
  joins there also match the namespace, which lets PostgreSQL use its keys;
* vectors are int8 blobs on SQLite and pgvector values on PostgreSQL (both
  hold the same values: :mod:`stratamem.store.vectors`).

In both, the database itself refuses a turn in two nodes of one level. Every
query names the namespace, including those by node id: the pyramid resolves
ids inside its namespace first, and the store checks again (defence in
depth), so an id of another namespace reads as absent and a write to it
raises :class:`~stratamem.errors.NotFoundError`. Reach it as ``store.nodes``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import NotFoundError
from ..records import Summary
from . import data_version
from .ddl import TYPES, create_table
from .new_rows import NewNode
from .node_reads import NodeReads
from .node_views import delete_views, put_view
from .sql import SQLITE, Writer, chunks, dialect_of
from .summary_refs import inline_turns, stored_summary
from .vectors import vector_placeholder, write_vector

__all__ = ["NodeStore", "m003_pyramid", "m014_summary_spend", "m020_node_settled"]

# First key of the two-key advisory lock serializing one namespace's pyramid writers on PostgreSQL ("Py").
_LOCK_CLASS = 0x5079


# --- the tables (m003_pyramid, m014_summary_spend, m020_node_settled) ---------------------------

# The columns both backends' ``nodes`` share, in order, between the key columns and the table constraints.
_NODE_COLUMNS = (
    "level INTEGER NOT NULL CHECK (level >= 1)",
    "kind TEXT NOT NULL",
    "{node_session}",
    "seq_lo {bigint}",
    "seq_hi {bigint}",
    "turn_count INTEGER NOT NULL",
    "tokens {bigint} NOT NULL",
    "first_turn_id {bigint} NOT NULL",
    "last_turn_id {bigint} NOT NULL",
    "ts_start {stamp} NOT NULL",
    "ts_end {stamp} NOT NULL",
    "parent_id {bigint}{parent_ref}",
    "reason TEXT NOT NULL",
    "tier TEXT CHECK (tier IN ('hot', 'warm', 'cold'))",
    "tier_at {stamp}",
    "summary TEXT",
    "summary_tokens INTEGER",
    "summary_status TEXT NOT NULL DEFAULT 'pending' CHECK (summary_status IN ('pending', 'ok', 'failed'))",
    "summary_error TEXT",
    "view_tokens INTEGER",
    "warm_content TEXT",  # moved to node_views by m025_lean_store (migrations are never edited)
    "warm_format TEXT",
    "archive_ref TEXT",
    "archived_at {stamp}",
    "embedding {vector}",
    "created_at {stamp} NOT NULL",
)


@dataclass(frozen=True)
class _Tables:
    """How one backend lays out the pyramid tables around :data:`_NODE_COLUMNS` (see the module docstring)."""

    head: tuple[str, ...]
    """``nodes``' key columns, before the shared ones."""
    tail: tuple[str, ...]
    """``nodes``' table constraints, after them."""
    node_session: str
    """The ``{node_session}`` placeholder: the session column."""
    parent_ref: str
    """The ``{parent_ref}`` placeholder: the parent link's constraint, if any."""
    node_turns: tuple[str, ...]
    """``node_turns``' columns and constraints."""
    indexes: tuple[str, ...]
    """The ``nodes`` indexes."""


_TABLES = {
    "sqlite": _Tables(
        head=("id INTEGER PRIMARY KEY", "{tenant_column}"),
        tail=(),
        node_session="session_id INTEGER REFERENCES sessions(id)",
        parent_ref=" REFERENCES nodes(id)",
        node_turns=(
            "level INTEGER NOT NULL",
            "turn_id INTEGER NOT NULL",
            "node_id INTEGER NOT NULL REFERENCES nodes(id)",
            "PRIMARY KEY (level, turn_id)",
        ),
        indexes=(
            "CREATE INDEX nodes_level ON nodes (namespace_id, level, id)",
            "CREATE INDEX nodes_session ON nodes (session_id, seq_hi)",
            "CREATE INDEX nodes_parent ON nodes (parent_id)",
        ),
    ),
    # No foreign keys into the canonical tables: retention deletes turns while their
    # coverage rows stay; node-to-node links are enforced within the namespace.
    "postgres": _Tables(
        head=("{tenant_column}", "id BIGINT GENERATED ALWAYS AS IDENTITY"),
        tail=("PRIMARY KEY (namespace, id)", "FOREIGN KEY (namespace, parent_id) REFERENCES nodes (namespace, id)"),
        node_session="session TEXT",
        parent_ref="",
        node_turns=(
            "namespace TEXT NOT NULL",
            "level INTEGER NOT NULL",
            "turn_id BIGINT NOT NULL",
            "node_id BIGINT NOT NULL",
            "PRIMARY KEY (namespace, level, turn_id)",
            "FOREIGN KEY (namespace, node_id) REFERENCES nodes (namespace, id)",
        ),
        # Store-wide id index (early versions looked nodes up by bare id; migrations are never edited).
        indexes=(
            "CREATE INDEX nodes_id ON nodes (id)",
            "CREATE INDEX nodes_level ON nodes (namespace, level, id)",
            "CREATE INDEX nodes_session ON nodes (namespace, session, seq_hi)",
            "CREATE INDEX nodes_parent ON nodes (parent_id)",
        ),
    ),
}

_NODE_TURNS_INDEX = {
    "sqlite": "CREATE INDEX node_turns_node ON node_turns (node_id)",
    "postgres": "CREATE INDEX node_turns_node ON node_turns (node_id, turn_id)",
}


def m003_pyramid(conn: Any) -> None:
    """Pyramid nodes (segments and consolidations) and their turn coverage.

    On PostgreSQL the summary vectors are pgvector values: the backend's
    migration list runs :func:`stratamem.store.postgres.nodes.m003_pyramid`,
    which makes sure pgvector is there first.
    """
    dialect = dialect_of(conn)
    tables = _TABLES[dialect.name]
    columns = (*tables.head, *_NODE_COLUMNS, *tables.tail)
    conn.execute(
        create_table(dialect, "nodes", columns, node_session=tables.node_session, parent_ref=tables.parent_ref)
    )
    for statement in tables.indexes:
        conn.execute(statement)
    conn.execute(create_table(dialect, "node_turns", tables.node_turns, without_rowid=True))
    conn.execute(_NODE_TURNS_INDEX[dialect.name])


def m014_summary_spend(conn: Any) -> None:
    """What summarizing cost, per namespace and level: model calls and the provider's token usage."""
    conn.execute(
        create_table(
            dialect_of(conn),
            "summary_spend",
            (
                "{tenant_column}",
                "level INTEGER NOT NULL CHECK (level >= 1)",
                "calls {bigint} NOT NULL DEFAULT 0",
                "input_tokens {bigint} NOT NULL DEFAULT 0",
                "output_tokens {bigint} NOT NULL DEFAULT 0",
                "PRIMARY KEY ({tenant}, level)",
            ),
        )
    )


def m020_node_settled(conn: Any) -> None:
    """When a node's summary first stood: the namespace's newest turn id at that moment.

    The cache layout's ledger shows a summary only from the window's next jump
    on, so that a prompt's stable prefix does not change between jumps
    (docs/context.md, "Prompt caching"). Nodes summarized before this
    migration have none: they count as settled long ago.
    """
    conn.execute(f"ALTER TABLE nodes ADD COLUMN settled_turn {TYPES[dialect_of(conn).name]['bigint']}")


class NodeStore(NodeReads):
    """Node rows of every namespace in one store.

    Write methods must run inside ``store.transaction()`` when several must
    commit together; each is atomic on its own.

    Args:
        sql: The owning store's SQL layer.
    """

    # --- writing -----------------------------------------------------------------------

    def _session_value(self, w: Writer, key: Any, session: str | None) -> Any:
        if session is None or self._d is not SQLITE:
            return session
        return w.execute("SELECT id FROM sessions WHERE namespace_id = ? AND name = ?", (key, session)).fetchone()[0]

    def insert(self, namespace: str, node: NewNode) -> int:
        """Insert a node and its coverage rows; returns the node id.

        Raises:
            BackendError: A covered turn already belongs to a node of this level
                (the primary key refuses it), or the write failed.
        """
        seq_lo, seq_hi = node.seq_range or (None, None)
        now = self._d.stamp(datetime.now(UTC))
        with self._sql.write() as w:
            key = self._key(namespace)
            node_id = int(
                w.execute(
                    f"INSERT INTO nodes ({self._ns}, level, kind, {self._shape.session_column}, seq_lo, seq_hi, "
                    "turn_count, tokens, first_turn_id, last_turn_id, ts_start, ts_end, reason, tier, tier_at, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (
                        key,
                        node.level,
                        node.kind,
                        self._session_value(w, key, node.session),
                        seq_lo,
                        seq_hi,
                        len(node.turn_ids),
                        node.tokens,
                        min(node.turn_ids),
                        max(node.turn_ids),
                        self._d.stamp(node.start),
                        self._d.stamp(node.end),
                        node.reason,
                        node.tier,
                        now if node.tier else None,
                        now,
                    ),
                ).fetchone()[0]
            )
            tenant = (key,) if self._shape.node_turns_tenant else ()
            w.executemany(
                f"INSERT INTO node_turns ({f'{self._ns}, ' if tenant else ''}level, turn_id, node_id) "
                f"VALUES ({'?, ' if tenant else ''}?, ?, ?)",
                [(*tenant, node.level, int(t), node_id) for t in node.turn_ids],
            )
            data_version.bump(w, namespace)
        return node_id

    def _update(
        self,
        namespace: str,
        statement: str,
        params: Sequence[Any],
        expect: int = 1,
        ids: Sequence[int] | None = None,
        *,
        destructive: bool = False,
    ) -> None:
        """Run an UPDATE of the namespace's nodes; fewer rows than ``expect`` means an unknown id.

        With ``ids``, ``statement`` ends in ``WHERE`` and runs once per slice of ids.
        A change bumps the namespace's data version (its epoch when ``destructive``).
        """
        with self._sql.write() as w:
            key = self._key(namespace)
            if ids is None:
                count = w.execute(f"{statement} AND {self._ns} = ?", (*params, key)).rowcount
            else:
                count = sum(
                    w.execute(
                        f"{statement} {self._d.in_list('id', len(part))} AND {self._ns} = ?", (*params, *part, key)
                    ).rowcount
                    for part in chunks(ids)
                )
            if count < expect:
                raise NotFoundError(f"{expect - count} of the nodes are not in namespace {namespace!r}")
            if count:
                data_version.bump(w, namespace, destructive=destructive)

    def set_parent(self, namespace: str, child_ids: Iterable[int], parent_id: int) -> None:
        """Record that ``parent_id`` consolidates the children.

        Raises:
            NotFoundError: A child is not a node of the namespace (nothing changes).
        """
        ids = [int(c) for c in child_ids]
        self._update(namespace, "UPDATE nodes SET parent_id = ? WHERE", (int(parent_id),), expect=len(ids), ids=ids)

    def set_summary(
        self,
        namespace: str,
        node_id: int,
        summary: Summary,
        *,
        tokens: int,
        status: str,
        error: str | None,
        view_tokens: int | None = None,
        embedding: bytes | None = None,
    ) -> None:
        """Store a node's summary, its status and (optionally) its embedding.

        The embedding is kept as int8 (:mod:`stratamem.store.vectors`). The first
        summary stored also records the node's ``settled_turn`` (the namespace's
        newest turn id); a later one (a retry) keeps it.

        Raises:
            NotFoundError: No such node in the namespace.
        """
        with self._sql.write() as w:  # the quoted turns are read in the transaction that stores the references
            key = self._key(namespace)
            body = stored_summary(
                lambda q, p: w.execute(q, p).fetchall(),
                self._d,
                key,
                int(node_id),
                self._shape.node_turns_tenant,
                summary.to_dict(),
            )
            self._update(
                namespace,
                "UPDATE nodes SET summary = ?, summary_tokens = ?, summary_status = ?, summary_error = ?, "
                f"view_tokens = COALESCE(?, view_tokens), embedding = COALESCE({vector_placeholder(self._d)}, "
                f"embedding), settled_turn = COALESCE(settled_turn, (SELECT MAX(id) FROM turns WHERE {self._ns} = ?)) "
                "WHERE id = ?",
                (
                    body,
                    tokens,
                    status,
                    error,
                    view_tokens,
                    write_vector(self._d, embedding),
                    key,
                    int(node_id),
                ),
            )

    def set_status(self, namespace: str, node_id: int, status: str, error: str | None) -> None:
        """Set a node's summary status and error, leaving its summary as it is.

        Raises:
            NotFoundError: No such node in the namespace.
        """
        self._update(
            namespace,
            "UPDATE nodes SET summary_status = ?, summary_error = ? WHERE id = ?",
            (status, error, int(node_id)),
        )

    def set_tier(
        self,
        namespace: str,
        node_id: int,
        tier: str,
        *,
        at: datetime,
        view_tokens: int | None,
        warm: tuple[str, str] | None = None,
        archive_ref: str | None = None,
    ) -> None:
        """Move a segment to ``tier`` at instant ``at`` (also its ``archived_at`` when an archive ref is given).

        Warm content replaces nothing canonical; cold clears it for the archive ref.

        Raises:
            NotFoundError: No such node in the namespace.
        """
        when = self._d.stamp(at)
        with self._sql.write() as w:  # the row and its view (node_views) together
            self._update(
                namespace,
                "UPDATE nodes SET tier = ?, tier_at = ?, view_tokens = ?, archive_ref = COALESCE(?, archive_ref), "
                "archived_at = CASE WHEN CAST(? AS TEXT) IS NULL THEN archived_at ELSE ? END WHERE id = ?",
                (tier, when, view_tokens, archive_ref, archive_ref, when, int(node_id)),
            )
            put_view(w, self._d, self._key(namespace), node_id, warm or None)

    def clear_archive(self, namespace: str, node_ids: Iterable[int]) -> None:
        """Forget archive references of the namespace's nodes (retention expired the content), and the
        CTF copy a cold node keeps with ``cold_format: ctf``: it is the same content."""
        ids = [int(i) for i in node_ids]
        with self._sql.write() as w:
            self._update(
                namespace, "UPDATE nodes SET archive_ref = NULL WHERE", (), expect=0, ids=ids, destructive=True
            )
            delete_views(w, self._d, self._key(namespace), ids)

    def delete_turns(self, namespace: str, turn_ids: Sequence[int]) -> int:
        """Delete canonical turns of the namespace (retention only); returns how many were deleted."""
        with self._sql.write() as w:
            key = self._key(namespace)
            # Summaries quoting these turns keep the quoted text (docs: store/summary_refs.py).
            inline_turns(w, self._d, key, self._shape.node_turns_tenant, turn_ids)
            deleted = sum(
                int(
                    w.execute(
                        f"DELETE FROM turns WHERE {self._ns} = ? AND {self._d.in_list('id', len(part))}", (key, *part)
                    ).rowcount
                )
                for part in chunks([int(t) for t in turn_ids])
            )
            if deleted:
                data_version.bump(w, namespace, destructive=True)
            return deleted

    def lock(self, namespace: str) -> None:
        """Serialize the namespace's pyramid writers until the current transaction ends.

        PostgreSQL: concurrent writers of one namespace would otherwise seal
        the same open turns (a duplicate key on ``node_turns``) or deadlock on
        each other's node rows; a transaction-scoped advisory lock keyed by
        ``hashtext(namespace)`` serializes them without blocking other
        namespaces. Must run inside ``store.transaction()``. SQLite: nothing to
        do, ``BEGIN IMMEDIATE`` already takes the database's write lock.
        """
        if self._d is SQLITE:
            return
        with self._sql.write() as w:
            w.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (_LOCK_CLASS, namespace))

    # --- summarization spend (m014_summary_spend) ---------------------------------------

    def add_spend(self, namespace: str, level: int, *, calls: int, input_tokens: int, output_tokens: int) -> None:
        """Add one summarization's model calls and provider-reported tokens to the level's totals."""
        with self._sql.write() as w:
            w.execute(
                f"INSERT INTO summary_spend ({self._ns}, level, calls, input_tokens, output_tokens) "
                f"VALUES (?, ?, ?, ?, ?) ON CONFLICT ({self._ns}, level) DO UPDATE SET "
                "calls = summary_spend.calls + excluded.calls, "
                "input_tokens = summary_spend.input_tokens + excluded.input_tokens, "
                "output_tokens = summary_spend.output_tokens + excluded.output_tokens",
                (self._key(namespace), int(level), int(calls), int(input_tokens), int(output_tokens)),
            )
