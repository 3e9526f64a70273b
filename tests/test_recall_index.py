"""The persisted recall index: embedded at write time, opened (not rebuilt) by a new process, compact.

Real SQLite files and a real PostgreSQL (pgserver); the default-embedder
tests use the real local MiniLM (shared by the process, loaded once).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.embed import CachedEmbedder
from stratamem.embed.quantize import decode_int8, encode_int6, encode_int8, int6_blob_size, int6_codes
from stratamem.errors import BackendError, ModelError
from stratamem.retrieve.corpus import ANALYZER
from stratamem.store.base_turn_index import IndexMeta, TurnIndexRow
from stratamem.store.open import open_store
from stratamem.store.sqlite.store import SQLiteStore
from stratamem.testing.hash_embedder import HashEmbedder

NO_PYRAMID = Config().replace(pyramid={"enabled": False})


def _chat(n: int, topic: str = "turn") -> list[dict[str, str]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{topic} {i}: the deploy key {i} is in vault"}
        for i in range(n)
    ]


def _hits(mem: Memory, query: str) -> list[tuple[int, float]]:
    return [(h.turn_ids[0], round(h.score["fused"], 9)) for h in mem._recall_index().search(query, k=10)]


# --- the default embedder --------------------------------------------------------------


def test_memory_uses_the_configured_local_embedder_through_the_store_cache(tmp_path: Path) -> None:
    with Memory(tmp_path / "d.db", namespace="n", config=NO_PYRAMID) as mem:
        assert isinstance(mem.embedder, CachedEmbedder)
        assert mem.embedder.name == "all-MiniLM-L6-v2"
        assert mem.embedder.cache is mem.store.embeddings
        mem.add(_chat(3), session="s")
        status = mem.status()
        assert (status.embedder, status.embedding_dims, status.embedded_turns) == ("all-MiniLM-L6-v2", 384, 3)
        ctx = mem.context("where is the deploy key?", budget=400, policy="recall")
        assert ctx.manifest.notes == ()
        # Turn vectors live in the recall index only: the content cache holds no second copy.
        assert mem.store.embeddings.count() == 0


def test_the_default_model_is_shared_by_every_memory_of_the_process(tmp_path: Path) -> None:
    with (
        Memory(tmp_path / "a.db", embedder=None) as off,
        Memory(tmp_path / "b.db") as a,
        Memory(tmp_path / "c.db", namespace="other") as b,
    ):
        assert off.embedder is None
        assert a.embedder.embedder is b.embedder.embedder  # one loaded model
        assert a.for_namespace("x").embedder.embedder is a.embedder.embedder


def test_embedder_none_is_lexical_and_the_manifest_says_so(tmp_path: Path) -> None:
    with Memory(tmp_path / "l.db", namespace="n", config=NO_PYRAMID, embedder=None) as mem:
        mem.add(_chat(3), session="s")
        status = mem.status()
        assert (status.embedder, status.embedding_dims, status.embedded_turns) == ("none", 0, 0)
        assert mem.store.embeddings.turns.counts("n") == (3, 0)  # terms are kept all the same
        ctx = mem.context("deploy key", budget=400, policy="recall")
        assert ctx.manifest.notes == ("no embedder configured: recall is lexical only (BM25 + session structure)",)


def test_provider_none_in_the_configuration_means_no_embedder(tmp_path: Path) -> None:
    config = NO_PYRAMID.replace(embedding={"provider": "none"})
    with Memory(tmp_path / "n.db", config=config) as mem:
        assert mem.embedder is None
        mem.add(_chat(2))
        assert mem.status().embedder == "none"


# --- embedding at write time, opening instead of rebuilding ----------------------------------


def test_turns_are_embedded_when_written_and_a_new_memory_embeds_only_the_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stratamem.retrieve import persisted

    monkeypatch.setattr(persisted, "BATCH", 256)  # the default (1024) would need a bigger chat
    path = tmp_path / "w.db"
    writer_emb = HashEmbedder(64)
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=writer_emb) as mem:
        mem.add(_chat(300), session="s")
        assert writer_emb.texts_embedded == 300
        # Batches of at most 256 turns per embedding call and per stored transaction.
        assert [len(c) for c in writer_emb.calls] == [256, 44]
        assert mem.store.embeddings.turns.counts("n") == (300, 300)
    reader_emb = HashEmbedder(64)
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=reader_emb) as mem:
        mem.context("deploy key 7", budget=500, policy="recall")
        # Only the query is embedded (recall and item search each ask for it); no turn is.
        assert {tuple(c) for c in reader_emb.calls} == {("deploy key 7",)}


def test_an_opened_index_ranks_exactly_like_the_writer_s_grown_one(tmp_path: Path) -> None:
    path = tmp_path / "same.db"
    emb = HashEmbedder(48)
    writer = Memory(path, namespace="n", config=NO_PYRAMID, embedder=emb)
    writer.add(_chat(5, "alpha"), session="a")
    writer.context("warm", budget=200, policy="recall")  # the writer's index now grows in place
    writer.add(_chat(7, "beta"), session="b")
    writer.add(_chat(4, "alpha"), session="a")
    reader = Memory(path, namespace="n", config=NO_PYRAMID, embedder=HashEmbedder(48))
    for query in ("alpha deploy key 3", "beta vault", "key 6"):
        assert _hits(reader, query) == _hits(writer, query)
    writer.close()
    reader.close()


def test_a_failing_embedder_keeps_turns_and_terms_and_a_later_open_embeds_them(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    broken = HashEmbedder(32, fail_with=RuntimeError("service down"))
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=broken) as mem:
        stored = mem.add(_chat(4), session="s")
        assert [t.seq for t in stored] == [1, 2, 3, 4]
        assert [e.kind for e in mem.events.recent("recall.embed_failed")] == ["recall.embed_failed"]
        assert mem.store.embeddings.turns.counts("n") == (4, 0)
        with pytest.raises(ModelError):
            mem.context("deploy key", budget=300, policy="recall")  # the vectors are still missing
    healthy = HashEmbedder(32)
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=healthy) as mem:
        ctx = mem.context("deploy key 2", budget=300, policy="recall")
        assert healthy.calls[0] == [
            f"user: turn {i}: the deploy key {i} is in vault"
            if i % 2 == 0
            else f"assistant: turn {i}: the deploy key {i} is in vault"
            for i in range(4)
        ]
        assert mem.store.embeddings.turns.counts("n") == (4, 4)
        assert {i.turn_ids[0] for i in ctx.manifest.items if i.reason == "recalled"} >= {stored[2].id}


def test_another_model_re_embeds_and_another_analysis_re_analyses(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=HashEmbedder(16, name="model-a")) as mem:
        mem.add(_chat(3), session="s")
        assert mem.store.embeddings.turns.meta("n") == IndexMeta("model-a", 16, ANALYZER)
    b = HashEmbedder(24, name="model-b")
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=b) as mem:
        mem.context("vault", budget=300, policy="recall")
        assert len(b.calls[0]) == 3  # every turn again, then only the query
        assert {tuple(c) for c in b.calls[1:]} == {("vault",)}
        assert mem.store.embeddings.turns.meta("n") == IndexMeta("model-b", 24, ANALYZER)
        rows = mem.store.embeddings.turns.load("n")
        assert {len(r.vector or b"") for r in rows.values()} == {int6_blob_size(24)}
        mem.store.embeddings.turns.set_meta("n", IndexMeta("model-b", 24, "a0:older-analysis"))
        assert mem.store.embeddings.turns.counts("n") == (0, 0)  # stale terms are dropped with their vectors
    again = HashEmbedder(24, name="model-b")
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=again) as mem:
        assert len(mem.context("vault", budget=300, policy="recall").manifest.items) > 0
        assert mem.store.embeddings.turns.counts("n") == (3, 3)


def test_turns_another_writer_indexed_are_caught_up_from_their_rows(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    reader_emb, writer_emb = HashEmbedder(32), HashEmbedder(32)
    reader = Memory(path, namespace="t", config=NO_PYRAMID, embedder=reader_emb)
    reader.add(_chat(2), session="s")
    reader.context("seed", budget=200, policy="recall")
    writer = Memory(path, namespace="t", config=NO_PYRAMID, embedder=writer_emb)
    [fact] = writer.add([{"role": "user", "content": "The kubernetes upgrade is planned for June 3."}], session="s")
    before = len(reader_emb.calls)
    ctx = reader.context("kubernetes upgrade", budget=300, policy="recall")
    assert fact.id in {i.turn_ids[0] for i in ctx.manifest.items if i.reason == "recalled"}
    # Only the query: the writer's row was read, not re-embedded.
    assert {tuple(c) for c in reader_emb.calls[before:]} == {("kubernetes upgrade",)}
    reader.close()
    writer.close()


def test_rows_never_cross_namespaces(tmp_path: Path) -> None:
    with Memory(tmp_path / "ns.db", namespace="alice", config=NO_PYRAMID, embedder=HashEmbedder(8)) as alice:
        alice.add(_chat(3), session="s")
        bob = alice.for_namespace("bob")
        bob.add(_chat(2), session="s")
        turns = alice.store.embeddings.turns
        assert (turns.counts("alice"), turns.counts("bob")) == ((3, 3), (2, 2))
        assert set(turns.load("alice")).isdisjoint(turns.load("bob"))
        assert turns.delete("bob") == 2
        assert (turns.counts("alice"), turns.counts("bob"), turns.meta("bob")) == ((3, 3), (0, 0), None)


def test_a_read_only_store_still_opens_an_index_that_needs_filling(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=None) as mem:
        mem.add(_chat(3), session="s")
    emb = HashEmbedder(16)
    mem = Memory(path, namespace="n", config=NO_PYRAMID.replace(context={"record_manifests": False}), embedder=emb)
    with mem.store.lock:  # type: ignore[attr-defined]
        mem.store.connection.execute("PRAGMA query_only = ON")  # type: ignore[attr-defined]
    ctx = mem.context("deploy key 1", budget=300, policy="recall")
    assert [i.reason for i in ctx.manifest.items].count("recalled") == 3
    assert {w.split(":")[0] for w in mem.status().warnings} == {"recall.index_failed"}
    assert len(emb.calls[0]) == 3
    mem.close()


# --- the feature store on both backends ------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A fresh store of each backend holding namespace ``n`` with three turns (ids from the store)."""
    if request.param == "sqlite":
        s: Any = SQLiteStore(tmp_path / "c.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        s = open_store(schema_url(dsn, fresh_schema(dsn, "ri")))
    yield s
    s.close()


def test_the_feature_store_contract(store: Any) -> None:
    mem = Memory(store, namespace="n", config=NO_PYRAMID, embedder=None)
    ids = [t.id for t in mem.add(_chat(3), session="s")]
    rows = store.embeddings.turns
    assert rows.meta("n") == IndexMeta("", 0, ANALYZER)
    assert rows.counts("n") == (3, 0)
    blob = encode_int8(np.eye(1, 4, dtype=np.float32))[0]
    rows.put("n", [TurnIndexRow(ids[0], "deploy key", blob)])
    assert rows.load("n", [ids[0]]) == {ids[0]: TurnIndexRow(ids[0], "deploy key", blob)}
    assert rows.counts("n") == (3, 1)
    rows.set_meta("n", IndexMeta("m", 4, ANALYZER))  # another model: vectors cleared, terms kept
    assert rows.counts("n") == (3, 0)
    assert rows.load("n", [ids[0]])[ids[0]].terms == "deploy key"
    assert rows.delete("n", [ids[1], ids[2]]) == 2
    assert sorted(rows.load("n")) == [ids[0]]
    assert rows.load("nobody") == {} and rows.counts("nobody") == (0, 0)
    assert rows.delete("n") == 1
    assert rows.meta("n") is None


def test_memory_embeds_at_write_time_on_postgres_too(pg_dsn: str) -> None:
    store = open_store(schema_url(pg_dsn, fresh_schema(pg_dsn, "rw")))
    emb = HashEmbedder(32)
    mem = Memory(store, namespace="n", config=NO_PYRAMID, embedder=emb)
    mem.add(_chat(5), session="s")
    assert store.embeddings.turns.counts("n") == (5, 5)
    fresh = HashEmbedder(32)
    other = Memory(store, namespace="n", config=NO_PYRAMID, embedder=fresh)
    assert _hits(other, "deploy key 3") == _hits(mem, "deploy key 3")
    assert {tuple(c) for c in fresh.calls} == {("deploy key 3",)}
    store.close()


# --- the int8 codec ------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=2, max_size=64).filter(
        lambda v: float(np.linalg.norm(v)) > 1e-3
    )
)
def test_int8_vectors_decode_to_unit_vectors_within_a_small_angle(values: list[float]) -> None:
    vec = np.asarray([values], dtype=np.float32)
    vec /= np.linalg.norm(vec)
    [blob] = encode_int8(vec)
    assert len(blob) == len(values) + 4
    out = decode_int8([blob], len(values))
    assert out.dtype == np.float32 and out.shape == vec.shape
    assert abs(float(np.linalg.norm(out)) - 1.0) < 1e-5
    # Each component is off by at most half a step of max|v|/127.
    assert float(out[0] @ vec[0]) > 1 - len(values) * (0.5 / 127) ** 2


def test_a_corrupt_vector_blob_is_refused() -> None:
    blob = encode_int8(np.ones((1, 8), dtype=np.float32))[0]
    with pytest.raises(BackendError, match="expected 12"):
        decode_int8([blob[:-1]], 8)
    with pytest.raises(ValueError, match="NaN"):
        encode_int8(np.array([[np.nan, 1.0]], dtype=np.float32))


# --- bulk paths used when an index opens ---------------------------------------------------------

_words = st.lists(st.sampled_from(["deploy", "key", "vault", "cat", "lisbon", "june", "x"]), max_size=8)


@settings(max_examples=40, deadline=None)
@given(st.lists(_words, min_size=0, max_size=200), st.integers(0, 5))
def test_bm25_bulk_extend_builds_the_same_postings_as_adding_one_by_one(docs: list[list[str]], before: int) -> None:
    from stratamem.retrieve.lexical import BM25Index

    one, bulk = BM25Index(), BM25Index()
    for d in docs[:before]:
        one.add(d)
        bulk.add(d)
    for d in docs[before:]:
        one.add(d)
    bulk.extend(docs[before:])
    assert len(one) == len(bulk)
    assert one._postings == bulk._postings
    for term in ("deploy", "vault", "x", "absent"):
        np.testing.assert_array_equal(one.posting(term)[0], bulk.posting(term)[0])
        np.testing.assert_array_equal(one.posting(term)[1], bulk.posting(term)[1])
    np.testing.assert_array_equal(one.scores(["deploy", "x"]), bulk.scores(["deploy", "x"]))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=60), st.integers(1, 3))
def test_window_norms_of_an_opened_index_equal_those_grown_turn_by_turn(sessions: list[int], window: int) -> None:
    from datetime import datetime

    from stratamem.records import StoredTurn, Turn
    from stratamem.retrieve.corpus import TurnCorpus

    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    seqs: dict[int, int] = {}
    turns = []
    for i, s in enumerate(sessions):
        seqs[s] = seqs.get(s, 0) + 1
        turns.append(
            StoredTurn(
                id=i + 1,
                namespace="n",
                session=f"s{s}",
                seq=seqs[s],
                tokens=3,
                turn=Turn(role="user", content=f"turn {i} about {s}", timestamp=t0),
            )
        )
    emb = HashEmbedder(16)
    grown, opened = TurnCorpus(window, emb.embed_batch), TurnCorpus(window, emb.embed_batch)
    for st_ in turns:
        grown.add([st_])
    opened.add(turns)
    assert grown.window_norms is not None and opened.window_norms is not None
    np.testing.assert_array_equal(grown.window_norms.view, opened.window_norms.view)
    np.testing.assert_allclose(grown.session_vectors(), opened.session_vectors(), rtol=0, atol=1e-12)


# --- the index opened from stored term strings (postings found per query term) --------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(_words, min_size=0, max_size=120),
    st.lists(_words, max_size=20),
    st.lists(st.sampled_from(["deploy", "key", "vault", "cat", "lisbon", "june", "x", "absent", "ke"]), max_size=4),
)
def test_stored_terms_postings_equal_an_eager_index_s_after_later_adds(
    docs: list[list[str]], later: list[list[str]], early: list[str]
) -> None:
    from stratamem.retrieve.lexical import BM25Index
    from stratamem.retrieve.stored_terms import StoredTermsIndex

    eager, stored = BM25Index(), StoredTermsIndex()
    eager.extend(docs)
    counts = stored.open_stored([" ".join(d) for d in docs])
    assert counts.tolist() == [len(d) for d in docs]
    for term in early:  # resolved before the later documents arrive ...
        assert (term in stored) == (term in eager)
    for d in later:
        eager.add(d)
        stored.add(d)
    # ... or after them ("ke" is a prefix of "key": never a match).
    for term in ("deploy", "key", "vault", "x", "absent", "ke", "june"):
        assert (term in stored) == (term in eager)
        np.testing.assert_array_equal(stored.posting(term)[0], eager.posting(term)[0])
        np.testing.assert_array_equal(stored.posting(term)[1], eager.posting(term)[1])
        assert stored.idf(term) == eager.idf(term)
    np.testing.assert_array_equal(stored.scores(["deploy", "x", "june"]), eager.scores(["deploy", "x", "june"]))


def test_stored_terms_can_only_start_an_empty_index() -> None:
    from stratamem.retrieve.stored_terms import StoredTermsIndex

    index = StoredTermsIndex()
    index.add(["deploy"])
    with pytest.raises(ValueError, match="empty index"):
        index.open_stored(["key"])


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["Ann", "Bo", None])), min_size=1, max_size=50),
    st.integers(0, 10),
)
def test_a_corpus_opened_in_one_batch_has_the_structure_of_one_grown_turn_by_turn(
    spec: list[tuple[int, str | None]], split: int
) -> None:
    from datetime import datetime, timedelta

    from stratamem.records import StoredTurn, Turn
    from stratamem.retrieve.corpus import TurnCorpus

    t0 = datetime(2024, 1, 1, tzinfo=UTC)
    seqs: dict[int, int] = {}
    turns = []
    for i, (s, name) in enumerate(spec):
        seqs[s] = seqs.get(s, 0) + 1
        turns.append(
            StoredTurn(
                id=i + 1,
                namespace="n",
                session=f"s{s}",
                seq=seqs[s],
                tokens=3,
                turn=Turn(role="user", content=f"turn {i} about {s}", name=name, timestamp=t0 + timedelta(minutes=i)),
            )
        )
    grown, opened = TurnCorpus(2), TurnCorpus(2)
    for st_ in turns:
        grown.add([st_])
    opened.add(turns[:split], terms=[" ".join(grown.terms[i]) for i in range(min(split, len(turns)))])
    opened.add(turns[split:])
    grown.ready()
    opened.ready()
    for name in ("session_of", "speaker_of"):
        np.testing.assert_array_equal(getattr(grown, name), getattr(opened, name))
    for name in ("order", "lo", "hi", "prev", "next"):
        np.testing.assert_array_equal(getattr(grown, name), getattr(opened, name))
    assert grown.pos == opened.pos and grown.speakers == opened.speakers
    assert grown.session_dates == opened.session_dates
    assert [grown.terms[i] for i in range(len(turns))] == [opened.terms[i] for i in range(len(turns))]
    for query in (["turn"], ["1", "about"], ["absent"]):
        for a, b in zip(grown.lexical(query), opened.lexical(query), strict=True):
            np.testing.assert_array_equal(a, b)


_chat_words = st.lists(
    st.sampled_from(["deploy", "key", "vault", "lisbon", "june", "cat", "moved", "paint"]), min_size=1, max_size=6
)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@settings(max_examples=8, deadline=None)
@given(chat=st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), _chat_words), min_size=1, max_size=25))
def test_an_index_reopened_from_the_store_ranks_exactly_like_a_rebuilt_one(
    backend: str,
    chat: list[tuple[str, list[str]]],
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    from stratamem.retrieve.engine import HybridIndex

    if backend == "sqlite":
        store: Any = SQLiteStore(tmp_path_factory.mktemp("reopen") / "r.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        store = open_store(schema_url(dsn, fresh_schema(dsn, "reopen")))
    emb = HashEmbedder(24)
    writer = Memory(store, namespace="n", config=NO_PYRAMID, embedder=emb)
    for session, words in chat:
        writer.add([{"role": "user", "content": " ".join(words)}], session=session)
    opened = writer.indexer.open()
    from stratamem.retrieve.corpus import TurnCorpus

    # Rebuilt: every turn analysed and embedded again (6-bit round trip, as stored: the codes), every posting built.
    turns = list(store.iter_turns("n"))
    rebuilt = HybridIndex(emb)
    rebuilt.add_turns(
        turns,
        vectors=int6_codes(
            encode_int6(np.asarray(emb.embed_batch([TurnCorpus.text(t) for t in turns]), dtype=np.float32)), 24
        ),
    )
    assert [t.id for t in opened.turns] == [t.id for t in rebuilt.turns]
    for query in ("deploy key", "moved to lisbon in june", "paint cat vault"):
        got = [(h.turn_ids[0], round(h.score["fused"], 6)) for h in opened.search(query, k=10)]
        want = [(h.turn_ids[0], round(h.score["fused"], 6)) for h in rebuilt.search(query, k=10)]
        assert got == want
    writer.close()
