"""Issue 28's third pass (``m026_compact_store``): sentence vectors in 2 bits, older manifests brief.

The 2-bit codec, the stored sizes, and the upgrade of a store of the previous
layout on both backends (real SQLite files and a real PostgreSQL via
pgserver), with the documented offline HashEmbedder at MiniLM's 384
dimensions so the blobs have their real sizes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from layouts import PASSAGE_ROWS, before_m028
from pg import fresh_schema, raw_rows, schema_url

from stratamem import Config, Memory
from stratamem.embed.quantize import decode_int2, encode_int2, encode_int4, int2_blob_size, int2_rows, int4_rows
from stratamem.errors import BackendError
from stratamem.retrieve.sentences import sentence_texts
from stratamem.store.manifest_rows import decode_manifest
from stratamem.store.open import open_store
from stratamem.testing.hash_embedder import HashEmbedder

NO_PYRAMID = Config().replace(pyramid={"enabled": False})


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store's location on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "signs.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "signs"))


def _chat(n: int) -> list[dict[str, Any]]:
    """Short turns of several sentences each (they get sentence vectors)."""
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"My sister Ana{i} moved to Porto{i} last spring after a long search. "
            f"She found a flat near the river{i} with a small balcony full of plants. "
            f"Her cat Pim{i} sleeps on the balcony all afternoon.",
            "metadata": {"dia_id": f"D1:{i}"},
        }
        for i in range(n)
    ]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False, width=32),
        min_size=1,
        max_size=41,
    )
)
def test_two_bit_codes_are_sign_and_size_against_the_rms_and_decode_to_unit_rows(values: list[float]) -> None:
    vec = np.asarray([values], dtype=np.float32)
    [blob] = encode_int2(vec)
    dims = len(values)
    assert len(blob) == int2_blob_size(dims) == (dims + 3) // 4
    rms = float(np.sqrt(np.mean(np.square(vec[0].astype(np.float64)))))
    want = [(1 if v >= 0 else -1) * (3 if abs(float(v)) > 0.9816 * rms else 1) for v in vec[0]]
    codes = int2_rows(blob, dims)
    assert codes.dtype == np.int8 and codes[0].tolist() == want
    back = decode_int2([blob], dims)
    assert np.isclose(float(np.linalg.norm(back[0])), 1.0, atol=1e-5)
    assert np.allclose(back[0] * float(np.linalg.norm(want)), want, atol=1e-4)


def test_two_bit_codes_keep_most_of_a_cosine_and_refuse_a_blob_of_the_wrong_length() -> None:
    rng = np.random.default_rng(3)
    vec = rng.normal(size=(200, 384)).astype(np.float32)
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    assert np.einsum("ij,ij->i", decode_int2(encode_int2(vec), 384), vec).min() > 0.92
    with pytest.raises(BackendError, match="2-bit"):
        decode_int2([b"\x00" * 95], 384)
    with pytest.raises(BackendError, match="not a multiple of 96"):
        int2_rows(b"\x00" * 100, 384)


def test_a_stored_sentence_vector_takes_one_bit_a_component(where: str) -> None:
    emb = HashEmbedder(384)
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        mem.add(_chat(10), session="s")
        rows = raw_rows(mem.store, PASSAGE_ROWS)
    assert len(rows) == 10 and {m for _, m, _ in rows} == {f"{emb.name}/384/sentences2"}
    assert {len(v) for _, _, v in rows} == {3 * 96}  # three sentences; 4 bits took 3 * 192


def _as_before_m026(store: Any, emb: HashEmbedder, texts: dict[int, list[str]]) -> dict[int, bytes]:
    """Put a store back as it was before ``m026_compact_store``: 4-bit sentence rows under ``.../sentences4``."""
    old = {tid: b"".join(encode_int4(np.asarray(emb.embed_batch(t), dtype=np.float32))) for tid, t in texts.items()}
    raw_rows(store, "DELETE FROM recall_passages")
    store.embeddings.passages.put("n", f"{emb.name}/384/sentences4", old)
    before_m028(store)
    raw_rows(store, "DELETE FROM _stratamem_migrations WHERE name = 'm026_compact_store'")
    return old


def test_a_store_of_the_previous_layout_upgrades_without_the_model(where: str) -> None:
    emb = HashEmbedder(384)
    every = NO_PYRAMID.replace(context={"keep_full_manifests": 1000})  # the retention before: all in full
    with Memory(open_store(where), namespace="n", config=every, embedder=emb) as mem:
        mem.add(_chat(12), session="s")
        for q in ("where did Ana3 move", "Pim7 balcony", "river5 flat", "Porto2", "pottery", "spring search"):
            mem.context(q, budget=1500)
        index = mem._recall_index()
        texts = {tid: sentence_texts(index.turn(tid), 40) for tid in mem.store.embeddings.turns.load("n")}
        old = _as_before_m026(mem.store, emb, texts)
        turns = [dataclasses.astuple(t) for t in mem.store.iter_turns("n")]
        manifests = [(m.id, dict(m.data)) for m in mem.store.manifests.latest("n", 100)]
        bodies = dict(raw_rows(mem.store, "SELECT id, body FROM manifests"))
    assert len(manifests) == 6 and all("stored_trimmed" not in d for _, d in manifests)
    fresh = HashEmbedder(384)
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=fresh) as mem:  # m026 runs
        assert ("m026_compact_store",) in raw_rows(mem.store, "SELECT name FROM _stratamem_migrations")
        rows = {int(t): (m, bytes(v)) for t, m, v in raw_rows(mem.store, PASSAGE_ROWS)}
        assert {m for m, _ in rows.values()} == {f"{emb.name}/384/sentences2"}
        assert {t: v for t, (_, v) in rows.items()} == {
            t: b"".join(encode_int2(int4_rows(blob, 384))) for t, blob in old.items()
        }
        assert [dataclasses.astuple(t) for t in mem.store.iter_turns("n")] == turns
        kept = [(m.id, dict(m.data)) for m in mem.store.manifests.latest("n", 100)]
        assert [i for i, _ in kept] == [i for i, _ in manifests]  # none dropped
        after = dict(raw_rows(mem.store, "SELECT id, body FROM manifests"))
        for (mid, data), (_, before) in zip(kept, manifests, strict=True):
            if mid in [i for i, _ in manifests[:3]]:  # the newest three: untouched
                assert bytes(after[mid]) == bytes(bodies[mid]) and data == before
                continue
            assert data["stored_trimmed"] == {"scores": True} and len(after[mid]) < len(bodies[mid])
            assert [(e["id"], e["reason"], e["tokens"], e["score"].get("fused")) for e in data["items"]] == [
                (e["id"], e["reason"], e["tokens"], e["score"].get("fused")) for e in before["items"]
            ]
            assert decode_manifest(bytes(after[mid]))["near_misses"] == [
                {**n, "score": {k: v for k, v in n["score"].items() if k == "fused"}} for n in before["near_misses"]
            ]
        mem.search("where did Ana3 move", k=3)
        assert [t for c in fresh.calls for t in c] == ["where did Ana3 move"]  # no sentence embedded again
