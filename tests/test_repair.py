"""A crash between an ingest's commit and its derived data is repaired (issue 24, finding 5).

A child process ingests a file and is killed (SIGKILL, by its own progress
callback: deterministic, after the commit, while the turns are being
indexed). Its turns are stored; their index rows, segments and summaries are
not. ``status`` says so; running the ingest again — which stores nothing new —
or the next context makes them, equal to what a clean ingest makes. Both
backends; the repair itself killed half-way resumes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.ingest import read_file
from stratamem.store.open import open_store

CFG = Config().replace(pyramid={"summarizer": "extractive", "defer_summarization": False})
SESSIONS, PER_SESSION = 4, 600
TURNS = SESSIONS * PER_SESSION
FIRST = 1024  # stratamem.retrieve.persisted.BATCH: the ingest's first progress call comes after these are indexed
REPAIRED = 1000  # stratamem.memory.derived.REPAIR_BATCH: the repair's first step


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def target_for(backend: str, tmp_path: Path, name: str, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return str(tmp_path / f"{name}.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, name))


def conversation_file(path: Path) -> Path:
    rows = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Note {i} of session {s}: the lake house needs {i} new tiles for the porch.",
            "session": f"c{s}",
        }
        for s in range(SESSIONS)
        for i in range(PER_SESSION)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def opened(target: str) -> Memory:
    return Memory(open_store(target), config=CFG, embedder=None)


def derived(mem: Memory) -> dict[str, Any]:
    """What the derived data holds: segments per session, summarized nodes, index rows."""
    nodes = mem.pyramid.nodes(limit=100_000)
    return {
        "turns": mem.status().turns,
        "segments": sorted((n.session, n.seq_range) for n in nodes if n.level == 1),
        "levels": sorted({n.level for n in nodes}),
        "unsummarized": sum(n.summary is None for n in nodes if n.tier != "hot"),
        "index_rows": mem.store.embeddings.turns.counts(mem.namespace)[0],  # type: ignore[attr-defined]
    }


def killed_ingest(target: str, path: Path, *, kill_at: str = "ingest") -> int:
    """Run an ingest in a child that SIGKILLs itself at its first progress call; returns its exit status."""
    code = textwrap.dedent(
        f"""
        import os, signal
        from stratamem.ingest import read_file
        from test_repair import opened

        def die(n):
            os.kill(os.getpid(), signal.SIGKILL)

        mem = opened({target!r})
        if {kill_at!r} == "ingest":
            mem.ingest(read_file({str(path)!r}), progress=die)
        else:
            mem._derived.repair(progress=die)
        """
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run([sys.executable, "-c", code], env=env, timeout=300).returncode


def test_a_rerun_ingest_repairs_what_a_kill_after_the_commit_left(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    path = conversation_file(tmp_path / "c.jsonl")
    clean = target_for(backend, tmp_path, "clean", request)
    with opened(clean) as mem:
        mem.ingest(read_file(path))
        want = derived(mem)
    assert want["turns"] == TURNS and len(want["segments"]) == TURNS // 10

    crashed = target_for(backend, tmp_path, "crashed", request)
    assert killed_ingest(crashed, path) == -signal.SIGKILL
    with opened(crashed) as mem:
        st = mem.status()
        # Every turn committed; their derived data missing, and status says so.
        assert (st.turns, st.unindexed_turns, st.pending_sessions) == (TURNS, TURNS - FIRST, SESSIONS)
        assert st.warnings == (
            f"{TURNS - FIRST} turns without index (made at the next context, search or ingest)",
            f"{SESSIONS} sessions without segments after an interrupted ingest (repaired next)",
        )
        assert derived(mem)["segments"] == []
        report = mem.ingest(read_file(path))
        assert (report.total_stored, report.total_skipped) == (0, TURNS)
        assert derived(mem) == want
        st = mem.status()
        assert (st.unindexed_turns, st.pending_sessions, st.warnings) == (0, 0, ())


def test_the_first_context_repairs_and_a_killed_repair_resumes(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    path = conversation_file(tmp_path / "c.jsonl")
    crashed = target_for(backend, tmp_path, "crashed", request)
    assert killed_ingest(crashed, path) == -signal.SIGKILL
    # The repair is killed too, after its first committed batch of index rows.
    assert killed_ingest(crashed, path, kill_at="repair") == -signal.SIGKILL
    with opened(crashed) as mem:
        st = mem.status()
        assert (st.unindexed_turns, st.pending_sessions) == (TURNS - FIRST - REPAIRED, SESSIONS)
    with opened(crashed) as mem:
        ctx = mem.context("lake house tiles porch", budget=2000)
        assert ctx.manifest.items
        got = derived(mem)
        assert got["index_rows"] == TURNS and got["unsummarized"] == 0
        assert len(got["segments"]) == TURNS // 10
        st = mem.status()
        assert (st.unindexed_turns, st.pending_sessions, st.warnings) == (0, 0, ())
