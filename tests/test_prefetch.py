"""PrefetchedEmbedder: one call for a known batch; a failed batch reaches each caller once, unretried."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from stratamem.embed.prefetch import PrefetchedEmbedder
from stratamem.errors import ModelError
from stratamem.testing.hash_embedder import HashEmbedder


class _Flaky:
    """HashEmbedder that fails any call holding a text listed in ``bad``; counts calls."""

    name, dimensions = "flaky", 16

    def __init__(self, bad: set[str]) -> None:
        self.inner, self.bad, self.calls = HashEmbedder(16), bad, []

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if self.bad & set(texts):
            raise ModelError("endpoint down")
        return self.inner.embed_batch(texts)


def test_filled_texts_are_served_from_one_call_and_others_pass_through() -> None:
    inner = _Flaky(set())
    pre = PrefetchedEmbedder(inner)
    assert pre.fill(["a", "b", "a"]) == 2
    got = pre.embed_batch(["b", "a", "c"])
    assert inner.calls == [["a", "b"], ["c"]]
    assert np.array_equal(got, HashEmbedder(16).embed_batch(["b", "a", "c"]))


def test_a_failed_batch_raises_to_each_caller_without_asking_the_embedder_again() -> None:
    inner = _Flaky({"b"})
    pre = PrefetchedEmbedder(inner)
    assert pre.fill(["a", "b"]) == 0
    for text in ("a", "b"):
        with pytest.raises(ModelError, match="endpoint down"):
            pre.embed_batch([text])
    assert inner.calls == [["a", "b"]]
    assert pre.embed_batch(["c"]).shape == (1, 16)  # a text outside the batch still asks
    pre.clear()
    inner.bad = set()
    assert pre.embed_batch(["a"]).shape == (1, 16)  # cleared: asked afresh
    assert inner.calls == [["a", "b"], ["c"], ["a"]]


def test_rows_of_the_wrong_shape_are_held_as_a_model_error() -> None:
    class Short(_Flaky):
        def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
            return super().embed_batch(texts)[:1]

    pre = PrefetchedEmbedder(Short(set()))
    assert pre.fill(["a", "b"]) == 0
    with pytest.raises(ModelError, match=r"returned \(1, 16\) rows"):
        pre.embed_batch(["b"])


_PYRAMID = {
    "micro_chunk_size": 5,
    "mini_chunk_size": 10,
    "macro_chunk_size": 20,
    "defer_summarization": False,
    "auto_extract_facts": False,
}


def test_summary_vectors_come_from_the_turns_stored_vectors_without_asking_the_model(tmp_path) -> None:
    """With every turn's vector stored, the encoder sees the turns once and no summary text."""
    from test_pyramid import msgs

    from stratamem import Config, Memory
    from stratamem.embed.quantize import decode_int6
    from stratamem.retrieve.corpus import TurnCorpus
    from stratamem.retrieve.lexical import analyze
    from stratamem.retrieve.sentences import sentence_texts

    embedder = HashEmbedder(16)
    mem = Memory(tmp_path / "m.db", namespace="t", config=Config().replace(pyramid=_PYRAMID), embedder=embedder)
    mem.add_sessions([])  # nothing: no call
    assert embedder.calls == []
    mem.add(msgs(40), session="a")
    nodes = mem.pyramid.nodes()
    assert [sum(n.level == lv for n in nodes) for lv in (1, 2, 3)] == [8, 4, 2]
    # The turns in one call, then their sentences (short turns of several, embedding.sentences); no summary text.
    added = mem.turns(session="a")
    sentences = [t for st in added for t in sentence_texts(st, len(analyze(TurnCorpus.text(st))))]
    assert embedder.calls == [[TurnCorpus.text(st) for st in added], sentences]
    rows = mem.store.embeddings.turns.load("t")
    for node in nodes:
        ids = mem.pyramid.turn_ids(node.id)
        assert len(ids) == node.turn_count
        total = decode_int6([rows[i].vector for i in ids], 16).sum(axis=0)
        want = total / np.linalg.norm(total)
        stored = mem.pyramid.embedding(node.id)
        # Stored as int8 codes with a scale: within half a quantisation step of the vector.
        assert np.abs(stored - want).max() <= np.abs(want).max() / 127 / 2 + 1e-6
    mem.close()


def test_without_stored_turn_vectors_each_levels_summaries_are_embedded_together(tmp_path) -> None:
    """Turns written without an embedder: summary texts go to the encoder in one call per level."""
    from test_pyramid import msgs

    from stratamem import Config, Memory
    from stratamem.testing.hash_embedder import hash_vector

    off = Config().replace(pyramid={**_PYRAMID, "enabled": False})
    with Memory(tmp_path / "m.db", namespace="t", config=off, embedder=None) as plain:
        plain.add(msgs(40), session="a")
    embedder = HashEmbedder(16)
    mem = Memory(tmp_path / "m.db", namespace="t", config=Config().replace(pyramid=_PYRAMID), embedder=embedder)
    mem.pyramid.update(["a"])
    nodes = mem.pyramid.nodes()
    by_level = {lv: [n.summary.text for n in nodes if n.level == lv] for lv in (1, 2, 3)}
    assert [len(by_level[lv]) for lv in (1, 2, 3)] == [8, 4, 2]
    assert embedder.calls == [list(dict.fromkeys(by_level[lv])) for lv in (1, 2, 3)]
    for node in nodes:
        stored = mem.pyramid.embedding(node.id)
        want = hash_vector(node.summary.text, 16)
        assert np.abs(stored - want).max() <= np.abs(want).max() / 127 / 2 + 1e-6
    mem.close()


def test_one_model_name_for_every_place_that_records_vectors(tmp_path) -> None:
    from stratamem.embed import model_name
    from stratamem.items.core import embedder_name
    from stratamem.retrieve.persisted import TurnIndexer
    from stratamem.store import SQLiteStore

    class Unnamed:
        name = ""

    named = HashEmbedder(16)
    with SQLiteStore(tmp_path / "m.db") as store:
        for emb, want in ((named, named.name), (Unnamed(), "Unnamed"), (object(), "object")):
            assert model_name(emb) == embedder_name(emb) == PrefetchedEmbedder(emb).name == want
            assert TurnIndexer(store, "n", emb).model == want
