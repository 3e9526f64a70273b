"""Shared fixtures. Real SQLite files in tmp_path; models are loaded once per run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from stratamem import Memory

if TYPE_CHECKING:
    from stratamem.embed import LocalMiniLM

SHARED = Path(__file__).resolve().parents[2] / "shared"
LOCOMO = SHARED / "data" / "locomo" / "locomo10.json"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh SQLite file path."""
    return tmp_path / "memory.db"


@pytest.fixture
def memory(db_path: Path) -> Iterator[Memory]:
    """A Memory on a fresh SQLite file, namespace 'test'."""
    mem = Memory(db_path, namespace="test", embedder=None)
    yield mem
    mem.close()


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A real PostgreSQL 16 + pgvector: ``STRATAMEM_PG_DSN`` if set, else one pgserver per test run."""
    import os

    from pg import LocalPostgres

    if os.environ.get("STRATAMEM_PG_DSN"):
        yield os.environ["STRATAMEM_PG_DSN"]
        return
    server = LocalPostgres()
    yield server.dsn
    server.stop()


@pytest.fixture(scope="session")
def minilm() -> LocalMiniLM:
    """The real local all-MiniLM-L6-v2 embedder, loaded once per test run (read-only: share it)."""
    from stratamem import Config
    from stratamem.embed.default import configured_model

    # The process-wide default model: Memory(path) without an embedder shares it.
    return configured_model(Config()).load()
