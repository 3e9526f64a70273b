"""PostgreSQL tables of the pyramid (``m003_pyramid``, ``m014_summary_spend``).

The statements are in :mod:`stratamem.store.node_store`, one implementation for
every backend; only the DDL, which differs, is here:

* Every row carries the tenant column ``namespace``; segments name their
  session directly (sessions are never renamed), so no query needs a join to
  find a namespace's nodes.
* ``node_turns`` has the primary key ``(namespace, level, turn_id)`` — turn
  ids are unique store-wide, so, as on SQLite, the database itself refuses a
  turn in two nodes of one level.
* Summary embeddings are pgvector ``vector`` values holding the int8-quantized
  floats (:mod:`stratamem.store.vectors`); callers still get float32 bytes.
* No foreign keys into the canonical tables: retention deletes turns while
  their coverage rows stay, and derived rows must never block a change to
  the canonical record. Node-to-node links are enforced within the
  namespace (``(namespace, parent_id)`` and ``(namespace, node_id)``).
"""

from __future__ import annotations

import psycopg

from ..new_rows import NewNode
from .search import require_pgvector

__all__ = ["NewNode", "m003_pyramid", "m014_summary_spend"]


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
