"""Seed 001 (agent-loop compaction), the rows issue 27's audit found short.

Each test reproduces the audit's finding on the code before the fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

import stratamem
from stratamem import Memory
from stratamem.agentloop import Compactor
from stratamem.config import CompactionConfig, Config, PruningConfig
from stratamem.errors import ConfigError
from stratamem.providers import structural_problems
from stratamem.testing.llm_server import FakeLLMServer, checkpoint_reply
from stratamem.tokens import count_messages, get_tokenizer

TOK = get_tokenizer("o200k_base")


def chat(turns: int) -> list[dict[str, Any]]:
    """A plain user/assistant chat of ``turns`` exchanges (2 messages each)."""
    out: list[dict[str, Any]] = []
    for t in range(turns):
        out.append({"role": "user", "content": f"Question {t}: how is part {t} of the order service going?"})
        out.append({"role": "assistant", "content": f"Part {t} is done; its tests pass."})
    return out


def tool_turn(t: int, steps: int, rows: int) -> list[dict[str, Any]]:
    """One OpenAI-shaped user turn with ``steps`` tool calls of ``rows`` output rows each."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": f"Request {t}: migrate table t{t}."}]
    for k in range(steps):
        cid = f"call_{t}_{k}"
        fn = {"name": "run", "arguments": f'{{"cmd": "migrate t{t} step {k}"}}'}
        msgs.append(
            {"role": "assistant", "content": None, "tool_calls": [{"id": cid, "type": "function", "function": fn}]}
        )
        body = "".join(f"t{t} k{k} row {i}: copied {i * 17 % 101} rows\n" for i in range(rows))
        msgs.append({"role": "tool", "tool_call_id": cid, "content": body})
    msgs.append({"role": "assistant", "content": f"Table t{t} is migrated."})
    return msgs


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(reply=checkpoint_reply) as s:
        yield s


# --- the environment ------------------------------------------------------------------------


def test_seed001_wrap_and_compactor_read_the_agentloop_env_variables(
    monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer, tmp_path: Path
) -> None:
    """The audit: a wrapped client kept threshold 100000 with ``STRATAMEM_COMPACTION_THRESHOLD`` set."""
    monkeypatch.setenv("STRATAMEM_COMPACTION_THRESHOLD", "60000")
    monkeypatch.setenv("STRATAMEM_COMPACTION_ENABLED", "true")
    monkeypatch.setenv("STRATAMEM_PRUNING_SOFT_TRIM_CHARS", "6_000")
    client = openai.OpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0)
    wrapped = stratamem.wrap(client)
    assert wrapped.stratamem.compactor.config.threshold == 60_000
    assert wrapped.stratamem.compactor.pruning.soft_trim_chars == 6_000
    assert Compactor(None, provider="openai").config.threshold == 60_000
    # Over a memory's own settings (the file's), as in the shells: the variable wins over the file …
    cfg = Config.from_dict({"compaction": {"threshold": 80_000, "keep_recent_tokens": 9_000}})
    with Memory(tmp_path / "m.db", namespace="a", config=cfg, embedder=None) as mem:
        c = stratamem.wrap(client, memory=mem).stratamem.compactor
        assert (c.config.threshold, c.config.keep_recent_tokens) == (60_000, 9_000)
    # … and explicit arguments win over the variables.
    explicit = stratamem.wrap(client, config=CompactionConfig(threshold=50_000), pruning=PruningConfig())
    assert explicit.stratamem.compactor.config.threshold == 50_000
    assert explicit.stratamem.compactor.pruning.soft_trim_chars == 4_000
    # A typo is an error, here as in the shells (one parser).
    monkeypatch.setenv("STRATAMEM_COMPACTION_TRESHOLD", "1")
    with pytest.raises(ConfigError, match="STRATAMEM_COMPACTION_TRESHOLD"):
        stratamem.wrap(client)


# --- compaction disabled ----------------------------------------------------------------------


def test_seed001_compaction_disabled_applies_the_legacy_20_message_cap(tmp_path: Path) -> None:
    """The audit: with compaction disabled there was no legacy 20-message cap (180 -> 180 messages)."""
    off = CompactionConfig(enabled=False)
    with Memory(tmp_path / "m.db", namespace="a", embedder=None) as mem:
        c = Compactor(None, provider="openai", memory=mem, session="s", config=off)
        msgs = [{"role": "system", "content": "Be brief."}, *chat(90)]
        assert len(msgs) == 181
        result = c.prepare_messages(msgs)
        assert result.compaction.status == "capped"
        # The system message stays; the newest 20 messages (10 whole exchanges) are sent.
        assert len(msgs) == 21
        assert msgs[0] == {"role": "system", "content": "Be brief."}
        assert msgs[1]["content"].startswith("Question 80:")
        assert structural_problems(msgs, "openai") == []
        # Nothing is lost: every message was stored before it left the prompt.
        assert len(mem.turns("s")) == 181
    # Side data aligned with the messages is cut with them.
    msgs = [{"role": "system", "content": "Be brief."}, *chat(90)]
    side = list(range(len(msgs)))
    Compactor(None, provider="openai", config=off).prepare_messages(msgs, aligned=side)
    assert side == [0, *range(161, 181)]
    # A newest turn longer than 20 messages is never cut in two (its tool results stay beside their calls).
    long_turn = chat(3) + tool_turn(9, steps=12, rows=2)
    c = Compactor(None, provider="openai", config=off)
    c.prepare_messages(long_turn)
    assert long_turn[0]["content"].startswith("Request 9:")
    assert len(long_turn) == 26
    assert structural_problems(long_turn, "openai") == []


# --- aligned side data ------------------------------------------------------------------------


def test_seed001_prepare_messages_keeps_aligned_side_data(server: FakeLLMServer) -> None:
    """The audit: ``prepare_messages`` had no ``aligned=`` (only ``compact`` did)."""
    model = stratamem.llm.OpenAIChat("summ", base_url=server.openai_base_url, max_retries=0)
    cfg = CompactionConfig(
        threshold=6_000, keep_recent_tokens=1_500, output_reserve=500, checkpoint_max_tokens=600, min_gain_ratio=0
    )
    c = Compactor(model, provider="openai", config=cfg, pruning=PruningConfig(enabled=False))
    msgs = [m for t in range(8) for m in tool_turn(t, steps=2, rows=40)]
    side = [f"ctx{i}" for i in range(len(msgs))]
    kept_last = side[-1]
    result = c.prepare_messages(msgs, aligned=side)
    assert result.compaction.status == "compacted"
    assert len(side) == len(msgs)
    assert side[-1] == kept_last
    assert side[:2] == [None, None]  # the checkpoint pair
    with pytest.raises(stratamem.ValidationError):
        c.prepare_messages(msgs, aligned=side[:-1])


# --- phase 4: a dynamic recent window, decisions kept ------------------------------------------


def test_seed001_keep_recent_tokens_grows_to_hold_the_last_turns(server: FakeLLMServer) -> None:
    """The audit: ``keep_recent_tokens`` was fixed; the seed's phase 4 makes it dynamic. Here the last
    three (tool-heavy) turns need ~2,470 tokens: a fixed 1,500-token window kept only one of them."""
    model = stratamem.llm.OpenAIChat("summ", base_url=server.openai_base_url, max_retries=0)
    cfg = CompactionConfig(threshold=9_000, keep_recent_tokens=1_500, output_reserve=500, checkpoint_max_tokens=600)
    msgs = [m for t in range(8) for m in tool_turn(t, steps=2, rows=28)]
    last3 = msgs[-3 * len(tool_turn(0, 2, 28)) :]
    assert 1_500 < count_messages(last3, TOK) < 3_000
    dynamic = Compactor(model, provider="openai", config=cfg)
    work = list(msgs)
    assert dynamic.compact(work).status == "compacted"
    assert work[-len(last3) :] == last3
    assert [m["content"] for m in work if m["role"] == "user"][1:] == [
        f"Request {t}: migrate table t{t}." for t in (5, 6, 7)
    ]
    # The fixed window (keep_recent_turns = 0) as before: only the newest turn stays.
    fixed = Compactor(model, provider="openai", config=dataclasses.replace(cfg, keep_recent_turns=0))
    work = list(msgs)
    fixed.compact(work)
    assert [m["content"] for m in work if m["role"] == "user"][1:] == ["Request 7: migrate table t7."]
    # Never past twice the setting: a window that would need more keeps what fits.
    huge = [m for t in range(8) for m in tool_turn(t, steps=2, rows=40)]
    capped = Compactor(model, provider="openai", config=cfg)
    capped.compact(huge)
    assert count_messages(huge[2:], TOK) <= 2 * cfg.keep_recent_tokens + 600


def test_seed001_decision_messages_are_retained_without_a_hook(server: FakeLLMServer) -> None:
    """The audit: decisions stayed verbatim only when a ``compaction.before`` hook pinned them."""
    model = stratamem.llm.OpenAIChat("summ", base_url=server.openai_base_url, max_retries=0)
    cfg = CompactionConfig(threshold=6_000, keep_recent_tokens=1_500, output_reserve=500, checkpoint_max_tokens=600)
    decision = {"role": "user", "content": "We decided to keep PostgreSQL for the orders table; no MongoDB."}
    answer = {"role": "assistant", "content": "Understood: PostgreSQL stays."}
    msgs = tool_turn(0, 2, 40) + [decision, answer] + [m for t in range(1, 6) for m in tool_turn(t, 2, 40)]
    c = Compactor(model, provider="openai", config=cfg)
    result = c.compact(msgs)
    assert result.status == "compacted"
    assert decision in msgs and answer in msgs
    assert msgs.index(decision) == 2  # right after the checkpoint pair
    assert "Request 0: migrate table t0." not in [m["content"] for m in msgs]  # the rest of the old turns left
    assert structural_problems(msgs, "openai") == []
    # Turned off, only a hook keeps it.
    msgs = tool_turn(0, 2, 40) + [decision, answer] + [m for t in range(1, 6) for m in tool_turn(t, 2, 40)]
    off = Compactor(model, provider="openai", config=dataclasses.replace(cfg, retain_decisions_tokens=0))
    off.compact(msgs)
    assert decision not in msgs
