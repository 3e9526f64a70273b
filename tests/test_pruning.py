"""Layer 1: tool-output pruning (seed 001, Phase 1 test list and more)."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from stratamem.agentloop.pruning import (
    CLEARED_PLACEHOLDER,
    PruneStats,
    is_tool_result_message,
    prune_tool_results,
    trim_marker,
)
from stratamem.config import PruningConfig
from stratamem.errors import ConfigError, ValidationError
from stratamem.providers import structural_problems

BIG = "".join(f"line {i:05d} of the build log\n" for i in range(1000))  # 28,000 chars


def anthropic_step(i: int, output: str, *, thinking: bool = False) -> list[dict[str, Any]]:
    """One tool step: assistant tool_use, then the user message with its tool_result."""
    blocks: list[dict[str, Any]] = []
    if thinking:
        blocks.append({"type": "thinking", "thinking": "x" * 5000, "signature": "sig"})
    blocks += [
        {"type": "text", "text": f"Running step {i}."},
        {"type": "tool_use", "id": f"t{i}", "name": "bash", "input": {"cmd": "pytest " + "-v " * 2000}},
    ]
    return [
        {"role": "assistant", "content": blocks},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{i}", "content": output}]},
    ]


def anthropic_loop(n: int, output: str = BIG, **kw: Any) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing tests. " + "Please. " * 1000}]
    for i in range(n):
        msgs += anthropic_step(i, output, **kw)
    return msgs


def result_text(msg: dict[str, Any]) -> str:
    if msg["role"] == "tool":
        return msg["content"]
    content = msg["content"][0]["content"]
    return content if isinstance(content, str) else content[0]["text"]


def test_is_tool_result_message() -> None:
    assert is_tool_result_message(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}]}
    )
    assert is_tool_result_message({"role": "tool", "tool_call_id": "a", "content": "x"})
    assert not is_tool_result_message({"role": "user", "content": "hello"})
    assert not is_tool_result_message({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    assert not is_tool_result_message({"role": "user", "content": []})
    assert not is_tool_result_message(
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}
    )


def test_soft_trim_large_result() -> None:
    msgs = anthropic_loop(3)
    stats = prune_tool_results(msgs)
    text = result_text(msgs[2])
    assert text == BIG[:1500] + trim_marker(1500, 1500, len(BIG)) + BIG[-1500:]
    assert "kept 1500 head + 1500 tail of 28000 characters" in text
    assert stats == PruneStats(
        tool_result_messages=3,
        protected=2,
        soft_trimmed=1,
        hard_cleared=0,
        skipped_images=0,
        chars_before=3 * len(BIG),
        chars_after=2 * len(BIG) + len(text),
    )


def test_soft_trim_preserves_small() -> None:
    small = "ok\n" * 1333  # 3,999 chars: just under the threshold
    msgs = anthropic_loop(5, small)
    before = copy.deepcopy(msgs)
    stats = prune_tool_results(msgs)
    assert msgs == before
    assert stats.changed == 0


def test_hard_clear_old_results() -> None:
    msgs = anthropic_loop(10, "short output")
    stats = prune_tool_results(msgs)
    texts = [result_text(m) for m in msgs[2::2]]
    # Ages 9..0: ages >= 6 (the four oldest) are cleared, the rest stay.
    assert texts == [CLEARED_PLACEHOLDER] * 4 + ["short output"] * 6
    assert stats.hard_cleared == 4 and stats.soft_trimmed == 0


def test_protect_last_n_results() -> None:
    msgs = anthropic_loop(4)
    prune_tool_results(msgs, PruningConfig(keep_last_tool_results=3))
    texts = [result_text(m) for m in msgs[2::2]]
    assert texts[1:] == [BIG] * 3
    assert texts[0] != BIG


def test_protection_wins_over_hard_clear() -> None:
    msgs = anthropic_loop(4, "out")
    prune_tool_results(msgs, PruningConfig(hard_clear_after=1, keep_last_tool_results=3))
    assert [result_text(m) for m in msgs[2::2]] == [CLEARED_PLACEHOLDER, "out", "out", "out"]


def test_never_modify_assistant_blocks() -> None:
    msgs = anthropic_loop(9, thinking=True)
    assistants = copy.deepcopy([m for m in msgs if m["role"] == "assistant"])
    prune_tool_results(msgs)
    assert [m for m in msgs if m["role"] == "assistant"] == assistants


def test_never_modify_user_text() -> None:
    msgs = anthropic_loop(9)
    msgs.insert(5, {"role": "user", "content": [{"type": "text", "text": BIG}]})
    msgs.insert(6, {"role": "assistant", "content": "noted"})
    users = copy.deepcopy([m for m in msgs if m["role"] == "user" and not is_tool_result_message(m)])
    prune_tool_results(msgs)
    assert [m for m in msgs if m["role"] == "user" and not is_tool_result_message(m)] == users
    assert users[0]["content"].startswith("Fix the failing tests.")


def test_skip_image_results() -> None:
    msgs = anthropic_loop(9)
    image = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
        {"type": "text", "text": BIG},
    ]
    msgs[2]["content"][0]["content"] = copy.deepcopy(image)
    stats = prune_tool_results(msgs)
    assert msgs[2]["content"][0]["content"] == image
    assert stats.skipped_images == 1


def test_empty_messages_noop() -> None:
    msgs: list[dict[str, Any]] = []
    assert prune_tool_results(msgs) == PruneStats()
    assert msgs == []


def test_all_protected_noop() -> None:
    msgs = anthropic_loop(2)
    before = copy.deepcopy(msgs)
    stats = prune_tool_results(msgs)
    assert msgs == before
    assert (stats.protected, stats.changed) == (2, 0)


def test_pruning_is_idempotent_and_in_place() -> None:
    msgs = anthropic_loop(9)
    same = msgs
    first = prune_tool_results(msgs)
    snapshot = copy.deepcopy(msgs)
    second = prune_tool_results(msgs)
    assert msgs is same and msgs == snapshot
    assert (first.soft_trimmed, first.hard_cleared) == (4, 3)
    assert second.changed == 0
    assert structural_problems(msgs, "anthropic") == []


def test_list_content_keeps_list_shape() -> None:
    msgs = anthropic_loop(3)
    msgs[2]["content"][0]["content"] = [{"type": "text", "text": BIG[:20000]}, {"type": "text", "text": BIG[20000:]}]
    prune_tool_results(msgs)
    block = msgs[2]["content"][0]["content"]
    assert len(block) == 1 and block[0]["type"] == "text"
    assert block[0]["text"].startswith(BIG[:1500]) and "of 28001 characters" in block[0]["text"]


def openai_loop(steps: int, parallel: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix it."},
    ]
    for i in range(steps):
        calls = [
            {"id": f"c{i}_{j}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
            for j in range(parallel)
        ]
        msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
        msgs += [{"role": "tool", "tool_call_id": c["id"], "content": BIG} for c in calls]
    return msgs


def test_openai_parallel_results_count_as_one_step() -> None:
    msgs = openai_loop(8, parallel=3)
    stats = prune_tool_results(msgs)
    tools = [m for m in msgs if m["role"] == "tool"]
    assert stats.tool_result_messages == 8
    assert [result_text(m) for m in tools[:6]] == [CLEARED_PLACEHOLDER] * 6  # steps aged 7 and 6
    assert all(trim_marker(1500, 1500, len(BIG)) in result_text(m) for m in tools[6:18])  # ages 5..2
    assert [result_text(m) for m in tools[18:]] == [BIG] * 6  # the two newest steps
    assert (stats.hard_cleared, stats.soft_trimmed, stats.protected) == (6, 12, 6)
    assert structural_problems(msgs, "openai") == []


def test_ratio_triggers_wait_for_a_full_window() -> None:
    msgs = anthropic_loop(4)
    cfg = PruningConfig(soft_trim_ratio=0.5, hard_clear_ratio=0.9, hard_clear_after=2, context_window=1_000_000)
    assert prune_tool_results(msgs, cfg).changed == 0  # ~30k tokens: far below half a million
    cfg = PruningConfig(soft_trim_ratio=0.01, hard_clear_ratio=0.9, hard_clear_after=3, context_window=1_000_000)
    stats = prune_tool_results(msgs, cfg)
    assert (stats.soft_trimmed, stats.hard_cleared) == (2, 0)


def test_disabled_pruning_changes_nothing() -> None:
    msgs = anthropic_loop(9)
    before = copy.deepcopy(msgs)
    assert prune_tool_results(msgs, PruningConfig(enabled=False)).changed == 0
    assert msgs == before


def test_bad_input_and_config_raise() -> None:
    with pytest.raises(ValidationError):
        prune_tool_results({"role": "user"})  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"messages\[1\]"):
        prune_tool_results([{"role": "user", "content": "x"}, "oops"])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="below soft_trim_chars"):
        prune_tool_results([], PruningConfig(soft_trim_chars=3000))
    with pytest.raises(ConfigError, match="context_window"):
        prune_tool_results([], PruningConfig(soft_trim_ratio=0.5))


def test_pruning_logs_counts_not_content(caplog: pytest.LogCaptureFixture) -> None:
    msgs = anthropic_loop(9)
    with caplog.at_level(logging.INFO, logger="stratamem.agentloop.pruning"):
        prune_tool_results(msgs)
    after = 2 * len(BIG) + 4 * (3000 + len(trim_marker(1500, 1500, len(BIG)))) + 3 * len(CLEARED_PLACEHOLDER)
    assert caplog.messages == [
        f"pruned tool results: 4 soft-trimmed, 3 hard-cleared, 2 protected, chars {9 * len(BIG)} -> {after}"
    ]
    assert "build log" not in caplog.text
