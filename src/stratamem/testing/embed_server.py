"""A fake embeddings endpoint: a real HTTP server on 127.0.0.1 speaking OpenAI's ``/v1/embeddings``.

:class:`FakeEmbeddingServer` answers ``POST /v1/embeddings`` with
deterministic vectors (:func:`stratamem.testing.hash_embedder.hash_vector`
by default), so code under test runs its production path — the official
``openai`` client, real sockets — without a model. It accepts a string or a
list of strings as ``input``, honours ``dimensions`` and both
``encoding_format`` values (``float`` and ``base64``), records every
request, and can fail or stall the next calls on demand.

Example::

    with FakeEmbeddingServer(dimensions=64) as server:
        emb = OpenAIEmbedder("fake-embed", dimensions=64, base_url=server.base_url)
        vectors = emb.embed_batch(["a", "b"])
        assert server.requests[0].inputs == ["a", "b"]
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._http import JSONHandler, LocalHTTPServer
from .hash_embedder import hash_vector

__all__ = ["EmbeddingRequest", "FakeEmbeddingServer"]

VectorFn = Callable[[str, int], "np.ndarray | list[float]"]


@dataclass(frozen=True, slots=True)
class EmbeddingRequest:
    """One request the server received."""

    path: str
    """Request path."""
    body: Mapping[str, Any]
    """Parsed JSON body."""
    headers: Mapping[str, str]
    """Request headers (lower-cased names)."""

    @property
    def inputs(self) -> list[str]:
        """The texts asked for, as a list."""
        raw = self.body.get("input")
        return [raw] if isinstance(raw, str) else list(raw or [])

    @property
    def model(self) -> str | None:
        """Model named in the request."""
        return self.body.get("model")


@dataclass(frozen=True, slots=True)
class _Failure:
    status: int
    delay_s: float


class FakeEmbeddingServer(LocalHTTPServer):
    """An OpenAI-compatible embeddings server in a background thread.

    Args:
        dimensions: Vector length when the request does not ask for one.
        vector_fn: ``(text, dimensions) -> vector``; default :func:`hash_vector`
            (unit length). Return unnormalized vectors to test normalization.
        model: Model name echoed in replies.
        port: Port to bind on 127.0.0.1; 0 picks a free one.

    Attributes:
        requests: Every request received, in order (failed ones included).
    """

    def __init__(
        self, dimensions: int = 384, *, vector_fn: VectorFn = hash_vector, model: str = "fake-embed", port: int = 0
    ) -> None:
        super().__init__(port=port, thread_name="fake-embed-server")
        self.dimensions = dimensions
        self.vector_fn = vector_fn
        self.model = model
        self.requests: list[EmbeddingRequest] = []
        self._failures: deque[_Failure] = deque()
        self._lock = threading.Lock()

    def fail_next(self, count: int = 1, *, status: int = 500, delay_s: float = 0.0) -> None:
        """Answer the next ``count`` requests with HTTP ``status`` (after ``delay_s``).

        ``status=0`` closes the connection without an answer.
        """
        with self._lock:
            self._failures.extend(_Failure(status, delay_s) for _ in range(count))

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` — what an OpenAI client takes as ``base_url``."""
        return self.url + "/v1"

    def _handler(self) -> type[JSONHandler]:
        owner = self

        class Handler(_Handler):
            server_owner = owner

        return Handler

    # --- request handling (called from the server's threads) ------------------------

    def _next_failure(self) -> _Failure | None:
        with self._lock:
            return self._failures.popleft() if self._failures else None

    def _answer(self, body: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            return 400, _error("'input' must be a non-empty string or list of strings")
        dims = body.get("dimensions", self.dimensions)
        if not isinstance(dims, int) or dims < 1:
            return 400, _error("'dimensions' must be a positive integer")
        fmt = body.get("encoding_format", "float")
        data = []
        for i, text in enumerate(texts):
            vec = np.asarray(self.vector_fn(text, dims), dtype=np.float32)
            value: Any = base64.b64encode(vec.astype("<f4").tobytes()).decode() if fmt == "base64" else vec.tolist()
            data.append({"object": "embedding", "index": i, "embedding": value})
        tokens = sum(len(t.split()) for t in texts)
        return 200, {
            "object": "list",
            "data": data,
            "model": body.get("model") or self.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _error(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


class _Handler(JSONHandler):
    server_owner: FakeEmbeddingServer

    def do_POST(self) -> None:  # the stdlib's naming
        owner = self.server_owner
        try:
            body = json.loads(self.read_body() or b"{}")
        except json.JSONDecodeError:
            self.send_json(400, _error("body is not JSON"))
            return
        owner.requests.append(EmbeddingRequest(self.path, body, {k.lower(): v for k, v in self.headers.items()}))
        if self.path.rstrip("/") != "/v1/embeddings":
            self.send_json(404, _error(f"no route {self.path}"))
            return
        failure = owner._next_failure()
        if failure is not None:
            time.sleep(failure.delay_s)
            if failure.status == 0:
                self.drop_connection()
                return
            self.send_json(failure.status, _error(f"injected failure {failure.status}"))
            return
        status, payload = owner._answer(body)
        self.send_json(status, payload)
