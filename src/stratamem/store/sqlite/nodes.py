"""SQLite tables of the pyramid (``m003_pyramid``, ``m014_summary_spend``).

The statements are in :mod:`stratamem.store.node_store`, one implementation for
every backend; only the DDL, which differs, is here. ``node_turns`` has the
primary key ``(level, turn_id)``: the database itself refuses a turn in two
nodes of one level.
"""

from __future__ import annotations

import sqlite3

from ..new_rows import NewNode

__all__ = ["NewNode", "m003_pyramid", "m014_summary_spend"]


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
