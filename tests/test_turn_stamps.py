"""Issue 28: SQLite turn timestamps in 8 bytes (:mod:`stratamem.store.turn_stamps`, ``m028_compact_rows``).

The stamp round-trips every aware datetime in range and sorts as the times do
(property tests); a real LoCoMo conversation's turns take 8 bytes a timestamp
instead of 27 and read back the same; a store written before (ISO text)
upgrades without a changed read; PostgreSQL keeps ``TIMESTAMPTZ``; a damaged
stamp is a clear error naming the turn.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg import fresh_schema, raw_rows, schema_url

from stratamem import Config, Memory
from stratamem.errors import BackendError, DecodeError, InvalidTurnError
from stratamem.records import StoredTurn, format_timestamp
from stratamem.store.open import open_store
from stratamem.store.turn_stamps import pack_stamp, unpack_stamp

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


def _write(db: Path, conv: int) -> list[StoredTurn]:
    with Memory(db, namespace="l", config=PLAIN, embedder=None) as mem:
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
