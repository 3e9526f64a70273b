"""Seed 004 (local memory architecture), the rows issue 27's audit found short.

Each test reproduces the audit's finding on the code before the fix.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
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
    (state,) = [i for i in ctx.manifest.items if i.id == "state"]
    assert state.tokens <= budget // 2
    assert "state" not in {m.id for m in ctx.manifest.near_misses}
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
