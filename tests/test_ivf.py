"""Approximate vector scans past a number of turns (issue 28): lists (IVF) over the vector rows.

The lists themselves (every row in exactly one, grown as rows arrive; probing
every list is the exact scan, bit for bit), and the path through a real
SQLite store with the threshold lowered: engaged, identical to the exact
index when every list is probed, and a forgotten turn never comes back.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem import Config, Memory
from stratamem.errors import ConfigError
from stratamem.records import Turn
from stratamem.retrieve.ivf import LISTS, Clusters, ScanSettings
from stratamem.retrieve.passages import PassageVectors
from stratamem.retrieve.vector_rows import BLOCK, VectorRows
from stratamem.store.sqlite import SQLiteStore
from stratamem.testing.hash_embedder import HashEmbedder


def _unit(rng: np.random.Generator, n: int, dims: int) -> np.ndarray:
    vec = rng.normal(size=(n, dims)).astype(np.float32)
    return vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)


def _every_row_once(clusters: Clusters, n: int) -> None:
    """Each of the ``n`` rows sits in exactly one list (the lists' rows, together, are 0..n-1 once each)."""
    assert clusters.size == n
    assert np.array_equal(clusters.rows(list(range(len(clusters)))), np.arange(n))


@settings(max_examples=20, deadline=None)
@given(
    first=st.integers(1, 2 * BLOCK + 100),
    later=st.lists(st.integers(1, 300), max_size=5),
    codes=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_every_row_is_in_exactly_one_list_as_rows_are_added(
    first: int, later: list[int], codes: bool, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    rows = VectorRows(16, codes=codes)
    rows.extend(_unit(rng, first, 16))
    q = _unit(rng, 1, 16)[0]
    rows.dots_probed([q], 3)  # the lists are made at the first approximate scan
    assert rows.clusters is not None
    _every_row_once(rows.clusters, first)
    n = first
    for size in later:  # the agent loop: rows arrive after the lists exist and join them
        rows.extend(_unit(rng, size, 16))
        n += size
        _every_row_once(rows.clusters, n)
    dots, scanned = rows.dots_probed([q], 3)
    # The probed rows are scored exactly (within float rounding: BLAS may sum a block of other rows in
    # another order); the others score 0.
    exact = rows.dots_many([q])[0]
    assert np.allclose(dots[0][scanned], exact[scanned], rtol=1e-5, atol=1e-6)
    assert not dots[0][np.setdiff1d(np.arange(n), scanned)].any()


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 3 * BLOCK), codes=st.booleans(), seed=st.integers(0, 2**16))
def test_probing_every_list_is_the_exact_scan_bit_for_bit(n: int, codes: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = VectorRows(24, codes=codes)
    rows.extend(_unit(rng, n, 24))
    qs = list(_unit(rng, 3, 24))
    dots, scanned = rows.dots_probed(qs, LISTS)
    assert np.array_equal(scanned, np.arange(n))
    assert np.array_equal(dots, rows.dots_many(qs))
    # The best sentence (or passage) per turn likewise: every row of every turn scanned.
    owners = np.sort(rng.integers(0, 50, n))
    sentences = PassageVectors()
    sentences.add(list(np.unique(owners)), [rows.take(np.flatnonzero(owners == o)) for o in np.unique(owners)])
    turn = [rng.random(50) for _ in qs]
    exact = sentences.best_many(qs, turn)
    for got, want in zip(sentences.best_many(qs, turn, LISTS), exact, strict=True):
        assert np.array_equal(got, want)


def test_the_settings_apply_from_their_row_count_and_zero_means_never() -> None:
    assert not ScanSettings(rows=10).applies(9) and ScanSettings(rows=10).applies(10)
    assert ScanSettings(rows=10).probe_for(9) is None and ScanSettings(rows=10, probe=3).probe_for(10) == 3
    assert not ScanSettings(rows=0).applies(10**9)
    assert ScanSettings().rows == 200_000 and Config().embedding.approximate_from == 200_000
    with pytest.raises(ConfigError, match="probe"):
        Config().replace(embedding={"probe": 0})


TOPICS = [
    "I adopted a grey cat named Pepper from the shelter last spring.",
    "My sister is training for the Lisbon marathon in October. She runs every morning.",
    "We repainted the kitchen a pale green colour over the weekend.",
    "The pottery class taught us to throw bowls on the wheel. Mine came out lopsided.",
    "I finished reading a novel about lighthouse keepers on a remote island.",
    "Our team moved the database to a new server and the queries got faster.",
]


def _memory(path: Path, approximate_from: int, probe: int) -> Memory:
    config = Config().replace(
        pyramid={"enabled": False}, embedding={"approximate_from": approximate_from, "probe": probe}
    )
    return Memory(SQLiteStore(path), namespace="ivf", embedder=HashEmbedder(), config=config)


def _fill(mem: Memory, turns: int) -> None:
    rng = np.random.default_rng(7)
    batch = []
    for i in range(turns):
        text = f"{TOPICS[int(rng.integers(len(TOPICS)))]} Note {i} about item {int(rng.integers(1000))}."
        batch.append(Turn(role="user" if i % 2 == 0 else "assistant", content=text))
    mem.add(batch, session="one")


QUESTIONS = [
    "What is the name of the cat I adopted?",
    "How many things did I finish reading and painting?",  # planned: several turns, sentences scanned
    "Which city is the marathon in?",
]


def test_a_store_past_the_lowered_threshold_scans_through_lists_and_all_lists_equal_exact(tmp_path: Path) -> None:
    exact = _memory(tmp_path / "s.db", 0, 1)
    _fill(exact, 400)
    approx = _memory(tmp_path / "s.db", 100, LISTS)
    for q in QUESTIONS:
        want = [(h.id, h.score) for h in exact.search(q, k=10)]
        assert [(h.id, h.score) for h in approx.search(q, k=10)] == want
    index = approx._recall_index()
    assert index.scan == ScanSettings(100, LISTS) and exact._recall_index().scan == ScanSettings(0, 1)
    # Engaged: the turn rows have lists, and so do the sentence rows of the planned question.
    assert index._corpus.vectors is not None and index._corpus.vectors.clusters is not None
    assert exact._recall_index()._corpus.vectors.clusters is None
    assert index.plan(QUESTIONS[1]).multi and index._sentence_vectors._matrix.clusters is not None
    # Turns added later join the lists (the agent loop), and are found.
    approx.add([Turn(role="user", content="I bought a red kayak for the lake trips.")], session="one")
    assert approx.search("red kayak lake", k=1)[0].text.endswith("red kayak for the lake trips.")
    index = approx._recall_index()
    assert index._corpus.vectors.clusters.size == len(index)


def test_each_matrix_is_scanned_by_its_own_rows_the_sentences_before_the_turns(tmp_path: Path) -> None:
    """Issue 28: at 100k turns the ~255k sentence rows were scanned in full (most of a planned question's
    scans) because the threshold counted turns. Each matrix now goes by its own rows: here the sentence
    rows pass it, the turn rows do not."""
    exact = _memory(tmp_path / "m.db", 0, 1)
    _fill(exact, 400)
    mem = _memory(tmp_path / "m.db", 600, 4)
    single, planned = QUESTIONS[0], QUESTIONS[1]
    index = mem._recall_index()
    assert not index.plan(single).multi and index.plan(planned).multi
    # The turn rows are below the threshold: a question without a plan is ranked exactly, bit for bit.
    assert [(h.id, h.score) for h in mem.search(single, k=10)] == [(h.id, h.score) for h in exact.search(single, k=10)]
    mem.search(planned, k=10)
    sentences = index._sentence_vectors
    assert len(index) == 400 < 600 <= len(sentences)
    assert index._corpus.vectors is not None and index._corpus.vectors.clusters is None
    assert sentences._matrix is not None and sentences._matrix.clusters is not None
    # Probing every list of the sentence rows gives the exact planned ranking.
    every = _memory(tmp_path / "m.db", 600, LISTS)
    assert [(h.id, h.score) for h in every.search(planned, k=10)] == [
        (h.id, h.score) for h in exact.search(planned, k=10)
    ]


def test_a_forgotten_turn_never_comes_back_through_the_lists(tmp_path: Path) -> None:
    mem = _memory(tmp_path / "f.db", 100, 4)
    _fill(mem, 300)
    mem.add([Turn(role="user", content="My locker code at the gym is 4417 and I never share it.")], session="one")
    hits = mem.search("locker code at the gym", k=5)
    secret = [h for h in hits if "4417" in h.text]
    assert secret and mem._recall_index()._corpus.vectors.clusters is not None
    mem.forget(turns=[secret[0].turn_ids[0]])
    for q in ("locker code at the gym", "what is my locker code", "4417"):
        assert all("4417" not in h.text for h in mem.search(q, k=50))
        assert "4417" not in mem.context(q, budget=2000).text
    # The index reopened without it: its lists hold every remaining row once, the forgotten one in none.
    index = mem._recall_index()
    assert index._corpus.vectors.clusters is not None
    _every_row_once(index._corpus.vectors.clusters, len(index))
    assert all("4417" not in index.turn(st.id).text for st in index.turns)
