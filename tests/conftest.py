"""Shared fixtures. Real SQLite files in tmp_path; models are loaded once per run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from stratamem import Memory

if TYPE_CHECKING:
    from stratamem.embed import LocalMiniLM

SHARED = Path(__file__).resolve().parents[2] / "shared"
LOCOMO = SHARED / "data" / "locomo" / "locomo10.json"


FIXTURES = Path(__file__).resolve().parent / "fixtures"
# 2025-01-01T00:00:00Z: long before any run.
_FINISHED = 1_735_689_600


@pytest.fixture(scope="session", autouse=True)
def finished_fixture_logs() -> None:
    """Date the committed conversation files in the past: they are finished logs.

    Importers hold back a reply at the end of a log that changed in the last
    minute (it may still be streaming); a fresh checkout would make every
    fixture look live, and a test's outcome would depend on when it ran. Tests
    of live logs copy a fixture to tmp_path (a fresh file) on purpose.
    """
    for path in FIXTURES.rglob("*"):
        if path.is_file():
            os.utime(path, (_FINISHED, _FINISHED))


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
