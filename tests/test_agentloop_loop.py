"""Issue 17, agent loop: async handlers, resume after a restart, idempotent replay,
the minimum-gain rule and compaction feeding the pyramid and memory items."""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_compaction import SMALL, anthropic_conversation, openai_conversation

from stratamem import Memory
from stratamem.agentloop import Compactor, prune_tool_results
from stratamem.agentloop.checkpoint import CHECKPOINT_HEADER, checkpoint_facts
from stratamem.agentloop.replay import same_turn
from stratamem.config import CompactionConfig, Config, PruningConfig
from stratamem.errors import ConfigError
from stratamem.events import Event, EventBus
from stratamem.ingest import parse_messages
from stratamem.llm import OpenAIChat
from stratamem.providers import structural_problems
from stratamem.testing.llm_server import FakeLLMServer, checkpoint_reply
from stratamem.tokens import count_messages, get_tokenizer

TOK = get_tokenizer("o200k_base")
# The rule off: every call over the threshold compacts (the behaviour before issue 17).
EAGER = CompactionConfig(
    threshold=12_000,
    keep_recent_tokens=3_000,
    output_reserve=1_000,
    checkpoint_max_tokens=800,
    min_gain_ratio=0.0,
    cooldown_calls=0,
)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(reply=checkpoint_reply) as s:
        yield s


@pytest.fixture
def model(server: FakeLLMServer) -> OpenAIChat:
    server.requests.clear()
    return OpenAIChat("summarizer", base_url=server.openai_base_url, max_retries=0, timeout_s=5)


def same_list(a: list[dict[str, Any]], b: list[dict[str, Any]], provider: str) -> bool:
    """Same messages, up to the provider's equivalent spellings (a string or one text block)."""
    ta, tb = parse_messages(a, provider), parse_messages(b, provider)
    return len(ta) == len(tb) and all(same_turn(x, y) for x, y in zip(ta, tb, strict=True))


def no_pyramid() -> Config:
    return Config.from_dict({"pyramid": {"enabled": False}})


# --- async handlers ---------------------------------------------------------------------


def test_sync_emit_runs_an_async_handler_to_completion_outside_any_loop() -> None:
    bus = EventBus()
    seen: list[str] = []

    async def handler(e: Event) -> list[int]:
        await asyncio.sleep(0)
        seen.append(e.kind)
        return [1, 2]

    bus.subscribe("x", handler)
    bus.subscribe("x", lambda e: "sync")
    assert bus.emit(Event("x")) == [[1, 2], "sync"]
    assert seen == ["x"]


def test_sync_emit_inside_a_running_loop_runs_the_handler_in_a_helper_thread() -> None:
    bus = EventBus()
    threads: list[str] = []

    async def handler(e: Event) -> int:
        threads.append(threading.current_thread().name)
        return 7

    bus.subscribe("x", handler)

    async def main() -> list[Any]:
        return bus.emit(Event("x"))  # a sync emitter called from async code

    assert asyncio.run(main()) == [7]
    assert threads == ["stratamem-async-handler"]


def test_aemit_awaits_async_handlers_and_calls_sync_ones() -> None:
    bus = EventBus()
    order: list[str] = []

    async def a(e: Event) -> str:
        await asyncio.sleep(0)
        order.append("a")
        return "A"

    def b(e: Event) -> str:
        order.append("b")
        return "B"

    bus.subscribe("x", a)
    bus.subscribe("x", b)
    assert asyncio.run(bus.aemit(Event("x"))) == ["A", "B"]
    assert order == ["a", "b"]


def test_async_handler_exception_propagates_from_emit() -> None:
    bus = EventBus()

    async def bad(e: Event) -> None:
        raise KeyError("hook bug")

    bus.subscribe("x", bad)
    with pytest.raises(KeyError):
        bus.emit(Event("x"))


def test_async_pin_handler_is_awaited_on_the_callers_loop_in_aprepare(model: OpenAIChat) -> None:
    msgs = anthropic_conversation(8)
    bus = EventBus()
    loops: list[Any] = []

    async def pin(e: Event) -> list[int]:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return [e.data["message_indices"][0]]

    bus.subscribe("compaction.before", pin)
    c = Compactor(model, provider="anthropic", config=EAGER, events=bus)

    async def main() -> Any:
        result = await c.aprepare_messages(msgs)
        return result, asyncio.get_running_loop()

    result, loop = asyncio.run(main())
    assert result.compaction.status == "compacted"
    assert result.compaction.pinned_indices[0] == 0  # the pinned turn starts at index 0
    assert loops == [loop]
    assert msgs[2]["content"] == "Request 0: fix module src/pkg/mod0.py please."  # after the checkpoint pair
    assert not structural_problems(msgs, "anthropic")


def test_async_pin_handler_works_in_a_sync_loop_too(model: OpenAIChat) -> None:
    msgs = anthropic_conversation(8)
    bus = EventBus()

    async def pin(e: Event) -> list[int]:
        return [e.data["message_indices"][0]]

    bus.subscribe("compaction.before", pin)
    result = Compactor(model, provider="anthropic", config=EAGER, events=bus).prepare_messages(msgs)
    assert result.compaction.status == "compacted" and result.compaction.pinned_indices[0] == 0


# --- resume and idempotent replay --------------------------------------------------------


def test_feeding_all_stored_turns_back_stores_nothing_twice(db_path: Path) -> None:
    msgs = anthropic_conversation(20)
    assert len(msgs) == 120
    with Memory(db_path, namespace="agent", config=no_pyramid()) as mem:
        Compactor(None, provider="anthropic", memory=mem, session="s", config=SMALL).sync(msgs)
        assert len(mem.turns("s")) == 120
    with Memory(db_path, namespace="agent", config=no_pyramid()) as mem:  # a restart
        c = Compactor(None, provider="anthropic", memory=mem, session="s", config=SMALL)
        again = copy.deepcopy(msgs)
        assert c.sync(again) == []
        assert len(mem.turns("s")) == 120 and c.state.turn_count == 120
        again.append({"role": "user", "content": "Request 20: one more."})
        ids = c.sync(again)
        assert len(ids) == 1 and len(mem.turns("s")) == 121


def test_replayed_messages_still_match_after_pruning_changed_their_tool_results(db_path: Path) -> None:
    msgs = anthropic_conversation(6, rows=300)
    with Memory(db_path, namespace="agent", config=no_pyramid()) as mem:
        Compactor(None, provider="anthropic", memory=mem, session="s", config=SMALL).sync(msgs)
        pruned = copy.deepcopy(msgs)
        stats = prune_tool_results(pruned, PruningConfig())
        assert stats.soft_trimmed and stats.hard_cleared
        c = Compactor(None, provider="anthropic", memory=mem, session="s", config=SMALL)
        assert c.sync(pruned) == []
        assert len(mem.turns("s")) == len(msgs)


def test_a_forked_replay_stores_the_new_branch_only(db_path: Path) -> None:
    msgs = anthropic_conversation(4)
    with Memory(db_path, namespace="agent", config=no_pyramid()) as mem:
        Compactor(None, provider="anthropic", memory=mem, session="s", config=SMALL).sync(msgs)
        fork = copy.deepcopy(msgs[:12]) + [{"role": "user", "content": "Actually, do something else."}]
        c = Compactor(None, provider="anthropic", memory=mem, session="s", config=SMALL)
        assert len(c.sync(fork)) == 1
        assert len(mem.turns("s")) == len(msgs) + 1


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_resume_returns_checkpoint_and_recent_turns_within_budget(
    provider: str, model: OpenAIChat, db_path: Path
) -> None:
    make = anthropic_conversation if provider == "anthropic" else openai_conversation
    msgs = make(8)
    with Memory(db_path, namespace="agent", config=no_pyramid()) as mem:
        c = Compactor(model, provider=provider, memory=mem, session="s", config=EAGER)
        assert c.prepare_messages(msgs).compaction.status == "compacted"
        live_after = copy.deepcopy(msgs)
        msgs.append({"role": "user", "content": "Request 8: and the docs."})
        c.sync(msgs)
        stored = len(mem.turns("s"))
    with Memory(db_path, namespace="agent", config=no_pyramid()) as mem:
        c2 = Compactor(model, provider=provider, memory=mem, session="s", config=EAGER)
        resumed = c2.resume_messages()
        # Same list as the live one (checkpoint pair, recent window) plus the turn added after.
        assert same_list(resumed, live_after + [{"role": "user", "content": "Request 8: and the docs."}], provider)
        assert any(isinstance(m["content"], str) and m["content"].startswith(CHECKPOINT_HEADER) for m in resumed)
        assert not structural_problems(resumed, provider)
        assert c2.count(resumed) + EAGER.output_reserve <= EAGER.threshold
        assert len(mem.turns("s")) == stored  # adopted, not stored again
        resumed.append({"role": "assistant", "content": "On it."})
        assert len(c2.sync(resumed)) == 1


def test_resume_without_compaction_returns_every_stored_turn(db_path: Path) -> None:
    msgs = anthropic_conversation(2)
    with Memory(db_path, namespace="agent", config=no_pyramid()) as mem:
        Compactor(None, provider="anthropic", memory=mem, session="s", config=SMALL).sync(msgs)
        assert same_list(
            Compactor(None, provider="anthropic", memory=mem, session="s", config=SMALL).resume_messages(),
            msgs,
            "anthropic",
        )
        assert Compactor(None, provider="anthropic", memory=mem, session="new", config=SMALL).resume_messages() == []


def test_resume_over_budget_compacts_before_returning(model: OpenAIChat, db_path: Path) -> None:
    msgs = anthropic_conversation(8)
    with Memory(db_path, namespace="agent", config=no_pyramid()) as mem:
        Compactor(None, provider="anthropic", memory=mem, session="s", config=SMALL).sync(msgs)
        c = Compactor(model, provider="anthropic", memory=mem, session="s", config=SMALL)
        resumed = c.resume_messages()
        assert c.state.compaction_count == 1
        assert c.count(resumed) + SMALL.output_reserve <= SMALL.threshold
        assert not structural_problems(resumed, "anthropic")
        assert len(mem.turns("s")) == 48


# --- the minimum-gain rule ----------------------------------------------------------------


def grow(msgs: list[dict[str, Any]], t: int) -> None:
    """One more tool step in the current turn (about 1,400 tokens)."""
    tid = f"toolu_more_{t}"
    msgs.append(
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": tid, "name": "read_file", "input": {"path": f"src/x{t}.py"}}],
        }
    )
    msgs.append(
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": tid,
                    "content": "".join(f"line {i} of x{t}\n" for i in range(300)),
                }
            ],
        }
    )


def run_loop(model: OpenAIChat, config: CompactionConfig, calls: int = 24) -> tuple[int, int, list[Any]]:
    msgs = anthropic_conversation(6)
    msgs.append({"role": "user", "content": "Request 6: a long investigation."})
    c = Compactor(model, provider="anthropic", config=config, pruning=PruningConfig(enabled=False))
    results = []
    peak = 0
    for t in range(calls):
        grow(msgs, t)
        r = c.prepare_messages(msgs)
        results.append(r.compaction)
        peak = max(peak, r.tokens + config.output_reserve)
        assert not structural_problems(msgs, "anthropic")
    return sum(r.status == "compacted" for r in results), peak, results


def test_min_gain_rule_makes_each_compaction_free_its_share_in_a_long_tool_loop(model: OpenAIChat) -> None:
    eager_n, eager_peak, eager = run_loop(model, EAGER)
    ruled = CompactionConfig(
        threshold=12_000,
        keep_recent_tokens=3_000,
        output_reserve=1_000,
        checkpoint_max_tokens=800,
        min_gain_ratio=0.25,
        cooldown_calls=0,
        hard_limit=15_000,
    )
    n, peak, results = run_loop(model, ruled)
    # Without the rule, once the long turn fills the window every call compacts (one step each).
    assert [r.status for r in eager[-12:]] == ["compacted"] * 12
    assert n <= 0.6 * eager_n
    assert all(r.tokens_before - r.tokens_after >= 3_000 for r in results[1:] if r.status == "compacted")
    assert peak <= 12_000 and eager_peak <= 12_000


def test_cooldown_defers_the_next_calls_after_a_compaction(model: OpenAIChat) -> None:
    cfg = CompactionConfig(
        threshold=12_000,
        keep_recent_tokens=3_000,
        output_reserve=1_000,
        checkpoint_max_tokens=800,
        min_gain_ratio=0.0,
        cooldown_calls=3,
        hard_limit=20_000,
    )
    _, _, results = run_loop(model, cfg)
    statuses = [r.status for r in results]
    first = statuses.index("compacted")
    # Right after a compaction: the next 2 calls may only be deferred or not needed.
    for s in statuses[first + 1 : first + 3]:
        assert s in ("deferred", "not_needed")
    eager = run_loop(model, EAGER)[0]
    assert statuses.count("compacted") < eager


def test_deferred_compactions_are_counted_in_the_state(model: OpenAIChat) -> None:
    cfg = CompactionConfig(
        threshold=12_000,
        keep_recent_tokens=3_000,
        output_reserve=1_000,
        checkpoint_max_tokens=800,
        min_gain_ratio=0.9,
        cooldown_calls=0,
        hard_limit=50_000,
    )
    msgs = anthropic_conversation(8)
    c = Compactor(model, provider="anthropic", config=cfg)
    r = c.prepare_messages(msgs)
    assert r.compaction.status == "deferred" and "min gain" in (r.compaction.reason or "")
    assert c.state.deferred == 1 and c.state.compaction_count == 0
    assert c.compact(msgs).status == "compacted"  # an explicit compact() is never deferred


def test_min_gain_configuration_is_checked(model: OpenAIChat) -> None:
    with pytest.raises(ConfigError):
        Compactor(model, provider="anthropic", config=CompactionConfig(min_gain_ratio=1.5))
    with pytest.raises(ConfigError):
        Compactor(model, provider="anthropic", config=CompactionConfig(threshold=100_000, hard_limit=50_000))


# --- compaction feeds the pyramid and the memory items -------------------------------------


def test_compaction_seals_a_segment_and_extracts_items(model: OpenAIChat, db_path: Path) -> None:
    cfg = Config.from_dict(
        {
            "pyramid": {"micro_chunk_size": 1000},
            "compaction": {
                "threshold": 12_000,
                "keep_recent_tokens": 3_000,
                "output_reserve": 1_000,
                "checkpoint_max_tokens": 800,
            },
        }
    )
    with Memory(db_path, namespace="agent", config=cfg) as mem:
        sealed_events: list[Event] = []
        mem.events.subscribe("segment.sealed", sealed_events.append)
        msgs = anthropic_conversation(8)
        c = Compactor(model, provider="anthropic", memory=mem, session="s")
        r = c.prepare_messages(msgs)
        assert r.compaction.status == "compacted"
        assert r.compaction.sealed_segment is not None
        assert [e.data["reason"] for e in sealed_events] == ["manual"]
        seg = mem.pyramid.node(r.compaction.sealed_segment)
        assert seg.level == 1 and len(mem.pyramid.turn_ids(seg.id)) == 48
        facts = checkpoint_facts(c.state.summary or "")
        assert facts and r.compaction.items_extracted == len(facts)
        items = mem.items.list()
        assert {i.content for i in items} >= {text for text, _ in facts}


def test_checkpoint_facts_reads_the_lasting_sections() -> None:
    text = (
        "## Goal\n- fix it\n\n## Constraints & Preferences\n- Use **pytest** only\n- none\n\n"
        "## Progress\n### Done\n- [x] a\n\n## Key Decisions\n- **Retry**: exponential backoff\n\n"
        "## Next Steps\n1. ship\n\n## Critical Context\n- `src/a.py` line 3\n- none\n"
    )
    assert checkpoint_facts(text) == [
        ("Use pytest only", "preference"),
        ("Retry: exponential backoff", "decision"),
        ("`src/a.py` line 3", "fact"),
    ]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.integers(1, 6), cut=st.integers(0, 40), extra=st.integers(0, 3))
def test_replay_of_any_stored_prefix_or_suffix_stores_only_new_messages(
    tmp_path: Path, turns: int, cut: int, extra: int
) -> None:
    msgs = anthropic_conversation(turns, rows=5)
    db = tmp_path / f"r{turns}_{cut}_{extra}.db"
    with Memory(db, namespace="agent", config=no_pyramid()) as mem:
        Compactor(None, provider="anthropic", memory=mem, session="s", config=SMALL).sync(msgs)
        start = min(cut, len(msgs) - 1)
        while msgs[start]["role"] != "user" or not isinstance(msgs[start]["content"], str):
            start -= 1
        replay = copy.deepcopy(msgs[start:])
        for k in range(extra):
            replay.append({"role": "user" if k % 2 == 0 else "assistant", "content": f"new {k}"})
        c = Compactor(None, provider="anthropic", memory=mem, session="s", config=SMALL)
        assert len(c.sync(replay)) == extra
        assert len(mem.turns("s")) == len(msgs) + extra
    db.unlink()


def test_m008_adds_the_loop_fields_to_existing_conversation_rows(tmp_path: Path) -> None:
    import sqlite3

    from stratamem.store import SQLiteStore
    from stratamem.store import migrations as mig
    from stratamem.store.sqlite.schema import MIGRATIONS

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    mig.apply(conn, [m for m in MIGRATIONS if m.name != "m009_conversation_loop"])
    conn.execute(
        "INSERT INTO conversations (namespace, session, summary, compaction_count, updated_at) "
        "VALUES ('ns', 's', '## Goal', 2, '2025-01-01T00:00:00.000000Z')"
    )
    conn.close()
    store = SQLiteStore(path)
    state = store.conversations.get("ns", "s")
    assert state is not None
    assert (state.summary, state.compaction_count, state.resume_seq, state.deferred, dict(state.last_usage)) == (
        "## Goal",
        2,
        0,
        0,
        {},
    )
    store.close()


def test_a_failure_feeding_the_memory_is_reported_and_the_compaction_stands(model: OpenAIChat, db_path: Path) -> None:
    cfg = Config.from_dict(
        {
            "pyramid": {"micro_chunk_size": 1000},
            "compaction": {
                "threshold": 12_000,
                "keep_recent_tokens": 3_000,
                "output_reserve": 1_000,
                "checkpoint_max_tokens": 800,
            },
        }
    )
    with Memory(db_path, namespace="agent", config=cfg) as mem:

        def broken_hook(e: Event) -> None:
            raise RuntimeError("hook bug")

        mem.events.subscribe("items.extracted", broken_hook)
        failed: list[Event] = []
        mem.events.subscribe("compaction.feed_failed", failed.append)
        msgs = anthropic_conversation(8)
        c = Compactor(model, provider="anthropic", memory=mem, session="s")
        r = c.prepare_messages(msgs)
        assert r.compaction.status == "compacted" and r.compaction.sealed_segment is not None
        assert r.compaction.items_extracted == 0
        assert c.state.last_status == "compacted" and (c.state.last_error or "").startswith("items: RuntimeError")
        assert [e.data["errors"] for e in failed] == [["items: RuntimeError"]]
        assert not structural_problems(msgs, "anthropic") and len(mem.turns("s")) == 48


def test_deferral_never_lets_a_request_pass_the_hard_limit(model: OpenAIChat) -> None:
    cfg = CompactionConfig(
        threshold=12_000,
        keep_recent_tokens=3_000,
        output_reserve=1_000,
        checkpoint_max_tokens=800,
        min_gain_ratio=0.9,
        cooldown_calls=0,
        hard_limit=16_000,
    )
    n, peak, results = run_loop(model, cfg)
    statuses = [r.status for r in results]
    assert statuses.count("deferred") >= 3 and n >= 1
    assert peak <= 16_000
    # Every compaction after the first was forced: the request was over the hard limit.
    assert all(r.tokens_before + 1_000 > 16_000 for r in results[1:] if r.status == "compacted")


def test_sync_handlers_still_work_in_async_loops(model: OpenAIChat) -> None:
    msgs = anthropic_conversation(8)
    bus = EventBus()
    bus.subscribe("compaction.before", lambda e: [e.data["message_indices"][0]])
    seen: list[str] = []
    bus.subscribe("compaction.after", lambda e: seen.append(e.data["status"]))
    c = Compactor(model, provider="anthropic", config=EAGER, events=bus)
    result = asyncio.run(c.aprepare_messages(msgs))
    assert result.compaction.pinned_indices[0] == 0 and seen == ["compacted"]


def test_a_lone_new_request_compacts_instead_of_raising_when_the_recent_window_does_not_fit(model: OpenAIChat) -> None:
    # The recent window (turn 1) fits keep_recent_tokens by raw count but not the budget once
    # calibrated, and the new request has no step yet: everything before it is summarized.
    # (The newest turn with no step used to raise BudgetError here.)
    msgs = anthropic_conversation(1, rows=200) + anthropic_conversation(2, rows=50)[6:]
    msgs.append({"role": "user", "content": "Request 2: next."})
    cfg = CompactionConfig(
        threshold=6_000,
        keep_recent_tokens=3_000,
        output_reserve=500,
        checkpoint_max_tokens=800,
        min_gain_ratio=0.0,
        cooldown_calls=0,
    )
    c = Compactor(model, provider="anthropic", config=cfg)
    c.observe_usage(msgs, count_messages(msgs, TOK) * 3)
    r = c.compact(msgs)
    assert r.status == "compacted" and r.split_turn
    assert msgs[2:] == [{"role": "user", "content": "Request 2: next."}] and len(msgs) == 3
    assert not structural_problems(msgs, "anthropic")
