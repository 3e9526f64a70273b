"""The one SQL layer (store/sql.py): placeholder conversion, timestamps, ordering, and feature stores.

Every test runs on both backends.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from pg import fresh_schema

from stratamem.records import format_timestamp
from stratamem.store.ddl import create_table
from stratamem.store.postgres.store import PostgresStore
from stratamem.store.sql import CHUNK, POSTGRES, SQLITE, chunks, dialect_of, run_ddl, upsert
from stratamem.store.sqlite.store import SQLiteStore


def test_sqlite_statements_are_kept_as_written() -> None:
    statement = "SELECT a FROM t WHERE b = ? AND c LIKE '%x'"
    assert SQLITE.sql(statement) is statement


def test_postgres_placeholders_and_percent_signs() -> None:
    assert POSTGRES.sql("SELECT a FROM t WHERE b = ? AND c LIKE '%x' AND d IN (?,?)") == (
        "SELECT a FROM t WHERE b = %s AND c LIKE '%%x' AND d IN (%s,%s)"
    )


@given(st.lists(st.sampled_from(["?", "%", "a", " ", "="]), max_size=40).map("".join))
def test_postgres_conversion_keeps_every_other_character(statement: str) -> None:
    converted = POSTGRES.sql(statement)
    assert "?" not in converted
    # Read back left to right as psycopg does: "%%" is a percent sign, "%s" a parameter.
    assert re.sub(r"%%|%s", lambda m: "%" if m.group() == "%%" else "?", converted) == statement


def test_timestamps_round_trip_in_both_dialects() -> None:
    at = datetime(2026, 11, 24, 16, 0, 1, 500, tzinfo=timezone(timedelta(hours=2)))
    assert SQLITE.stamp(at) == format_timestamp(at)
    assert SQLITE.read_stamp(SQLITE.stamp(at)) == at
    assert POSTGRES.stamp(at) is at
    back = POSTGRES.read_stamp(at)
    assert back == at and back.tzinfo == UTC


def test_bytewise_order() -> None:
    assert SQLITE.bytewise("session") == "session"
    assert POSTGRES.bytewise("session") == 'session COLLATE "C"'


def test_dialect_of_a_raw_connection_and_ddl_per_dialect() -> None:
    conn = sqlite3.connect(":memory:")
    assert dialect_of(conn) is SQLITE
    assert dialect_of(object()) is POSTGRES
    run_ddl(
        conn,
        {
            "sqlite": ["CREATE TABLE a (x INTEGER)", "CREATE TABLE b (y TEXT)"],
            "postgres": ["CREATE TABLE never (z BIGINT)"],
        },
    )
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert names == {"a", "b"}


def test_tenant_column_in_lists_octets_and_chunks() -> None:
    assert (SQLITE.tenant, POSTGRES.tenant) == ("namespace_id", "namespace")
    assert SQLITE.in_list("id", 3) == "id IN (?,?,?)"
    assert POSTGRES.sql(POSTGRES.in_list("id", 2)) == "id IN (%s,%s)"
    assert SQLITE.octets("t.text") == "stratamem_octets(t.text)"  # packed texts: store/text_codec.py
    assert POSTGRES.octets("t.text") == "octet_length(t.text)"
    assert [list(p) for p in chunks(list(range(5)), 2)] == [[0, 1], [2, 3], [4]]
    assert list(chunks([])) == []
    assert [len(p) for p in chunks(list(range(CHUNK + 1)))] == [CHUNK, 1]


def test_sqlite_tenant_key_is_the_namespace_id_and_counts_utf8_bytes(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "t.db")
    try:
        assert store.sql.tenant_key("ns") is None  # no such namespace: callers read and write nothing
        store.ensure_session("ns", "s")
        (ns_id,) = store.sql.rows("SELECT id FROM namespaces WHERE name = ?", ("ns",))[0]
        assert store.sql.tenant_key("ns") == ns_id
        assert store.sql.rows(f"SELECT {SQLITE.octets('?')}", ("é€",)) == [(5,)]
    finally:
        store.close()


def test_postgres_tenant_key_is_the_name_and_counts_utf8_bytes(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn, schema=fresh_schema(pg_dsn, "sq"))
    try:
        assert store.sql.tenant_key("never-created") == "never-created"  # the name itself, no query
        assert store.sql.rows(f"SELECT {POSTGRES.octets('CAST(? AS TEXT)')}", ("é€",)) == [(5,)]
    finally:
        store.close()


def test_upsert_replaces_the_columns_of_the_row_holding_the_keys(tmp_path: Path) -> None:
    statement = upsert("t", ("a", "b"), ("c",))
    assert statement == ("INSERT INTO t (a, b, c) VALUES (?, ?, ?) ON CONFLICT (a, b) DO UPDATE SET c = excluded.c")
    conn = sqlite3.connect(tmp_path / "u.db")
    conn.execute("CREATE TABLE t (a TEXT, b INTEGER, c TEXT, PRIMARY KEY (a, b))")
    conn.executemany(statement, [("x", 1, "old"), ("x", 2, "kept"), ("x", 1, "new")])
    assert conn.execute("SELECT a, b, c FROM t ORDER BY b").fetchall() == [("x", 1, "new"), ("x", 2, "kept")]
    conn.close()


def test_namespace_columns_and_membership_spellings() -> None:
    assert (SQLITE.namespace_key, SQLITE.namespace_name) == ("id", "name")
    assert (POSTGRES.namespace_key, POSTGRES.namespace_name) == ("namespace", "namespace")
    assert SQLITE.in_namespace("t") == "t.namespace_id = (SELECT id FROM namespaces WHERE name = ?)"
    assert POSTGRES.in_namespace("t") == "t.namespace = ?"
    assert SQLITE.one_of("id", [3, 1]) == ("id IN (?,?)", [3, 1])
    assert POSTGRES.one_of("id", [3, 1]) == ("id = ANY(?)", [[3, 1]])


def test_create_table_spells_one_column_list_per_dialect() -> None:
    columns = (
        "{tenant_column}",
        "turn_id {bigint} NOT NULL",
        "v {blob}",
        "at {stamp}",
        "x {real}",
        "e {vector}",
        "{extra}",
        "PRIMARY KEY ({tenant}, turn_id)",
    )
    assert create_table(SQLITE, "t", columns, without_rowid=True, extra="y TEXT") == (
        "CREATE TABLE t (namespace_id INTEGER NOT NULL REFERENCES namespaces(id), turn_id INTEGER NOT NULL, "
        "v BLOB, at TEXT, x REAL, e BLOB, y TEXT, PRIMARY KEY (namespace_id, turn_id)) WITHOUT ROWID"
    )
    assert create_table(POSTGRES, "t", columns, without_rowid=True, extra="y TEXT") == (
        "CREATE TABLE t (namespace TEXT NOT NULL, turn_id BIGINT NOT NULL, v BYTEA, at TIMESTAMPTZ, "
        "x DOUBLE PRECISION, e vector, y TEXT, PRIMARY KEY (namespace, turn_id))"
    )


def _writer_tenant_and_turn_rows(store: SQLiteStore | PostgresStore) -> None:
    # Writer.tenant creates the namespace once and gives the tenant value of either dialect.
    with store.sql.write() as w:
        key = w.tenant("ns")
        assert w.tenant("ns") == key
    assert store.namespaces() == ["ns"]
    assert store.sql.tenant_key("ns") == key
    store.sql.put_turn_rows("recall_passages", "ns", ("model_id", "vectors"), [(7, 1, b"a"), (8, 1, b"b")])
    store.sql.put_turn_rows("recall_passages", "ns", ("model_id", "vectors"), [(7, 1, b"c")])
    store.sql.put_turn_rows("recall_passages", "absent", ("model_id", "vectors"), [(9, 1, b"x")])
    rows = store.sql.rows("SELECT turn_id, vectors FROM recall_passages ORDER BY turn_id")
    # SQLite has no id for a namespace never created, so nothing is written; PostgreSQL keys rows by the name.
    absent = [] if store.sql.dialect is SQLITE else [(9, b"x")]
    assert [(int(t), bytes(v)) for t, v in rows] == [(7, b"c"), (8, b"b"), *absent]
    assert store.namespaces() == ["ns"]


def test_writer_tenant_and_turn_rows_on_sqlite(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "w.db")
    try:
        _writer_tenant_and_turn_rows(store)
    finally:
        store.close()


def test_writer_tenant_and_turn_rows_on_postgres(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn, schema=fresh_schema(pg_dsn, "sq"))
    try:
        _writer_tenant_and_turn_rows(store)
    finally:
        store.close()
