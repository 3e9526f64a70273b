"""Passage and sentence vector rows stored compactly (issue 28): their page layout and the upgrade that moves them.

Real SQLite files and a real PostgreSQL (pgserver); the documented offline
HashEmbedder at MiniLM's 384 dimensions, so the blobs have their real sizes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.store.open import open_store
from stratamem.testing.hash_embedder import HashEmbedder

NO_PYRAMID = Config().replace(pyramid={"enabled": False})


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store's location on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "pages.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "pages"))


def _raw(store: Any, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if store.backend == "sqlite":
        with store.lock:
            return store.connection.execute(statement.replace("%s", "?"), params).fetchall()
    with store.connection() as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []


def _chat(n: int) -> list[dict[str, str]]:
    """Short turns of several sentences each, every one about something of its own."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"My sister Ana{i} moved to Porto{i} last spring after a long search. "
            f"She found a flat near the river{i} with a small balcony full of plants. "
            f"Her cat Pim{i} sleeps on the balcony all afternoon. "
            f"Next month she starts a pottery course at the studio{i} on the hill.",
        }
        for i in range(n)
    ]


def _rows(store: Any) -> dict[int, tuple[str, bytes]]:
    return {int(t): (m, bytes(v)) for t, m, v in _raw(store, "SELECT turn_id, model, vectors FROM recall_passages")}


def test_sentence_rows_fill_their_pages(tmp_path: Path) -> None:
    # Before m023 the clustered table spilled each 1.5 KB blob to an overflow page of its own (2.7x the bytes);
    # a rowid table keeps two such rows on a page.
    path = tmp_path / "s.db"
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=HashEmbedder(384)) as mem:
        mem.add(_chat(200), session="s")
        rows = _rows(mem.store)
    assert len(rows) == 200 and {len(v) for _, v in rows.values()} == {4 * 388}
    conn = sqlite3.connect(path)
    pages = conn.execute(
        "SELECT SUM(pgsize) FROM dbstat WHERE name IN (SELECT name FROM sqlite_master WHERE tbl_name = ?)",
        ("recall_passages",),
    ).fetchone()[0]
    conn.close()
    assert pages < 1.5 * sum(len(v) for _, v in rows.values())


def _clustered(store: Any) -> None:
    """Put ``recall_passages`` back as ``m011_passages`` made it (SQLite: ``WITHOUT ROWID``), rows kept."""
    if store.backend == "sqlite":
        for statement in [
            "CREATE TABLE old (namespace_id INTEGER NOT NULL REFERENCES namespaces(id), turn_id INTEGER NOT NULL, "
            "model TEXT NOT NULL, vectors BLOB NOT NULL, PRIMARY KEY (namespace_id, turn_id)) WITHOUT ROWID",
            "INSERT INTO old SELECT * FROM recall_passages",
            "DROP TABLE recall_passages",
            "ALTER TABLE old RENAME TO recall_passages",
        ]:
            _raw(store, statement)
    _raw(store, "DELETE FROM _stratamem_migrations WHERE name = 'm023_passage_pages'")


def test_a_store_of_the_previous_layout_upgrades_with_its_rows_unchanged(where: str) -> None:
    emb = HashEmbedder(384)
    question = "where did Ana7 move"
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        mem.add(_chat(30), session="s")
        rows = _rows(mem.store)
        hits = [(h.turn_ids[0], h.score["fused"]) for h in mem._recall_index().search(question, k=5)]
        _clustered(mem.store)
    if where.endswith(".db"):
        conn = sqlite3.connect(where)
        assert (
            "WITHOUT ROWID"
            in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'recall_passages'").fetchone()[0]
        )
        conn.close()
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=emb) as mem:  # m023 runs
        assert ("m023_passage_pages",) in _raw(mem.store, "SELECT name FROM _stratamem_migrations")
        assert len(rows) == 30 and _rows(mem.store) == rows
        assert [(h.turn_ids[0], h.score["fused"]) for h in mem._recall_index().search(question, k=5)] == hits
        mem.add(_chat(32)[30:], session="s")  # written and replaced under the same key afterwards
        mem.forget(turns=[min(rows)])
        assert len(_rows(mem.store)) == 31
        if mem.store.backend == "sqlite":
            (sql,) = _raw(mem.store, "SELECT sql FROM sqlite_master WHERE name = 'recall_passages'")[0]
            assert "WITHOUT ROWID" not in sql


SHORT = [
    "Hey Mel! Good to see you! How have you been?",
    "Wow, that's so cool! I went to a support group yesterday.",
    "Thanks, Caroline! The kids loved the museum trip last week.",
    "That's amazing! What made you want to start painting again?",
    "Sounds fun! I'm off to go swimming with the kids now.",
    "Take care! Let's catch up again soon, okay?",
]


def test_a_store_of_short_turns_does_not_grow_a_sentence_row_per_turn(tmp_path: Path) -> None:
    # Chat turns of two short sentences (LoCoMo's kind): the turn's own vector reads all they say.
    # Before the floors (issue 28) every one of them got a row of two sentence vectors.
    with Memory(tmp_path / "short.db", namespace="n", config=NO_PYRAMID, embedder=HashEmbedder(384)) as mem:
        mem.add(
            [{"role": "user" if i % 2 == 0 else "assistant", "content": SHORT[i % 6]} for i in range(60)], session="s"
        )
        assert _rows(mem.store) == {}
        assert {r.sentences for r in mem.store.embeddings.turns.load("n").values()} == {0}
        mem.add(_chat(3), session="s")  # turns that tell several things still get theirs
        assert len(_rows(mem.store)) == 3
