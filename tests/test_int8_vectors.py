"""Node and item vectors stored as int8 codes with a scale (store/vectors.py, ``m015_int8_vectors``).

Round trips stay within half a quantisation step; a store written before
m015 (float32 vectors) reads the same vectors, within that error, after it
migrates; and on a fixed corpus embedded by the real local MiniLM, item
search and summary ranking are the same before and after. Both backends.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from pg import fresh_schema, raw_rows, schema_url

from stratamem import Config
from stratamem.embed.quantize import int8_blob_size
from stratamem.errors import BackendError
from stratamem.items.api import Items
from stratamem.records import Summary, Turn
from stratamem.store import TurnBatch
from stratamem.store.new_rows import NewNode
from stratamem.store.open import open_store
from stratamem.store.sqlite.store import SQLiteStore
from stratamem.store.vectors import pack_vector, quantized, unpack_vector
from stratamem.tokens import get_tokenizer

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
TOKENIZER = get_tokenizer()

FACTS = [
    "Caroline went to the LGBTQ support group on Tuesday",
    "Melanie painted a sunrise over the lake last year",
    "The quarterly budget review moved to Friday afternoon",
    "Jon lost his job as a banker and opened a dance studio",
    "Gina's clothing store launched an online shop in March",
    "The kids love the camping trip to the mountains every summer",
    "Audrey adopted two dogs from the animal shelter",
    "The server migration to PostgreSQL finished without downtime",
]
QUERIES = [
    "support group meeting",
    "painting hobby",
    "when is the budget review",
    "new business after losing a job",
    "online store",
    "family holiday outdoors",
    "pets",
    "database move",
]
SUMMARIES = [
    "Caroline talks about her support group and adoption plans.",
    "Melanie describes her paintings and pottery class.",
    "The team plans the budget review and the database migration.",
    "Jon and Gina discuss their new businesses.",
]


# --- the codec ----------------------------------------------------------------------------------


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, width=32)


@given(arrays(np.float32, st.integers(1, 64), elements=finite))
def test_round_trip_is_within_half_a_quantisation_step(vec: np.ndarray) -> None:
    blob = pack_vector(vec.tobytes())
    assert len(blob) == int8_blob_size(len(vec))
    back = np.frombuffer(unpack_vector(blob), dtype=np.float32)
    step = float(np.abs(vec).max()) / 127
    assert back.shape == vec.shape
    assert np.all(np.abs(back - vec) <= step / 2 * (1 + 1e-5) + 1e-30)
    assert quantized(vec.tobytes()) == back.tobytes()


def test_codec_refuses_what_it_cannot_store() -> None:
    with pytest.raises(ValueError, match="multiple of 4"):
        pack_vector(b"\x00" * 6)
    with pytest.raises(ValueError, match="NaN"):
        pack_vector(np.array([1.0, np.nan], dtype=np.float32).tobytes())
    with pytest.raises(BackendError, match="shorter than its 4-byte scale"):
        unpack_vector(b"\x01\x02")


# --- both backends ------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """``(backend, location)`` of a fresh store; the test opens and reopens it."""
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "v.db")
    dsn = request.getfixturevalue("pg_dsn")
    return "postgres", schema_url(dsn, fresh_schema(dsn, "q"))


def _float32(store: Any, table: str, key: int, vec: np.ndarray) -> None:
    """Write ``vec`` as the pre-m015 schema held it (float32 blob / exact pgvector value)."""
    if store.backend == "sqlite":
        raw_rows(store, f"UPDATE {table} SET embedding = %s WHERE id = %s", (vec.astype(np.float32).tobytes(), key))
    else:
        raw_rows(
            store,
            f"UPDATE {table} SET embedding = CAST(%s AS real[])::vector WHERE id = %s",
            (vec.astype(np.float32).tolist(), key),
        )


def _items(store: Any, embedder: Any) -> Items:
    return Items(store, "ns", tokenizer=TOKENIZER, config=Config().items, embedder=embedder)


def _node_ranking(store: Any, node_ids: list[int], query: np.ndarray) -> list[int]:
    vecs = {n: np.frombuffer(store.nodes.embedding("ns", n), dtype=np.float32) for n in node_ids}
    return sorted(node_ids, key=lambda n: -float(vecs[n] @ query) / float(np.linalg.norm(vecs[n])))


def _search(store: Any, embedder: Any, queries: np.ndarray) -> tuple[list[list[int]], list[list[int]]]:
    """Per query: the items search returns, and every item by its index score, best first."""
    items = _items(store, embedder)
    found = [[i.id for i in items.search(q, limit=len(FACTS)).items] for q in QUERIES]
    ids = sorted(items._index.ids())
    ranked = [[i for i, _ in sorted(items._index.scores_for(ids, q), key=lambda p: (-p[1], p[0]))] for q in queries]
    return found, ranked


# What search returns for each query, as indexes into FACTS (the same over float32 and int8 vectors).
# With the calibrated score (items.recall.match_score), "pets" finds the dogs by meaning alone, and
# "new business after losing a job" (cosine 0.36, one word of four) stays under recall_min_score.
FOUND = [[0], [], [2], [], [4], [], [6], []]


def test_a_store_written_before_m015_reads_the_same_vectors_and_ranks_the_same(
    target: tuple[str, str], minilm: Any
) -> None:
    backend, where = target
    store = open_store(where)
    item_vecs = minilm.embed_batch(FACTS).astype(np.float32)
    summary_vecs = minilm.embed_batch(SUMMARIES).astype(np.float32)
    queries = minilm.embed_batch(QUERIES).astype(np.float32)
    ids = [_items(store, minilm).add(text, tier="cold").id for text in FACTS]
    stored = store.append(
        "ns", [TurnBatch("s", [Turn(role="user", content=s, timestamp=T0) for s in SUMMARIES], [5] * len(SUMMARIES))]
    )
    node_ids = []
    for turn, text, vec in zip(stored, SUMMARIES, summary_vecs, strict=True):
        node_id = store.nodes.insert(
            "ns",
            NewNode(
                level=1,
                kind="micro",
                session="s",
                seq_range=(turn.seq, turn.seq),
                turn_ids=(turn.id,),
                tokens=5,
                start=T0,
                end=T0,
                reason="size",
                tier="hot",
            ),
        )
        store.nodes.set_summary(
            "ns", node_id, Summary(text, summarizer="test"), tokens=5, status="ok", error=None, embedding=vec.tobytes()
        )
        node_ids.append(node_id)
    # New writes are int8 already; put the old float32 form back and forget m015, as a store of the previous
    # schema would be.
    for key, vec in zip(ids, item_vecs, strict=True):
        _float32(store, "memory_items", key, vec)
    for key, vec in zip(node_ids, summary_vecs, strict=True):
        _float32(store, "nodes", key, vec)
    raw_rows(store, "DELETE FROM _stratamem_migrations WHERE name = 'm015_int8_vectors'")
    if backend == "postgres":  # (SQLite's new code cannot read float32 blobs: m015 always runs at open)
        assert [r[1] for r in store.items.vectors_after("ns", 0)] == [v.tobytes() for v in item_vecs]
        assert _search(store, minilm, queries)[0] == [[ids[i] for i in f] for f in FOUND]
    # Item and summary rankings over the float32 vectors, as the store held them before.
    floats_items = [sorted(ids, key=lambda i: (-float(item_vecs[ids.index(i)] @ q), i)) for q in queries]
    floats_nodes = [sorted(node_ids, key=lambda n: -float(summary_vecs[node_ids.index(n)] @ q)) for q in queries]
    log_before = store.items.vector_log_head("ns")
    store.close()

    store = open_store(where)  # m015 runs
    try:
        assert raw_rows(store, "SELECT name FROM _stratamem_migrations WHERE name = 'm015_int8_vectors'") == [
            ("m015_int8_vectors",)
        ]
        rows = store.items.vectors_after("ns", 0)
        assert [r[0] for r in rows] == ids
        assert [r[1] for r in rows] == [quantized(v.tobytes()) for v in item_vecs]
        assert [store.nodes.embedding("ns", n) for n in node_ids] == [quantized(v.tobytes()) for v in summary_vecs]
        for vec, (_, blob, _) in zip(item_vecs, rows, strict=True):
            assert np.abs(np.frombuffer(blob, dtype=np.float32) - vec).max() <= np.abs(vec).max() / 127 / 2 + 1e-7
        if backend == "sqlite":  # only SQLite's bytes shrink: 4 + dims per vector
            sizes = raw_rows(
                store,
                "SELECT DISTINCT LENGTH(embedding) FROM memory_items UNION "
                "SELECT DISTINCT LENGTH(embedding) FROM nodes",
            )
            assert sizes == [(int8_blob_size(minilm.dimensions),)]
        # Every converted item is logged, so an index loaded before the migration reloads it.
        seq, changes = store.items.vector_changes("ns", log_before)
        assert seq > log_before and sorted(i for i, _ in changes) == ids
        assert _search(store, minilm, queries) == ([[ids[i] for i in f] for f in FOUND], floats_items)
        assert [ranking[0] for ranking in floats_items] == ids  # each query's own fact scores best
        assert [_node_ranking(store, node_ids, q) for q in queries] == floats_nodes
        assert [ranking[0] for ranking in floats_nodes] == [node_ids[i] for i in (0, 1, 2, 3, 3, 0, 1, 2)]
    finally:
        store.close()


def test_new_vectors_are_stored_as_int8_on_sqlite(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "n.db")
    try:
        vec = np.linspace(-1, 1, 384, dtype=np.float32)
        item = Items(store, "ns", tokenizer=TOKENIZER, config=Config().items, embedder=None).add("a fact")
        store.items.update("ns", [item.id], embedding=vec.tobytes(), embedding_model="m")
        assert raw_rows(store, "SELECT LENGTH(embedding) FROM memory_items") == [(388,)]
        assert store.items.vectors_after("ns", 0) == [(item.id, quantized(vec.tobytes()), "m")]
    finally:
        store.close()
