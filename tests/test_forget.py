"""Forget: turns, sessions and namespaces go with everything derived from them, bytes included.

SQLite: the raw bytes of the database file, its -wal and every archive file
(raw and decompressed) are searched for a unique marker after a forget.
PostgreSQL (a real server): no row of any table holds the marker, and after
``VACUUM FULL`` no table or index file does either. Crashes are real: a
subprocess dies with ``os._exit`` between the commit and the archive files,
and the next open finishes the job.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url
from psycopg import sql
from test_pyramid import check_tree

from stratamem import Config, Memory
from stratamem.embed.cache import CachedEmbedder, content_hash
from stratamem.errors import NotFoundError, ValidationError
from stratamem.records.conversations import ConversationState
from stratamem.store.open import open_store
from stratamem.testing.hash_embedder import HashEmbedder

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
MARK = "Zyqxmarker4471"
STAMP = "2024-05-01T09:00:00Z"
# Small segments that go cold at once, so the marker reaches warm content, the archive and summaries.
CFG = Config().replace(
    pyramid={
        "micro_chunk_size": 4,
        "mini_chunk_size": 8,
        "macro_chunk_size": 16,
        "hot_chunks": 1,
        "warm_max_age_hours": 1,
        "summarizer": "extractive",
        "defer_summarization": False,
    }
)


def fill(mem: Memory, n: int = 40, *, session: str = "s1", marker_at: int | None = 13, start: int = 0) -> None:
    for i in range(start, start + n):
        text = f"Note {i}: Alice paid {i} euros in Paris for the museum tickets."
        if i == marker_at:
            text = f"My locker code is {MARK} and Bob knows it."
        mem.add(
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": text,
                "timestamp": (T0 + timedelta(hours=i)).isoformat(),
            },
            session=session,
        )


def marker_files(root: Path) -> list[str]:
    """Files under ``root`` whose bytes (or decompressed zstd frames) contain the marker, any case."""
    needle = MARK.lower().encode()
    hits = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if needle in data.lower():
            hits.append(path.name)
        if path.name.endswith(".zst") and data:
            with zstandard.ZstdDecompressor().stream_reader(path.open("rb"), read_across_frames=True) as r:
                if needle in r.read().lower():
                    hits.append(path.name + "#decompressed")
    return hits


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory(tmp_path / "m.db", namespace="alice", config=CFG)
    m.embedder = CachedEmbedder(HashEmbedder(), m.store.embeddings)
    yield m
    m.close()


def archived_ids(mem: Memory) -> set[int]:
    """Turn ids the cold segments' archive frames hold."""
    arc = mem.pyramid.archive
    return {
        r["id"]
        for n in mem.pyramid.nodes(level=1, tier="cold")
        if n.archive_ref
        for r in arc.read_node(n.archive_ref, n.id)
    }


def marker_turn(mem: Memory) -> int:
    [tid] = [t.id for t in mem.turns() if MARK in t.text]
    return tid


def test_forgetting_a_turn_leaves_no_byte_of_it_in_the_database_wal_or_archive(mem: Memory, tmp_path: Path):
    fill(mem)
    mem.context("locker code", budget=300)  # a recorded manifest that names the turn
    mem.store.conversations.put(ConversationState("alice", "s1", summary=f"checkpoint: code {MARK}"))
    tid = marker_turn(mem)
    mem.store.forgetting.checkpoint()  # put the marker into the main file too, not only the WAL
    before = marker_files(tmp_path)
    # The archive holds a reference to the marker's turn, never its text (issue 12: text stored once).
    assert "m.db" in before and not any(h.endswith("#decompressed") for h in before)
    assert tid in archived_ids(mem)
    turns_before = [t.id for t in mem.turns()]

    report = mem.forget(turns=[tid])

    assert marker_files(tmp_path) == []
    assert report.turns == 1 and report.wal_truncated
    assert report.archive_files == (f"{datetime.now(UTC).date().isoformat()}.jsonl.zst",)
    assert report.manifests_removed == 1
    assert [t.id for t in mem.turns()] == [t for t in turns_before if t != tid]
    assert tid not in archived_ids(mem) and archived_ids(mem)
    assert mem.store.conversations.get("alice", "s1") is None
    key = content_hash(f"user: My locker code is {MARK} and Bob knows it.")
    assert mem.store.embeddings.get_many("hash-embedder", [key]) == {}
    check_tree(mem)
    # The rebuilt nodes were summarized again from what remains; every cold segment still expands.
    for node in mem.pyramid.nodes(level=1):
        assert [t.id for t in mem.pyramid.expand(node.id)] == mem.pyramid.turn_ids(node.id)
        if node.tier == "cold":
            assert mem.pyramid.expansion(node.id).sources == {node.id: "archive"}
    assert all(n.summary_status == "ok" for n in mem.pyramid.nodes() if n.tier != "hot" and n.level == 1)
    assert all(MARK not in h.text for h in mem.search("locker code Bob", k=20))
    ctx = mem.context("locker code", budget=2000, format="text")
    assert MARK not in ctx.text


def test_a_segment_left_without_turns_is_removed_and_its_span_goes_to_its_neighbour(mem: Memory):
    fill(mem, 20, marker_at=None)
    first = mem.pyramid.nodes(level=1)[1]
    assert first.seq_range == (5, 8)
    report = mem.forget(turns=mem.pyramid.turn_ids(first.id))
    assert report.nodes_removed >= 1
    spans = [n.seq_range for n in mem.pyramid.nodes(level=1)]
    assert spans[:2] == [(1, 4), (5, 12)]
    check_tree(mem)


def test_forgetting_a_session_removes_it_and_keeps_the_others(mem: Memory, tmp_path: Path):
    fill(mem, 20, session="s1")
    fill(mem, 12, session="s2", marker_at=None, start=100)
    other = [t.id for t in mem.turns("s2")]
    report = mem.forget(session="s1")
    assert report.sessions == ("s1",) and report.turns == 20
    assert [s.name for s in mem.store.sessions("alice")] == ["s2"]
    assert [t.id for t in mem.turns()] == other
    assert marker_files(tmp_path) == []
    with pytest.raises(NotFoundError):
        mem.turns("s1")
    check_tree(mem)
    mem.add({"role": "user", "content": "a new start"}, session="s1")
    check_tree(mem)


def test_forgetting_a_namespace_removes_every_trace_and_leaves_other_namespaces(mem: Memory, tmp_path: Path):
    fill(mem)
    bob = mem.for_namespace("bob")
    fill(bob, 10, marker_at=None)
    mem.context("museum", budget=300)
    report = mem.forget(all_namespace=True)
    assert report.turns == 40
    assert [n.namespace for n in mem.namespaces()] == ["bob"]
    assert marker_files(tmp_path) == []
    assert not any((tmp_path / "m.db.archive" / "alice").glob("*.zst"))
    assert bob.status().turns == 10
    with pytest.raises(NotFoundError):
        mem.context("museum")


def test_an_item_with_other_sources_left_is_resourced_and_one_without_is_removed(mem: Memory):
    fill(mem, 6, marker_at=None)
    a, b = [t.id for t in mem.turns()][:2]
    store = mem.store.items
    from stratamem.store.new_rows import NewItem

    both = store.insert(
        "alice",
        NewItem(
            content="Alice likes Paris",
            type="fact",
            tier="cold",
            tokens=4,
            relevance=0.5,
            source="auto",
            created_at=STAMP,
            provenance=(a, b),
            session="s1",
        ),
    )
    only = store.insert(
        "alice",
        NewItem(
            content="Alice paid euros",
            type="fact",
            tier="cold",
            tokens=4,
            relevance=0.5,
            source="auto",
            created_at=STAMP,
            provenance=(a,),
            session="s1",
        ),
    )
    report = mem.forget(turns=[a])
    assert (report.items_removed, report.items_resourced) >= (1, 1)
    [kept] = store.get("alice", [both])
    assert kept.provenance == (b,)
    assert store.get("alice", [only]) == []


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"turns": [1], "session": "s1"},
        {"session": "s1", "all_namespace": True},
        {"turns": []},
        {"turns": "1"},
        {"turns": [True]},
        {"all_namespace": "yes"},
        {"session": "bad name!"},
    ],
)
def test_ambiguous_or_malformed_targets_are_refused_and_nothing_is_forgotten(mem: Memory, kwargs: dict):
    fill(mem, 5, marker_at=None)
    with pytest.raises(ValidationError):
        mem.forget(**kwargs)
    assert mem.status().turns == 5


def test_unknown_turns_sessions_and_other_namespaces_turns_are_not_found_and_nothing_is_forgotten(mem: Memory):
    fill(mem, 5, marker_at=None)
    bob = mem.for_namespace("bob")
    fill(bob, 3, marker_at=None)
    bob_turn = bob.turns()[0].id
    with pytest.raises(NotFoundError, match="nothing was forgotten"):
        mem.forget(turns=[1, bob_turn])
    with pytest.raises(NotFoundError):
        mem.forget(session="nope")
    with pytest.raises(NotFoundError):
        mem.for_namespace("carol").forget(all_namespace=True)
    assert mem.status().turns == 5 and bob.status().turns == 3


_CRASH = textwrap.dedent("""
    import os, sys
    sys.path[:0] = [{tests!r}]
    from test_forget import CFG
    from stratamem import Memory
    from stratamem.pyramid.archive import Archive
    from stratamem.store.sqlite.forget import SQLiteForget
    where = sys.argv[2]
    if where == "after_commit":
        Archive.finish_rewrite = lambda self, name, action: os._exit(9)
    else:
        SQLiteForget._apply = lambda self, conn, plan: os._exit(9)
    mem = Memory(sys.argv[1], namespace="alice", config=CFG)
    mem.forget(turns=[int(sys.argv[3])])
""")


def _crash(db: Path, where: str, tid: int) -> None:
    code = _CRASH.format(tests=str(Path(__file__).parent))
    proc = subprocess.run(
        [sys.executable, "-c", code, str(db), where, str(tid)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 9, proc.stderr


def test_a_crash_after_the_commit_is_finished_on_the_next_open(tmp_path: Path):
    db = tmp_path / "m.db"
    mem = Memory(db, namespace="alice", config=CFG)
    fill(mem)
    tid = marker_turn(mem)
    mem.close()
    _crash(db, "after_commit", tid)
    staged = list((tmp_path / "m.db.archive" / "alice").glob("*.rewrite"))
    assert len(staged) == 1  # committed, file not yet in place
    again = Memory(db, namespace="alice", config=CFG)
    assert tid not in {t.id for t in again.turns()}
    check_tree(again)  # opens the pyramid, which finishes the archive
    assert marker_files(tmp_path) == []
    assert not list((tmp_path / "m.db.archive" / "alice").glob("*.rewrite"))
    for node in again.pyramid.nodes(level=1, tier="cold"):
        assert [t.id for t in again.pyramid.expand(node.id)] == again.pyramid.turn_ids(node.id)
    assert again.store.forgetting.pending_archive("alice") == {}
    again.close()


def test_a_crash_before_the_commit_forgets_nothing_and_the_staged_file_is_discarded(tmp_path: Path):
    db = tmp_path / "m.db"
    mem = Memory(db, namespace="alice", config=CFG)
    fill(mem)
    tid = marker_turn(mem)
    mem.close()
    _crash(db, "before_commit", tid)
    assert list((tmp_path / "m.db.archive" / "alice").glob("*.rewrite"))
    again = Memory(db, namespace="alice", config=CFG)
    assert tid in {t.id for t in again.turns()}
    check_tree(again)
    assert not list((tmp_path / "m.db.archive" / "alice").glob("*.rewrite"))
    cold = again.pyramid.nodes(level=1, tier="cold")
    assert cold and all(again.pyramid.expansion(n.id).sources == {n.id: "archive"} for n in cold)
    again.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["add", "add", "seal", "forget", "forget_session"]),
            st.sampled_from(["a", "b"]),
            st.integers(1, 7),
            st.randoms(use_true_random=False),
        ),
        min_size=1,
        max_size=12,
    ),
    preset=st.sampled_from(["pyramid", "topics", "user_turn"]),
)
def test_every_turn_stays_in_exactly_one_node_per_level_through_forgets(ops, preset):
    if preset == "user_turn":
        config = Config().replace(
            pyramid={
                "preset": "custom",
                "segmenter": "user_turn",
                "mini_chunk_size": 4,
                "macro_chunk_size": 9,
                "summarizer": "heuristic",
            }
        )
    elif preset == "topics":
        config = Config().replace(
            pyramid={
                "preset": "topics",
                "summarizer": "heuristic",
                "bulk_merge_size": 2,
                "topic_summary_tokens": 30,
                "hot_chunks": 1,
            },
            context={"default_budget": 200},
        )
    else:
        config = Config().replace(
            pyramid={
                "micro_chunk_size": 3,
                "mini_chunk_size": 5,
                "macro_chunk_size": 11,
                "summarizer": "heuristic",
                "hot_chunks": 1,
            }
        )
    mem = Memory(":memory:", namespace="p", config=config)
    clock = 0
    for op, session, n, rnd in ops:
        sessions = {s.name for s in mem.store.sessions("p")}
        if op == "seal" and session in sessions:
            mem.seal(session)
        elif op == "forget" and mem.status().turns:
            ids = [t.id for t in mem.turns()]
            mem.forget(turns=rnd.sample(ids, min(n, len(ids))))
        elif op == "forget_session" and session in sessions:
            mem.forget(session=session)
        else:
            for i in range(clock, clock + n):
                mem.add(
                    {
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": f"Note {i} about w{i % 5}.",
                        "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
                    },
                    session=session,
                )
            clock += n
        check_tree(mem)
    for s in mem.store.sessions("p"):
        mem.seal(s.name)
    check_tree(mem)
    assert len(mem.store.nodes.coverage("p", 1)) == mem.status().turns


# --- PostgreSQL ---------------------------------------------------------------------------


def _rows_with_marker(conn: psycopg.Connection, schema: str) -> dict[str, int]:
    tables = [
        r[0]
        for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s AND table_type = 'BASE TABLE'",
            (schema,),
        ).fetchall()
    ]
    out = {}
    for t in tables:
        q = sql.SQL("SELECT count(*) FROM {}.{} x WHERE x::text ILIKE %s").format(
            sql.Identifier(schema), sql.Identifier(t)
        )
        n = conn.execute(q, (f"%{MARK}%",)).fetchone()[0]
        if n:
            out[t] = n
    return out


def _files_with_marker(conn: psycopg.Connection, schema: str) -> list[str]:
    conn.execute("CHECKPOINT")
    data_dir = Path(conn.execute("SHOW data_directory").fetchone()[0])
    rels = conn.execute(
        "SELECT c.relname, pg_relation_filepath(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND pg_relation_filepath(c.oid) IS NOT NULL "
        "UNION SELECT t.relname, pg_relation_filepath(t.oid) FROM pg_class c JOIN pg_namespace n "
        "ON n.oid = c.relnamespace JOIN pg_class t ON t.oid = c.reltoastrelid WHERE n.nspname = %s",
        (schema, schema),
    ).fetchall()
    hits = []
    needle = MARK.lower().encode()
    for name, rel in rels:
        for path in data_dir.glob(rel + "*"):
            if needle in path.read_bytes().lower():
                hits.append(name)
    return sorted(set(hits))


def test_postgres_forget_leaves_no_row_and_after_vacuum_full_no_table_file_with_the_marker(pg_dsn: str):
    schema = fresh_schema(pg_dsn, "fg")
    store = open_store(schema_url(pg_dsn, schema))
    mem = Memory(store, namespace="alice", config=CFG)
    mem.embedder = CachedEmbedder(HashEmbedder(), store.embeddings)
    try:
        fill(mem)
        mem.context("locker code", budget=300)
        store.conversations.put(ConversationState("alice", "s1", summary=f"checkpoint {MARK}"))
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert "turns" in _rows_with_marker(conn, schema)
            assert "turns" in _files_with_marker(conn, schema)
        report = mem.forget(turns=[marker_turn(mem)])
        assert report.turns == 1
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert _rows_with_marker(conn, schema) == {}
        mem.store.forgetting.vacuum()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            assert _files_with_marker(conn, schema) == []
        check_tree(mem)
        assert MARK not in mem.context("locker code", budget=2000, format="text").text
    finally:
        mem.close()


def test_postgres_forget_of_a_session_and_a_namespace_matches_sqlite(pg_dsn: str, tmp_path: Path):
    results = []
    for store in (open_store(str(tmp_path / "d.db")), open_store(schema_url(pg_dsn, fresh_schema(pg_dsn, "fd")))):
        mem = Memory(store, namespace="alice", config=CFG)
        try:
            fill(mem, 20, session="s1")
            fill(mem, 12, session="s2", marker_at=None, start=100)
            bob = mem.for_namespace("bob")
            fill(bob, 4, marker_at=None)
            r1 = mem.forget(session="s1")
            tree = [(n.level, n.turn_count, n.seq_range) for n in mem.pyramid.nodes()]
            check_tree(mem)
            r2 = mem.forget(all_namespace=True)
            results.append(
                (r1.turns, r1.sessions, tree, r2.turns, [(n.namespace, n.turns, n.sessions) for n in mem.namespaces()])
            )
        finally:
            mem.close()
    assert results[0] == results[1]
    assert results[0][-1] == [("bob", 4, 1)]


def test_session_logs_of_a_project_are_rewritten_without_the_forgotten_turns(tmp_path: Path):
    from stratamem.state.sessionlog import SessionLogs

    project = tmp_path / "proj"
    project.mkdir()
    mem = Memory(tmp_path / "m.db", namespace="alice", config=CFG, project_dir=project)
    fill(mem, 8, marker_at=3)
    fill(mem, 3, session="s2", marker_at=None, start=50)
    logs = SessionLogs(project, "alice")
    logs.rebuild(mem.store)
    assert marker_files(project) == ["s1.jsonl"]
    mem.forget(turns=[marker_turn(mem)])
    assert marker_files(project) == []
    assert [r["id"] for r in logs.read("s1")] == [t.id for t in mem.turns("s1")]
    mem.forget(session="s2")
    assert not logs.path("s2").exists()
    mem.close()
