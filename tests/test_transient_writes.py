"""Writes the database rolls back under contention: marked transient, and run again by the library.

Two PostgreSQL transactions that lock the same rows in opposite orders deadlock;
the server rolls one of them back. That error is a ``BackendError`` with
``transient=True`` (nothing was stored, running the call again is safe), and
``Store.retrying`` runs such work again, so both writes land. The pyramid's
update and the item extraction path run through it (a CI run lost a segment's
items to exactly this deadlock between four writer processes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.errors import BackendError
from stratamem.store import data_version, open_store
from stratamem.testing import HashEmbedder


def _crossing_writers(store: object, retry: bool) -> tuple[list[str], list[BaseException]]:
    """Two threads bump namespaces ``a`` then ``b`` and ``b`` then ``a``, each holding its first row lock."""
    barrier = threading.Barrier(2)
    runs: list[str] = []
    errors: list[BaseException] = []

    def work_for(first: str, second: str) -> Callable[[], None]:
        def work() -> None:
            runs.append(first)
            with store.sql.write() as w:  # type: ignore[attr-defined]
                data_version.bump(w, first)
                if runs.count(first) == 1:  # only the first run waits for the other to hold its row
                    barrier.wait(timeout=30)
                data_version.bump(w, second)

        return work

    def run(first: str, second: str) -> None:
        work = work_for(first, second)
        try:
            store.retrying(work) if retry else work()  # type: ignore[attr-defined]
        except BaseException as exc:  # noqa: BLE001 - collected and asserted by the test
            errors.append(exc)

    threads = [threading.Thread(target=run, args=pair) for pair in (("a", "b"), ("b", "a"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return runs, errors


def test_a_postgres_deadlock_is_a_transient_backend_error(pg_dsn: str) -> None:
    store = open_store(schema_url(pg_dsn, fresh_schema(pg_dsn, "dl")))
    try:
        runs, errors = _crossing_writers(store, retry=False)
        assert sorted(runs) == ["a", "b"]
        assert len(errors) == 1
        assert isinstance(errors[0], BackendError)
        assert errors[0].transient is True
        assert "deadlock detected" in str(errors[0])
        # The survivor committed both bumps; the victim's were rolled back.
        assert [data_version.read(store.sql, ns).version for ns in ("a", "b")] == [1, 1]
    finally:
        store.close()


def test_retrying_runs_the_rolled_back_write_again_and_both_land(pg_dsn: str) -> None:
    store = open_store(schema_url(pg_dsn, fresh_schema(pg_dsn, "dl")))
    try:
        runs, errors = _crossing_writers(store, retry=True)
        assert errors == []
        assert len(runs) >= 3  # the write rolled back ran again (twice, if the two collided again)
        assert [data_version.read(store.sql, ns).version for ns in ("a", "b")] == [2, 2]
    finally:
        store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_retrying_gives_up_at_once_on_a_lasting_error_and_inside_a_callers_transaction(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        target = str(tmp_path / "r.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        target = schema_url(dsn, fresh_schema(dsn, "dl"))
    store = open_store(target)
    runs: list[int] = []

    def failing(transient: bool) -> Callable[[], None]:
        def work() -> None:
            runs.append(1)
            raise BackendError("the disk is full", transient=transient)

        return work

    try:
        with pytest.raises(BackendError, match="disk is full"):
            store.retrying(failing(False))
        assert len(runs) == 1
        runs.clear()
        with pytest.raises(BackendError, match="disk is full"):
            store.retrying(failing(True))
        assert len(runs) == store.RETRY_ATTEMPTS == 3
        runs.clear()
        with pytest.raises(BackendError, match="disk is full"), store.transaction():
            store.retrying(failing(True))
        assert len(runs) == 1  # the caller's transaction is rolled back: retrying is the caller's
    finally:
        store.close()


def test_extracted_items_keep_the_vectors_they_were_embedded_with(tmp_path: Path) -> None:
    config = Config().replace(pyramid={"defer_summarization": False, "micro_chunk_size": 4})
    mem = Memory(open_store(str(tmp_path / "v.db")), namespace="v", config=config, embedder=HashEmbedder())
    try:
        turn = mem.add({"role": "user", "content": "I adopted a rescue cat named Miso last week."}, session="s")[0]
        [item] = mem.items.extract_facts([("Ana: I adopted a rescue cat named Miso.", "fact", [turn.id])])
        assert item.embedded is True
        found = mem.items.search("Miso the rescue cat", limit=1)
        assert [i.id for i in found.items] == [item.id]
        assert found.semantic[item.id] > 0
        assert mem.items.status().flags["unembedded"] == 0
    finally:
        mem.store.close()
