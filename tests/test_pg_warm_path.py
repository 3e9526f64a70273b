"""PostgreSQL's per-call costs on the warm path (issue 28): no full count of the turns, no round trip per checkout.

A namespace's turn ids commit in order, so the agent loop never counts every
turn. The recall index checks that it holds every turn of its namespace before each
``context()``. Where a committed turn's id is above every id committed before
it (``ids_commit_in_order``), reading the turns above its newest id is enough;
otherwise it counts every turn of the namespace, twice per agent-loop step,
which at 1M turns is most of a warm call.

Opening the recall index reads every turn's vector, term ids and sentence
vectors: in psycopg's default text format a ``BYTEA`` crosses the wire as
twice as many hex digits, which the client then decodes, so those bulk
reads ask for binary rows (the same values, about half the time at 100k
turns). The sentence blobs are unpacked in one pass, exactly as one by one.

The pool hands out a quiet connection without a round trip (it checked each
one with an empty statement, about a third of a warm call's statements), and
still replaces one the server has ended.

These tests run on a real PostgreSQL (pgserver): the appends' ordering under
two concurrent writers, and the statements sent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.embed.quantize import encode_int2, int2_rows
from stratamem.records import Turn
from stratamem.retrieve.sentence_rows import SentenceRows
from stratamem.store.base import TurnBatch
from stratamem.store.open import open_store


@pytest.fixture
def url(pg_dsn: str) -> str:
    return schema_url(pg_dsn, fresh_schema(pg_dsn, "ao"))


def _batch(session: str, n: int) -> list[TurnBatch]:
    return [TurnBatch(session, [Turn("user", f"{session} says {i}") for i in range(n)], [3] * n)]


def _waiting(dsn: str, pids: set[int]) -> bool:
    """Whether some stratamem connection other than ``pids`` waits on a lock."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'stratamem' AND wait_event_type = 'Lock'"
        ).fetchall()
    return any(r[0] not in pids for r in rows)


def test_a_second_append_to_the_namespace_takes_no_id_until_the_first_commits(pg_dsn: str, url: str) -> None:
    """Writer B (another session of the namespace) waits for writer A's commit *before* its turns take ids:
    otherwise A could commit its lower ids after B's, and a reader that saw B's turns would miss A's."""
    first, second = open_store(url), open_store(url)
    try:
        first.append("ns", _batch("a", 2))  # the namespace and its rows exist
        done: list[Any] = []
        with first.transaction():
            mine = first.append("ns", _batch("a", 3))
            with first.connection() as conn:
                pid = conn.info.backend_pid
                seq_before = conn.execute("SELECT last_value FROM turns_id_seq").fetchone()[0]
            writer = threading.Thread(target=lambda: done.append(second.append("ns", _batch("b", 4))))
            writer.start()
            deadline = time.monotonic() + 30
            while not _waiting(pg_dsn, {pid}) and writer.is_alive() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert writer.is_alive() and not done, "B finished while A's append was uncommitted"
            with first.connection() as conn:
                seq_while_waiting = conn.execute("SELECT last_value FROM turns_id_seq").fetchone()[0]
        writer.join(30)
        (theirs,) = done
        assert seq_while_waiting == seq_before  # B drew no id while it waited
        assert min(t.id for t in theirs) > max(t.id for t in mine)
        assert first.ids_commit_in_order is True
    finally:
        first.close()
        second.close()


class _Statements:
    """Every statement the process sends to PostgreSQL while it is open (psycopg's cursor, observed)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[str] = []
        self.binary: list[bool] = []
        original = psycopg.Cursor.execute

        def execute(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            self.sent.append(query if isinstance(query, str) else query.as_string(cursor.connection))
            self.binary.append(cursor.format == psycopg.pq.Format.BINARY)
            return original(cursor, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.Cursor, "execute", execute)

    def full_counts(self) -> list[str]:
        """Statements that count every turn of the namespace (not only those above an id)."""
        return [s for s in self.sent if "COUNT(*)" in s and "FROM turns" in s and "t.id >" not in s]


@pytest.fixture
def flat_memories(url: str) -> Iterator[tuple[Memory, Memory]]:
    flat = Config().replace(pyramid={"enabled": False})
    mem = Memory(open_store(url), namespace="ns", config=flat, embedder=None)
    other = Memory(open_store(url), namespace="ns", config=flat, embedder=None)
    yield mem, other
    mem.close()
    other.close()


def test_the_agent_loop_on_postgres_never_counts_every_turn_of_the_namespace(
    flat_memories: tuple[Memory, Memory], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After this process's own ``add``, no full ``COUNT`` in ``add`` or ``context``; after another writer's
    turns the index still catches up (from the turns above its newest id)."""
    mem, other = flat_memories
    mem.add([{"role": "user", "content": f"the vault code is {1000 + i}"} for i in range(20)], session="s")
    mem.context("vault code")
    ran = _Statements(monkeypatch)
    mem.context("vault code")
    for i in range(3):
        mem.add({"role": "user", "content": f"the locker code is {2000 + i}"}, session="s")
        assert "2000" in mem.context("locker code").text
    assert ran.full_counts() == []
    other.add({"role": "user", "content": "the vault code is now 5150"}, session="t")  # another writer, session
    assert "5150" in mem.context("vault code now").text
    assert len(mem._recall_index()) == 24


def test_a_quiet_pooled_connection_is_handed_out_without_a_round_trip(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(url)
    try:
        store.append("ns", _batch("a", 2))
        ran = _Statements(monkeypatch)
        for _ in range(5):
            assert store.turn_count("ns") == 2
        assert ran.sent == ["SELECT COUNT(*) FROM turns t WHERE t.namespace = %s"] * 5
    finally:
        store.close()


def test_a_pooled_connection_the_server_ended_is_replaced_on_checkout(pg_dsn: str, url: str) -> None:
    store = open_store(url)  # one connection kept in the pool (min_connections=1)
    try:
        store.append("ns", _batch("a", 2))
        with store.connection() as conn:
            pid = conn.info.backend_pid
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
            deadline = time.monotonic() + 30
            while admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone():
                assert time.monotonic() < deadline, "the backend did not end"
                time.sleep(0.01)
        assert store.turn_count("ns") == 2  # no error: the ended connection was dropped at checkout
        with store.connection() as conn:
            assert conn.info.backend_pid != pid
    finally:
        store.close()


def test_opening_the_recall_index_reads_its_blobs_as_binary_rows(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from stratamem.testing.hash_embedder import HashEmbedder

    flat = Config().replace(pyramid={"enabled": False})
    chat = [
        {
            "role": "user",
            "content": f"My sister Ana{i} moved to Porto{i} last spring after a long search. "
            f"She found a flat near the river{i} with a small balcony full of plants. Her cat Pim{i} sleeps there.",
        }
        for i in range(30)
    ]
    with Memory(open_store(url), namespace="ns", config=flat, embedder=HashEmbedder(dimensions=32)) as mem:
        mem.add(chat, session="s")
        want = mem.context("where does Ana3 live").text
    with Memory(open_store(url), namespace="ns", config=flat, embedder=HashEmbedder(dimensions=32)) as mem:
        ran = _Statements(monkeypatch)
        assert mem.context("where does Ana3 live").text == want  # the same index, read as binary rows
    bulk = {
        "index rows": "SELECT turn_id, term_ids, vector,",
        "sentence blobs": "SELECT turn_id, vectors FROM recall_passages",
        "turn keys": "SELECT t.id, CAST(",
    }
    for what, marker in bulk.items():
        sent = [b for q, b in zip(ran.sent, ran.binary, strict=True) if marker in q]
        assert sent == [True], (what, sent)


@settings(max_examples=40, deadline=None)
@given(
    counts=st.lists(st.integers(min_value=0, max_value=5), min_size=0, max_size=12),
    dims=st.sampled_from([3, 8, 33]),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_sentence_blobs_decoded_in_one_pass_equal_one_by_one(counts: list[int], dims: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    blobs = {
        100 + i: b"".join(encode_int2(rng.standard_normal((n, dims)).astype(np.float32))) if n else b""
        for i, n in enumerate(counts)
    }
    blobs[999] = b"\x01\x02\x03" * 7  # a damaged blob (not a whole number of vectors, for these sizes)
    got = SentenceRows.decode(blobs, dims)
    size = (dims + 3) // 4
    whole = {t: b for t, b in blobs.items() if b and not len(b) % size}
    assert sorted(got) == sorted(whole)
    for tid, blob in whole.items():
        one = np.vstack([int2_rows(blob[i : i + size], dims) for i in range(0, len(blob), size)])
        assert got[tid].dtype == np.int8 and np.array_equal(got[tid], one)
