"""Public, documented test helpers: offline fakes users' own tests can import.

Each fake lives in its own module (e.g. a fake OpenAI-compatible HTTP server
for chat and embeddings, deterministic in-process models). They are real
implementations of our protocols or real HTTP servers bound to 127.0.0.1, so
code under test runs its production path against them. Nothing here is
imported by the library itself.

Exported here: :class:`FakeLLMServer` (:mod:`~stratamem.testing.llm_server`) and its
:class:`FakePromptCache` (:mod:`~stratamem.testing.prompt_cache`),
:class:`FakeEmbeddingServer` (:mod:`~stratamem.testing.embed_server`) and
:class:`HashEmbedder` (:mod:`~stratamem.testing.hash_embedder`). The durability
drills (:mod:`~stratamem.testing.drills`, :mod:`~stratamem.testing.workload`,
:mod:`~stratamem.testing.consistency`) run processes and are imported by module.
"""

from __future__ import annotations

from .embed_server import FakeEmbeddingServer
from .hash_embedder import HashEmbedder
from .llm_server import FakeLLMServer
from .prompt_cache import FakePromptCache

__all__ = ["FakeEmbeddingServer", "FakeLLMServer", "FakePromptCache", "HashEmbedder"]
