"""An embedder behind any OpenAI-compatible ``/v1/embeddings`` endpoint.

Goes through the official ``openai`` client (the ``llm`` extra), so OpenAI
itself, Azure-style proxies and local servers (llama.cpp, vLLM, Ollama's
OpenAI mode, text-embeddings-inference) all work. Base URL and key are
passed explicitly: the library never reads ``OPENAI_*`` variables.
Retries with backoff on 408/409/429/5xx and lost connections are the
client's own; what still fails becomes :class:`~stratamem.errors.ModelError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, ModelError
from ._checks import check_texts, normalize_rows

if TYPE_CHECKING:  # numpy is imported where it is used: opening a store (`stratamem status`) needs none
    import numpy as np

__all__ = ["OpenAIEmbedder"]


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible endpoint.

    Args:
        model: Model name sent with each request.
        dimensions: Length of the vectors the model returns (checked on every reply).
        base_url: Endpoint including ``/v1`` (default: OpenAI's).
        api_key: Bearer key. Required for OpenAI's own endpoint; elsewhere ``None``
            sends a placeholder (local servers ignore it).
        request_dimensions: Send ``dimensions`` in the request, for models that can
            shorten their vectors (OpenAI ``text-embedding-3-*``). Many compatible
            servers reject the field, so it is off by default.
        batch_size: Most texts per request; longer inputs are split into several.
        timeout_s: Per-request timeout in seconds.
        max_retries: Retries of a transient failure (the client backs off exponentially).

    Raises:
        ConfigError: Bad limits, or no key for OpenAI's endpoint, or the
            ``openai`` package is missing.
    """

    def __init__(
        self,
        model: str,
        *,
        dimensions: int,
        base_url: str | None = None,
        api_key: str | None = None,
        request_dimensions: bool = False,
        batch_size: int = 64,
        timeout_s: float = 60.0,
        max_retries: int = 2,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError("model must be a non-empty string")
        if dimensions < 1 or batch_size < 1 or timeout_s <= 0 or max_retries < 0:
            raise ConfigError("dimensions, batch_size and timeout_s must be positive; max_retries not negative")
        try:
            import openai
        except ImportError as exc:
            raise ConfigError("OpenAIEmbedder needs the openai client: pip install 'stratamem[llm]'") from exc
        base_url = base_url or "https://api.openai.com/v1"
        if api_key is None and "api.openai.com" in base_url:
            raise ConfigError("OpenAIEmbedder needs an api_key for api.openai.com (it never reads the environment)")
        self.model = model
        # Shortened vectors differ from full ones: keep them apart in the cache.
        self.name = f"{model}@{dimensions}" if request_dimensions else model
        self.dimensions = int(dimensions)
        self.base_url = base_url
        self.request_dimensions = request_dimensions
        self.batch_size = int(batch_size)
        self._errors: tuple[type[Exception], ...] = (openai.OpenAIError,)
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "unused", timeout=float(timeout_s), max_retries=int(max_retries)
        )

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts with one request per ``batch_size`` texts.

        Some endpoints (OpenAI's among them) reject empty strings; that surfaces
        as :class:`~stratamem.errors.ModelError`, like any refused request.

        Returns:
            float32 array ``(len(texts), dimensions)``, rows L2-normalized (some
            compatible servers return unnormalized vectors), in input order.

        Raises:
            TypeError: Bad ``texts``.
            ModelError: A request failed after retries, or a reply has the wrong
                count, order, length, or non-finite or all-zero vectors.
        """
        import numpy as np

        texts = check_texts(texts)
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            out[start : start + len(chunk)] = self._request(chunk)
        return normalize_rows(out)

    def _request(self, chunk: list[str]) -> np.ndarray:
        import numpy as np

        extra: dict[str, Any] = {"dimensions": self.dimensions} if self.request_dimensions else {}
        try:
            resp = self._client.embeddings.create(model=self.model, input=chunk, encoding_format="float", **extra)
        except self._errors as exc:
            status = getattr(exc, "status_code", None)
            why = f"HTTP {status} ({type(exc).__name__})" if status else type(exc).__name__
            raise ModelError(f"embedding model {self.model!r} at {self.base_url} failed: {why}") from exc
        data = sorted(resp.data, key=lambda d: d.index)
        if [d.index for d in data] != list(range(len(chunk))):
            raise ModelError(f"embedding model {self.model!r} returned {len(data)} vectors for {len(chunk)} texts")
        try:
            vectors = np.array([d.embedding for d in data], dtype=np.float32)
        except (TypeError, ValueError) as exc:
            raise ModelError(f"embedding model {self.model!r} returned malformed vectors") from exc
        if vectors.shape != (len(chunk), self.dimensions):
            raise ModelError(
                f"embedding model {self.model!r} returned vectors of shape {vectors.shape}, "
                f"expected ({len(chunk)}, {self.dimensions})"
            )
        if not np.isfinite(vectors).all() or not np.linalg.norm(vectors, axis=1).all():
            raise ModelError(f"embedding model {self.model!r} returned a non-finite or all-zero vector")
        return vectors

    def __repr__(self) -> str:
        return f"OpenAIEmbedder({self.model!r}, base_url={self.base_url!r})"
