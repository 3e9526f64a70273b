"""The agent loop's slow calls at 100k turns, cut without changing an answer (issue 28).

Two causes of the loop's p95 (``benchmarks/context_latency.py --loop-in-place``):
a ``pair`` question ("When did Ana and Ben …") scanned every vector matrix once
for each of its three query vectors although its two sub-queries have one
vector (the speaker names are not embedded), and the first ``add`` after the
index opened, or after the sentence rows were stacked, copied the whole matrix
into a larger buffer. Each fix is checked here against the computation it
replaced; the embedder is the documented offline
:class:`~stratamem.testing.HashEmbedder`.
"""

from __future__ import annotations

import gc
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FunctionType, MethodType, ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem import Config, Memory, NotFoundError
from stratamem.memory.requests import current_session
from stratamem.records import StoredTurn, Turn
from stratamem.retrieve import HybridIndex
from stratamem.retrieve import scans as scans_module
from stratamem.retrieve.ivf import ScanSettings
from stratamem.retrieve.passages import PassageVectors
from stratamem.retrieve.plan import QueryPlan
from stratamem.retrieve.vector_rows import VectorRows, _Rows
from stratamem.store.open import open_store
from stratamem.testing.hash_embedder import HashEmbedder

T0 = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)
CONFIG = Config().replace(pyramid={"enabled": False})
_SAYS = [
    "We baked rye bread in the old oven. It rose well this time. The crust was dark.",
    "The trip to Rome is booked for May. We fly on a Tuesday. The hotel is near the station.",
    "I painted the fence green last weekend. It took two days. The neighbours liked it.",
    "We went to the pride festival together. The parade was long. We danced all evening.",
]


def _turn(i: int) -> StoredTurn:
    name = "Ana" if i % 2 == 0 else "Ben"
    text = f"{_SAYS[i % len(_SAYS)]} Day {i}."
    return StoredTurn(i, "n", f"s{i // 20}", i, 20, Turn("user", text, name=name, timestamp=T0 + timedelta(hours=i)))


def _index(turns: int) -> HybridIndex:
    index = HybridIndex(embedder=HashEmbedder(32))
    index.add_turns([_turn(i) for i in range(1, turns + 1)])
    return index


PAIR = (
    "When did Ana and Ben go to the festival together?",
    QueryPlan("pair", ("When did Ana go to the festival together?", "When did Ben go to the festival together?")),
)


def _breakdowns(hits: list[Any]) -> list[tuple[str, dict[str, float]]]:
    return [(h.id, h.score) for h in hits]


def test_a_pair_question_scans_its_one_sub_query_vector_once_and_ranks_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``main`` multiplied each matrix by three query vectors here (the question and two sub-queries whose
    vector texts are both "When did go to the festival together?"); now by the two distinct ones."""
    index = _index(120)
    query, plan = PAIR
    texts = [index.vector_text(q) for q in (query, *plan.subqueries)]
    assert texts[1] == texts[2] != texts[0]  # the names are not embedded: one vector for both sub-queries
    assert len(index._sentence_vectors) and index.planning.sentence_mix > 0

    # The same question with every query vector scanned, as before (no two vectors are ever merged).
    def every_vector(vectors: Any) -> tuple[list[Any], list[int]]:
        return list(vectors), list(range(len(vectors)))

    with monkeypatch.context() as m:
        m.setattr(scans_module, "distinct", every_vector)
        before = _breakdowns(index.search(query, k=20, plan=plan))

    widths: list[tuple[int, int]] = []
    real = VectorRows.dots_many

    def spy(self: VectorRows, queries: Any) -> Any:
        widths.append((len(self), len(queries)))
        return real(self, queries)

    monkeypatch.setattr(VectorRows, "dots_many", spy)
    after = _breakdowns(index.search(query, k=20, plan=plan))
    assert widths == [(len(index._corpus), 2), (len(index._sentence_vectors), 2)]  # type: ignore[arg-type]
    assert after == before  # the same hits, in the same order, with bit-for-bit the same breakdowns


@settings(max_examples=40, deadline=None)
@given(
    picks=st.lists(st.integers(0, 3), min_size=1, max_size=6),
    seed=st.integers(0, 2**16),
)
def test_scanning_distinct_vectors_gives_every_query_its_own_scans(picks: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    pool = [v / np.linalg.norm(v) for v in rng.standard_normal((4, 16)).astype(np.float32)]
    vectors = [pool[p].copy() for p in picks]  # repeats are equal vectors, not the same object
    turns = VectorRows(16, codes=True)
    turns.extend(rng.integers(-127, 128, size=(300, 16), dtype=np.int8))
    sentences = PassageVectors()
    sentences.add(range(0, 300, 3), [rng.integers(-7, 8, size=(1 + i % 3, 16), dtype=np.int8) for i in range(100)])
    got = scans_module.scan_queries(vectors, turns, sentences, None, ScanSettings(rows=0))
    for v, (q, dots, best, passage) in zip(vectors, got, strict=True):
        alone = turns.dots_many([v])[0]
        assert q is v and passage is None
        assert np.array_equal(dots, alone)  # bit for bit
        assert best is not None and np.array_equal(best, sentences.best_many([v], [alone])[0])
    arrays = [a for _, d, b, _ in got for a in (d, b)]
    assert len({id(a) for a in arrays}) == len(arrays)  # no two queries share an array


def test_the_loops_first_adds_copy_no_vector_matrix(tmp_path: Path) -> None:
    """``main`` adopted a first batch as the buffer, full: the first ``add`` after the index opened (turn
    vectors) and after the first planned question (sentence vectors) copied the whole matrix."""
    path = str(tmp_path / "loop.db")
    writer = Memory(path, namespace="n", embedder=HashEmbedder(32), config=CONFIG)
    writer.add([_turn(i).turn for i in range(1, 401)], session="one")
    writer.close()
    mem = Memory(path, namespace="n", embedder=HashEmbedder(32), config=CONFIG)
    query, plan = PAIR
    mem.context(query, budget=2000)  # opens the index from the store and stacks the sentence rows
    index = mem._recall_index()
    assert index.plan(query).shape == "pair"
    turn_rows, sentence_rows = index._corpus.vectors, index._sentence_vectors._matrix
    assert turn_rows is not None and sentence_rows is not None
    assert turn_rows.codes and sentence_rows.codes  # opened from the store: int8 codes and their norms
    held_sentences = len(sentence_rows)

    def buffers() -> list[np.ndarray]:
        return [m._buf for v in (turn_rows, sentence_rows) for m in (v._rows, v._inverse) if m is not None]

    held = buffers()
    for i in range(401, 431):  # the benchmark's 30 loop steps
        mem.add(_turn(i).turn, session="one")
        mem.context(query, budget=2000)
    assert len(index._corpus) == 430 and len(sentence_rows) > held_sentences
    assert all(a is b for a, b in zip(buffers(), held, strict=True))  # grown into, never copied


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 200), min_size=1, max_size=8), seed=st.integers(0, 2**16))
def test_rows_grown_by_claims_hold_every_row_in_order(sizes: list[int], seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = _Rows(np.int8, 5)
    parts = [rng.integers(-127, 128, size=(n, 5), dtype=np.int8) for n in sizes]
    for p in parts:
        before = rows._buf
        rows.extend(p)
        assert rows._buf is before or len(rows._buf) >= 2 * rows.n  # a grown buffer: room for as many again
    assert np.array_equal(rows.view, np.concatenate(parts))
    codes = VectorRows(5, codes=True)
    codes.extend_parts(parts)
    whole = VectorRows(5, codes=True)
    whole.extend(np.concatenate(parts))
    assert np.array_equal(codes._rows.view, whole._rows.view)
    assert codes._inverse is not None and whole._inverse is not None
    assert np.array_equal(codes._inverse.view, whole._inverse.view)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "v.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "lp"))


def test_a_context_checks_the_recall_index_against_the_store_once(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``main`` asked for the recall index twice per context (recall, then the vector text items and summaries
    rank with), each time reading the namespace's data version: on PostgreSQL a round trip each."""
    mem = Memory(open_store(store_url), namespace="n", embedder=HashEmbedder(32), config=CONFIG)
    mem.add([_turn(i).turn for i in range(1, 41)], session="one")
    mem.context("When did Ana go to the festival?", budget=2000)
    reads: list[str] = []
    real = type(mem.store).data_version

    def spy(self: Any, namespace: str) -> Any:
        reads.append(namespace)
        return real(self, namespace)

    monkeypatch.setattr(type(mem.store), "data_version", spy)
    for step in range(3):
        mem.add(_turn(41 + step).turn, session="one")
        reads.clear()
        ctx = mem.context("When did Ben paint the fence?", budget=2000)
        assert reads == ["n", "n"]  # the facade's staleness check, then the recall index's, once
        assert any(f"Day {41 + step}." in m["content"] for m in ctx.messages)  # the new turn is in it
    mem.close()


def test_a_context_without_a_session_finds_it_in_one_read(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``main`` asked whether the namespace exists, then for its newest session: two round trips on
    PostgreSQL where the newest session alone says both."""
    mem = Memory(open_store(store_url), namespace="n", embedder=HashEmbedder(32), config=CONFIG)
    mem.add([_turn(i).turn for i in range(1, 11)], session="one")
    mem.add(_turn(11).turn, session="two")
    asked: list[str] = []
    real = type(mem.store).has_namespace

    def spy(self: Any, namespace: str) -> Any:
        asked.append(namespace)
        return real(self, namespace)

    monkeypatch.setattr(type(mem.store), "has_namespace", spy)
    assert current_session(mem.store, "n", None) == "two"  # the newest turn's session
    mem.context("When did Ana bake bread?", budget=2000)
    assert asked == []  # found without asking whether the namespace exists
    assert current_session(mem.store, "n", "one") == "one" and asked == ["n"]  # a named session: checked
    with pytest.raises(NotFoundError):
        current_session(mem.store, "nowhere", None)  # an unknown namespace is still refused
    with pytest.raises(NotFoundError):
        Memory(mem.store, namespace="nowhere", embedder=HashEmbedder(32), config=CONFIG).context("anything")
    mem.close()


def _tracked_after_opening(path: str, namespace: str) -> int:
    """Objects the cyclic collector tracks once ``namespace``'s index is open and the process is collected."""
    mem = Memory(path, namespace=namespace, embedder=HashEmbedder(32), config=CONFIG)
    mem.context("When did Ana bake bread?", budget=2000)  # opens the index from the store
    gc.collect()
    gc.collect()  # (a tuple holding a tuple is let go one pass after it)
    tracked = len(gc.get_objects())
    mem.close()
    return tracked


def test_an_opened_index_leaves_the_collector_no_object_per_turn(tmp_path: Path) -> None:
    """``main`` kept a ``TurnKey`` (a named tuple: always tracked) per turn not recalled yet, so every full
    collection walked one object per turn (at 100k turns a 40-57 ms pause on about one loop call in 60).
    Opening 2,000 more turns now adds no tracked object per turn (measured: under 0.05 a turn)."""
    path = str(tmp_path / "gc.db")
    # (One vocabulary for both namespaces: the texts repeat, so only the number of turns differs.)
    turns = [replace(_turn(i).turn, content=_SAYS[i % len(_SAYS)]) for i in range(1, 2201)]
    writer = Memory(path, namespace="small", embedder=HashEmbedder(32), config=CONFIG)
    writer.add(turns[:200], session="one")
    writer.for_namespace("big").add(turns, session="one")
    writer.close()
    _tracked_after_opening(path, "small")  # modules and caches of a first context, out of the count
    small = _tracked_after_opening(path, "small")
    large = _tracked_after_opening(path, "big")
    assert (large - small) / 2000 < 0.05
    # Nor a container with an element per turn among what the index holds (each element is one more
    # visit per full collection): ``main`` held the keys and the role codes in lists of 2,200.
    mem = Memory(path, namespace="big", embedder=HashEmbedder(32), config=CONFIG)
    mem.context("When did Ana and Ben go to the festival together?", budget=2000)
    held, todo, seen = [], [mem._recall_index()], set()
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, type | ModuleType | FunctionType | MethodType):
            continue
        seen.add(id(o))
        if isinstance(o, list | dict | set) and len(o) >= 2000:
            held.append(f"{type(o).__name__} of {len(o)}")
        todo.extend(r for r in gc.get_referents(o) if gc.is_tracked(r))
    mem.close()
    assert held == []


def test_sentence_vectors_keep_no_container_with_an_element_per_turn() -> None:
    """``main`` kept the positions of the turns with sentence vectors in a set (~85k at 100k turns), the
    largest container a full collection walked (~1-3 ms of each at 100k)."""
    rng = np.random.default_rng(3)
    pv = PassageVectors()
    pv.add(range(3000), [rng.integers(-7, 8, size=(2, 16), dtype=np.int8) for _ in range(3000)])
    pv.best_many([np.ones(16, dtype=np.float32)], [np.zeros(3000)])  # stacks the rows
    pv.add([3000], [rng.integers(-7, 8, size=(3, 16), dtype=np.int8)])  # pending until the next query
    gc.collect()
    held, todo, seen = [], [pv], set()
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, type):
            continue
        seen.add(id(o))
        if isinstance(o, list | dict | set | tuple) and len(o) >= 3000:
            held.append(f"{type(o).__name__} of {len(o)}")
        todo.extend(r for r in gc.get_referents(o) if gc.is_tracked(r))
    assert held == []
    assert pv.turns == set(range(3001))  # (still given, made on demand)


def test_turn_slots_give_back_the_keys_and_turns_they_hold() -> None:
    """The slots hand out equal keys (and the full turns as stored) while keeping no key object."""
    from stratamem.retrieve.turn_slots import TurnSlots
    from stratamem.store.base_turn_index import TurnKey

    keys = [TurnKey(i, "n", "s", "Ana" if i % 2 else None, f"2024-01-0{i}T09:00:00Z") for i in range(1, 6)]
    full = _turn(3)
    slots = TurnSlots()
    slots.extend(keys)
    slots[2] = full
    slots.append(keys[0])
    assert len(slots) == 6 and slots[-1] == keys[0] and type(slots[0]) is TurnKey
    assert list(slots) == [keys[0], keys[1], full, keys[3], keys[4], keys[0]]
    assert slots[1:3] == [keys[1], full] and slots.ids(range(6)) == [1, 2, 3, 4, 5, 1]
    assert slots[4].timestamp == datetime(2024, 1, 5, 9, 0, tzinfo=UTC)
    gc.collect()
    assert not gc.is_tracked(slots._rows.view)  # (the array: the collector walks none of its slots)
