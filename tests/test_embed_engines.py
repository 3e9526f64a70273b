"""The two forward passes of LocalMiniLM: numpy and onnxruntime give the same vectors.

Real model, real onnxruntime. The reference vectors are sentence-transformers'
(``tests/fixtures/minilm_reference.json``).
"""

from __future__ import annotations

import base64
import importlib.abc
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from stratamem import Config
from stratamem.embed import LocalMiniLM
from stratamem.errors import ConfigError

CASES = json.loads((Path(__file__).parent / "fixtures" / "minilm_reference.json").read_text(encoding="utf-8"))["cases"]
LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"


@pytest.fixture(scope="module")
def numpy_pass() -> Iterator[LocalMiniLM]:
    model = LocalMiniLM(engine="numpy").load()
    yield model
    model.close()


@pytest.fixture(scope="module")
def onnx_pass() -> Iterator[LocalMiniLM]:
    model = LocalMiniLM(engine="onnx").load()
    yield model
    model.close()


def _reference() -> np.ndarray:
    ref = np.stack([np.frombuffer(base64.b64decode(c["vector"]), dtype="<f4") for c in CASES])
    return ref / np.linalg.norm(ref, axis=1, keepdims=True)


@pytest.mark.parametrize("engine", ["numpy", "onnx"])
def test_each_engine_equals_sentence_transformers(engine: str, numpy_pass: LocalMiniLM, onnx_pass: LocalMiniLM) -> None:
    model = numpy_pass if engine == "numpy" else onnx_pass
    got = model.embed_batch([c["text"] for c in CASES])
    ref = _reference()
    assert float((got * ref).sum(axis=1).min()) >= 0.999999
    assert float(np.abs(got - ref).max()) < 2e-6


def test_engines_agree_on_real_turns_of_every_length(numpy_pass: LocalMiniLM, onnx_pass: LocalMiniLM) -> None:
    """LoCoMo turns in mixed-length batches (padding), plus the empty text and one past the 256-token cut."""
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    turns = [
        t["text"]
        for key, s in data[0]["conversation"].items()
        if key.startswith("session_") and isinstance(s, list)
        for t in s
    ][:300]
    texts = [*turns, "", "word " * 400, "?"]
    a, b = numpy_pass.embed_batch(texts), onnx_pass.embed_batch(texts)
    assert a.shape == b.shape == (len(texts), 384)
    assert float((a * b).sum(axis=1).min()) >= 0.99999
    assert float(np.abs(a - b).max()) < 1e-5
    # A text's vector does not depend on the batch it was padded in.
    alone = onnx_pass.embed_batch([turns[5]] * 40)
    assert float(np.abs(alone[0] - b[5]).max()) < 1e-6


def test_auto_builds_onnxruntime_only_for_bulk_calls() -> None:
    model = LocalMiniLM()
    try:
        model.embed_batch(["a short query"])
        assert model.active_engine == "numpy"
        assert model._bulk is None  # no onnxruntime session for a query
        model.embed_batch([f"turn number {i}" for i in range(32)])
        assert model.active_engine == "onnx"
        # Once built, the session serves small calls too.
        calls = []
        session = model._bulk
        real = session.pooled
        session.pooled = lambda ids, mask: calls.append(len(ids)) or real(ids, mask)
        model.embed_batch(["another query"])
        assert calls == [1]
    finally:
        model.close()


def test_auto_falls_back_to_numpy_without_onnxruntime(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, numpy_pass: LocalMiniLM
) -> None:
    # An entry of None in sys.modules makes the import raise ImportError, as if not installed.
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    texts = [f"what happened on day {i}" for i in range(40)]
    model = LocalMiniLM()
    try:
        with caplog.at_level(logging.INFO, logger="stratamem.embed.local"):
            got = model.embed_batch(texts)
        assert model.active_engine == "numpy"
        assert float(np.abs(got - numpy_pass.embed_batch(texts)).max()) == 0.0
        assert [(r.levelno, "onnxruntime engine unavailable" in r.getMessage()) for r in caplog.records] == [
            (logging.INFO, True)
        ]
    finally:
        model.close()
    with pytest.raises(ConfigError, match="engine='onnx' needs onnxruntime"):
        LocalMiniLM(engine="onnx").load()


class _BrokenInstall(importlib.abc.MetaPathFinder):
    """An onnxruntime that is installed but cannot load its library."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "onnxruntime":
            raise ImportError("libonnxruntime.so: cannot open shared object file")
        return None


def test_a_broken_onnxruntime_install_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delitem(sys.modules, "onnxruntime", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_BrokenInstall(), *sys.meta_path])
    model = LocalMiniLM()
    try:
        with caplog.at_level(logging.INFO, logger="stratamem.embed.local"):
            model.embed_batch([f"turn {i}" for i in range(32)])
        assert model.active_engine == "numpy"
        assert [(r.levelno, "cannot open shared object" in r.getMessage()) for r in caplog.records] == [
            (logging.WARNING, True)
        ]
    finally:
        model.close()


def test_engine_is_checked() -> None:
    with pytest.raises(ConfigError, match="engine must be one of auto, numpy, onnx"):
        LocalMiniLM(engine="torch")
    with pytest.raises(ConfigError, match="embedding.engine: 'torch' is not one of auto, numpy, onnx"):
        Config.from_dict({"embedding": {"engine": "torch"}})
