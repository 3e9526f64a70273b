"""Schema migrations: blank database to head, idempotent, newer schemas refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from stratamem.errors import MigrationError
from stratamem.store import SQLiteStore
from stratamem.store import migrations as mig
from stratamem.store.sqlite.schema import MIGRATIONS


def _schema(path: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name").fetchall()
    conn.close()
    return rows


def test_blank_database_reaches_the_head_schema(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    assert mig.applied(conn) == [m.name for m in MIGRATIONS]
    assert mig.pending(conn, MIGRATIONS) == []
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"namespaces", "sessions", "turns", "store_meta", "_stratamem_migrations"} <= tables
    conn.close()


def test_applying_twice_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    SQLiteStore(path).close()
    before = _schema(path)
    conn = sqlite3.connect(path, isolation_level=None)
    assert mig.apply(conn, MIGRATIONS) == []
    conn.close()
    SQLiteStore(path).close()
    assert _schema(path) == before


def test_each_migration_applies_on_top_of_the_previous_ones(tmp_path: Path) -> None:
    path = tmp_path / "steps.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for i in range(len(MIGRATIONS)):
        assert mig.apply(conn, MIGRATIONS[: i + 1]) == [MIGRATIONS[i].name]
    conn.close()
    SQLiteStore(path).close()


def test_a_database_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO _stratamem_migrations VALUES ('m999_from_the_future', '2030-01-01')")
    conn.commit()
    conn.close()
    with pytest.raises(MigrationError, match="newer than this stratamem.*m999_from_the_future"):
        SQLiteStore(path)


def test_a_failing_migration_leaves_no_trace(tmp_path: Path) -> None:
    path = tmp_path / "fail.db"

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half (x)")
        conn.execute("THIS IS NOT SQL")

    conn = sqlite3.connect(path, isolation_level=None)
    with pytest.raises(MigrationError, match="m001_broken failed"):
        mig.apply(conn, [mig.Migration("m001_broken", broken)])
    assert conn.execute("SELECT name FROM sqlite_master WHERE name='half'").fetchall() == []
    assert mig.applied(conn) == []
    conn.close()
