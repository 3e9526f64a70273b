"""Seed 004 (local memory architecture), the rows issue 27's audit found short.

Each test reproduces the audit's finding on the code before the fix.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from stratamem import Config, Memory
from stratamem.state import WorkingState

T0 = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)


def _big_state(project: Path) -> WorkingState:
    """A working state of about 750 tokens: goal, now, 14 tasks, 8 decisions, 5 conventions."""
    ws = WorkingState(project, "agent")
    ws.set_goal("Describe and implement the agent's local memory architecture for the order service")
    ws.set_now("Implementing working-state compaction and the prompt manifest")
    for i in range(14):
        ws.add_task(f"Task {i}: wire the {['cache', 'queue', 'schema', 'parser'][i % 4]} for part {i} of the service")
    for i in range(8):
        ws.decide(f"Decision {i}: use option {i} for the {['store', 'index'][i % 2]}", f"measured faster in run {i}")
    for key in ("language", "runtime", "testing", "style", "review"):
        ws.set_convention(key, f"the team's agreed {key} setting, written down in the handbook")
    return ws


@pytest.mark.parametrize("budget", [150, 300, 500, 800])
def test_seed004_working_state_shrinks_instead_of_vanishing(tmp_path: Path, budget: int) -> None:
    """The audit: a 754-token state was ``over_budget`` at context budgets 150-500 and at 800 left no
    room for history. It must shrink toward the 250-token floor, keep its most important fields, say
    what it left out, and leave the conversation room."""
    ws = _big_state(tmp_path)
    assert 680 <= ws.project().tokens <= 750
    with Memory(tmp_path / "m.db", namespace="agent", embedder=None, project_dir=tmp_path) as mem:
        mem.add(
            [
                {"role": "user", "content": "Where are we with the cache task?"},
                {"role": "assistant", "content": "The cache is wired for parts 0 and 4; part 8 is next."},
            ],
            session="s",
        )
        ctx = mem.context("cache task", budget=budget, session="s", policy="state_first", format="text")
    assert ctx.tokens <= budget
    assert "state" not in {m.id for m in ctx.manifest.near_misses}
    (state,) = [i for i in ctx.manifest.items if i.id == "state"]
    assert state.tokens <= budget // 2
    assert "(left out to fit:" in ctx.text and "all in state.json)" in ctx.text
    assert any(n.startswith("state shrunk to fit") for n in ctx.manifest.notes)
    if budget >= 300:
        # The most important fields first: goal and now whole, then unfinished tasks.
        assert "goal: Describe and implement the agent's local memory architecture for the order service" in ctx.text
        assert "now: Implementing working-state compaction and the prompt manifest" in ctx.text
        assert "tasks[" in ctx.text
    if budget == 800:
        # History still fits beside the state.
        assert [i.reason for i in ctx.manifest.items if i.kind == "turn"] == ["recent_window", "recent_window"]


def test_seed004_working_state_shrinks_in_the_cache_layout_too(tmp_path: Path) -> None:
    """The cache layout places fixed blocks through the same step as the policies (context/fixed.py)."""
    _big_state(tmp_path)
    config = Config().replace(context={"cache_layout": True})
    with Memory(tmp_path / "m.db", namespace="agent", embedder=None, project_dir=tmp_path, config=config) as mem:
        mem.add([{"role": "user", "content": "Where are we with the cache task?"}], session="s")
        ctx = mem.context("cache task", budget=500, session="s", format="text")
    assert ctx.tokens <= 500
    assert "state" not in {m.id for m in ctx.manifest.near_misses}
    (state,) = [i for i in ctx.manifest.items if i.id == "state"]
    assert state.tokens <= 250
    assert any(n.startswith("state shrunk to fit") for n in ctx.manifest.notes)


CHECKPOINT = """## Goal
- Ship the order service.

## Constraints & Preferences
- none stated

## Progress
### Done
- [x] Migrated the orders table to PostgreSQL
- [x] **Task 2: wire the schema for part 2 of the service**
### In Progress
- [ ] Wire the queue

## Key Decisions
- **Keep PostgreSQL for orders**: MongoDB lost the load test

## Next Steps
1. Wire the queue

## Critical Context
- `src/orders/db.py`
"""


def test_seed004_completed_work_reaches_state_json(tmp_path: Path) -> None:
    """The audit: completed work never reached ``state.json`` (seed 004: "when something is completed
    or stabilized, promote to medium-term"). A compaction's checkpoint is where an agent loop says what
    is done: with a project directory its Done list and key decisions now land in the working state."""
    from stratamem.agentloop import Compactor
    from stratamem.config import CompactionConfig
    from stratamem.llm import OpenAIChat
    from stratamem.testing.llm_server import FakeLLMServer

    ws = WorkingState(tmp_path, "agent")
    ws.add_task("Task 2: wire the schema for part 2 of the service")
    ws.add_task("Wire the queue")
    cfg = Config.from_dict({"pyramid": {"enabled": False}})
    with (
        FakeLLMServer(reply=CHECKPOINT) as server,
        Memory(tmp_path / "m.db", namespace="agent", config=cfg, embedder=None, project_dir=tmp_path) as mem,
    ):
        model = OpenAIChat("summ", base_url=server.openai_base_url, max_retries=0)
        small = CompactionConfig(threshold=6_000, keep_recent_tokens=500, output_reserve=500, checkpoint_max_tokens=600)
        c = Compactor(model, provider="openai", memory=mem, session="s", config=small)
        msgs = []
        for t in range(8):
            msgs += [
                {"role": "user", "content": f"Step {t}: " + "migrate the next batch of order rows. " * 20},
                {"role": "assistant", "content": f"Batch {t} migrated."},
            ]
        assert c.compact(msgs).status == "compacted"
    doc = json.loads(ws.path.read_text(encoding="utf-8"))
    tasks = {t["title"]: t["status"] for t in doc["tasks"]}
    assert tasks == {
        "Task 2: wire the schema for part 2 of the service": "done",  # an open task, now done
        "Wire the queue": "open",  # still in progress: stays open
        "Migrated the orders table to PostgreSQL": "done",  # completed work not tracked before
    }
    assert [(d["title"], d["why"]) for d in doc["decisions"]] == [
        ("Keep PostgreSQL for orders", "MongoDB lost the load test")
    ]
    # Promoting the same checkpoint again changes nothing.
    assert ws.promote(["Migrated the orders table to PostgreSQL"], [("Keep PostgreSQL for orders", "")]) == (0, 0)


def test_seed004_state_toon_is_regenerated_after_a_hand_edit(tmp_path: Path) -> None:
    """The audit: ``state.toon`` went stale after a hand edit of ``state.json``."""
    ws = WorkingState(tmp_path, "agent")
    ws.set_goal("Ship the order service")
    assert "goal: Ship the order service" in ws.toon_path.read_text(encoding="utf-8")
    doc = json.loads(ws.path.read_text(encoding="utf-8"))
    doc["goal"] = "Ship the billing service"
    stamp = ws.toon_path.stat().st_mtime_ns
    ws.path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")  # by hand, same second
    os.utime(ws.path, ns=(stamp, stamp))  # even with an unchanged mtime, the hash tells
    assert ws.read()["goal"] == "Ship the billing service"
    assert "goal: Ship the billing service" in ws.toon_path.read_text(encoding="utf-8")
    # Through the context too: a reader never sees the old projection.
    doc["now"] = "Writing the invoices"
    ws.path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    with Memory(tmp_path / "m.db", namespace="agent", embedder=None, project_dir=tmp_path) as mem:
        mem.add({"role": "user", "content": "hello"}, session="s")
        assert "now: Writing the invoices" in mem.context("x", session="s", format="text").text
    assert "now: Writing the invoices" in ws.toon_path.read_text(encoding="utf-8")


def test_seed004_session_logs_are_written_on_add(tmp_path: Path) -> None:
    """The audit: session logs were written only by ``stratamem state logs``, not as turns were added."""
    with Memory(tmp_path / "m.db", namespace="agent", embedder=None, project_dir=tmp_path) as mem:
        first = mem.add([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}], session="s1")
        mem.add({"role": "user", "content": "other thread"}, session="s2")
        log1 = tmp_path / ".stratamem" / "sessions" / "agent" / "s1.jsonl"
        lines = [json.loads(x) for x in log1.read_text(encoding="utf-8").splitlines()]
        assert [(r["id"], r["role"], r["content"]) for r in lines] == [
            (first[0].id, "user", "hello"),
            (first[1].id, "assistant", "hi"),
        ]
        assert (tmp_path / ".stratamem" / "sessions" / "agent" / "s2.jsonl").exists()
        # A log that cannot be written never loses the turn: it is reported.
        log1.unlink()
        log1.mkdir()
        stored = mem.add({"role": "user", "content": "still stored"}, session="s1")
        assert mem.turns("s1")[-1].id == stored[0].id
        assert "sessionlog.failed" in {e.kind for e in mem.events.recent()}
    # Without a project directory nothing is written.
    with Memory(tmp_path / "n.db", namespace="other", embedder=None) as mem:
        mem.add({"role": "user", "content": "hello"}, session="s1")
    assert not (tmp_path / ".stratamem" / "sessions" / "other").exists()


def test_seed004_adr_files_are_a_reviewable_instruction_source(tmp_path: Path) -> None:
    """The audit: ``docs/adr/*.md`` were not read. They go into the context with the instruction files,
    shared rules first, then the decision records in name order, then personal preferences."""
    (tmp_path / "STRATAMEM.md").write_text("Run the tests before answering.\n", encoding="utf-8")
    (tmp_path / "STRATAMEM.local.md").write_text("Answer in British English.\n", encoding="utf-8")
    adr = tmp_path / "docs" / "adr"
    adr.mkdir(parents=True)
    (adr / "0002-toon.md").write_text("# ADR 2: TOON in prompts\nStatus: accepted\n", encoding="utf-8")
    (adr / "0001-postgres.md").write_text("# ADR 1: PostgreSQL for orders\nStatus: accepted\n", encoding="utf-8")
    (adr / "README.txt").write_text("not a record", encoding="utf-8")
    with Memory(tmp_path / "m.db", namespace="agent", embedder=None, project_dir=tmp_path) as mem:
        mem.add({"role": "user", "content": "hello"}, session="s")
        ctx = mem.context("x", session="s", format="text")
    ids = [i.id for i in ctx.manifest.items if i.kind == "instructions"]
    assert ids == [
        "instructions:STRATAMEM.md",
        "adr:0001-postgres.md",
        "adr:0002-toon.md",
        "instructions:STRATAMEM.local.md",
    ]
    assert "## Architecture decision record (docs/adr/0001-postgres.md)\n# ADR 1: PostgreSQL for orders" in ctx.text
    assert "not a record" not in ctx.text
