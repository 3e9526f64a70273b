"""Embeddings: the local MiniLM against sentence-transformers' vectors, the
OpenAI-compatible client against a real HTTP server, and the content-hash cache."""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem.embed import (
    CachedEmbedder,
    Embedder,
    LocalMiniLM,
    MemoryEmbeddingCache,
    OpenAIEmbedder,
    content_hash,
    cosine,
    embed_in_batches,
    embed_one,
)
from stratamem.errors import BackendError, ConfigError, ModelError
from stratamem.store import SQLiteStore
from stratamem.store.sqlite.schema import MIGRATIONS
from stratamem.testing.embed_server import FakeEmbeddingServer
from stratamem.testing.hash_embedder import HashEmbedder, hash_vector

REFERENCE = json.loads((Path(__file__).parent / "fixtures" / "minilm_reference.json").read_text(encoding="utf-8"))
CASES = REFERENCE["cases"]


def _ref_vector(case: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(case["vector"]), dtype="<f4")


@pytest.fixture(scope="module")
def reference_batch(minilm: LocalMiniLM) -> np.ndarray:
    return minilm.embed_batch([c["text"] for c in CASES])


# --- local MiniLM ------------------------------------------------------------------------


@pytest.mark.parametrize("index", [pytest.param(i, id=f"case[{i}] {c['text'][:24]!r}") for i, c in enumerate(CASES)])
def test_local_minilm_matches_sentence_transformers(reference_batch: np.ndarray, index: int) -> None:
    assert cosine(reference_batch[index], _ref_vector(CASES[index])) >= 0.9999


def test_one_text_at_a_time_gives_the_batch_vectors(minilm: LocalMiniLM, reference_batch: np.ndarray) -> None:
    # Padding to the longest text of a batch must not leak into shorter texts.
    for i in (0, 5, 16, 34, 39):
        single = embed_one(minilm, CASES[i]["text"])
        assert np.abs(single - reference_batch[i]).max() < 1e-5


def test_vectors_are_unit_length_float32_in_input_order(minilm: LocalMiniLM, reference_batch: np.ndarray) -> None:
    assert reference_batch.dtype == np.float32
    assert reference_batch.shape == (len(CASES), 384)
    assert np.allclose(np.linalg.norm(reference_batch, axis=1), 1.0, atol=1e-6)
    reversed_texts = [c["text"] for c in reversed(CASES)]
    assert np.abs(minilm.embed_batch(reversed_texts)[::-1] - reference_batch).max() < 1e-5


def test_texts_past_256_tokens_are_truncated_like_the_reference(minilm: LocalMiniLM) -> None:
    # "a " * 300 is 302 tokens; 254 words + [CLS] + [SEP] is exactly the 256 kept.
    long, cut = minilm.embed_batch(["a " * 300, "a " * 254])
    assert np.abs(long - cut).max() < 1e-6
    assert not np.allclose(minilm.embed_batch(["a " * 200])[0], cut, atol=1e-3)


def test_small_batch_limits_give_the_same_vectors(reference_batch: np.ndarray) -> None:
    tight = LocalMiniLM(batch_size=3, max_batch_tokens=300, threads=2)
    got = tight.embed_batch([c["text"] for c in CASES])
    assert np.abs(got - reference_batch).max() < 1e-5


def test_empty_input_gives_an_empty_matrix(minilm: LocalMiniLM) -> None:
    assert minilm.embed_batch([]).shape == (0, 384)
    assert embed_in_batches(minilm, [], batch_size=4).shape == (0, 384)


def test_a_bare_string_or_a_non_string_is_refused(minilm: LocalMiniLM) -> None:
    with pytest.raises(TypeError, match="not a single string"):
        minilm.embed_batch("hello")
    with pytest.raises(TypeError, match=r"texts\[1\] is int"):
        minilm.embed_batch(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="not str"):
        embed_one(minilm, b"bytes")  # type: ignore[arg-type]


def test_the_local_embedder_is_an_embedder(minilm: LocalMiniLM) -> None:
    assert isinstance(minilm, Embedder)
    assert (minilm.name, minilm.dimensions) == ("all-MiniLM-L6-v2", 384)


def test_bad_limits_and_a_missing_model_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="max_tokens"):
        LocalMiniLM(max_tokens=1000)
    with pytest.raises(ConfigError, match="batch_size"):
        LocalMiniLM(batch_size=0)
    empty = LocalMiniLM(tmp_path)
    with pytest.raises(ConfigError, match="missing model.safetensors, config.json, tokenizer.json"):
        empty.embed_batch(["x"])
    assert not empty.loaded


def test_importing_and_constructing_loads_nothing_heavy() -> None:
    code = (
        "import sys; from stratamem.embed import LocalMiniLM, OpenAIEmbedder; m = LocalMiniLM(); "
        "heavy = ('tokenizers', 'safetensors', 'openai', 'torch', 'onnx', 'onnxruntime'); "
        "print(sorted(n for n in heavy if n in sys.modules), m.loaded)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] False"


def test_embed_in_batches_splits_calls_and_keeps_order() -> None:
    fake = HashEmbedder(16)
    texts = [f"text {i}" for i in range(10)]
    out = embed_in_batches(fake, texts, batch_size=4)
    assert [len(c) for c in fake.calls] == [4, 4, 2]
    assert np.array_equal(out, np.stack([hash_vector(t, 16) for t in texts]))


# --- OpenAI-compatible client against a real HTTP server ---------------------------------


@pytest.fixture
def server():
    with FakeEmbeddingServer(dimensions=32) as srv:
        yield srv


def test_openai_embedder_returns_the_servers_vectors(server: FakeEmbeddingServer) -> None:
    emb = OpenAIEmbedder("fake-embed", dimensions=32, base_url=server.base_url, batch_size=2)
    texts = ["alpha beta", "gamma", "alpha", "delta epsilon", "zeta"]
    got = emb.embed_batch(texts)
    assert np.abs(got - HashEmbedder(32).embed_batch(texts)).max() < 1e-6
    assert [r.inputs for r in server.requests] == [texts[0:2], texts[2:4], texts[4:5]]
    assert {r.model for r in server.requests} == {"fake-embed"}
    assert server.requests[0].headers["authorization"] == "Bearer unused"
    assert "dimensions" not in server.requests[0].body
    assert emb.name == "fake-embed"


def test_openai_embedder_can_ask_for_shortened_vectors(server: FakeEmbeddingServer) -> None:
    emb = OpenAIEmbedder(
        "fake-embed", dimensions=8, base_url=server.base_url, request_dimensions=True, api_key="sk-test"
    )
    assert emb.embed_batch(["x"]).shape == (1, 8)
    assert server.requests[0].body["dimensions"] == 8
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert emb.name == "fake-embed@8"


def test_openai_embedder_normalizes_unnormalized_vectors() -> None:
    with FakeEmbeddingServer(dimensions=4, vector_fn=lambda text, d: [3.0, 4.0, 0.0, 0.0]) as srv:
        emb = OpenAIEmbedder("m", dimensions=4, base_url=srv.base_url)
        assert emb.embed_batch(["a"]).tolist() == [[pytest.approx(0.6), pytest.approx(0.8), 0.0, 0.0]]


def test_a_transient_failure_is_retried(server: FakeEmbeddingServer) -> None:
    server.fail_next(1, status=503)
    emb = OpenAIEmbedder("fake-embed", dimensions=32, base_url=server.base_url, max_retries=1)
    assert emb.embed_batch(["a"]).shape == (1, 32)
    assert len(server.requests) == 2


def test_a_failure_after_retries_is_a_model_error(server: FakeEmbeddingServer) -> None:
    server.fail_next(1, status=500)
    emb = OpenAIEmbedder("fake-embed", dimensions=32, base_url=server.base_url, max_retries=0)
    with pytest.raises(ModelError, match="HTTP 500"):
        emb.embed_batch(["a"])
    server.fail_next(1, status=400)
    with pytest.raises(ModelError, match="HTTP 400"):
        OpenAIEmbedder("fake-embed", dimensions=32, base_url=server.base_url, max_retries=3).embed_batch(["a"])
    assert len(server.requests) == 2  # a 400 is not retried


def test_a_timeout_and_a_dead_server_are_model_errors(server: FakeEmbeddingServer) -> None:
    server.fail_next(1, status=200, delay_s=1.0)
    emb = OpenAIEmbedder("fake-embed", dimensions=32, base_url=server.base_url, timeout_s=0.2, max_retries=0)
    with pytest.raises(ModelError, match="APITimeoutError"):
        emb.embed_batch(["a"])
    url = server.base_url
    server.close()
    with pytest.raises(ModelError, match="APIConnectionError"):
        OpenAIEmbedder("fake-embed", dimensions=32, base_url=url, max_retries=0).embed_batch(["a"])


def test_a_reply_of_the_wrong_length_is_a_model_error(server: FakeEmbeddingServer) -> None:
    emb = OpenAIEmbedder("fake-embed", dimensions=64, base_url=server.base_url)
    with pytest.raises(ModelError, match=r"shape \(1, 32\), expected \(1, 64\)"):
        emb.embed_batch(["a"])


def test_a_zero_vector_reply_is_a_model_error() -> None:
    with FakeEmbeddingServer(dimensions=3, vector_fn=lambda text, d: [0.0] * d) as srv:
        with pytest.raises(ModelError, match="all-zero"):
            OpenAIEmbedder("m", dimensions=3, base_url=srv.base_url).embed_batch(["a"])


def test_openais_own_endpoint_needs_a_key() -> None:
    with pytest.raises(ConfigError, match="api_key"):
        OpenAIEmbedder("text-embedding-3-small", dimensions=1536)
    with pytest.raises(ConfigError, match="positive"):
        OpenAIEmbedder("m", dimensions=0, base_url="http://127.0.0.1:9/v1")


# --- cache ---------------------------------------------------------------------------------


def test_content_hash_is_tagged_with_its_algorithm() -> None:
    assert content_hash("") == "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert content_hash("\ud800").startswith("sha256:")  # lone surrogates hash instead of failing


def test_a_second_embed_of_the_same_text_makes_no_model_call() -> None:
    fake = HashEmbedder(16)
    cached = CachedEmbedder(fake)
    first = cached.embed_batch(["a", "b", "a"])
    assert fake.calls == [["a", "b"]]  # the duplicate is embedded once
    second = cached.embed_batch(["b", "a"])
    assert fake.calls == [["a", "b"]]
    assert np.array_equal(second, first[[1, 0]])
    assert (cached.stats.hits, cached.stats.misses, cached.stats.model_calls) == (3, 2, 1)
    cached.embed_batch(["a", "c"])
    assert fake.calls == [["a", "b"], ["c"]]


def test_the_sqlite_cache_survives_reopening_the_store(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    texts = ["the cat sat", "on the mat", "the cat sat"]
    with SQLiteStore(path) as store:
        first = CachedEmbedder(HashEmbedder(16), store.embeddings).embed_batch(texts)
        assert store.embeddings.count() == 2
    fake = HashEmbedder(16)
    with SQLiteStore(path) as store:
        again = CachedEmbedder(fake, store.embeddings).embed_batch(texts)
    assert fake.calls == []
    assert np.array_equal(again, first)


def test_models_do_not_share_cached_vectors(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "m.db") as store:
        a, b = HashEmbedder(16, name="model-a"), HashEmbedder(16, name="model-b")
        CachedEmbedder(a, store.embeddings).embed_batch(["x"])
        CachedEmbedder(b, store.embeddings).embed_batch(["x"])
        assert (len(a.calls), len(b.calls)) == (1, 1)
        assert (store.embeddings.count("model-a"), store.embeddings.count()) == (1, 2)
        assert store.embeddings.clear("model-a") == 1
        assert store.embeddings.count() == 1


def test_a_failing_embedder_caches_nothing_and_raises(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "m.db") as store:
        failing = HashEmbedder(16, fail_with=ModelError("endpoint down"))
        with pytest.raises(ModelError, match="endpoint down"):
            CachedEmbedder(failing, store.embeddings).embed_batch(["x", "y"])
        assert store.embeddings.count() == 0


def test_an_embedder_returning_the_wrong_shape_is_a_model_error() -> None:
    class Short(HashEmbedder):
        def embed_batch(self, texts):  # type: ignore[no-untyped-def]
            return super().embed_batch(texts)[:, :8]

    with pytest.raises(ModelError, match=r"returned shape \(1, 8\)"):
        CachedEmbedder(Short(16)).embed_batch(["x"])


def test_a_cached_vector_of_another_length_is_refused(tmp_path: Path) -> None:
    with SQLiteStore(tmp_path / "m.db") as store:
        CachedEmbedder(HashEmbedder(8, name="m"), store.embeddings).embed_batch(["x"])
        with pytest.raises(BackendError, match=r"shape \(8,\), expected \(16,\)"):
            CachedEmbedder(HashEmbedder(16, name="m"), store.embeddings).embed_batch(["x"])


def test_a_corrupt_blob_is_a_backend_error(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with SQLiteStore(path) as store:
        CachedEmbedder(HashEmbedder(8), store.embeddings).embed_batch(["x"])
    conn = sqlite3.connect(path)
    conn.execute("UPDATE embeddings SET vector = x'0000'")
    conn.commit()
    conn.close()
    with SQLiteStore(path) as store, pytest.raises(BackendError, match="corrupt"):
        CachedEmbedder(HashEmbedder(8), store.embeddings).embed_batch(["x"])


def test_the_embeddings_table_is_content_addressed(tmp_path: Path) -> None:
    assert "m002_embeddings" in [m.name for m in MIGRATIONS]
    with SQLiteStore(tmp_path / "m.db") as store:
        columns = [r[1] for r in store.connection.execute("PRAGMA table_info(embeddings)")]
    assert columns == ["model", "hash", "dims", "vector", "created_at"]


def test_the_memory_cache_evicts_the_least_recently_used() -> None:
    cache = MemoryEmbeddingCache(max_entries=2)
    fake = HashEmbedder(4)
    cached = CachedEmbedder(fake, cache)
    cached.embed_batch(["a", "b"])
    cached.embed_batch(["a"])  # "a" is now the most recent
    cached.embed_batch(["c"])  # evicts "b"
    cached.embed_batch(["a", "b"])
    assert fake.calls == [["a", "b"], ["c"], ["b"]]
    assert len(cache) == 2


def test_cached_vectors_cannot_be_edited_through_the_cache() -> None:
    cached = CachedEmbedder(HashEmbedder(4))
    out = cached.embed_batch(["a"])
    out[0, 0] = 99.0
    assert cached.embed_batch(["a"])[0, 0] != 99.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=12), max_size=12), st.lists(st.text(max_size=12), max_size=12))
def test_caching_changes_no_vector_and_embeds_each_distinct_text_once(first: list[str], second: list[str]) -> None:
    fake = HashEmbedder(8)
    cached = CachedEmbedder(fake)
    for texts in (first, second):
        got = cached.embed_batch(texts)
        assert got.shape == (len(texts), 8)
        if texts:
            assert np.array_equal(got, HashEmbedder(8).embed_batch(texts))
    embedded = [t for call in fake.calls for t in call]
    assert sorted(embedded) == sorted(set(first) | set(second))


def test_hash_embedder_similarity_follows_shared_words() -> None:
    v = HashEmbedder(256).embed_batch(["red apple pie", "green apple pie", "quarterly tax report"])
    assert cosine(v[0], v[1]) > 0.5 > abs(cosine(v[0], v[2]))
