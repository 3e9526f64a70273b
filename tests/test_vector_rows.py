"""The open recall index keeps its vectors compact (int8 codes) and scores them a block at a time (issue 28).

Equivalence with the plain float computation (every stored vector decoded
with :func:`decode_int8` / :func:`decode_int4`, one matrix product), and the
in-memory form of an index opened from a real store, on both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.embed.quantize import decode_int4, decode_int8, encode_int4, encode_int8, int4_codes, int8_codes
from stratamem.retrieve.passages import PassageVectors
from stratamem.retrieve.vector_rows import BLOCK, VectorRows
from stratamem.store.open import open_store
from stratamem.store.sqlite import SQLiteStore
from stratamem.testing.hash_embedder import HashEmbedder

CONFIG = Config().replace(pyramid={"enabled": False}, embedding={"passages": True})


def _unit(rng: np.random.Generator, n: int, dims: int) -> np.ndarray:
    vec = rng.normal(size=(n, dims)).astype(np.float32)
    if n > 2:
        vec[1] = 0.0  # a zero vector (an empty text's) stays zero, not NaN
    return vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(0, 2 * BLOCK + 300),
    dims=st.sampled_from([1, 7, 32, 384]),
    bits=st.sampled_from([4, 8]),
    cuts=st.lists(st.integers(0, 2 * BLOCK + 300), max_size=4),
    seed=st.integers(0, 2**16),
)
def test_codes_scored_in_blocks_equal_the_decoded_matrix(
    n: int, dims: int, bits: int, cuts: list[int], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    vec = _unit(rng, n, dims)
    blobs = encode_int4(vec) if bits == 4 else encode_int8(vec)
    decoded = decode_int4(blobs, dims) if bits == 4 else decode_int8(blobs, dims)
    codes = int4_codes(blobs, dims) if bits == 4 else int8_codes(blobs, dims)
    assert codes.dtype == np.int8 and codes.shape == (n, dims)
    rows = VectorRows(dims, codes=True)
    for lo, hi in zip([0, *sorted(c for c in cuts if c < n)], [*sorted(c for c in cuts if c < n), n], strict=True):
        rows.extend(codes[lo:hi])  # grown batch by batch, as an agent loop adds turns
    assert len(rows) == n and rows.codes
    q = _unit(rng, 1, dims)[0]
    # Every decoded block is bit for bit the decoded rows; the dot products (codes times the query,
    # scaled per row after) agree with the decoded matrix's within float rounding.
    assert np.array_equal(rows.block(0, n), decoded)
    at = rng.integers(0, max(n, 1), size=min(n, 50))
    assert np.array_equal(rows.take(at), decoded[at])
    floats = VectorRows(dims, codes=False)
    floats.extend(decoded)
    np.testing.assert_allclose(rows.dots(q), floats.dots(q), rtol=0, atol=2e-6)
    np.testing.assert_allclose(rows.dots(q), decoded @ q, rtol=0, atol=2e-6)


def test_codes_take_a_quarter_of_float32_rows() -> None:
    vec = _unit(np.random.default_rng(1), 5000, 384)
    codes, floats = VectorRows(384, codes=True), VectorRows(384, codes=False)
    codes.extend(int8_codes(encode_int8(vec), 384))
    floats.extend(decode_int8(encode_int8(vec), 384))
    assert codes.nbytes == 5000 * (384 + 4)  # one int8 per component and one float32 per row
    assert floats.nbytes == 5000 * 384 * 4


def test_a_float_row_added_to_codes_is_quantized_as_the_store_would() -> None:
    vec = _unit(np.random.default_rng(2), 3, 16)
    rows = VectorRows(16, codes=True)
    rows.extend(int8_codes(encode_int8(vec[:2]), 16))
    rows.extend(vec[2:])
    assert np.array_equal(rows.block(0, 3), decode_int8(encode_int8(vec), 16))


def test_passage_vectors_of_codes_and_floats_keep_their_owners() -> None:
    vec = _unit(np.random.default_rng(3), 5, 8)
    pv = PassageVectors()
    pv.add([0, 2], [int8_codes(encode_int8(vec[:2]), 8), vec[2:4]])  # codes first: the matrix holds codes
    pv.add([1], [int8_codes(encode_int8(vec[4:]), 8)])
    q = vec[3]
    got = pv.best(q, np.zeros(3))
    plain = decode_int8(encode_int8(vec), 8) @ q
    np.testing.assert_allclose(got, [max(plain[0], plain[1]), plain[4], max(plain[2], plain[3])], atol=1e-6)


# --- an index opened from the store, both backends --------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        s: Any = SQLiteStore(tmp_path / "v.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        s = open_store(schema_url(dsn, fresh_schema(dsn, "vr")))
    yield s
    s.close()


def _chat(n: int) -> list[dict[str, str]]:
    out = []
    for i in range(n):
        if i % 7 == 3:  # a long answer: passage vectors
            text = " ".join(
                f"Sentence {j} of answer {i} names the harbour crane number {i * 10 + j}." for j in range(30)
            )
        else:  # short turns of two sentences: sentence vectors
            text = f"My sister {i} moved to Porto in spring last year. Side note: the boiler code {i} is in the binder."
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return out


def test_an_opened_index_holds_its_vectors_as_codes_and_scores_like_the_decoded_rows(store: Any) -> None:
    Memory(store, namespace="n", config=CONFIG, embedder=HashEmbedder(32)).add(_chat(40), session="s")
    emb = HashEmbedder(32)
    index = Memory(store, namespace="n", config=CONFIG, embedder=emb)._recall_index()
    query = "where did my sister move, and the harbour crane?"
    sig, _ = index.signals(query, sentence_mix=0.5)  # stacks the sentence and passage rows
    turns, sentences, passages = index._corpus.vectors, index._sentence_vectors._matrix, index._passage_vectors._matrix
    assert turns is not None and sentences is not None and passages is not None
    assert len(turns) == 40 and len(passages) > 0 and len(sentences) > 0
    for rows in (turns, sentences, passages):
        assert rows.codes and rows.nbytes <= max(len(rows), 64) * (32 + 4)
    # The plain computation: every stored turn vector decoded, one product with the query.
    from stratamem.embed.quantize import decode_int6  # turn vectors are stored in 6 bits (m025_lean_store)

    stored = store.embeddings.turns.load("n")
    plain = decode_int6([stored[t.id].vector for t in index.turns], 32) @ np.asarray(emb.embed_batch([query])[0])
    np.testing.assert_allclose(
        np.asarray(index._corpus.vectors.dots(np.asarray(emb.embed_batch([query])[0]))), plain, atol=1e-6
    )
    assert sig["vector"].shape == (40,)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(0, 2 * BLOCK + 300),
    dims=st.sampled_from([1, 7, 384]),
    queries=st.integers(1, 4),
    codes=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_several_queries_scored_in_one_pass_equal_each_scored_alone(
    n: int, dims: int, queries: int, codes: bool, seed: int
) -> None:
    """A planned question's query vectors share one pass over the rows (issue 28), bit for bit."""
    rng = np.random.default_rng(seed)
    vec = _unit(rng, n, dims)
    rows = VectorRows(dims, codes=codes)
    rows.extend(int8_codes(encode_int8(vec), dims) if codes else vec)
    qs = list(_unit(rng, queries, dims))
    many = rows.dots_many(qs)
    assert many.shape == (queries, n) and many.dtype == np.float32
    for got, q in zip(many, qs, strict=True):
        assert np.array_equal(got, rows.dots(q))
    owners = np.sort(rng.integers(0, max(n // 3, 1), size=n))
    passages = PassageVectors()
    for pos in np.unique(owners):
        passages.add([int(pos)], [vec[owners == pos]])
    turn = [rng.random(max(n // 3, 1)).astype(np.float32) for _ in qs]
    for got, q, t in zip(passages.best_many(qs, turn), qs, turn, strict=True):
        assert np.array_equal(got, passages.best(q, t))
