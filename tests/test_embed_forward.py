"""The numpy forward pass's element-wise steps against float64 textbook forms, and its vectors against
sentence-transformers' at float32 precision (issue 12 made these steps cheaper; the vectors must not move)."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem.embed import LocalMiniLM
from stratamem.embed._bert import _attention, _bias_gelu_inplace, _layer_norm

CASES = json.loads((Path(__file__).parent / "fixtures" / "minilm_reference.json").read_text(encoding="utf-8"))["cases"]
_ERF = np.vectorize(math.erf)
_EPS = float(np.finfo(np.float32).eps)


def _gelu64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)))


def _softmax_attention64(q: np.ndarray, k: np.ndarray, v: np.ndarray, key_bias: np.ndarray | None) -> np.ndarray:
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2)
    if key_bias is not None:
        s = s + key_bias
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return (p @ v.astype(np.float64)).transpose(0, 2, 1, 3)  # (b, n, h, hd)


def test_gelu_with_its_bias_matches_the_erf_form_everywhere() -> None:
    # Both tails (erfc underflows past |x| ≈ 13), zero, and the range the model's activations live in.
    grid = np.concatenate([np.linspace(-40, 40, 8001), [0.0, -0.0, 1e-30, -1e-30, 88.0, -88.0]]).astype(np.float32)
    x = np.resize(grid, (13, 1536)).astype(np.float32)  # rows × the model's intermediate width; odd row count
    bias = np.linspace(-1, 1, 1536).astype(np.float32)
    want = _gelu64(x + bias)  # the same float32 sum the pass adds, then GELU in float64
    got = x.copy()
    _bias_gelu_inplace(got, bias)
    # A&S 7.1.26 is accurate to 1.5e-7 in erfc, times |x|/2 (≤ 3.3e-7 near |x| = 3, as before issue 12);
    # the rest is float32 rounding of the result.
    assert (np.abs(got - want) <= 4e-7 + 2 * _EPS * np.abs(want)).all()


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 90), scale=st.floats(0.01, 30), seed=st.integers(0, 2**32 - 1))
def test_gelu_blocks_cover_every_row_exactly_once(rows: int, scale: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, 1536)) * scale).astype(np.float32)
    bias = rng.standard_normal(1536).astype(np.float32)
    got = x.copy()
    _bias_gelu_inplace(got, bias)
    want = _gelu64(x + bias)
    assert (np.abs(got - want) <= 4e-7 + 2 * _EPS * np.abs(want)).all()


@settings(max_examples=80, deadline=None)
@given(
    b=st.integers(1, 4),
    n=st.integers(1, 12),
    scale=st.sampled_from([0.1, 1.0, 5.0, 30.0, 200.0]),
    padded=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_attention_equals_the_max_subtracted_softmax(b: int, n: int, scale: float, padded: bool, seed: int) -> None:
    """Any score scale: small ones skip the row maximum, overflowing ones (scale 30, 200) take the textbook path."""
    rng = np.random.default_rng(seed)
    h, hd = 3, 8
    q, k, v = (rng.standard_normal((b, h, n, hd)).astype(np.float32) * s for s in (scale, 1.0, 1.0))
    mask = np.ones((b, n), np.int64)
    if padded:
        mask[:, 1:][rng.random((b, n - 1)) < 0.4] = 0  # the first token is always real, as [CLS] is
    key_bias = np.where(mask[:, None, None, :] > 0, np.float32(0), np.float32(-1e9)).astype(np.float32)
    out = np.full((b, n, h, hd), np.nan, np.float32)
    _attention(q, k, v, key_bias if padded else None, out)
    want = _softmax_attention64(q, k, v, key_bias if padded else None)
    assert np.isfinite(out).all()
    assert np.abs(out - want).max() <= 1e-5 * max(1.0, scale)


def test_attention_gives_padding_keys_no_weight() -> None:
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((1, 2, 4, 8)).astype(np.float32) for _ in range(3))
    mask = np.array([[1, 1, 0, 0]])
    key_bias = np.where(mask[:, None, None, :] > 0, np.float32(0), np.float32(-1e9)).astype(np.float32)
    out = np.empty((1, 4, 2, 8), np.float32)
    _attention(q, k, v, key_bias, out)
    v_changed = v.copy()
    v_changed[:, :, 2:] = 1e6  # what padding positions hold must not matter
    again = np.empty_like(out)
    _attention(q, k, v_changed, key_bias, again)
    assert np.array_equal(out, again)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 40), shift=st.floats(-50, 50), scale=st.floats(1e-3, 1e3), seed=st.integers(0, 2**32 - 1))
def test_layer_norm_matches_float64(rows: int, shift: float, scale: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, 384)) * scale + shift).astype(np.float32)
    w, b = rng.standard_normal(384).astype(np.float32), rng.standard_normal(384).astype(np.float32)
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(-1, keepdims=True)) / np.sqrt(x64.var(-1, keepdims=True) + 1e-12) * w + b
    got = _layer_norm(x.copy(), w, b, 1e-12)
    # float32 centring loses about |shift|/scale ulps of the spread.
    assert np.abs(got - want).max() <= 2e-5 * (1 + abs(shift) / scale) * np.abs(w).max()


def test_vectors_equal_sentence_transformers_to_float32_precision(minilm: LocalMiniLM) -> None:
    """Tighter than test_embed's 0.9999 bar: the cheaper element-wise steps moved no vector."""
    got = minilm.embed_batch([c["text"] for c in CASES])
    ref = np.stack([np.frombuffer(base64.b64decode(c["vector"]), dtype="<f4") for c in CASES])
    ref = ref / np.linalg.norm(ref, axis=1, keepdims=True)
    assert float((got * ref).sum(axis=1).min()) >= 0.999999
    assert float(np.abs(got - ref).max()) < 1e-6
