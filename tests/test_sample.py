"""The bundled sample conversation: exact shape, provider validity, clean ingest, the story's facts.

The sample is what ``stratamem demo`` runs on, so these tests pin its counts
exactly. The story is data (``scripts/sample/*.yaml``); regenerate the file with
``python scripts/make_sample.py`` and update the numbers here when the story
changes on purpose.
"""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from datetime import timedelta
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

from stratamem import Memory
from stratamem.cli import main
from stratamem.ingest import read_file
from stratamem.providers import structural_problems, to_anthropic, to_openai

REPO = Path(__file__).resolve().parents[1]
SAMPLE = Path(str(resources.files("stratamem") / "data" / "sample_conversation.jsonl"))

SESSION_TURNS = {
    "kickoff": 49,
    "payments-retry": 38,
    "bug-hunt": 51,
    "load-test": 48,
    "postgres-migration": 53,
    "launch-prep": 37,
}
TOTAL_TURNS = 276
TOOL_CALLS = 95


@pytest.fixture(scope="module")
def sessions():
    """The sample read the way ``stratamem ingest`` reads it."""
    return read_file(SAMPLE)


@pytest.fixture(scope="module")
def lines():
    """The raw JSON Lines records."""
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]


def _session_text(sessions, name):
    return "\n".join(t.text for s in sessions if s.session == name for t in s.turns)


def test_sample_has_the_exact_sessions_and_turn_counts(sessions):
    assert {s.session: len(s.turns) for s in sessions} == SESSION_TURNS
    assert sum(len(s.turns) for s in sessions) == TOTAL_TURNS


def test_sample_roles_speakers_and_tool_calls_are_exact(lines):
    assert Counter(r["role"] for r in lines) == {"assistant": 123, "tool": 95, "user": 52, "system": 6}
    assert Counter(r["name"] for r in lines if r["role"] == "user") == {"dana": 48, "priya": 4}
    calls = [c["id"] for r in lines for c in r.get("tool_calls") or ()]
    results = [r["tool_call_id"] for r in lines if r["role"] == "tool"]
    assert len(calls) == len(set(calls)) == TOOL_CALLS
    assert sorted(results) == sorted(calls)


def test_every_line_names_its_session_and_time(lines):
    assert all({"session", "timestamp", "platform", "channel"} <= set(r) for r in lines)
    assert {(r["platform"], r["channel"]) for r in lines} == {("cli", "larkspur-orders")}


@pytest.mark.parametrize("name", list(SESSION_TURNS))
def test_each_session_is_structurally_valid_for_both_providers(sessions, name):
    [session] = [s for s in sessions if s.session == name]
    system, messages = to_anthropic(session.turns)
    assert system is not None and system.startswith("You are a coding agent")
    assert structural_problems(messages, "anthropic") == []
    assert structural_problems(to_openai(session.turns), "openai") == []


def test_sessions_run_forward_in_time_with_a_long_gap(sessions):
    stamps = [t.timestamp for s in sessions for t in s.turns]
    assert stamps == sorted(stamps)
    starts = {s.session: s.turns[0].timestamp for s in sessions}
    ends = {s.session: s.turns[-1].timestamp for s in sessions}
    assert starts["load-test"] - ends["bug-hunt"] > timedelta(days=10)
    assert starts["kickoff"].date().isoformat() == "2026-03-02"
    assert ends["launch-prep"].date().isoformat() == "2026-03-19"


def test_sample_has_long_tool_outputs_and_an_explicit_topic_switch(sessions, lines):
    long_results = [r for r in lines if r["role"] == "tool" and len(r["content"]) > 2000]
    assert len(long_results) == 3
    switches = [r["session"] for r in lines if r["role"] == "user" and r["content"].startswith("New topic:")]
    assert switches == ["bug-hunt", "launch-prep"]


def test_early_decisions_are_not_restated_in_the_last_sessions(sessions):
    # The demo's question is only answerable by recalling the early sessions.
    early = _session_text(sessions, "kickoff") + _session_text(sessions, "payments-retry")
    late = _session_text(sessions, "postgres-migration") + _session_text(sessions, "launch-prep")
    for fact in ("base 200 ms", "3 attempts", "SQLite in WAL mode", "EUR 24/month", "No ORMs"):
        assert fact in early, fact
        assert fact not in late, fact
    changed = _session_text(sessions, "load-test")
    for fact in ("base 500 ms", "4 attempts", "PostgreSQL 16", "supersedes ADR 0001"):
        assert fact in changed, fact


def test_sample_ingests_into_a_file_database(db_path, sessions):
    with Memory(db_path, namespace="sample", embedder=None) as mem:
        stored = mem.add_sessions(sessions)
        status = mem.status()
    assert len(stored) == TOTAL_TURNS
    assert (status.sessions, status.turns) == (6, TOTAL_TURNS)
    assert status.tokens == sum(st.tokens for st in stored)


def test_cli_ingest_and_demo_run_on_the_sample(tmp_path):
    runner = CliRunner()
    ingest = runner.invoke(main, ["--db", str(tmp_path / "x.db"), "ingest", str(SAMPLE)])
    assert ingest.exit_code == 0, ingest.output
    assert "ingested 276 turns in 6 session(s) into 1 namespace(s): default" in ingest.output
    demo = runner.invoke(main, ["--db", str(tmp_path / "y.db"), "demo"])
    assert demo.exit_code == 0, demo.output
    assert demo.output.startswith("ingested 276 turns in 6 session(s)")


def test_generator_reproduces_the_bundled_file():
    spec = importlib.util.spec_from_file_location("make_sample", REPO / "scripts" / "make_sample.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.render(module.build()) == SAMPLE.read_text(encoding="utf-8")
