"""PostgreSQL bodies of the schema migrations, and the runner that applies them.

The names are the SQLite ones (:mod:`stratamem.store.sqlite.schema`); the
bodies differ. The rules are those of :mod:`stratamem.store.migrations`:
append, never edit; each migration runs in one transaction with the row that
records it; a database that records a migration unknown to this version is
refused.

The tenant column. Every table carries ``namespace`` (the namespace name) and
every key, unique constraint and foreign key starts with it. Queries filter on
it, and a distributed PostgreSQL (Citus) can shard every table by it with the
rows of one namespace co-located (see ``docs/postgres.md``).

Concurrent openers. Several processes may open a fresh database at once; the
runner takes a transaction-scoped advisory lock, so exactly one of them
applies each migration and the others see it recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg
from psycopg import sql

from ...errors import MigrationError
from ..conversations import m004_conversations, m009_conversation_loop
from ..data_version import m016_data_versions
from ..embedding_cache import m002_embeddings
from ..idempotency import m017_idempotency_keys
from ..ingest_keys import m008_ingest_keys
from ..item_facts import m018_item_facts
from ..manifests import m006_manifests, m022_compact_manifests
from ..node_views import m025_lean_store
from ..passage_store import (
    m011_passages,
    m023_passage_pages,
    m024_sentence_nibbles,
    m026_compact_store,
    m028_compact_rows,
)
from ..summary_refs import m027_compact_content
from ..turn_index import m010_recall_index, m019_recall_events, m021_term_ids
from ..vectors import m015_int8_vectors
from .items import m005_items, m007_item_ids, m013_item_scope
from .nodes import m003_pyramid, m014_summary_spend, m020_node_settled

__all__ = ["MIGRATIONS", "PgMigration", "applied", "apply", "ensure_schema"]

# An arbitrary constant identifying "stratamem schema changes" among advisory locks.
_LOCK_KEY = 0x5374_7261  # "Stra"
_TABLE = "_stratamem_migrations"


@dataclass(frozen=True, slots=True)
class PgMigration:
    """One named schema step for PostgreSQL."""

    name: str
    """Stable name shared with the SQLite migration of the same step."""
    run: Callable[[psycopg.Connection], None]
    """Executes the step's statements inside the open transaction."""


def _run_all(conn: psycopg.Connection, statements: Sequence[str]) -> None:
    for statement in statements:
        conn.execute(statement)


def m001_core(conn: psycopg.Connection) -> None:
    """Namespaces, sessions and turns: the canonical record."""
    _run_all(
        conn,
        [
            """CREATE TABLE namespaces (
            namespace TEXT PRIMARY KEY,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )""",
            # ``last_seq`` is the per-session counter; writers reserve a range with
            # UPDATE ... RETURNING, whose row lock makes sequences gap-free.
            """CREATE TABLE sessions (
            namespace TEXT NOT NULL REFERENCES namespaces (namespace),
            id BIGINT GENERATED ALWAYS AS IDENTITY,
            name TEXT NOT NULL,
            platform TEXT,
            channel TEXT,
            created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            last_seq BIGINT NOT NULL DEFAULT 0,
            PRIMARY KEY (namespace, id),
            UNIQUE (namespace, name)
        )""",
            # Content is kept as the exact JSON text (not jsonb, which reorders keys)
            # so a turn reads back byte-for-byte as written; NULL for plain text.
            """CREATE TABLE turns (
            namespace TEXT NOT NULL,
            id BIGINT GENERATED ALWAYS AS IDENTITY,
            session_id BIGINT NOT NULL,
            seq BIGINT NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            content TEXT,
            name TEXT,
            model TEXT,
            ts TIMESTAMPTZ NOT NULL,
            tokens INTEGER NOT NULL,
            metadata TEXT,
            PRIMARY KEY (namespace, id),
            UNIQUE (namespace, session_id, seq),
            FOREIGN KEY (namespace, session_id) REFERENCES sessions (namespace, id)
        )""",
            "CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ],
    )


# Same names, same order as :data:`stratamem.store.sqlite.schema.MIGRATIONS`;
# the feature bodies live beside their feature stores (``postgres_<feature>.py``).
MIGRATIONS: list[PgMigration] = [
    PgMigration("m001_core", m001_core),
    PgMigration("m002_embeddings", m002_embeddings),
    PgMigration("m003_pyramid", m003_pyramid),
    PgMigration("m004_conversations", m004_conversations),
    PgMigration("m005_items", m005_items),
    PgMigration("m006_manifests", m006_manifests),
    PgMigration("m007_item_ids", m007_item_ids),
    PgMigration("m008_ingest_keys", m008_ingest_keys),
    PgMigration("m009_conversation_loop", m009_conversation_loop),
    PgMigration("m010_recall_index", m010_recall_index),
    PgMigration("m011_passages", m011_passages),
    PgMigration("m013_item_scope", m013_item_scope),
    PgMigration("m014_summary_spend", m014_summary_spend),
    PgMigration("m015_int8_vectors", m015_int8_vectors),
    PgMigration("m016_data_versions", m016_data_versions),
    PgMigration("m017_idempotency_keys", m017_idempotency_keys),
    PgMigration("m018_item_facts", m018_item_facts),
    PgMigration("m019_recall_events", m019_recall_events),
    PgMigration("m020_node_settled", m020_node_settled),
    PgMigration("m021_term_ids", m021_term_ids),
    PgMigration("m022_compact_manifests", m022_compact_manifests),
    PgMigration("m023_passage_pages", m023_passage_pages),
    PgMigration("m024_sentence_nibbles", m024_sentence_nibbles),
    PgMigration("m025_lean_store", m025_lean_store),
    PgMigration("m026_compact_store", m026_compact_store),
    PgMigration("m027_compact_content", m027_compact_content),
    PgMigration("m028_compact_rows", m028_compact_rows),
]


def ensure_schema(conn: psycopg.Connection, schema: str) -> None:
    """Create ``schema`` if missing; safe when many processes open a fresh database at once.

    ``CREATE SCHEMA IF NOT EXISTS`` alone is not: two concurrent ones can both
    pass the check and one fails on the catalog's unique index. It also needs
    CREATE on the database even when the schema exists, which a
    least-privilege role lacks, so existence is checked first.
    """
    exists = "SELECT 1 FROM pg_namespace WHERE nspname = %s"
    if conn.execute(exists, (schema,)).fetchone():
        return
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        if not conn.execute(exists, (schema,)).fetchone():
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))


def applied(conn: psycopg.Connection) -> list[str]:
    """Names of the migrations recorded in the current schema, in the order applied."""
    exists = conn.execute("SELECT to_regclass(%s)", (_TABLE,)).fetchone()
    if exists is None or exists[0] is None:
        return []
    return [r[0] for r in conn.execute(f"SELECT name FROM {_TABLE} ORDER BY applied_at, name")]


def apply(conn: psycopg.Connection, migrations: Sequence[PgMigration] = MIGRATIONS) -> list[str]:
    """Apply every pending migration, each in its own transaction.

    The connection must be in autocommit mode; ``search_path`` selects the schema.

    Returns:
        Names of the migrations applied by this call.

    Raises:
        MigrationError: A migration failed (rolled back) or the schema is newer
            than this version.
    """
    known = {m.name for m in migrations}
    done: list[str] = []
    for m in migrations:
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                names = applied(conn)
                if not names:  # only then: creating needs CREATE on the schema
                    conn.execute(
                        f"CREATE TABLE IF NOT EXISTS {_TABLE} "
                        "(name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())"
                    )
                unknown = [n for n in names if n not in known]
                if unknown:
                    raise MigrationError(
                        f"database schema is newer than this stratamem (unknown migrations: "
                        f"{', '.join(unknown)}); upgrade stratamem to open it"
                    )
                if m.name in names:
                    continue
                m.run(conn)
                conn.execute(f"INSERT INTO {_TABLE} (name) VALUES (%s)", (m.name,))
        except psycopg.Error as exc:
            raise MigrationError(f"migration {m.name} failed: {exc}") from exc
        done.append(m.name)
    return done
