"""A numpy forward pass of a BERT encoder (all-MiniLM-L6-v2), exact in float32.

Internal to :mod:`stratamem.embed.local`. It reproduces what the
sentence-transformers pipeline of the model does (``modules.json``: Transformer
→ mean Pooling → Normalize) with the weights from ``model.safetensors``, so
the library never needs torch. The tokenizer lives in the caller; this module
takes token ids and an attention mask.

Speed notes (2-core box, issue 12): the matrix products go to numpy's BLAS
and run at ~100-118 GFLOP/s a core, what OpenBLAS reaches here on any shape,
so they are left alone. The element-wise steps are numpy passes over memory,
and the cheap ones cost ~0.13 ns an element each: they are made cheaper by
making fewer passes — GELU with its bias over cache-sized blocks of rows,
softmax without the row maximum when nothing can overflow and normalized
after the product with the values, two biases folded into others at load,
layer norm's means as BLAS products. A/B in one process on LoCoMo batches:
the whole pass 5-6 % faster; vectors equal to ~1e-7 (``docs/embeddings.md``).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_F32 = np.float32

# Abramowitz & Stegun 7.1.26: erfc(z) ≈ poly(t)·exp(-z²), t = 1/(1 + p·z), for z ≥ 0,
# absolute error < 1.5e-7 — below float32 resolution of the activations, so GELU
# matches the exact erf form (torch's default) to the last bits that matter.
_AS_P = 0.3275911
_AS_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)
# In terms of |x|: t = 1/(1 + p·|x|/√2) = u/p' with u = 1/(|x| + 1/p'), p' = p/√2. The
# polynomial's coefficients absorb the powers of 1/p' and GELU's ½ (highest power first).
_P_X = _AS_P / math.sqrt(2.0)
_U_SHIFT = np.float32(1.0 / _P_X)
_U_COEF = tuple(np.float32(0.5 * c / _P_X ** (5 - i)) for i, c in enumerate(_AS_A))
# Elements per block of the GELU: four float32 scratch buffers of this size plus
# the block itself stay within a core's 2 MB L2 (65,536 measured fastest on this box).
_GELU_CHUNK = 65_536


@dataclass(frozen=True, slots=True)
class _Layer:
    qkv: np.ndarray  # (d, 3d), query part pre-scaled by 1/sqrt(head_dim)
    q_bias: np.ndarray  # the query's bias only: see BertEncoder.__init__ for the key's and the value's
    out: np.ndarray
    out_bias: np.ndarray  # the output projection's bias plus the value bias projected through it
    ln1_w: np.ndarray
    ln1_b: np.ndarray
    up: np.ndarray
    up_bias: np.ndarray
    down: np.ndarray
    down_bias: np.ndarray
    ln2_w: np.ndarray
    ln2_b: np.ndarray


class BertEncoder:
    """Weights of a BERT model plus the forward pass with mean pooling.

    Args:
        model_dir: Directory holding ``config.json`` and ``model.safetensors``.
    """

    def __init__(self, model_dir: Path) -> None:
        from safetensors.numpy import load_file

        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        self.head_dim = self.hidden // self.heads
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        if config.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"unsupported activation {config.get('hidden_act')!r}")
        w = load_file(str(model_dir / "model.safetensors"))
        # Checkpoints exported from BertModel have no "bert." prefix; those from
        # BertFor* heads do. Accept both.
        w = {k.removeprefix("bert."): v for k, v in w.items()}
        self.word = w["embeddings.word_embeddings.weight"]
        # Sentence embedding inputs are a single segment: token type 0 everywhere,
        # so its row is added to the positions once here instead of on every pass.
        self.position = w["embeddings.position_embeddings.weight"] + w["embeddings.token_type_embeddings.weight"][0]
        self.emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        scale = _F32(1.0 / math.sqrt(self.head_dim))
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):

            def g(name: str, i: int = i) -> np.ndarray:
                return w[f"encoder.layer.{i}.{name}"]

            out_w = np.ascontiguousarray(g("attention.output.dense.weight").T)
            # Two biases are moved, not dropped (exact in real arithmetic, last-bit
            # differences in float32): the key bias adds q·b_k to every score of a
            # query row, which softmax cancels; the attention weights of a row sum to
            # 1, so the value bias reaches the context unchanged and is projected once.
            out_b = g("attention.output.dense.bias") + g("attention.self.value.bias") @ out_w
            self.layers.append(
                _Layer(
                    qkv=np.ascontiguousarray(
                        np.concatenate(
                            [
                                g("attention.self.query.weight") * scale,
                                g("attention.self.key.weight"),
                                g("attention.self.value.weight"),
                            ]
                        ).T
                    ),
                    q_bias=g("attention.self.query.bias") * scale,
                    out=out_w,
                    out_bias=out_b.astype(_F32),
                    ln1_w=g("attention.output.LayerNorm.weight"),
                    ln1_b=g("attention.output.LayerNorm.bias"),
                    up=np.ascontiguousarray(g("intermediate.dense.weight").T),
                    up_bias=g("intermediate.dense.bias"),
                    down=np.ascontiguousarray(g("output.dense.weight").T),
                    down_bias=g("output.dense.bias"),
                    ln2_w=g("output.LayerNorm.weight"),
                    ln2_b=g("output.LayerNorm.bias"),
                )
            )
        self.max_positions = int(self.position.shape[0])

    def pooled(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Mean-pooled (not yet normalized) last hidden states, shape ``(batch, hidden)``.

        Args:
            ids: Token ids, shape ``(batch, length)``, padded with anything.
            mask: 1 for real tokens, 0 for padding, same shape.
        """
        b, n = ids.shape
        d, h, hd = self.hidden, self.heads, self.head_dim
        x = self.word[ids]
        x += self.position[:n]
        x = _layer_norm(x.reshape(b * n, d), *self.emb_ln, self.eps)
        # Padding keys get a large negative score, as the reference implementation
        # adds finfo.min: after softmax they weigh exactly zero. A batch without
        # padding (rows of one length) needs no mask at all.
        key_bias = None if mask.all() else np.where(mask[:, None, None, :] > 0, _F32(0), _F32(-1e9)).astype(_F32)
        ctx = np.empty((b, n, h, hd), _F32)
        for L in self.layers:
            qkv = x @ L.qkv
            qkv[:, :d] += L.q_bias
            q, k, v = qkv.reshape(b, n, 3, h, hd).transpose(2, 0, 3, 1, 4)
            _attention(q, k, v, key_bias, ctx)
            a = ctx.reshape(b * n, d) @ L.out
            a += L.out_bias
            a += x
            x = _layer_norm(a, L.ln1_w, L.ln1_b, self.eps)
            up = x @ L.up
            _bias_gelu_inplace(up, L.up_bias)
            down = up @ L.down
            down += L.down_bias
            down += x
            x = _layer_norm(down, L.ln2_w, L.ln2_b, self.eps)
        m = mask.astype(_F32)[:, :, None]
        summed = (x.reshape(b, n, d) * m).sum(axis=1)
        # sentence-transformers clamps the token count at 1e-9 before dividing.
        return summed / np.maximum(m.sum(axis=1), _F32(1e-9))


def _attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, key_bias: np.ndarray | None, out: np.ndarray) -> None:
    """``softmax(q·kᵀ + key_bias)·v`` per batch row and head, written into ``out`` laid out ``(b, n, h, hd)``.

    ``q``, ``k``, ``v`` are ``(b, h, n, hd)`` views. Two passes over the
    ``(b, h, n, n)`` scores are saved against the textbook form: the row maximum
    is not subtracted before ``exp`` when no score can overflow or underflow
    (checked on the row sums; otherwise the textbook form runs), and rows are
    normalized after the product with ``v`` (``hd`` values a row instead of
    ``n``), in the same pass that lays the heads out side by side.
    """
    scores = q @ k.transpose(0, 1, 3, 2)
    if key_bias is not None:
        scores += key_bias
    with np.errstate(over="ignore", under="ignore"):  # checked just below
        e = np.exp(scores)
    sums = e.sum(axis=-1, keepdims=True)
    # Above 1e-20 the largest term of a row is a normal float with full precision;
    # a non-finite sum means some exp overflowed.
    if not (np.isfinite(sums).all() and sums.min() > _F32(1e-20)):
        scores -= scores.max(axis=-1, keepdims=True)
        e = np.exp(scores, out=scores)
        sums = e.sum(axis=-1, keepdims=True)
    np.reciprocal(sums, out=sums)
    np.multiply(e @ v, sums, out=out.transpose(0, 2, 1, 3))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis of a 2-D ``x``; ``x`` is overwritten.

    The row means are a matrix-vector product and the variances an
    ``einsum`` with no squared temporary: ~25 % faster than ``mean`` and
    ``mean(square)`` on this box's 384-wide rows.
    """
    d = x.shape[-1]
    x -= (x @ np.full(d, 1.0 / d, _F32))[:, None]
    inv = np.einsum("ij,ij->i", x, x)
    inv *= _F32(1.0 / d)
    inv += _F32(eps)
    np.sqrt(inv, out=inv)
    np.reciprocal(inv, out=inv)
    x *= inv[:, None]
    x *= weight
    x += bias
    return x


def _bias_gelu_inplace(x: np.ndarray, bias: np.ndarray) -> None:
    """``x = gelu(x + bias)`` in place for a C-contiguous 2-D ``x``, GELU in its exact form ``x·Φ(x)``.

    Written as ``relu(x) − ½|x|·erfc(|x|/√2)``: the identity holds on both
    signs and needs erfc only for non-negative arguments, where the A&S
    approximation is accurate. The work runs over blocks of whole rows that
    stay in the core's cache, the bias added there too, every step writing
    into preallocated scratch buffers. The A&S variable ``t = 1/(1 + p·z)`` is
    replaced by ``u = 1/(|x| + √2/p)`` (``t = u·√2/p``) with the polynomial's
    coefficients rescaled, which saves one pass per block.
    """
    rows, cols = x.shape
    step = max(1, _GELU_CHUNK // cols)
    size = min(rows, step) * cols
    a, u, e, q = (np.empty(size, _F32) for _ in range(4))
    zero = np.zeros(size, _F32)  # numpy's maximum runs ~2x faster against an array than a scalar
    for start in range(0, rows, step):
        block = x[start : start + step]
        block += bias
        v = block.reshape(-1)
        k = v.size
        av, uv, ev, qv, zv = a[:k], u[:k], e[:k], q[:k], zero[:k]
        np.abs(v, out=av)
        np.add(av, _U_SHIFT, out=uv)
        np.reciprocal(uv, out=uv)
        np.square(v, out=ev)
        ev *= _F32(-0.5)
        np.exp(ev, out=ev)  # exp(-(|x|/√2)²)
        np.multiply(uv, _U_COEF[0], out=qv)
        for coef in _U_COEF[1:]:
            qv += coef
            qv *= uv
        qv *= ev  # ½·erfc(|x|/√2)
        qv *= av
        np.maximum(v, zv, out=v)
        v -= qv
