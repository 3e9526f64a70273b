"""Issue 28: turn texts packed on SQLite (:mod:`stratamem.store.text_codec`, ``m027_compact_content``).

The codec round-trips any text (property test); every real LoCoMo turn and
every turn of the real Claude Code transcripts reads back exactly from a real
SQLite store, which holds their texts in fewer bytes; a PostgreSQL store
keeps TEXT and reads the same; a store written before the codec upgrades
without a changed byte; a damaged packed text is a clear error naming the turn.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg import fresh_schema, raw_rows, schema_url

from stratamem import Config, Memory
from stratamem.errors import BackendError, DecodeError
from stratamem.ingest import read_file
from stratamem.store.open import open_store
from stratamem.store.text_codec import MIN_BYTES, pack_text, unpack_text

SHARED = Path(__file__).resolve().parents[2] / "shared"
LOCOMO = SHARED / "data" / "locomo" / "locomo10.json"
TRANSCRIPTS = sorted((SHARED / "data" / "transcripts" / "claude_code").glob("*.jsonl"))
PLAIN = Config().replace(pyramid={"enabled": False})


def _locomo_messages(conv: int) -> list[tuple[str, list[dict]]]:
    data = json.loads(LOCOMO.read_text())[conv]["conversation"]
    t0 = datetime(2023, 5, 8, tzinfo=UTC)
    out = []
    for i in range(1, 40):
        if f"session_{i}" not in data:
            break
        msgs = [
            {
                "role": "user" if t["speaker"] == data["speaker_a"] else "assistant",
                "name": t["speaker"],
                "content": t["text"],
                "timestamp": (t0 + timedelta(days=i, seconds=30 * k)).isoformat(),
            }
            for k, t in enumerate(data[f"session_{i}"])
        ]
        out.append((f"session_{i}", msgs))
    return out


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=600))
def test_any_text_reads_back_exactly(text: str) -> None:
    packed = pack_text(text)
    assert unpack_text(packed) == text
    if isinstance(packed, bytes):
        assert len(packed) < len(text.encode()) and len(text.encode()) >= MIN_BYTES
    else:
        assert packed is text


def test_real_locomo_and_transcript_turns_read_back_exactly_in_fewer_bytes(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Memory(db, namespace="l", config=PLAIN, embedder=None) as mem:
        for conv in range(3):
            for name, msgs in _locomo_messages(conv):
                mem.for_namespace(f"l{conv}").add(msgs, session=name)
        for path in TRANSCRIPTS:
            mem.for_namespace(f"cc-{path.stem[:8]}").ingest(read_file(path))
        written = {
            ns.namespace: [dataclasses.astuple(t) for t in mem.store.iter_turns(ns.namespace)]
            for ns in mem.store.namespace_stats()
        }
    assert sum(len(v) for v in written.values()) > 1500
    with Memory(db, namespace="l", config=PLAIN, embedder=None) as mem:  # read back by a fresh process' store
        assert {ns: [dataclasses.astuple(t) for t in mem.store.iter_turns(ns)] for ns in written} == written
    # The LoCoMo texts as given, against what the file holds for them.
    given_texts = [m["content"] for conv in range(3) for _, msgs in _locomo_messages(conv) for m in msgs]
    conn = sqlite3.connect(db)
    rows = conn.execute(
        "SELECT t.text FROM turns t JOIN namespaces n ON n.id = t.namespace_id WHERE n.name LIKE 'l%' ORDER BY t.id"
    ).fetchall()
    conn.close()
    assert [unpack_text(r[0]) for r in rows] == given_texts
    stored = sum(len(r[0]) if isinstance(r[0], bytes) else len(r[0].encode()) for r in rows)
    assert stored < 0.68 * sum(len(t.encode()) for t in given_texts)  # main stored each text as it is


@pytest.fixture
def pg_where(pg_dsn: str) -> str:
    return schema_url(pg_dsn, fresh_schema(pg_dsn, "codec"))


def test_postgres_keeps_text_and_reads_the_same(pg_where: str) -> None:
    with Memory(open_store(pg_where), namespace="l", config=PLAIN, embedder=None) as mem:
        name, msgs = _locomo_messages(0)[0]
        stored = mem.add(msgs, session=name)
        assert [t.text for t in mem.store.iter_turns("l")] == [m["content"] for m in msgs]
        kinds = raw_rows(mem.store, "SELECT DISTINCT pg_typeof(text)::text FROM turns")
        assert kinds == [("text",)] and len(stored) == len(msgs)


def test_a_store_written_before_the_codec_upgrades_without_a_changed_byte(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with Memory(db, namespace="l", config=PLAIN, embedder=None) as mem:
        for name, msgs in _locomo_messages(1):
            mem.add(msgs, session=name)
        written = [dataclasses.astuple(t) for t in mem.store.iter_turns("l")]
    conn = sqlite3.connect(db, isolation_level=None)
    for tid, text in conn.execute("SELECT id, text FROM turns").fetchall():  # as main wrote them: TEXT
        conn.execute("UPDATE turns SET text = ? WHERE id = ?", (unpack_text(text), tid))
    conn.execute("DELETE FROM _stratamem_migrations WHERE name = 'm027_compact_content'")
    assert conn.execute("SELECT COUNT(*) FROM turns WHERE typeof(text) = 'blob'").fetchone() == (0,)
    conn.close()
    with Memory(db, namespace="l", config=PLAIN, embedder=None) as mem:  # m027 runs
        assert [dataclasses.astuple(t) for t in mem.store.iter_turns("l")] == written
    conn = sqlite3.connect(db)
    blobs, total = conn.execute("SELECT SUM(typeof(text) = 'blob'), COUNT(*) FROM turns").fetchone()
    conn.close()
    assert blobs >= 0.8 * total


def test_a_damaged_packed_text_is_an_error_naming_the_turn(tmp_path: Path) -> None:
    db = tmp_path / "bad.db"
    with Memory(db, namespace="l", config=PLAIN, embedder=None) as mem:
        name, msgs = _locomo_messages(0)[0]
        mem.add(msgs[:3], session=name)
    conn = sqlite3.connect(db, isolation_level=None)
    tid, blob = conn.execute("SELECT id, text FROM turns WHERE typeof(text) = 'blob' LIMIT 1").fetchone()
    conn.execute("UPDATE turns SET text = ? WHERE id = ?", (blob[:-3], tid))
    conn.execute("UPDATE turns SET text = ? WHERE id = ?", (b"\x09" + blob[1:], tid + 1))
    conn.close()
    with pytest.raises(DecodeError, match="truncated|corrupt"):
        unpack_text(blob[:-3])
    with pytest.raises(DecodeError, match="unknown form"):
        unpack_text(b"\x09" + blob[1:])
    with Memory(db, namespace="l", config=PLAIN, embedder=None) as mem:
        with pytest.raises(BackendError, match=f"stored turn {tid} .* unreadable"):
            mem.store.turns("l")
