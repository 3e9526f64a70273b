"""Prompt caching in the agent loop (issue 26): breakpoints through wrap(), usage with cache fields,
pruning in epochs and the cache-aware compaction gate. Real clients against FakeLLMServer."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from wire import marked

import stratamem
from stratamem import Memory
from stratamem.agentloop.breakpoints import caller_marks, place_breakpoints
from stratamem.agentloop.pruning import CLEARED_PLACEHOLDER, prune_frontier, prune_tool_results
from stratamem.config import CompactionConfig, Config, PruningConfig
from stratamem.records.usage import PromptUsage, cache_rules
from stratamem.testing import FakeLLMServer, FakePromptCache
from stratamem.tokens import get_tokenizer

TOK = get_tokenizer("o200k_base")
OUTPUT = "".join(f"line {i:04d} of the test run output\n" for i in range(300))  # ~9,900 chars
SHORT = OUTPUT[:3300]  # below the soft-trim limit: pruning leaves it alone for six steps


@pytest.fixture
def mem(db_path: Path) -> Iterator[Memory]:
    m = Memory(db_path, namespace="agent", config=Config.from_dict({"pyramid": {"enabled": False}}), embedder=None)
    yield m
    m.close()


def ant(server: FakeLLMServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="ak-test", max_retries=0)


def _rolling(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The caller's own rolling breakpoint: cache_control on the last block of its list."""
    out = copy.deepcopy(history)
    last = out[-1]
    if isinstance(last["content"], str):
        last["content"] = [{"type": "text", "text": last["content"]}]
    last["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return out


def test_wrap_keeps_the_callers_cache_control_and_calibrates_on_the_whole_input(mem: Memory) -> None:
    cache = FakePromptCache(min_tokens=256)
    with FakeLLMServer(reply="Looking.", prompt_cache=cache) as server:
        client = stratamem.wrap(ant(server), memory=mem, session="s", agent_model="claude-x")
        history: list[dict[str, Any]] = [{"role": "user", "content": "Run the tests and tell me what fails."}]
        for _ in range(4):
            server.script_tool_call("bash", {"cmd": "pytest"})
            resp = client.messages.create(model="claude-x", max_tokens=20, messages=_rolling(history))
            history.append({"role": "assistant", "content": resp.content})
            history.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": resp.content[0].id, "content": SHORT}],
                }
            )
        bodies = [r.body for r in server.requests]
        usages = [server.cached(r) for r in server.requests]
    # The caller's breakpoint reaches the provider, on the block the caller marked (the last one).
    assert all(marked(b) == [(len(b["messages"]) - 1, len(b["messages"][-1]["content"]) - 1)] for b in bodies)
    # ... and is not stored: the live list holds none.
    assert "cache_control" not in repr(client.stratamem.messages)
    read, written = usages[-1]
    assert read > 0
    state = client.stratamem.compactor.state
    assert (state.last_usage["cached_read"], state.last_usage["cache_written"]) == (read, written)
    assert state.last_usage["input_tokens"] == server.input_tokens(server.requests[-1])
    # Calibrated on cached + uncached input: our count and the provider's agree to within framing.
    assert 0.95 < client.stratamem.compactor.calibration.factor("claude-x") < 1.3


def test_cache_aware_wrap_marks_the_stable_prefix_on_the_copy_it_sends(mem: Memory) -> None:
    cfg = CompactionConfig(cache_aware=True)
    with FakeLLMServer(reply="Looking.", prompt_cache=FakePromptCache(min_tokens=1024)) as server:
        client = stratamem.wrap(ant(server), memory=mem, session="s", config=cfg, pruning=PruningConfig(epoch=3))
        history: list[dict[str, Any]] = [{"role": "user", "content": "Run the tests and tell me what fails."}]
        for _ in range(9):
            server.script_tool_call("bash", {"cmd": "pytest"})
            resp = client.messages.create(model="claude-sonnet-4-6", max_tokens=20, messages=history)
            history.append({"role": "assistant", "content": resp.content})
            history.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": resp.content[0].id, "content": OUTPUT}],
                }
            )
        bodies = [r.body for r in server.requests]
        reads = [server.cached(r)[0] for r in server.requests]
    last = bodies[-1]
    frontier = prune_frontier(last["messages"])
    assert frontier is not None
    # Ours: the last block (rolling) and the prune frontier; at most four, none in the stored list.
    assert marked(last) == sorted([(frontier, 0), (len(last["messages"]) - 1, 0)])
    assert "cache_control" not in repr(client.stratamem.messages)
    placed = client.stratamem.last_cache["breakpoints"]
    assert placed == [f"last block (message {len(last['messages']) - 1})", f"prune frontier (message {frontier})"]
    # Pruned in epochs: most calls only append, so the provider reads the previous call's entry.
    assert sum(1 for r in reads[1:] if r > 0) >= 6
    expected = client.stratamem.last_cache["expected"]
    assert expected["read"] > 0 and expected["read"] + expected["written"] + expected["uncached"] == expected["total"]


def test_openai_requests_get_no_cache_control(mem: Memory) -> None:
    with FakeLLMServer(reply="Fine.", prompt_cache=FakePromptCache(min_tokens=64)) as server:
        client = stratamem.wrap(
            openai.OpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0),
            memory=mem,
            session="s",
            config=CompactionConfig(cache_aware=True),
        )
        history = [{"role": "user", "content": "Hello. " * 300}]
        for _ in range(3):
            resp = client.chat.completions.create(model="gpt-4.1", messages=history)
            history += [
                {"role": "assistant", "content": resp.choices[0].message.content},
                {"role": "user", "content": "More."},
            ]
        assert "cache_control" not in repr([r.body for r in server.requests])
        state = client.stratamem.compactor.state
        assert state.last_usage["cached_read"] == server.cached(server.requests[-1])[0] > 0


# --- the pure parts --------------------------------------------------------------------------


def _step(i: int, output: str = OUTPUT) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": [{"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": output}]},
    ]


def _loop(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(n):
        out += _step(i)
    return out


def _results(messages: list[dict[str, Any]]) -> list[str]:
    return [
        m["content"][0]["content"] if isinstance(m["content"][0]["content"], str) else "list"
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
    ]


def test_pruning_in_epochs_waits_then_gives_each_result_its_final_form_once() -> None:
    cfg = PruningConfig(epoch=3, keep_last_tool_results=2, hard_clear_after=4)
    msgs = _loop(4)  # two results past the protected ones: not yet an epoch
    assert prune_tool_results(msgs, cfg).changed == 0 and prune_frontier(msgs) is None
    msgs += _step(4)  # three wait: one pass, each once
    stats = prune_tool_results(msgs, cfg)
    assert stats.changed == 3
    results = _results(msgs)
    assert results[0] == CLEARED_PLACEHOLDER and "trimmed" in results[1] and "trimmed" in results[2]
    frontier = prune_frontier(msgs)
    assert frontier == 6
    before = copy.deepcopy(msgs[: frontier + 1])
    for i in range(5, 7):  # the next results wait again; nothing before the frontier moves
        msgs += _step(i)
        prune_tool_results(msgs, cfg)
        assert msgs[: frontier + 1] == before
    # Forced (the request would cross the threshold): the usual rules, old results cleared.
    assert prune_tool_results(msgs, cfg, force=True).hard_cleared == 2
    assert _results(msgs)[:3] == [CLEARED_PLACEHOLDER] * 3


def test_epoch_zero_prunes_as_before() -> None:
    a, b = _loop(8), _loop(8)
    prune_tool_results(a, PruningConfig())
    prune_tool_results(b, PruningConfig(epoch=0))
    assert a == b


def test_caller_marks_go_back_only_on_the_unchanged_message_and_ours_yield() -> None:
    sent = _loop(3)
    caller = copy.deepcopy(sent)
    caller[0]["content"] = [{"type": "text", "text": "go", "cache_control": {"type": "ephemeral"}}]
    caller[-1]["content"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    plain, marks = caller_marks(caller)
    assert plain == [{**m, "content": [{"type": "text", "text": "go"}]} if i == 0 else m for i, m in enumerate(sent)]
    out = copy.deepcopy(plain)
    out[-1]["content"][0]["content"] = "changed by pruning"
    placed = place_breakpoints(out, marks, ours=True, tokenizer=TOK, min_tokens=0, system_marks=2, limit=4)
    # Two system marks + the caller's first message = 3; the caller's mark on the changed message is dropped;
    # one slot is left for ours (the last block).
    assert out[0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert out[-1]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert placed == ["last block (message 6)"]


def test_prompt_usage_reads_every_provider_shape() -> None:
    a = PromptUsage.from_provider(
        {"input_tokens": 21, "cache_read_input_tokens": 1800, "cache_creation_input_tokens": 300, "output_tokens": 9}
    )
    assert (a.input, a.cached_read, a.cache_written, a.uncached, a.source) == (2121, 1800, 300, 21, "anthropic")
    chat = PromptUsage.from_provider({"prompt_tokens": 2000, "prompt_tokens_details": {"cached_tokens": 1536}})
    assert (chat.input, chat.cached_read, chat.hit_rate, chat.source) == (2000, 1536, 0.768, "openai-chat")
    resp = PromptUsage.from_provider({"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 896}})
    assert (resp.input, resp.cached_read, resp.source) == (1000, 896, "openai-responses")
    with pytest.raises(stratamem.ValidationError):
        PromptUsage.from_provider({"tokens": 3})
    with pytest.raises(stratamem.ValidationError):
        PromptUsage.from_provider({"input_tokens": -1})
    assert cache_rules("anthropic", "claude-haiku-4-5").min_tokens == 4096
    assert cache_rules("openai", "gpt-5-mini").read == 0.1


def test_cache_aware_gate_puts_off_a_compaction_that_costs_more_than_it_saves() -> None:
    from stratamem.agentloop import Compactor

    cfg = CompactionConfig(
        threshold=6_000,
        keep_recent_tokens=1_500,
        output_reserve=500,
        checkpoint_max_tokens=600,
        min_gain_ratio=0.0,
        cooldown_calls=0,
        hard_limit=40_000,
        cache_aware=True,
    )
    epochs = PruningConfig(epoch=100)  # no epoch comes: only the budget could force an edit
    comp = Compactor(None, provider="anthropic", config=cfg, pruning=epochs)
    msgs = _loop(1)
    comp.prepare_messages(msgs)  # below the threshold: it learns how the request grows
    statuses = []
    for i in range(1, 6):
        msgs += _step(i)
        before = copy.deepcopy(msgs)
        done = comp.prepare_messages(msgs)
        statuses.append((done.compaction.status, (done.compaction.reason or "")[:6]))
        assert msgs == before  # over the threshold but below the hard limit: nothing edited
    assert statuses == [("deferred", "cache:")] * 5
    # At the hard limit it must act: forced pruning first (then compaction, as ever).
    forced = Compactor(
        None, provider="anthropic", config=CompactionConfig(**{**_fields(cfg), "hard_limit": 7_000}), pruning=epochs
    )
    forced.prepare_messages(_loop(1))
    done = forced.prepare_messages(_loop(6))
    assert done.pruning.changed > 0 and done.compaction.status == "truncated"


def _fields(cfg: CompactionConfig) -> dict[str, Any]:
    return {f: getattr(cfg, f) for f in cfg.__dataclass_fields__}
