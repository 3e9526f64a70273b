"""The warm ``context()`` path keeps its answers while its per-call costs stop growing with the namespace (issue 28).

Each structure made incremental here is checked against the plain computation
it replaced: the summary cosines (one matrix-vector product over a stack of
the summaries' vectors kept across calls, instead of a Python pass over every
summary), the sentence/passage vectors grown in place (instead of copied whole
after every ``add``), and the system prompts of a session read through the
partial index of system turns (instead of a scan of the session), on both
backends. Real SQLite files and a real PostgreSQL (pgserver); the embedder is
the documented offline :class:`~stratamem.testing.HashEmbedder`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.context.dedup import Shown
from stratamem.context.history import pack_checked
from stratamem.context.sources import VECTOR_FLOOR, SummaryIndex, _Stack
from stratamem.records import StoredTurn, Turn
from stratamem.retrieve import HybridIndex
from stratamem.retrieve import updates as updates_module
from stratamem.retrieve.engine import Hit
from stratamem.retrieve.passages import PassageVectors
from stratamem.retrieve.plan import QueryPlan
from stratamem.retrieve.updates import find_updates
from stratamem.retrieve.vector_rows import VectorRows
from stratamem.store.base import TurnBatch
from stratamem.store.open import open_store
from stratamem.store.sqlite import SQLiteStore
from stratamem.testing.hash_embedder import HashEmbedder
from stratamem.tokens import BPETokenizer

T0 = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)
_TOPICS = ["paid rent in Paris", "baked bread with rye", "fixed the bike chain", "planned a trip to Rome"]


# --- summary cosines --------------------------------------------------------------------------


def _naive_cosines(mem: Memory, units: list[Any], query: str) -> list[float]:
    """What the ranking's vector score was before issue 28: per summary, in Python."""
    q = np.asarray(mem.pyramid.embedder.embed_batch([query]), dtype=np.float32)[0]
    out = []
    for u in units:
        v = mem.pyramid.embedding(u.id)
        norm = float(np.linalg.norm(v))
        cos = float(v @ q) / norm if norm > 0 else 0.0
        out.append(max(0.0, (cos - VECTOR_FLOOR) / (1.0 - VECTOR_FLOOR)))
    return out


def test_summary_cosines_follow_the_pyramid_and_equal_the_per_summary_formula(tmp_path: Path) -> None:
    cfg = Config().replace(pyramid={"micro_chunk_size": 4, "mini_chunk_size": 3, "hot_chunks": 1})
    mem = Memory(str(tmp_path / "m.db"), config=cfg, embedder=HashEmbedder(32))
    queries = ["Paris rent", "rye bread", "bike chain", "Rome trip"]
    seen_vectors = 0
    for step in range(12):
        mem.add(
            [
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"Step {step}: Ana {_TOPICS[(step + i) % 4]} ({i}).",
                    "timestamp": (T0 + timedelta(days=2 * step, minutes=i)).isoformat(),
                }
                for i in range(3)
            ],
            session=f"s{step // 5}",
        )
        for q in queries:
            grown = mem._summary_index.rank(mem.pyramid, q, limit=1000)
            fresh = SummaryIndex().rank(mem.pyramid, q, limit=1000)
            assert [u.id for u in grown] == [u.id for u in fresh]
            # The same vectors in another row order of the stacked matrix: its product may round the
            # last float32 bit differently (seen with 6-bit turn vectors, whose means the summaries take).
            for g, f in zip(grown, fresh, strict=True):
                assert g.score == pytest.approx(f.score, abs=1e-6)
            with_vector = [u for u in grown if "vector" in u.score]
            expected = _naive_cosines(mem, with_vector, q)
            # The same formula in float32 (a matrix product sums in another order: last-bit differences).
            assert [u.score["vector"] for u in with_vector] == pytest.approx(expected, abs=1e-6)
            seen_vectors = max(seen_vectors, sum(v > 0 for v in expected))
    assert seen_vectors >= 3  # the vectors did rank something


@st.composite
def _stack_ops(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """Appends of documents (some without a vector), changed summaries and index rebuilds."""
    ops: list[tuple[str, Any]] = []
    next_id = 0
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["append", "append", "change", "rebuild"]))
        if kind == "append":
            n = draw(st.integers(1, 40))
            ops.append(("append", [(next_id + i, draw(st.booleans())) for i in range(n)]))
            next_id += n
        elif kind == "change" and next_id:
            ops.append(("change", draw(st.integers(0, next_id - 1))))
        elif kind == "rebuild":
            ops.append(("rebuild", draw(st.randoms(use_true_random=False)).random()))
    return ops


@settings(max_examples=60, deadline=None)
@given(ops=_stack_ops(), seed=st.integers(0, 2**32 - 1))
def test_the_stack_gives_each_document_its_cosine_through_appends_changes_and_rebuilds(
    ops: list[tuple[str, Any]], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    dim = 8
    vectors: dict[int, np.ndarray | None] = {}
    docs: list[int] = []
    stack = _Stack()

    def vector() -> np.ndarray:
        return rng.standard_normal(dim).astype(np.float32) * float(rng.uniform(0.5, 2.0))

    for kind, arg in ops:
        if kind == "append":
            for node_id, has in arg:
                vectors[node_id] = vector() if has else None
            stack.extend([n for n, _ in arg], [vectors[n] for n, _ in arg])
            docs += [n for n, _ in arg]
        elif kind == "change":
            vectors[arg] = vector()
            stack.drop(arg)
        else:  # the index rebuilt: documents kept in a new order, some left out
            keep = [d for d in docs if (d * 2654435761 + int(arg * 1000)) % 5]
            stack.restart()
            stack.extend(keep, [vectors[d] for d in keep])
            docs = keep
        if kind == "change":  # SummaryIndex rebuilds after a change
            stack.restart()
            stack.extend(docs, [vectors[d] for d in docs])
        q = rng.standard_normal(dim).astype(np.float32)
        got = stack.cosines(q)
        if all(vectors[d] is None for d in vectors):
            assert got is None
            continue
        assert got is not None and len(got) == len(docs) == stack.rows
        for i, d in enumerate(docs):
            v = vectors[d]
            want = 0.0 if v is None else float(v @ q) / float(np.linalg.norm(v.astype(np.float64)))
            assert got[i] == pytest.approx(want, abs=1e-5)


# --- sentence / passage vectors -------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    batches=st.lists(st.lists(st.integers(0, 4), min_size=1, max_size=30), min_size=1, max_size=12),
    seed=st.integers(0, 2**32 - 1),
)
def test_passage_vectors_added_batch_by_batch_give_the_best_cosine_of_each_turn(
    batches: list[list[int]], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    pv = PassageVectors()
    rows: dict[int, list[np.ndarray]] = {}
    pos = 0
    q = rng.standard_normal(6).astype(np.float32)
    for counts in batches:
        made = [rng.standard_normal((c, 6)).astype(np.float32) for c in counts]
        positions = list(range(pos, pos + len(counts)))
        pv.add(positions, made)
        for p, m in zip(positions, made, strict=True):
            rows.setdefault(p, []).extend(m)
        pos += len(counts)
        turn = rng.standard_normal(pos)
        got = pv.best(q, turn)
        want = turn.copy()
        for p, vs in rows.items():
            for v in vs:
                want[p] = max(want[p], float(v @ q))
        assert got.tolist() == pytest.approx(want.tolist(), abs=1e-6)
        assert len(pv) == sum(len(v) for v in rows.values())
        assert pv.turns == {p for p, vs in rows.items() if vs}


# --- system prompts, both backends ----------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        s: Any = SQLiteStore(tmp_path / "w.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        s = open_store(schema_url(dsn, fresh_schema(dsn, "wp")))
    yield s
    s.close()


def _fill(store: Any) -> None:
    """Two sessions of 300 turns, a system prompt at the start of each and one more in ``b``."""
    for name in ("a", "b"):
        turns = [Turn("system", f"You help {name}, first.", timestamp=T0)]
        turns += [
            Turn("user" if i % 2 else "assistant", f"{name} says {i}", timestamp=T0 + timedelta(minutes=i))
            for i in range(1, 300)
        ]
        if name == "b":
            turns.append(Turn("system", "You help b, second.", timestamp=T0 + timedelta(hours=9)))
        store.append("ns", [TurnBatch(name, turns, [3] * len(turns))])


def test_a_sessions_system_turns_are_read_exactly(store: Any) -> None:
    _fill(store)
    for session in ("a", "b", None):
        everything = store.turns("ns", session)
        want = [(t.session, t.seq, t.text) for t in everything if t.role == "system"]
        got = store.turns("ns", session, role="system")
        assert [(t.session, t.seq, t.text) for t in got] == want
        newest = store.turns("ns", session, role="system", newest_first=True, limit=1)
        assert [(t.session, t.seq) for t in newest] == [(t.session, t.seq) for t in everything if t.role == "system"][
            -1:
        ]
    assert [t.text for t in store.turns("ns", "b", role="system")] == ["You help b, first.", "You help b, second."]
    assert len(store.turns("ns", "a", role="user")) == 150  # other roles as before


def test_sqlite_reads_a_sessions_system_turns_through_the_partial_index(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "w.db")
    try:
        _fill(store)
        ran: list[str] = []
        store.connection.set_trace_callback(ran.append)  # type: ignore[attr-defined]
        store.turns("ns", "b", role="system")
        store.connection.set_trace_callback(None)  # type: ignore[attr-defined]
        (statement,) = [s for s in ran if "FROM turns" in s]
        plan = " | ".join(r[-1] for r in store.connection.execute("EXPLAIN QUERY PLAN " + statement))
        # Not the (session_id, seq) index, which reads every turn of the session.
        assert "USING INDEX turns_system" in plan and "sqlite_autoindex_turns" not in plan, plan
    finally:
        store.close()


# --- the recall index's step check ----------------------------------------------------------


def _full_counts(ran: list[str]) -> list[str]:
    """Statements that count every turn of the namespace (not only those above an id)."""
    return [s for s in ran if "COUNT(*)" in s and "FROM turns" in s and "t.id >" not in s]


def test_the_agent_loop_on_sqlite_never_counts_every_turn_of_the_namespace(tmp_path: Path) -> None:
    """The in-step check of the recall index: after nothing, or after this process's own ``add``, no full
    ``COUNT`` (it read every turn: issue 28); after another writer's turns, checked and caught up."""
    flat = Config().replace(pyramid={"enabled": False})
    mem = Memory(tmp_path / "c.db", namespace="ns", config=flat, embedder=None)
    other = Memory(tmp_path / "c.db", namespace="ns", config=flat, embedder=None)
    try:
        mem.add([{"role": "user", "content": f"the vault code is {1000 + i}"} for i in range(20)], session="s")
        mem.context("vault code")
        ran: list[str] = []
        mem.store.connection.set_trace_callback(ran.append)  # type: ignore[attr-defined]
        mem.context("vault code")
        for i in range(3):
            mem.add({"role": "user", "content": f"the locker code is {2000 + i}"}, session="s")
            assert "2000" in mem.context("locker code").text
        assert not _full_counts(ran)
        other.add({"role": "user", "content": "the vault code is now 5150"}, session="s")  # another writer
        ran.clear()
        assert "5150" in mem.context("vault code now").text
        assert _full_counts(ran)  # checked in full, and caught up
    finally:
        mem.close()
        other.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_recall_index_follows_this_and_other_writers_and_a_forget(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        url = str(tmp_path / "f.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        url = schema_url(dsn, fresh_schema(dsn, "wf"))
    flat = Config().replace(pyramid={"enabled": False})
    mem = Memory(open_store(url), namespace="ns", config=flat, embedder=None)
    other = Memory(open_store(url), namespace="ns", config=flat, embedder=None)
    try:
        mem.add(
            [{"role": "user", "content": f"note {i}: the vault code is {1000 + i}"} for i in range(10)], session="s"
        )
        assert "1003" in mem.context("vault code 1003").text
        mem.add({"role": "user", "content": "the kayak is blue"}, session="s")  # this writer
        assert "kayak is blue" in mem.context("kayak").text
        other.add({"role": "user", "content": "the canoe is green"}, session="s")  # another writer
        assert "canoe is green" in mem.context("canoe").text
        mem.add({"role": "user", "content": "the raft is red"}, session="s")  # this one again, after the other
        assert "raft is red" in mem.context("raft").text
        (kayak,) = [t.id for t in other.store.turns("ns", "s") if "kayak" in t.text]
        other.forget(turns=[kayak])  # taken away elsewhere
        assert "kayak" not in mem.context("kayak").text
        assert len(mem._recall_index()) == 12
    finally:
        mem.close()
        other.close()


# --- one pass over each matrix, one strip per registry, readings remembered ------------------------


def _day(tid: int, session: str, text: str, days: int, name: str = "Ana") -> StoredTurn:
    return StoredTurn(tid, "n", session, tid, 10, Turn("user", text, name=name, timestamp=T0 + timedelta(days=days)))


def test_a_question_with_sub_queries_reads_each_vector_matrix_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Main scored each sub-query with its own pass over the turn and the sentence vectors (2 × 3 passes
    here); the rows are now converted once a block and multiplied by every query vector (2 passes)."""
    index = HybridIndex(embedder=HashEmbedder(32))
    index.add_turns(
        [
            _day(
                i,
                f"s{i}",
                f"We talked about the garden and the tomatoes again on day {i}. The rye bread was baked "
                f"in the old oven by the window. Ana planned a long trip to Rome with her sister.",
                i,
            )
            for i in range(1, 30)
        ]
    )
    assert len(index._sentence_vectors) and index.planning.sentence_mix > 0
    passes: list[int] = []
    inner = False
    for name in ("dots", "dots_many"):
        real = getattr(VectorRows, name, None)
        if real is None:
            continue

        def spy(self: VectorRows, *args: Any, _real: Any = real) -> Any:
            nonlocal inner
            if not inner:
                passes.append(len(self))
            inner, outer = True, inner
            try:
                return _real(self, *args)
            finally:
                inner = outer

        monkeypatch.setattr(VectorRows, name, spy)
    plan = QueryPlan("between", ("the bread in the oven", "the trip to Rome"))
    hits = index.search("How long between the garden talks?", k=5, plan=plan)
    assert hits
    assert sorted(passes) == sorted([len(index._corpus.vectors), len(index._sentence_vectors)])  # type: ignore[arg-type]


def test_packing_strips_a_text_against_the_same_registry_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A later round of :func:`pack_checked` that registers what the round before did asks no strip
    again: a ranking whose second turn repeats the first packed in 2 rounds asked 4 + 3 strips on main."""
    tok = BPETokenizer()
    texts = [
        "Ana baked rye bread in the old oven on Sunday morning.",
        "Ana baked rye bread in the old oven on Sunday morning!",
        "The bike chain was fixed at the shop near the station.",
        "Rent for the flat in Paris was paid on the first of May.",
    ]
    fresh = [_day(i + 1, "s", t, i) for i, t in enumerate(texts)]
    calls: list[str] = []
    real = Shown.strip

    def spy(self: Shown, text: str) -> Any:
        calls.append(text)
        return real(self, text)

    monkeypatch.setattr(Shown, "strip", spy)
    misses: list[Any] = []
    packed, shown, left = pack_checked(fresh, 1000, tok, "bread", {}, Shown(), misses, {})
    assert [st.id for st in packed.turns] == [1, 3, 4]
    assert [m.id for m in misses] == ["turn:2"] and [st.id for st in left] == [1, 3, 4]
    assert len(calls) == 4  # round 1 strips four texts; round 2 (the same registries) none


def test_find_updates_reads_a_turns_statements_once_across_contexts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Consecutive contexts recall the same turns: their readings (a parse of every clause) are
    remembered, so a second ``find_updates`` over the same hits parses nothing."""
    turns = {
        1: _day(1, "a", "I live in Denver with my two cats, and I work at the bakery downtown.", 0),
        2: _day(2, "b", "We moved to Austin last month, so now I live in Austin near the lake.", 90),
    }
    hits = [Hit(f"turn:{i}", "turn", (i,), {"fused": 1.0}) for i in (2, 1)]
    parsed: list[str] = []
    real = updates_module.readings

    def spy(text: str, speaker: str, names: Any = ()) -> Any:
        parsed.append(text)
        return real(text, speaker, names)

    monkeypatch.setattr(updates_module, "readings", spy)
    updates_module._readings.cache_clear()
    first = find_updates(hits, turns.__getitem__, lambda a, b: 0.9)
    assert sorted(parsed) == sorted(t.text for t in turns.values())
    parsed.clear()
    assert find_updates(hits, turns.__getitem__, lambda a, b: 0.9) == first
    assert parsed == []


def test_the_substance_prior_is_kept_between_queries_and_follows_new_turns() -> None:
    index = HybridIndex(embedder=HashEmbedder(16))
    index.add_turns([_day(i, "s", f"note {i} about the garden and tomatoes", i) for i in range(1, 6)])
    scale = index.weights.substance_terms
    first = index._corpus.substance(scale)
    assert index._corpus.substance(scale) is first and not first.flags.writeable
    index.add_turns([_day(9, "s", "a new note about the bread", 9)])
    grown = index._corpus.substance(scale)
    assert len(grown) == 6 and np.array_equal(grown[:5], first)
    assert np.array_equal(grown, 1.0 - np.exp(-index._corpus._lengths.view / scale))
