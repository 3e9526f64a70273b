"""Issue 28's row pass, ``m028_compact_rows``: SQLite turn timestamps in 8 bytes
(:mod:`stratamem.store.turn_stamps`), passage rows naming their model key by id
(:func:`stratamem.store.passage_store.m028_model_ids`).

The stamp round-trips every aware datetime in range and sorts as the times do
(property tests); a real LoCoMo conversation's turns take 8 bytes a timestamp
instead of 27 and read back the same, and its sentence rows one byte for their
model key instead of 31; a store written before upgrades without a changed
read (both backends); PostgreSQL keeps ``TIMESTAMPTZ``; a damaged stamp is a
clear error naming the turn.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from layouts import PASSAGE_ROWS, before_m028
from pg import fresh_schema, raw_rows, schema_url

from stratamem import Config, Memory
from stratamem.errors import BackendError, DecodeError, InvalidTurnError
from stratamem.records import StoredTurn, format_timestamp
from stratamem.store.open import open_store
from stratamem.store.part_bytes import part_of
from stratamem.store.turn_stamps import pack_stamp, unpack_stamp
from stratamem.testing.hash_embedder import HashEmbedder

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
PLAIN = Config().replace(pyramid={"enabled": False})

# Aware datetimes whose UTC instant lies in years 1-9999, with any whole-minute offset.
offsets = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))
instants = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=offsets)


@settings(max_examples=400, deadline=None)
@given(instants)
def test_a_stamp_is_eight_bytes_and_reads_back_the_same_instant_as_its_text(at: datetime) -> None:
    blob = pack_stamp(at)
    assert len(blob) == 8
    assert unpack_stamp(blob) == at == unpack_stamp(format_timestamp(at))
    assert unpack_stamp(blob).tzinfo is UTC and unpack_stamp(blob) == unpack_stamp(format_timestamp(at))


@settings(max_examples=400, deadline=None)
@given(instants, instants)
def test_stamps_sort_as_their_times_do(a: datetime, b: datetime) -> None:
    assert (pack_stamp(a) < pack_stamp(b)) == (a < b)
    assert (pack_stamp(a) == pack_stamp(b)) == (a == b)


def test_the_ends_of_the_range_and_beyond() -> None:
    first, last = datetime(1, 1, 1, tzinfo=UTC), datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert pack_stamp(first) == bytes(8) and unpack_stamp(pack_stamp(last)) == last
    with pytest.raises(InvalidTurnError, match="outside years 1-9999"):
        pack_stamp(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1))))
    with pytest.raises(DecodeError, match="7 bytes, not 8"):
        unpack_stamp(bytes(7))


def _locomo(conv: int) -> list[tuple[str, list[dict]]]:
    data = json.loads(LOCOMO.read_text())[conv]["conversation"]
    out, i = [], 1
    while f"session_{i}" in data:
        start = datetime(2023, 5, 8, 13, 56, tzinfo=UTC) + timedelta(days=7 * i)
        out.append(
            (
                f"session_{i}",
                [
                    {
                        "role": "user" if t["speaker"] == data["speaker_a"] else "assistant",
                        "name": t["speaker"],
                        "content": t["text"],
                        "timestamp": (start + timedelta(seconds=30 * k, microseconds=7 * k)).isoformat(),
                        "metadata": {"dia_id": t["dia_id"]},
                    }
                    for k, t in enumerate(data[f"session_{i}"])
                ],
            )
        )
        i += 1
    return out


def _write(db: Path | str, conv: int, embedder: HashEmbedder | None = None) -> list[StoredTurn]:
    with Memory(open_store(db), namespace="l", config=PLAIN, embedder=embedder) as mem:
        for name, msgs in _locomo(conv):
            mem.add(msgs, session=name)
        return list(mem.store.iter_turns("l"))


def _read(mem: Memory) -> list[StoredTurn]:
    return list(mem.store.iter_turns("l"))


def test_a_real_locomo_conversation_keeps_its_times_in_eight_bytes_each(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    written = _write(db, 0)
    sent = [m["timestamp"] for _, msgs in _locomo(0) for m in msgs]
    assert [t.turn.timestamp for t in written] == [datetime.fromisoformat(s) for s in sent]
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*), SUM(LENGTH(ts)), MIN(typeof(ts)) FROM turns").fetchone() == (
        419,
        8 * 419,
        "blob",
    )
    # The turns table of conversation 0 (419 turns): 19 pages of 4 KiB with ISO text stamps, 17 now.
    (pages,) = conn.execute("SELECT SUM(pgsize) FROM dbstat WHERE name = 'turns'").fetchone()
    conn.close()
    assert pages <= 17 * 4096
    with Memory(db, namespace="l", config=PLAIN, embedder=None) as mem:
        assert _read(mem) == written
        newest = max(datetime.fromisoformat(s) for s in sent)
        assert mem.store.nodes.newest_turn_time("l") == newest
        assert [k.timestamp for k in mem.store.embeddings.turns.keys("l")] == [t.turn.timestamp for t in written]


def test_a_store_written_with_text_stamps_upgrades_without_a_changed_read(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    written = _write(db, 1)
    conn = sqlite3.connect(db, isolation_level=None)
    for tid, ts in conn.execute("SELECT id, ts FROM turns").fetchall():  # as main wrote them: ISO text
        conn.execute("UPDATE turns SET ts = ? WHERE id = ?", (format_timestamp(unpack_stamp(ts)), tid))
    conn.execute("DELETE FROM _stratamem_migrations WHERE name = 'm028_compact_rows'")
    assert conn.execute("SELECT COUNT(*) FROM turns WHERE typeof(ts) = 'blob'").fetchone() == (0,)
    conn.close()
    with Memory(db, namespace="l", config=PLAIN, embedder=None) as mem:  # m028 runs
        assert _read(mem) == written
        assert mem.store.nodes.newest_turn_time("l") == max(t.turn.timestamp for t in written)
    with Memory(db, namespace="l", config=PLAIN, embedder=None) as mem:  # and again: nothing left to do
        assert _read(mem) == written
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*), SUM(typeof(ts) = 'blob') FROM turns").fetchone() == (len(written),) * 2
    assert ("m028_compact_rows",) in conn.execute("SELECT name FROM _stratamem_migrations").fetchall()
    conn.close()


def test_a_damaged_stamp_is_an_error_naming_the_turn(tmp_path: Path) -> None:
    db = tmp_path / "bad.db"
    with Memory(db, namespace="l", config=PLAIN, embedder=None) as mem:
        mem.add([{"role": "user", "content": "hello"}, {"role": "user", "content": "again"}], session="s")
    conn = sqlite3.connect(db, isolation_level=None)
    tid, blob = conn.execute("SELECT id, ts FROM turns ORDER BY id LIMIT 1").fetchone()
    conn.execute("UPDATE turns SET ts = ? WHERE id = ?", (blob[:-1], tid))
    conn.close()
    with Memory(db, namespace="l", config=PLAIN, embedder=None) as mem:
        with pytest.raises(BackendError, match=f"stored turn {tid} .* unreadable"):
            mem.store.turns("l")


@pytest.fixture
def pg_where(pg_dsn: str) -> str:
    return schema_url(pg_dsn, fresh_schema(pg_dsn, "stamps"))


def test_postgres_keeps_timestamptz_and_records_the_step(pg_where: str) -> None:
    with Memory(open_store(pg_where), namespace="l", config=PLAIN, embedder=None) as mem:
        name, msgs = _locomo(0)[0]
        mem.add(msgs, session=name)
        assert [t.timestamp for t in mem.store.iter_turns("l")] == [
            datetime.fromisoformat(m["timestamp"]) for m in msgs
        ]
        assert raw_rows(mem.store, "SELECT DISTINCT pg_typeof(ts)::text FROM turns") == [("timestamp with time zone",)]
        assert ("m028_compact_rows",) in raw_rows(mem.store, "SELECT name FROM _stratamem_migrations")


def _pages(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(
            conn.execute(
                "SELECT SUM(pgsize) FROM dbstat WHERE name IN (SELECT name FROM sqlite_master WHERE tbl_name = ?)",
                (table,),
            ).fetchone()[0]
        )
    finally:
        conn.close()


def test_sentence_rows_of_a_real_locomo_conversation_name_their_model_once(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    emb = HashEmbedder(384)  # MiniLM's width: the blobs have their real sizes
    _write(db, 0, emb)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT id, model FROM recall_models").fetchall() == [(1, f"{emb.name}/384/sentences2")]
    rows, ids, blobs = conn.execute(
        "SELECT COUNT(*), SUM(LENGTH(model_id)), SUM(LENGTH(vectors)) FROM recall_passages"
    ).fetchone()
    (payload, pages) = conn.execute(
        "SELECT SUM(payload), SUM(pgsize) FROM dbstat WHERE name = 'recall_passages'"
    ).fetchone()
    conn.close()
    assert (rows, ids, blobs) == (235, 235, 64_992)
    # Each row's bytes beyond its blob: 35.7 with the 31-byte key on every row (73,376 of payload in
    # 81,920 bytes of pages), 7.7 now (66,796 in 77,824).
    assert payload <= blobs + 8 * rows and pages <= 77_824
    assert part_of("recall_models") == "recall_index"  # `stratamem status` counts the key table with the vectors


def _pg_where(request: pytest.FixtureRequest) -> str:
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "rows"))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_passage_rows_of_the_previous_layout_upgrade_unchanged(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    where = str(tmp_path / "p.db") if backend == "sqlite" else _pg_where(request)
    emb = HashEmbedder(384)
    key = f"{emb.name}/384/sentences2"
    with Memory(open_store(where), namespace="l", config=PLAIN, embedder=emb) as mem:
        for name, msgs in _locomo(2)[:4]:
            mem.add(msgs, session=name)
        question = "what did Jon do with his dance studio"
        hits = [(h.turn_ids, h.score) for h in mem._recall_index().search(question, k=8)]
        blobs = mem.store.embeddings.passages.load("l", key)
        before_m028(mem.store)
        assert {
            (int(t), m, bytes(v))
            for t, m, v in raw_rows(mem.store, "SELECT turn_id, model, vectors FROM recall_passages")
        } == {(t, key, b) for t, b in blobs.items()}
    assert len(blobs) > 20
    fresh = HashEmbedder(384)
    with Memory(open_store(where), namespace="l", config=PLAIN, embedder=fresh) as mem:  # m028 runs
        assert ("m028_compact_rows",) in raw_rows(mem.store, "SELECT name FROM _stratamem_migrations")
        assert {(int(t), m, bytes(v)) for t, m, v in raw_rows(mem.store, PASSAGE_ROWS)} == {
            (t, key, b) for t, b in blobs.items()
        }
        assert mem.store.embeddings.passages.load("l", key) == blobs
        assert mem.store.embeddings.passages.load("l", f"{emb.name}/384/sentences4") == {}
        assert [(h.turn_ids, h.score) for h in mem._recall_index().search(question, k=8)] == hits
        assert [t for c in fresh.calls for t in c] == [question]  # nothing made again
