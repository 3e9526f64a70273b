"""A numpy forward pass of a BERT encoder (all-MiniLM-L6-v2), exact in float32.

Internal to :mod:`stratamem.embed.local`. It reproduces what the
sentence-transformers pipeline of the model does (``modules.json``: Transformer
→ mean Pooling → Normalize) with the weights from ``model.safetensors``, so
the library never needs torch. The tokenizer lives in the caller; this module
takes token ids and an attention mask.

Speed notes (2-core box): the matrix products go to numpy's BLAS; GELU is
the only costly element-wise step, so it runs in cache-sized chunks with
preallocated scratch buffers (a naive version took longer than all the
matrix products of a layer together).
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
_GELU_CHUNK = 32_768


@dataclass(frozen=True, slots=True)
class _Layer:
    qkv: np.ndarray      # (d, 3d), query part pre-scaled by 1/sqrt(head_dim)
    qkv_bias: np.ndarray
    out: np.ndarray
    out_bias: np.ndarray
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
        self.position = w["embeddings.position_embeddings.weight"]
        # Sentence embedding inputs are a single segment: token type 0 everywhere.
        self.token_type = w["embeddings.token_type_embeddings.weight"][0]
        self.emb_ln = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        scale = _F32(1.0 / math.sqrt(self.head_dim))
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            def g(name: str, i: int = i) -> np.ndarray:
                return w[f"encoder.layer.{i}.{name}"]
            q_w = g("attention.self.query.weight") * scale
            q_b = g("attention.self.query.bias") * scale
            self.layers.append(_Layer(
                qkv=np.ascontiguousarray(np.concatenate(
                    [q_w, g("attention.self.key.weight"), g("attention.self.value.weight")]).T),
                qkv_bias=np.concatenate([q_b, g("attention.self.key.bias"), g("attention.self.value.bias")]),
                out=np.ascontiguousarray(g("attention.output.dense.weight").T),
                out_bias=g("attention.output.dense.bias"),
                ln1_w=g("attention.output.LayerNorm.weight"), ln1_b=g("attention.output.LayerNorm.bias"),
                up=np.ascontiguousarray(g("intermediate.dense.weight").T),
                up_bias=g("intermediate.dense.bias"),
                down=np.ascontiguousarray(g("output.dense.weight").T),
                down_bias=g("output.dense.bias"),
                ln2_w=g("output.LayerNorm.weight"), ln2_b=g("output.LayerNorm.bias"),
            ))
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
        x += self.token_type
        x = _layer_norm(x.reshape(b * n, d), *self.emb_ln, self.eps)
        # Padding keys get a large negative score, as the reference implementation
        # adds finfo.min: after softmax they weigh exactly zero.
        key_bias = np.where(mask[:, None, None, :] > 0, _F32(0), _F32(-1e9)).astype(_F32)
        for L in self.layers:
            qkv = x @ L.qkv
            qkv += L.qkv_bias
            qkv = qkv.reshape(b, n, 3, h, hd).transpose(2, 0, 3, 1, 4)
            scores = qkv[0] @ qkv[1].transpose(0, 1, 3, 2)
            scores += key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(b * n, d)
            a = ctx @ L.out
            a += L.out_bias
            a += x
            x = _layer_norm(a, L.ln1_w, L.ln1_b, self.eps)
            up = x @ L.up
            up += L.up_bias
            _gelu_inplace(up)
            down = up @ L.down
            down += L.down_bias
            down += x
            x = _layer_norm(down, L.ln2_w, L.ln2_b, self.eps)
        m = mask.astype(_F32)[:, :, None]
        summed = (x.reshape(b, n, d) * m).sum(axis=1)
        # sentence-transformers clamps the token count at 1e-9 before dividing.
        return summed / np.maximum(m.sum(axis=1), _F32(1e-9))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """LayerNorm over the last axis; ``x`` is overwritten."""
    x -= x.mean(axis=-1, keepdims=True)
    var = np.mean(np.square(x), axis=-1, keepdims=True)
    x *= 1.0 / np.sqrt(var + _F32(eps))
    x *= weight
    x += bias
    return x


def _gelu_inplace(x: np.ndarray) -> None:
    """Exact-form GELU, ``x·Φ(x)``, written as ``relu(x) − ½|x|·erfc(|x|/√2)``, in place.

    The identity holds on both signs and needs erfc only for non-negative
    arguments, where the A&S approximation is accurate. The ½ is folded into
    the polynomial and every step writes into preallocated scratch buffers.
    """
    flat = x.reshape(-1)
    size = min(_GELU_CHUNK, flat.size)
    a, t, e, q = (np.empty(size, _F32) for _ in range(4))
    p = _F32(_AS_P / math.sqrt(2.0))
    c = [_F32(0.5 * v) for v in _AS_A]
    for start in range(0, flat.size, size):
        v = flat[start:start + size]
        k = v.size
        av, tv, ev, qv = a[:k], t[:k], e[:k], q[:k]
        np.abs(v, out=av)
        np.multiply(av, p, out=tv)
        tv += 1
        np.reciprocal(tv, out=tv)
        np.multiply(av, _F32(-0.5), out=ev)
        ev *= av
        np.exp(ev, out=ev)          # exp(-(|x|/√2)²)
        np.multiply(tv, c[0], out=qv)
        for coef in c[1:]:
            qv += coef
            qv *= tv
        qv *= ev                    # ½·erfc(|x|/√2)
        qv *= av
        np.maximum(v, 0, out=v)
        v -= qv
