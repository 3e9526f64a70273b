"""SQLite bodies of the schema migrations (names shared with every backend).

Append new migrations at the end of :data:`MIGRATIONS`; never edit one that
has been released. Each body runs inside the transaction that records it, so
it must use ``conn.execute`` (``executescript`` would commit early).
"""

from __future__ import annotations

import sqlite3

from ..conversations import m004_conversations, m009_conversation_loop
from ..data_version import m016_data_versions
from ..embedding_cache import m002_embeddings
from ..idempotency import m017_idempotency_keys
from ..ingest_keys import m008_ingest_keys
from ..item_facts import m018_item_facts
from ..manifests import m006_manifests, m022_compact_manifests
from ..migrations import Migration
from ..node_store import m003_pyramid, m014_summary_spend, m020_node_settled
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

__all__ = ["MIGRATIONS"]


def _run_all(conn: sqlite3.Connection, statements: list[str]) -> None:
    for sql in statements:
        conn.execute(sql)


def m001_core(conn: sqlite3.Connection) -> None:
    """Namespaces, sessions and turns: the canonical record."""
    _run_all(
        conn,
        [
            """CREATE TABLE namespaces (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL
        )""",
            """CREATE TABLE sessions (
            id INTEGER PRIMARY KEY,
            namespace_id INTEGER NOT NULL REFERENCES namespaces(id),
            name TEXT NOT NULL,
            platform TEXT,
            channel TEXT,
            created_at TEXT NOT NULL,
            last_seq INTEGER NOT NULL DEFAULT 0,
            UNIQUE (namespace_id, name)
        )""",
            # content is NULL when the turn is plain text (then it equals text), which
            # halves the bytes of the common case; otherwise it is the JSON block list.
            """CREATE TABLE turns (
            id INTEGER PRIMARY KEY,
            namespace_id INTEGER NOT NULL REFERENCES namespaces(id),
            session_id INTEGER NOT NULL REFERENCES sessions(id),
            seq INTEGER NOT NULL,
            role TEXT NOT NULL,
            text TEXT NOT NULL,
            content TEXT,
            name TEXT,
            model TEXT,
            ts TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            metadata TEXT,
            UNIQUE (session_id, seq)
        )""",
            "CREATE INDEX turns_namespace ON turns (namespace_id, id)",
            # Store-wide settings, e.g. the tokenizer every stored count was made with.
            "CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        ],
    )


MIGRATIONS: list[Migration] = [
    Migration("m001_core", m001_core),
    Migration("m002_embeddings", m002_embeddings),
    Migration("m003_pyramid", m003_pyramid),
    Migration("m004_conversations", m004_conversations),
    Migration("m005_items", m005_items),
    Migration("m006_manifests", m006_manifests),
    Migration("m007_item_ids", m007_item_ids),
    Migration("m008_ingest_keys", m008_ingest_keys),
    Migration("m009_conversation_loop", m009_conversation_loop),
    Migration("m010_recall_index", m010_recall_index),
    Migration("m011_passages", m011_passages),
    Migration("m013_item_scope", m013_item_scope),
    Migration("m014_summary_spend", m014_summary_spend),
    Migration("m015_int8_vectors", m015_int8_vectors),
    Migration("m016_data_versions", m016_data_versions),
    Migration("m017_idempotency_keys", m017_idempotency_keys),
    Migration("m018_item_facts", m018_item_facts),
    Migration("m019_recall_events", m019_recall_events),
    Migration("m020_node_settled", m020_node_settled),
    Migration("m021_term_ids", m021_term_ids, vacuum=True),
    Migration("m022_compact_manifests", m022_compact_manifests, vacuum=True),
    Migration("m023_passage_pages", m023_passage_pages, vacuum=True),
    Migration("m024_sentence_nibbles", m024_sentence_nibbles),
    Migration("m025_lean_store", m025_lean_store, vacuum=True),
    Migration("m026_compact_store", m026_compact_store, vacuum=True),
    Migration("m027_compact_content", m027_compact_content, vacuum=True),
    Migration("m028_compact_rows", m028_compact_rows, vacuum=True),
]
