"""Passage and sentence vector rows stored compactly (issue 28): their page layout and the upgrade that moves them.

Real SQLite files and a real PostgreSQL (pgserver); the documented offline
HashEmbedder at MiniLM's 384 dimensions, so the blobs have their real sizes.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from layouts import PASSAGE_ROWS, before_m028
from pg import fresh_schema, raw_rows, schema_url

from stratamem import Config, Memory
from stratamem.embed.quantize import (
    decode_int4,
    decode_int8,
    encode_int2,
    encode_int4,
    encode_int8,
    int4_blob_size,
    int4_rows,
)
from stratamem.errors import BackendError
from stratamem.retrieve.sentences import sentence_texts
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
    return {int(t): (m, bytes(v)) for t, m, v in raw_rows(store, PASSAGE_ROWS)}


def test_sentence_rows_fill_their_pages(tmp_path: Path) -> None:
    # Before m023 the clustered table spilled each 1.5 KB blob to an overflow page of its own (2.7x the bytes);
    # a rowid table keeps two such rows on a page.
    path = tmp_path / "s.db"
    eight = [
        {"role": "user", "content": " ".join(f"Fact {k} about Ana{i}: she keeps item{k} in box{k}." for k in range(8))}
        for i in range(200)
    ]
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=HashEmbedder(384)) as mem:
        mem.add(eight, session="s")
        rows = _rows(mem.store)
    assert len(rows) == 200 and {len(v) for _, v in rows.values()} == {8 * 96}
    conn = sqlite3.connect(path)
    pages = conn.execute(
        "SELECT SUM(pgsize) FROM dbstat WHERE name IN (SELECT name FROM sqlite_master WHERE tbl_name = ?)",
        ("recall_passages",),
    ).fetchone()[0]
    conn.close()
    assert pages < 1.5 * sum(len(v) for _, v in rows.values())


def _clustered(store: Any) -> None:
    """Put ``recall_passages`` back as ``m011_passages`` made it (SQLite: ``WITHOUT ROWID``), rows kept."""
    before_m028(store)
    if store.backend == "sqlite":
        for statement in [
            "CREATE TABLE old (namespace_id INTEGER NOT NULL REFERENCES namespaces(id), turn_id INTEGER NOT NULL, "
            "model TEXT NOT NULL, vectors BLOB NOT NULL, PRIMARY KEY (namespace_id, turn_id)) WITHOUT ROWID",
            "INSERT INTO old SELECT * FROM recall_passages",
            "DROP TABLE recall_passages",
            "ALTER TABLE old RENAME TO recall_passages",
        ]:
            raw_rows(store, statement)
    raw_rows(store, "DELETE FROM _stratamem_migrations WHERE name = 'm023_passage_pages'")


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
        assert ("m023_passage_pages",) in raw_rows(mem.store, "SELECT name FROM _stratamem_migrations")
        assert len(rows) == 30 and _rows(mem.store) == rows
        assert [(h.turn_ids[0], h.score["fused"]) for h in mem._recall_index().search(question, k=5)] == hits
        mem.add(_chat(32)[30:], session="s")  # written and replaced under the same key afterwards
        mem.forget(turns=[min(rows)])
        assert len(_rows(mem.store)) == 31
        if mem.store.backend == "sqlite":
            (sql,) = raw_rows(mem.store, "SELECT sql FROM sqlite_master WHERE name = 'recall_passages'")[0]
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


def test_vectors_round_trip_in_four_bits() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(50, 385)).astype(np.float32)  # an odd length pads the last byte
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    blobs = encode_int4(vectors)
    assert {len(b) for b in blobs} == {int4_blob_size(385)} == {193}
    back = decode_int4(blobs, 385)
    assert back.shape == (50, 385) and np.allclose(np.linalg.norm(back, axis=1), 1.0, atol=1e-5)
    assert (np.einsum("ij,ij->i", back, vectors) > 0.95).all()
    assert decode_int4(encode_int4(back), 385) == pytest.approx(back, abs=1e-6)  # codes are a fixed point
    axis = np.eye(4, dtype=np.float32)[:1]
    assert decode_int4(encode_int4(axis), 4).tolist() == axis.tolist()
    with pytest.raises(BackendError, match="4-bit"):
        decode_int4([blobs[0][:-1]], 385)


def test_stored_int8_sentence_vectors_are_re_encoded_in_four_bits_then_signs_on_upgrade(where: str) -> None:
    emb = HashEmbedder(384)
    key2 = f"{emb.name}/384/sentences2"
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        mem.add(_chat(12), session="s")
        index = mem._recall_index()
        texts = {tid: sentence_texts(index.turn(tid), 40) for tid in mem.store.embeddings.turns.load("n")}
        # As the version before m024 stored them: int8 vectors under ``.../sentences``.
        old = {tid: b"".join(encode_int8(emb.embed_batch(t))) for tid, t in texts.items()}
        mem.store.embeddings.passages.put("n", f"{emb.name}/384/sentences", old)
        before_m028(mem.store)
        raw_rows(
            mem.store,
            "DELETE FROM _stratamem_migrations WHERE name IN ('m024_sentence_nibbles', 'm026_compact_store')",
        )
    assert len(texts) == 12 and all(len(t) == 4 for t in texts.values())
    fresh = HashEmbedder(384)
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=fresh) as mem:  # m024, m026 run
        rows = _rows(mem.store)
        assert {m for m, _ in rows.values()} == {key2}
        for tid, blob in old.items():
            four = b"".join(encode_int4(decode_int8([blob[i : i + 388] for i in range(0, len(blob), 388)], 384)))
            assert rows[tid][1] == b"".join(encode_int2(int4_rows(four, 384)))
        mem._recall_index().search("where did Ana3 move", k=3)
        assert [t for c in fresh.calls for t in c] == ["where did Ana3 move"]  # nothing made again
