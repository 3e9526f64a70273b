"""The canonical record written once (store/record_store.py): append across insert chunks, on both backends.

``append`` inserts turns in multi-row statements of ``CHUNK // 11`` rows and
matches the returned ids by ``(session, seq)``; these tests cross those
boundaries with interleaved sessions and check what was stored, exactly.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from pg import fresh_schema

from stratamem.records import Turn
from stratamem.store.base import TurnBatch
from stratamem.store.postgres.store import PostgresStore
from stratamem.store.sql import CHUNK
from stratamem.store.sqlite.store import SQLiteStore

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
PER_INSERT = CHUNK // 11


def _batches(plan: list[tuple[str, int]]) -> list[TurnBatch]:
    out, k = [], 0
    for session, n in plan:
        turns = [
            Turn(
                role="user" if (k + i) % 2 else "assistant",
                content=f"turn {k + i} of {session}",
                timestamp=T0 + timedelta(seconds=k + i),
            )
            for i in range(n)
        ]
        out.append(TurnBatch(session, turns, [k + i + 1 for i in range(n)]))
        k += n
    return out


def _check_append(store: SQLiteStore | PostgresStore, plan: list[tuple[str, int]]) -> None:
    batches = _batches(plan)
    stored = store.append("ns", batches)
    sent = [(b.session, t, tok) for b in batches for t, tok in zip(b.turns, b.tokens, strict=True)]
    # Input order, each turn with its own session, content and token count.
    assert [(s.session, s.turn, s.tokens) for s in stored] == sent
    assert len({s.id for s in stored}) == len(stored)
    for session in {s for s, _ in plan}:
        mine = [s for s in stored if s.session == session]
        # Gap-free sequences per session, in input order, read back exactly as returned.
        assert [s.seq for s in mine] == list(range(1, len(mine) + 1))
        assert store.turns("ns", session) == mine
    ids = [s.id for s in stored]
    assert sorted(t.id for t in store.turns("ns", ids=ids)) == sorted(ids)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 2 * PER_INSERT + 3)), max_size=4))
def test_append_stores_every_turn_once_in_order_across_insert_chunks(plan: list[tuple[str, int]]) -> None:
    store = SQLiteStore(":memory:")
    try:
        _check_append(store, plan)
        assert store.turn_count("ns") == sum(n for _, n in plan)
    finally:
        store.close()


def test_append_across_insert_chunks_on_postgres(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn, schema=fresh_schema(pg_dsn, "rs"))
    try:
        _check_append(store, [("b", PER_INSERT + 5), ("a", 3), ("b", PER_INSERT), ("c", 0)])
        assert [s.name for s in store.sessions("ns")] == ["b", "a"]  # created in input order, not name order
        assert store.turn_count("ns") == 2 * PER_INSERT + 8
    finally:
        store.close()
