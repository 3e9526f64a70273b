"""Durability drills on real processes: SIGKILL, concurrent writers, disk full, read-only, server restart.

Small counts keep CI short; ``benchmarks/store_bench.py`` runs the full ones
(200 kills, 4 x 2,000 and 8 x 2,000 turns).
"""

from __future__ import annotations

import multiprocessing
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg import LocalPostgres, fresh_schema, schema_url

from stratamem.store import open_store
from stratamem.store.postgres.store import PostgresStore
from stratamem.testing.drills import (
    DrillCheck,
    crash_drill,
    disk_full_drill,
    read_only_drill,
    restart_drill,
    run_writers,
)


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "drill.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "drill"))


def test_sigkill_never_loses_or_duplicates_an_acknowledged_turn(target: str, tmp_path: Path) -> None:
    # The store-only drill: children append through the Store protocol, nothing derived.
    result = crash_drill(target, "crash", tmp_path, trials=8, seed=7, derived=False)
    assert result.failed_trials == [], result.failures
    c = result.check
    assert (c.lost, c.duplicated, c.gaps) == (0, 0, 0)
    assert c.integrity == ("ok" if not target.startswith("postgresql") else "n/a")
    assert c.acknowledged > 8  # every child stored something before it was killed
    assert c.stored == c.acknowledged + result.unacknowledged_stored
    assert result.derived is None


def test_sigkill_during_pyramid_and_compaction_leaves_derived_data_consistent(target: str, tmp_path: Path) -> None:
    postgres = target.startswith("postgresql")
    trials = 6 if postgres else 20
    result = crash_drill(target, "crash", tmp_path, trials=trials, seed=11)
    # After every kill: no acknowledged turn lost or doubled, derived data consistent,
    # and a reopened memory took a turn in each session and resumed the pyramid.
    assert result.failed_trials == [], result.failures
    c = result.check
    assert (c.lost, c.duplicated, c.gaps, c.integrity) == (0, 0, 0, "n/a" if postgres else "ok")
    assert c.stored == c.acknowledged + result.unacknowledged_stored
    d = result.derived
    assert d is not None and d.ok, d
    assert (d.overlaps, d.gaps, d.bad_provenance, d.unreadable, d.duplicate_items, d.state_errors) == (0,) * 6
    assert sum(result.phases.values()) == trials
    # The drill exercised what it claims to: three levels, tier moves, extracted items,
    # compactions; on SQLite every cold segment went to the archive and read back.
    shape = result.shape
    assert d.levels == 3 and shape["level 3 nodes"] >= 1
    assert shape["cold segments"] >= 1 and shape["extracted items"] >= 1
    assert shape["compactions"] >= 1
    assert shape["archived segments"] == (0 if postgres else shape["cold segments"]) == d.archived


def test_derived_check_reports_a_broken_archive_frame(tmp_path: Path) -> None:
    from stratamem import Memory
    from stratamem.testing.consistency import check_derived
    from stratamem.testing.workload import drill_config

    db = tmp_path / "d.db"
    with Memory(db, namespace="ns", config=drill_config(), embedder=None) as mem:
        for i in range(40):
            mem.add({"role": "user", "content": f"turn {i}: the budget for search is ${i}K."}, session="s")
        assert check_derived(mem).ok
        cold = [n for n in mem.pyramid.nodes(level=1, tier="cold") if n.archive_ref is not None]
        assert cold, "40 turns with macro chunks of 36 must archive something"
        archive = mem.pyramid.archive_path()
        assert archive is not None
        for f in archive.iterdir():
            f.write_bytes(b"\0" * f.stat().st_size)  # same size, garbage content
        broken = check_derived(mem)
    assert not broken.ok
    assert broken.unreadable == len(cold) and broken.archived == len(cold)
    assert all("ArchiveError" in p for p in broken.problems[: len(cold)]), broken.problems


def test_concurrent_writers_on_shared_and_own_sessions(target: str, tmp_path: Path) -> None:
    writers = 4
    result = run_writers(target, "conc", tmp_path, writers=writers, turns_each=150, max_batch=6)
    assert result.errors == []  # in particular no "database is locked"
    assert result.check == DrillCheck(
        acknowledged=writers * 150, stored=writers * 150, lost=0, duplicated=0, gaps=0, integrity=result.check.integrity
    )
    assert result.check.integrity in ("ok", "n/a")
    store = open_store(target)
    sessions = {s.name for s in store.sessions("conc")}
    store.close()
    assert sessions == {"shared0", "own0", "own1", "own2", "own3"}


def _open_new_file_at_once(path: str, barrier: Any, errors: Any) -> None:
    barrier.wait()
    try:
        open_store(path).close()
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which asserts there were none
        errors.put(repr(exc))


def test_processes_creating_the_same_new_file_at_once_all_open_it(tmp_path: Path) -> None:
    # Switching a new file to WAL needs an exclusive lock and SQLite does not wait for it;
    # before the open retried, about one round in twenty failed with "database is locked".
    ctx = multiprocessing.get_context("fork")
    failures = []
    for round_ in range(40):
        path = str(tmp_path / f"new{round_}.db")
        barrier, errors = ctx.Barrier(8), ctx.Queue()
        procs = [ctx.Process(target=_open_new_file_at_once, args=(path, barrier, errors)) for _ in range(8)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        assert [p.exitcode for p in procs] == [0] * 8
        while not errors.empty():
            failures.append(errors.get())
    assert failures == []


def test_disk_full_mid_batch_stores_nothing_and_the_writer_recovers(tmp_path: Path) -> None:
    result = disk_full_drill(tmp_path)
    assert result.error.startswith("BackendError: SQLite error")
    assert (result.faulted_stored, result.served_during, result.served_after) == (0, True, True)
    assert result.check == DrillCheck(10, 10, 0, 0, 0, "ok")


@pytest.fixture
def world_dir() -> Iterator[Path]:
    # The read-only drill may drop to ``nobody``, who cannot enter pytest's 0700 tmp dirs.
    path = Path(tempfile.mkdtemp(prefix="smro-", dir="/tmp"))
    path.chmod(0o777)
    yield path
    shutil.rmtree(path)


def test_read_only_file_refuses_the_batch_and_serves_again_once_writable(world_dir: Path) -> None:
    result = read_only_drill(world_dir)
    assert result.error == f"BackendError: SQLite error on {world_dir / 'ro.db'}: attempt to write a readonly database"
    assert (result.faulted_stored, result.served_during, result.served_after) == (0, True, True)
    assert result.check == DrillCheck(10, 10, 0, 0, 0, "ok")


def test_postgres_restart_mid_batch_is_all_or_nothing_and_the_store_keeps_serving() -> None:
    server = LocalPostgres()  # its own server: the restart must not disturb other tests
    store = PostgresStore(server.dsn, busy_timeout_ms=5_000, max_connections=2)
    try:
        # -m immediate is a crash: in-flight transactions are lost, recovery replays the WAL.
        result = restart_drill(store, lambda: server.pg_ctl("restart", "-m", "immediate"))
        assert result.failed, "the restart interrupted no batch"
        assert all(e.startswith("BackendError: PostgreSQL error") for e in result.errors)
        assert (result.partial, result.lost, result.gap_free, result.served_after) == ([], [], True, True)
    finally:
        store.close()
        server.stop()


def test_derived_check_reports_a_segment_that_no_longer_matches_its_range(tmp_path: Path) -> None:
    import sqlite3

    from stratamem import Memory
    from stratamem.testing.consistency import check_derived
    from stratamem.testing.workload import drill_config

    db = tmp_path / "d.db"
    with Memory(db, namespace="ns", config=drill_config(), embedder=None) as mem:
        mem.add([{"role": "user", "content": f"turn {i}"} for i in range(12)], session="s")
        segments = sorted(mem.pyramid.nodes(level=1, session="s"), key=lambda n: n.seq_range)
        assert [n.seq_range for n in segments] == [(1, 4), (5, 8), (9, 12)]
        assert check_derived(mem).ok
    # Damage the file behind the library's back: the second segment now claims to start one turn later.
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE nodes SET seq_lo = seq_lo + 1 WHERE id = ?", (segments[1].id,))
    with Memory(db, namespace="ns", config=drill_config(), embedder=None) as mem:
        result = check_derived(mem)
    assert (result.ok, result.gaps, result.bad_provenance, result.overlaps, result.unreadable) == (False, 1, 1, 0, 0)
    seg = segments[1].id
    assert result.problems == (
        f"session 's': segment {seg} starts at seq 6, expected 5",
        f"segment {seg} ('s' seq 6..8) holds 4 turn ids that are not that range's turns",
    )
