"""Passage vectors of long turns: the split, the signal, and their rows in the store (both backends).

Real SQLite files and a real PostgreSQL (pgserver); the signal test uses the
real local MiniLM (which reads only the first 256 word pieces of a text).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.errors import BackendError
from stratamem.records import StoredTurn, Turn
from stratamem.retrieve import HybridIndex, Weights
from stratamem.retrieve.lexical import analyze
from stratamem.retrieve.passages import (
    LONG_TERMS,
    MAX_PASSAGES,
    PASSAGE_WORDS,
    PassageVectors,
    decode_blob,
    encode_blob,
    is_long,
    passage_texts,
    split_passages,
)
from stratamem.store.open import open_store
from stratamem.store.sqlite import SQLiteStore
from stratamem.testing.hash_embedder import HashEmbedder

NO_PYRAMID = Config().replace(pyramid={"enabled": False})
PASSAGES = Config().replace(pyramid={"enabled": False}, embedding={"passages": True})
FILLER = (
    "Preheat the oven and line the tray with parchment before you start shaping the dough. "
    "Keep the kitchen warm so the proofing goes evenly across the whole loaf. "
)


def _long_answer(fact: str, before: int = 14, after: int = 14) -> str:
    """A ~600-word answer with ``fact`` in the middle, far past MiniLM's 256 word pieces."""
    return FILLER * before + fact + " " + FILLER * after


# --- the split --------------------------------------------------------------------------------

_WORD = st.text(alphabet="abcdefgh", min_size=1, max_size=6)
_SENT = st.lists(_WORD, min_size=1, max_size=60).map(lambda ws: " ".join(ws) + ".")


@settings(max_examples=80, deadline=None)
@given(st.lists(_SENT, min_size=1, max_size=40), st.integers(5, 200))
def test_the_split_is_deterministic_bounded_sentence_aligned_and_covers_every_word(sents: list[str], size: int) -> None:
    text = " ".join(sents)
    out = split_passages(text, size)
    assert out == split_passages(text, size)  # deterministic
    assert all(len(p.split()) <= size for p in out)
    # Every word is in some passage, in order: the passages are runs of the text.
    words = text.split()
    covered = " ".join(out).split()
    assert set(words) <= set(covered)
    if len(words) <= size:
        assert out == [text]
    else:
        assert len(out) >= 2
    # Sentence-aligned: every sentence that fits a passage is whole in one.
    for sent in sents:
        if len(sent.split()) <= size:
            assert any(f" {sent} " in f" {p} " for p in out)


def test_a_short_text_is_one_passage_and_an_empty_one_none() -> None:
    assert split_passages("One fact. Another one!") == ["One fact. Another one!"]
    assert split_passages("   ") == []
    with pytest.raises(ValueError, match="positive"):
        split_passages("x", 0)


def test_long_is_decided_on_content_words() -> None:
    assert not is_long(LONG_TERMS) and is_long(LONG_TERMS + 1)
    assert PASSAGE_WORDS < 180  # inside the 256 word pieces MiniLM reads, speaker prefix included


def test_a_turn_embeds_at_most_max_passages_the_first_ones() -> None:
    text = " ".join(f"Sentence number {i} says something about topic {i}." for i in range(400))
    st = _stored(0, "assistant", text)
    assert len(split_passages(text)) > MAX_PASSAGES
    assert passage_texts(st) == [f"assistant: {p}" for p in split_passages(text)[:MAX_PASSAGES]]


def test_passage_blobs_round_trip_and_a_torn_blob_is_refused() -> None:
    vec = np.linalg.qr(np.random.default_rng(0).normal(size=(8, 8)))[0][:3].astype(np.float32)
    back = decode_blob(encode_blob(vec), 8)
    assert back.shape == (3, 8)
    assert float(np.min(np.sum(back * vec, axis=1))) > 0.999
    with pytest.raises(BackendError, match="multiple of 12"):
        decode_blob(encode_blob(vec)[:-1], 8)


def test_the_best_passage_score_is_the_max_over_the_turn_and_its_passages() -> None:
    pv = PassageVectors()
    pv.add([1], [np.array([[1.0, 0.0], [0.6, 0.8]], dtype=np.float32)])
    got = pv.best(np.array([0.0, 1.0], dtype=np.float32), np.array([0.1, 0.2, 0.3]))
    assert got.tolist() == pytest.approx([0.1, 0.8, 0.3])
    assert len(pv) == 2 and pv.turns == {1}


# --- the signal, with the real model --------------------------------------------------------


def _stored(i: int, role: str, text: str, session: str = "s") -> StoredTurn:
    turn = Turn(role, text, timestamp=datetime(2024, 5, 1, 12, i, tzinfo=UTC))
    return StoredTurn(id=i + 1, namespace="n", session=session, seq=i, turn=turn, tokens=len(text.split()))


def test_a_fact_deep_in_a_long_answer_is_found_by_its_passage_vector(minilm: Any) -> None:
    fact = "Feed the sourdough starter with rye flour every twelve hours and keep it at room temperature."
    turns = [
        _stored(0, "user", "Can you give me a long guide to baking bread at home?"),
        _stored(1, "assistant", _long_answer(fact)),
        _stored(2, "user", "How do I keep my tomato plants from wilting in the heat?"),
        _stored(3, "assistant", "Water tomato plants deeply in the morning and mulch the soil."),
        _stored(4, "user", "What is a good stretching routine after running?"),
    ]
    on = HybridIndex(minilm, replace(Weights(), vector_passage=1.0))
    on.add_turns(turns)
    sig, _ = on.signals("how often should I feed my sourdough starter?")
    # The turn's own vector misses the fact; its passage vector finds it.
    assert sig["vector_passage"][1] > sig["vector"][1] + 0.15
    assert int(np.argmax(sig["vector_passage"])) == 1
    assert sig["vector_passage"][[0, 2, 3, 4]].tolist() == pytest.approx(sig["vector"][[0, 2, 3, 4]].tolist())
    off = HybridIndex(minilm, replace(Weights(), vector_passage=0.0))
    off.add_turns(turns)
    assert "vector_passage" not in off.signals("sourdough starter", weighted_only=True)[0]


# --- rows in the store, both backends -------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        s: Any = SQLiteStore(tmp_path / "p.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        s = open_store(schema_url(dsn, fresh_schema(dsn, "ps")))
    yield s
    s.close()


def _chat() -> list[dict[str, str]]:
    facts = [
        "The boiler code is 4471 and the filter sits behind the left panel.",
        "Your visa appointment moved to the consulate on Baker Street.",
    ]
    out = []
    for i, fact in enumerate(facts):
        out += [
            {"role": "user", "content": f"Question {i} about something else entirely"},
            {"role": "assistant", "content": _long_answer(fact, 10 + i, 12)},
        ]
    out.append({"role": "user", "content": "thanks, short reply"})
    return out


def _hits(mem: Memory, query: str) -> list[tuple[int, float]]:
    return [(h.turn_ids[0], round(h.score["fused"], 9)) for h in mem._recall_index().search(query, k=5)]


def test_passages_are_stored_at_write_time_and_a_new_process_does_not_re_embed_them(store: Any) -> None:
    emb = HashEmbedder(32)
    mem = Memory(store, namespace="n", config=PASSAGES, embedder=emb)
    ids = [t.id for t in mem.add(_chat(), session="s")]
    rows, size = store.embeddings.passages.size("n")
    n_passages = sum(min(MAX_PASSAGES, len(split_passages(_chat()[i]["content"]))) for i in (1, 3))
    assert (rows, size) == (2, n_passages * (32 + 4))  # only the two long answers
    assert sorted(store.embeddings.passages.load("n", f"{emb.name}/32")) == [ids[1], ids[3]]
    fresh = HashEmbedder(32)
    other = Memory(store, namespace="n", config=PASSAGES, embedder=fresh)
    assert _hits(other, "boiler code filter panel") == _hits(mem, "boiler code filter panel")
    assert {tuple(c) for c in fresh.calls} == {("boiler code filter panel",)}  # only the query
    index = other._recall_index()
    sig, _ = index.signals("boiler code filter panel")
    at = [t.id for t in index.turns].index(ids[1])
    # (Hash vectors: the passage holding the query's words is nearer than the whole turn.)
    assert sig["vector_passage"][at] > sig["vector"][at]
    # Forgetting a turn deletes its passages with it.
    mem.forget(turns=[ids[1]])
    assert sorted(store.embeddings.passages.load("n", f"{emb.name}/32")) == [ids[3]]
    mem.forget(all_namespace=True)
    assert store.embeddings.passages.size("n") == (0, 0)


def test_missing_passage_rows_are_made_when_the_index_opens(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with Memory(path, namespace="n", config=PASSAGES, embedder=HashEmbedder(32)) as mem:
        ids = [t.id for t in mem.add(_chat(), session="s")]
        mem.store.connection.execute("DELETE FROM recall_passages")
    emb = HashEmbedder(32)
    with Memory(path, namespace="n", config=PASSAGES, embedder=emb) as mem:
        mem.context("visa appointment", budget=300, policy="recall")
        long_texts = [t for c in emb.calls for t in c if t != "visa appointment"]
        want = sum(min(MAX_PASSAGES, len(split_passages(_chat()[i]["content"]))) for i in (1, 3))
        assert len(long_texts) == want  # the passages of the two long turns, nothing else
        assert sorted(mem.store.embeddings.passages.load("n", f"{emb.name}/32")) == [ids[1], ids[3]]
    # Rows of another model (or vector length) are not used: that index makes and stores its own.
    other = HashEmbedder(16)
    with Memory(path, namespace="n", config=PASSAGES, embedder=other) as mem:
        mem.context("visa appointment", budget=300, policy="recall")
        assert sorted(mem.store.embeddings.passages.load("n", f"{other.name}/16")) == [ids[1], ids[3]]
        assert mem.store.embeddings.passages.load("n", f"{other.name}/32") == {}


def test_the_default_embeds_no_passages_and_ranks_by_the_turn_vector(tmp_path: Path) -> None:
    emb = HashEmbedder(32)
    with Memory(tmp_path / "d.db", namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        mem.add(_chat(), session="s")
        assert mem.store.embeddings.passages.size("n") == (0, 0)
        assert sum(len(c) for c in emb.calls) == len(_chat())  # one vector per turn, nothing else
        weights = mem._recall_index().weights
        assert (weights.vector, weights.vector_passage) == (Weights().vector, 0.0)
    with Memory(tmp_path / "p.db", namespace="n", config=PASSAGES, embedder=HashEmbedder(32)) as mem:
        weights = mem._recall_index().weights
        assert (weights.vector, weights.vector_passage) == (0.0, 1.5)


def test_short_turns_store_no_passage_rows(tmp_path: Path) -> None:
    with Memory(tmp_path / "s.db", namespace="n", config=PASSAGES, embedder=HashEmbedder(32)) as mem:
        mem.add([{"role": "user", "content": f"short turn {i} about the deploy key"} for i in range(40)], session="s")
        assert mem.store.embeddings.passages.size("n") == (0, 0)


def test_a_reopened_index_counts_terms_not_characters(tmp_path: Path) -> None:
    # An opened index holds each turn's terms as one stored string: a short turn whose string
    # is longer than LONG_TERMS characters must not count as long (and be embedded on open).
    text = (
        "deployment credentials staging cluster rotation schedule ninety days monday morning pipeline "
        "secrets vault kubernetes namespace ingress certificate renewal automation terraform modules"
    )
    assert len(" ".join(analyze(text))) > LONG_TERMS and not is_long(len(analyze(text)))
    path = tmp_path / "s.db"
    with Memory(path, namespace="n", config=PASSAGES, embedder=HashEmbedder(32)) as mem:
        mem.add([{"role": "user", "content": f"{text} ({i})"} for i in range(40)], session="s")
    fresh = HashEmbedder(32)
    with Memory(path, namespace="n", config=PASSAGES, embedder=fresh) as mem:
        mem.context("deploy key rotation", budget=300, policy="recall")
        assert {tuple(c) for c in fresh.calls} == {("deploy key rotation",)}  # only the query
        assert mem.store.embeddings.passages.size("n") == (0, 0)
