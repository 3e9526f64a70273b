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
