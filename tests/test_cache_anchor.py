"""The cache layout's invariants: the anchored run's arithmetic, the ledger's choice, and prompts that
only grow at their end between two jumps (hypothesis over random stores)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from wire import plain

from stratamem import Memory
from stratamem.config import Config
from stratamem.context.anchor import jumped_at, run_start
from stratamem.context.cache_render import RECALL_TITLE
from stratamem.context.ledger import LedgerEntry, select_ledger
from stratamem.context.units import SummaryUnit
from stratamem.providers import structural_problems
from stratamem.tokens import get_tokenizer

TOK = get_tokenizer("o200k_base")


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 400), min_size=1, max_size=60),
    room=st.integers(50, 3000),
    step=st.floats(0.1, 1.0),
    openers=st.lists(st.booleans(), min_size=60, max_size=60),
)
def test_a_runs_start_only_moves_forward_and_its_run_fits(
    sizes: list[int], room: int, step: float, openers: list[bool]
) -> None:
    def opens(i: int) -> bool:
        return i == 0 or openers[i]

    grid = max(1, int(room * step))
    starts = [run_start(sizes[: n + 1], room, grid, opens=opens, max_units=30) for n in range(len(sizes))]
    last = None
    for n, start in enumerate(starts):
        if start is None:
            continue
        assert sum(sizes[start : n + 1]) <= room and n + 1 - start <= 30
        assert opens(start)
        if last is not None:
            assert start >= last
        last = start
        jump = jumped_at(sizes[: n + 1], start, room, grid, opens=opens, max_units=30)
        assert start <= jump <= n
        # From the jump on, the start stays; just before it, it was elsewhere.
        assert all(starts[m] == start for m in range(jump, n + 1))
        assert jump == start or starts[jump - 1] != start


def _entry(node: int, level: int, first: int, last: int, settled: int | None) -> LedgerEntry:
    unit = SummaryUnit(
        f"node:{node}", "segment" if level == 1 else "consolidation", f"- summary {node}", tuple(range(first, last + 1))
    )
    return LedgerEntry(unit, level, first, last, settled)


def test_the_ledger_shows_the_coarsest_settled_nodes_before_the_anchor_as_of_its_jump() -> None:
    entries = [
        _entry(1, 1, 1, 10, 12),
        _entry(2, 1, 11, 20, 25),
        _entry(3, 2, 1, 20, 40),  # consolidates 1 and 2, summarized at turn 40
        _entry(4, 1, 21, 30, 33),
        _entry(5, 1, 31, 40, 50),  # its turns reach past the anchor below
    ]
    # Anchored at turn 35, which it jumped to at turn 38: the consolidation (settled at 40) waits.
    shown = select_ledger(entries, 35, 38, 1000, TOK)
    assert [e.unit.id for e in shown] == ["node:1", "node:2", "node:4"]
    # After the next jump (at turn 41) it stands for its children.
    assert [e.unit.id for e in select_ledger(entries, 35, 41, 1000, TOK)] == ["node:3", "node:4"]
    # A room for two lines: the run starts at a step point, the newest lines kept.
    assert [e.unit.id for e in select_ledger(entries, 35, 38, 2 * 6, TOK)] == ["node:2", "node:4"]


WORDS = "apple harbour otter lighthouse quarry falcon violin garden rocket tunnel meadow lantern".split()


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lengths=st.lists(st.integers(3, 60), min_size=8, max_size=40),
    budget=st.sampled_from([600, 1200, 2500]),
    seed=st.integers(0, 1000),
)
def test_between_two_jumps_each_prompt_starts_with_the_previous_stable_prefix(
    lengths: list[int], budget: int, seed: int
) -> None:
    cfg = Config.from_dict({"pyramid": {"defer_summarization": False, "micro_chunk_size": 4}})
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory(Path(tmp) / "p.db", namespace="p", config=cfg, embedder=None)
        prev = None
        for i, n in enumerate(lengths):
            text = " ".join(WORDS[(seed + i * 7 + k) % len(WORDS)] for k in range(n)) + "."
            role = "user" if i % 2 == 0 else "assistant"
            mem.add({"role": role, "content": text}, session="s")
            if role != "user":
                continue
            ctx = mem.context(text, budget=budget, session="s", format="openai", cache=True)
            assert ctx.tokens <= budget
            cache = ctx.manifest.cache
            assert cache is not None and cache["deviation"] is None
            msgs = list(ctx.messages)
            recall = [
                k for k, m in enumerate(msgs) if m["role"] == "system" and str(m["content"]).startswith(RECALL_TITLE)
            ]
            stable = msgs[: recall[0]] if recall else msgs
            if prev is not None and prev[0] == cache["anchor"] and prev[1] == cache["layer_hashes"]:
                assert msgs[: len(prev[2])] == prev[2]
            prev = (cache["anchor"], cache["layer_hashes"], stable)
        mem.close()


POLICIES = ["hybrid", "state_first", "pyramid", "recall", "topics"]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(st.integers(2, 50), st.booleans()), min_size=4, max_size=24),
    budget=st.sampled_from([300, 900, 2000]),
)
def test_every_policy_and_format_keeps_the_budget_and_a_valid_request_with_the_layout(
    steps: list[tuple[int, bool]], budget: int
) -> None:
    """Random sessions with tool steps: each policy, each format, within the budget and structurally valid."""
    cfg = Config.from_dict({"pyramid": {"defer_summarization": False, "micro_chunk_size": 4}})
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory(Path(tmp) / "v.db", namespace="v", config=cfg, embedder=None)
        for i, (n, tool) in enumerate(steps):
            words = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(n))
            mem.add({"role": "user", "content": words + "."}, session="s")
            if tool:
                mem.add(
                    [
                        {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {"id": f"c{i}", "type": "function", "function": {"name": "grep", "arguments": "{}"}}
                            ],
                        },
                        {"role": "tool", "tool_call_id": f"c{i}", "content": words * 3},
                    ],
                    session="s",
                )
            mem.add({"role": "assistant", "content": "Right: " + words}, session="s")
        query = "Tell me about the " + WORDS[len(steps) % len(WORDS)] + "."
        for policy in POLICIES:
            for fmt in ("openai", "anthropic", "text"):
                ctx = mem.context(query, budget=budget, session="s", format=fmt, policy=policy, cache=True)
                assert ctx.tokens <= budget
                cache = ctx.manifest.cache
                assert cache is not None and cache["stable_tokens"] <= ctx.tokens
                if fmt != "text" and ctx.messages:
                    assert structural_problems(list(ctx.messages), fmt) == []
                marks = sum("cache_control" in b for b in ctx.system_blocks or ()) + sum(
                    "cache_control" in b
                    for m in ctx.messages
                    if isinstance(m.get("content"), list)
                    for b in m["content"]
                )
                assert marks == len(cache["breakpoints"]) <= 4
        mem.close()


def _stable(msgs: list[dict[str, Any]], fmt: str) -> list[Any]:
    """The messages before the one that carries this call's recall (OpenAI: a system message; Anthropic:
    the last user message, which also holds the newest results)."""
    if fmt == "openai":
        at = next(
            (k for k, m in enumerate(msgs) if m["role"] == "system" and m["content"].startswith(RECALL_TITLE)), None
        )
        return plain(msgs if at is None else msgs[:at])
    return plain(msgs[:-1])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    results=st.lists(st.integers(1, 600), min_size=3, max_size=16),
    budget=st.sampled_from([600, 1200, 2500]),
    fmt=st.sampled_from(["openai", "anthropic"]),
)
def test_a_tool_loop_keeps_the_budget_its_pairs_and_its_prefix_with_the_layout(
    results: list[int], budget: int, fmt: str
) -> None:
    """A tool loop (one request, then steps of random size): each call within the budget, every tool
    call with all its results, the window running to the newest step, and, while the anchor and the
    stable layers hold, the previous call's stable messages first."""
    cfg = Config.from_dict({"pyramid": {"defer_summarization": False, "micro_chunk_size": 4}})
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory(Path(tmp) / "t.db", namespace="t", config=cfg, embedder=None)
        mem.add({"role": "user", "content": "Fix the failing tests in the " + WORDS[0] + " module."}, session="s")
        prev = None
        for i, n in enumerate(results):
            call = {"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {"cmd": f"pytest -k {i}"}}
            output = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(n))
            mem.add(
                [
                    {"role": "assistant", "content": [{"type": "text", "text": f"Step {i}."}, call]},
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": output}],
                    },
                ],
                session="s",
                format="anthropic",
            )
            ctx = mem.context("fix the failing tests", budget=budget, session="s", format=fmt, cache=True)
            assert ctx.tokens <= budget
            msgs = list(ctx.messages)
            assert not msgs or structural_problems(msgs, fmt) == []  # none: no window and nothing recalled
            window = [it.turn_ids[0] for it in ctx.manifest.items if it.reason == "recent_window"]
            if window:  # it runs to the newest turn: the newest step's result
                assert window[-1] == max(window) and ctx.manifest.cache["anchor"]["turn"] == window[0]
                assert f"toolu_{i}" in json.dumps(msgs)
            cache = ctx.manifest.cache
            key = (json.dumps(cache["anchor"]), cache["layer_hashes"])
            stable = _stable(msgs, fmt)
            if prev is not None and prev[0] == key:
                assert stable[: len(prev[1])] == prev[1]
                if fmt == "anthropic":
                    assert plain(list(ctx.system_blocks or ())) == prev[2]
            prev = (key, stable, plain(list(ctx.system_blocks or ())))
        mem.close()
