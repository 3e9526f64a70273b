"""Layer 2: history compaction (seed 001, Phase 2 test list, the store wiring, and a property)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stratamem import Memory
from stratamem.agentloop import Compactor, find_cut_point, history_text, real_user_indices
from stratamem.agentloop.checkpoint import (
    ACK_TEXT,
    CHECKPOINT_HEADER,
    CHECKPOINT_PROMPT,
    OMITTED_HEADER,
    UPDATE_PROMPT,
    missing_sections,
)
from stratamem.config import CompactionConfig, PruningConfig
from stratamem.errors import BudgetError, CompactionCancelled, ConfigError
from stratamem.events import EventBus
from stratamem.llm import AnthropicChat, Completion, OpenAIChat
from stratamem.providers import structural_problems
from stratamem.store import SQLiteStore
from stratamem.testing.llm_server import FakeLLMServer, checkpoint_reply
from stratamem.tokens import CharEstimator, count_message, count_messages, get_tokenizer

TOK = get_tokenizer("o200k_base")
SMALL = CompactionConfig(threshold=12_000, keep_recent_tokens=3_000, output_reserve=1_000, checkpoint_max_tokens=800)


def output(n: int, tag: str = "") -> str:
    return "".join(f"{tag}row {i}: value={i * 7 % 13} status=ok\n" for i in range(n))


def anthropic_conversation(turns: int, steps: int = 2, rows: int = 120) -> list[dict[str, Any]]:
    """A valid Anthropic agent transcript: each turn a request, tool steps, a final answer."""
    msgs: list[dict[str, Any]] = []
    for t in range(turns):
        msgs.append({"role": "user", "content": f"Request {t}: fix module src/pkg/mod{t}.py please."})
        for k in range(steps):
            tid = f"toolu_{t}_{k}"
            msgs.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": f"I should look at mod{t}.", "signature": "sig"},
                        {
                            "type": "tool_use",
                            "id": tid,
                            "name": "read_file" if k == 0 else "edit_file",
                            "input": {"path": f"src/pkg/mod{t}.py"},
                        },
                    ],
                }
            )
            msgs.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": tid, "content": output(rows, f"t{t}k{k} ")}],
                }
            )
        msgs.append({"role": "assistant", "content": f"Done with request {t}."})
    return msgs


def openai_conversation(turns: int, steps: int = 2, rows: int = 120) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "Project rules: run the tests before you answer."}]
    for t in range(turns):
        msgs.append({"role": "user", "content": f"Request {t}: fix module src/pkg/mod{t}.py please."})
        for k in range(steps):
            calls = [
                {
                    "id": f"call_{t}_{k}_{j}",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": f'{{"path": "src/pkg/mod{t}_{j}.py"}}'},
                }
                for j in range(2)
            ]
            msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
            msgs += [
                {"role": "tool", "tool_call_id": c["id"], "content": output(rows // 2, f"t{t}k{k} ")} for c in calls
            ]
        msgs.append({"role": "assistant", "content": f"Done with request {t}."})
    return msgs


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(reply=checkpoint_reply) as s:
        yield s


@pytest.fixture
def model(server: FakeLLMServer) -> OpenAIChat:
    server.requests.clear()
    return OpenAIChat("summarizer", base_url=server.openai_base_url, max_retries=0, timeout_s=5)


def compactor(model: Any, provider: str = "anthropic", **kw: Any) -> Compactor:
    kw.setdefault("config", SMALL)
    return Compactor(model, provider=provider, **kw)


# --- trigger and cut point ----------------------------------------------------------------


def test_should_compact_under_threshold(model: OpenAIChat) -> None:
    msgs = anthropic_conversation(2)
    c = compactor(model)
    assert count_messages(msgs, TOK) + SMALL.output_reserve <= SMALL.threshold
    assert not c.should_compact(msgs)
    assert c.prepare_messages(msgs).compaction.status == "not_needed"


def test_should_compact_over_threshold(model: OpenAIChat) -> None:
    msgs = anthropic_conversation(8)
    c = compactor(model)
    assert count_messages(msgs, TOK) + SMALL.output_reserve > SMALL.threshold
    assert c.should_compact(msgs)
    assert not compactor(model, config=CompactionConfig(enabled=False)).should_compact(msgs)


def test_system_prompt_counts_toward_the_trigger(model: OpenAIChat) -> None:
    msgs = anthropic_conversation(2)
    c = compactor(model)
    gap = SMALL.threshold - SMALL.output_reserve - count_messages(msgs, TOK)
    assert not c.should_compact(msgs, system="rules " * (gap // 2 - 10))
    assert c.should_compact(msgs, system="rules " * (gap + 10))


def test_find_cut_point_keeps_recent() -> None:
    msgs = anthropic_conversation(8)
    cut = find_cut_point(msgs, 8_000, TOK)
    starts = real_user_indices(msgs)
    kept = sum(count_message(m, TOK) for m in msgs[cut:])
    assert cut == starts[-2] and kept <= 8_000
    assert sum(count_message(m, TOK) for m in msgs[starts[-3] :]) > 8_000
    assert find_cut_point(msgs, 10**9, TOK) == 0


def test_cut_at_user_boundary_never_at_a_tool_result() -> None:
    msgs = anthropic_conversation(4, steps=3)
    for keep in range(0, count_messages(msgs, TOK), 97):
        cut = find_cut_point(msgs, keep, TOK)
        assert msgs[cut]["role"] == "user" and isinstance(msgs[cut]["content"], str)
    # The seed's rule (snap to the next role == "user") lands on a tool result here:
    assert msgs[2]["role"] == "user" and msgs[2]["content"][0]["type"] == "tool_result"
    assert 2 not in real_user_indices(msgs)


def test_latest_request_is_always_kept_even_when_large() -> None:
    msgs = anthropic_conversation(3)
    assert find_cut_point(msgs, 10, TOK) == real_user_indices(msgs)[-1]


# --- rebuild -------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_alternation_preserved(provider: str, model: OpenAIChat) -> None:
    msgs = anthropic_conversation(8) if provider == "anthropic" else openai_conversation(8)
    latest = copy.deepcopy(msgs[real_user_indices(msgs)[-1] :])
    result = compactor(model, provider).compact(msgs)
    assert result.status == "compacted"
    assert structural_problems(msgs, provider) == []
    assert msgs[-len(latest) :] == latest  # the recent window, verbatim
    if provider == "openai":
        assert msgs[0] == {"role": "system", "content": "Project rules: run the tests before you answer."}
        msgs = msgs[1:]
    assert msgs[0]["content"].startswith(CHECKPOINT_HEADER) and msgs[1] == {"role": "assistant", "content": ACK_TEXT}
    assert count_messages(msgs, TOK) + SMALL.output_reserve <= SMALL.threshold


def test_alternation_leading_assistant(model: OpenAIChat) -> None:
    msgs = anthropic_conversation(8)
    # Walking back 7,423 tokens (the seed's rule) stops on msgs[35], the assistant's final answer
    # of turn 5; the recent window must start at the next real user turn instead.
    keep = sum(count_message(m, TOK) for m in msgs[35:])
    assert msgs[35] == {"role": "assistant", "content": "Done with request 5."}
    assert find_cut_point(msgs, keep, TOK) == 36
    config = CompactionConfig(
        threshold=12_000, keep_recent_tokens=keep, output_reserve=1_000, checkpoint_max_tokens=800
    )
    result = compactor(model, config=config).compact(msgs)
    assert result.removed_indices == tuple(range(36))
    assert [m["role"] for m in msgs[:3]] == ["user", "assistant", "user"]
    assert msgs[2]["content"] == "Request 6: fix module src/pkg/mod6.py please."
    assert structural_problems(msgs, "anthropic") == []


def test_split_turn_when_the_newest_turn_alone_is_too_big(model: OpenAIChat) -> None:
    msgs = anthropic_conversation(1, steps=14)
    c = compactor(model)
    result = c.compact(msgs)
    assert result.status == "compacted" and result.split_turn
    assert msgs[2] == {"role": "user", "content": "Request 0: fix module src/pkg/mod0.py please."}
    assert msgs[-1] == {"role": "assistant", "content": "Done with request 0."}
    assert structural_problems(msgs, "anthropic") == []
    assert c.count(msgs) + SMALL.output_reserve <= SMALL.threshold


def test_budget_error_when_the_newest_step_cannot_fit(model: OpenAIChat) -> None:
    msgs = anthropic_conversation(1, steps=1, rows=3000)[:-1]  # the loop waits on a 30k-token result
    with pytest.raises(BudgetError, match="latest user request and its newest tool step"):
        compactor(model).compact(msgs)
    assert len(msgs) == 3  # untouched


# --- checkpoint ----------------------------------------------------------------------------


def test_first_compaction_uses_checkpoint_prompt_with_all_sections(model: OpenAIChat, server: FakeLLMServer) -> None:
    msgs = anthropic_conversation(8)
    c = compactor(model)
    c.compact(msgs)
    req = server.requests[-1]
    assert req.system == CHECKPOINT_PROMPT
    assert "[user]: Request 0: fix module src/pkg/mod0.py please." in req.prompt_text
    assert "I should look at" not in req.prompt_text  # thinking is not sent
    assert missing_sections(c.state.summary or "") == []
    assert "## Files\n### Modified\n- src/pkg/mod0.py" in (c.state.summary or "")


def test_iterative_update_prompt(model: OpenAIChat, server: FakeLLMServer) -> None:
    msgs = anthropic_conversation(8)
    c = compactor(model)
    c.compact(msgs)
    first = c.state.summary or ""
    msgs += anthropic_conversation(14)[len(anthropic_conversation(8)) :]
    result = c.compact(msgs)
    req = server.requests[-1]
    assert result.status == "compacted" and result.compaction_number == 2
    assert req.system == UPDATE_PROMPT
    body = req.messages[0]["content"]
    assert body.startswith("## Current checkpoint\n\n" + first.split("\n\n## Files")[0])
    assert "[Checkpoint:" not in body  # the old checkpoint message is not re-summarized
    assert "- [x] Request 0: fix module src/pkg/mod0.py please." in (c.state.summary or "")
    assert c.state.compaction_count == 2


def test_large_input_is_summarized_in_parts(model: OpenAIChat, server: FakeLLMServer) -> None:
    from stratamem.config import LLMConfig

    msgs = anthropic_conversation(8)
    c = compactor(model, llm=LLMConfig(max_input_tokens=2_800))
    result = c.compact(msgs)
    assert result.summary_calls == len(server.requests) > 1
    assert [r.system for r in server.requests] == [CHECKPOINT_PROMPT] + [UPDATE_PROMPT] * (result.summary_calls - 1)
    assert all(r.max_tokens == SMALL.checkpoint_max_tokens for r in server.requests)
    assert result.summary_input_tokens == sum(server.input_tokens(r) for r in server.requests)


def test_anthropic_client_writes_the_checkpoint(server: FakeLLMServer) -> None:
    msgs = openai_conversation(8)
    c = compactor(AnthropicChat("claude-fake", base_url=server.url, max_retries=0), "openai")
    assert c.compact(msgs).status == "compacted"
    assert server.requests[-1].api == "anthropic"
    assert structural_problems(msgs, "openai") == []


# --- failure ---------------------------------------------------------------------------------


@pytest.mark.parametrize("failure", ["status", "timeout"])
def test_summarization_failure_fallback(failure: str, server: FakeLLMServer, db_path: Path) -> None:
    server.requests.clear()
    mem = Memory(db_path, namespace="agent", embedder=None)
    bus = mem.events
    model = OpenAIChat("summarizer", base_url=server.openai_base_url, max_retries=1, backoff_s=0, timeout_s=0.3)
    if failure == "status":
        server.fail_next(2, status=503)
    else:
        server.fail_next(2, status=500, delay_s=0.6)
    msgs = anthropic_conversation(8)
    original = copy.deepcopy(msgs)
    c = compactor(model, memory=mem, session="s1")
    result = c.compact(msgs)
    assert result.status == "fallback" and result.error and result.error.startswith("ModelError")
    assert structural_problems(msgs, "anthropic") == []
    assert c.count(msgs) + SMALL.output_reserve <= SMALL.threshold
    assert msgs[0]["content"].startswith(OMITTED_HEADER)
    assert [e.data["error"] for e in bus.recent("compaction.failed")] == ["ModelError"]
    assert bus.recent("compaction.after")[-1].data["status"] == "fallback"
    # Nothing is lost: every message is a stored turn, and the failure is in the persisted state.
    assert len(mem.turns("s1")) == len(original)
    assert set(result.turn_ids) == {t.id for t in mem.turns("s1")[: result.removed_indices[-1] + 1]}
    saved = SQLiteStore(db_path).conversations.get("agent", "s1")
    assert saved is not None and (saved.last_status, saved.failures, saved.summary) == ("fallback", 1, None)
    mem.close()


def test_a_client_validation_error_falls_back_visibly(server: FakeLLMServer) -> None:
    # The transcript is larger than the client accepts: it refuses before any call
    # with ValidationError, which must fall back like a model failure (review #13).
    server.requests.clear()
    model = OpenAIChat("summarizer", base_url=server.openai_base_url, max_retries=0, max_input_chars=500)
    bus = EventBus()
    msgs = anthropic_conversation(8)
    c = compactor(model, events=bus)
    result = c.compact(msgs)
    assert result.status == "fallback" and result.error is not None
    assert result.error.startswith("ValidationError: messages: input is ")
    assert server.requests == []
    assert [e.data["error"] for e in bus.recent("compaction.failed")] == ["ValidationError"]
    assert (c.state.last_status, c.state.failures) == ("fallback", 1)
    assert structural_problems(msgs, "anthropic") == []
    assert msgs[0]["content"].startswith(OMITTED_HEADER)


class _Broken:
    """A ChatModel of the caller's own that fails with an arbitrary exception."""

    model = "broken"

    def complete(self, system: str, messages: Any, *, max_tokens: int) -> Any:
        raise RuntimeError("socket closed")


def test_any_summarizer_exception_falls_back_and_loses_no_stored_turn(db_path: Path) -> None:
    mem = Memory(db_path, namespace="agent", embedder=None)
    msgs = anthropic_conversation(8)
    c = compactor(_Broken(), memory=mem, session="s1")
    result = c.compact(msgs)
    assert (result.status, result.error) == ("fallback", "RuntimeError: socket closed")
    assert [e.data["error"] for e in mem.events.recent("compaction.failed")] == ["RuntimeError"]
    assert len(mem.turns("s1")) == len(anthropic_conversation(8))
    assert c.state.last_error == "RuntimeError: socket closed"
    mem.close()


class _Verbose:
    """A model that ignores max_tokens and writes far too much."""

    model = "verbose"

    def complete(self, system: str, messages: Any, *, max_tokens: int) -> Completion:
        return Completion("## Goal\n" + "word " * 5000, 10, 10, "verbose", "stop", 1)


def test_an_overlong_checkpoint_is_cut_with_a_count_only_tokenizer() -> None:
    # CharEstimator has no truncate(): compaction must still cut the checkpoint (review #13).
    config = CompactionConfig(threshold=2000, keep_recent_tokens=200, output_reserve=100, checkpoint_max_tokens=300)
    tok = CharEstimator()
    c = Compactor(_Verbose(), provider="openai", tokenizer=tok, config=config)
    msgs: list[dict[str, Any]] = []
    for i in range(30):
        msgs += [{"role": "user", "content": f"request {i} " * 20}, {"role": "assistant", "content": f"done {i} " * 20}]
    assert c.compact(msgs).status == "compacted"
    checkpoint = c.state.summary or ""
    assert checkpoint.startswith("## Goal\nword word")
    assert tok.count(checkpoint) <= 300 + tok.count("\n\n") + 64  # body cut to 300; files section appended
    assert tok.count(checkpoint.split("\n\n## Files")[0]) <= 300
    assert structural_problems(msgs, "openai") == []


def test_fallback_keeps_the_previous_checkpoint(model: OpenAIChat, server: FakeLLMServer) -> None:
    msgs = anthropic_conversation(8)
    c = compactor(model)
    c.compact(msgs)
    summary = c.state.summary or ""
    msgs += anthropic_conversation(14)[len(anthropic_conversation(8)) :]
    server.fail_next(1, status=500)
    assert c.compact(msgs).status == "fallback"
    assert summary.split("\n\n## Files")[0] in msgs[0]["content"]
    assert c.state.summary == summary and c.state.compaction_count == 1


def test_no_model_truncates_visibly() -> None:
    msgs = anthropic_conversation(8)
    bus = EventBus()
    result = compactor(None, events=bus).compact(msgs)
    assert result.status == "truncated" and result.summary_calls == 0
    assert "no summarizer is configured" in msgs[0]["content"]
    assert bus.recent("compaction.after")[-1].data["status"] == "truncated"


# --- events, pinning, cancel -------------------------------------------------------------------


def test_before_event_carries_metadata_and_pins_turns(model: OpenAIChat, db_path: Path) -> None:
    mem = Memory(db_path, namespace="agent", embedder=None)
    seen: list[Any] = []

    def handler(event: Any) -> list[int]:
        seen.append(event)
        return [1]  # a message of the first turn: keep that whole turn verbatim

    mem.events.subscribe("compaction.before", handler)
    msgs = anthropic_conversation(8)
    first_turn = copy.deepcopy(msgs[:6])
    c = compactor(model, memory=mem, session="s")
    result = c.compact(msgs)
    data = seen[0].data
    stored = mem.turns("s")
    assert seen[0].namespace == "agent"
    assert data["compaction_number"] == 1 and data["session"] == "s"
    assert data["turn_ids"] == tuple(stored[i].id for i in data["message_indices"])
    assert data["tokens_compacted"] == sum(
        count_message(m, TOK) for m in (anthropic_conversation(8)[i] for i in data["message_indices"])
    )
    assert result.pinned_indices == (0, 1, 2, 3, 4, 5)
    assert msgs[2:8] == first_turn
    assert structural_problems(msgs, "anthropic") == []
    assert 0 not in result.removed_indices
    mem.close()


def test_handler_can_cancel(model: OpenAIChat, server: FakeLLMServer) -> None:
    bus = EventBus()

    def cancel(event: Any) -> None:
        raise CompactionCancelled("saving first")

    bus.subscribe("compaction.before", cancel)
    msgs = anthropic_conversation(8)
    before = copy.deepcopy(msgs)
    c = compactor(model, events=bus)
    result = c.compact(msgs)
    assert result.status == "cancelled" and msgs == before
    assert server.requests == []
    assert c.state.last_status == "cancelled"


# --- state -----------------------------------------------------------------------------------


def test_conversation_state_updated_and_restored_after_restart(model: OpenAIChat, db_path: Path) -> None:
    mem = Memory(db_path, namespace="agent", embedder=None)
    msgs = anthropic_conversation(8)
    c = compactor(model, memory=mem, session="s")
    c.prepare_messages(msgs)
    assert c.state.compaction_count == 1 and c.state.summary
    assert c.state.turn_count == 8 * 6 and c.state.last_status == "compacted"
    assert c.state.files_modified == tuple(f"src/pkg/mod{t}.py" for t in range(7))
    summary = c.state.summary
    mem.close()

    mem2 = Memory(db_path, namespace="agent", embedder=None)  # a new process
    c2 = compactor(model, memory=mem2, session="s")
    assert (c2.state.summary, c2.state.compaction_count, c2.state.turn_count) == (summary, 1, 48)
    assert c2.resume_messages()[0]["content"] == f"{CHECKPOINT_HEADER}\n\n{summary}"
    assert len(mem2.turns("s")) == 48
    mem2.close()


def test_turn_contexts_cleaned(model: OpenAIChat) -> None:
    msgs = anthropic_conversation(8)
    contexts = [f"ctx{i}" for i in range(len(msgs))]
    result = compactor(model).compact(msgs, aligned=contexts)
    assert len(contexts) == len(msgs)
    assert contexts[:2] == [None, None]
    assert contexts[2:] == [f"ctx{i}" for i in range(48) if i not in result.removed_indices]


def test_format_history_text_with_summary(model: OpenAIChat) -> None:
    msgs = anthropic_conversation(8)
    c = compactor(model)
    assert history_text(msgs, None, last=1) == "[assistant]: Done with request 7."
    c.compact(msgs)
    text = c.history_text(msgs, last=2)
    assert text.startswith(f"[Summary of earlier conversation]\n{c.state.summary}\n\n")
    assert text.endswith("[assistant]: Done with request 7.")
    assert CHECKPOINT_HEADER not in text


def test_prepare_messages_async(model: OpenAIChat) -> None:
    a, b = anthropic_conversation(8), anthropic_conversation(8)
    sync = compactor(model).prepare_messages(a)
    result = asyncio.run(compactor(model).aprepare_messages(b))
    assert result.compaction.status == sync.compaction.status == "compacted"
    assert result.pruning == sync.pruning and result.tokens == sync.tokens
    assert a == b


def test_calibration_from_reported_usage_moves_the_trigger(model: OpenAIChat) -> None:
    msgs = anthropic_conversation(2)  # 7,417 tokens + 1,000 reserve: under 12,000
    c = compactor(model)
    assert not c.should_compact(msgs)
    factor = c.observe_usage(msgs, count_messages(msgs, TOK) * 2)
    assert factor == 2.0
    assert c.should_compact(msgs)
    assert c.state.calibration == {"default": 2.0}


def test_bad_configuration_is_refused(model: OpenAIChat) -> None:
    with pytest.raises(ConfigError, match="provider"):
        Compactor(model, provider="gemini")
    with pytest.raises(ConfigError, match="must not exceed threshold"):
        Compactor(model, provider="openai", config=CompactionConfig(threshold=10_000))


# --- property ----------------------------------------------------------------------------------

WORDS = st.sampled_from(["fix", "the", "test", "src/app.py", "error", "line", "42", "ok", "build", "über", "日本"])


@st.composite
def transcripts(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The same random agent session as (anthropic, openai) message lists."""
    ant: list[dict[str, Any]] = []
    oai: list[dict[str, Any]] = [{"role": "system", "content": "Follow the project rules."}]
    for t in range(draw(st.integers(1, 7))):
        text = " ".join(draw(st.lists(WORDS, min_size=1, max_size=30)))
        if draw(st.booleans()):
            ant.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": text},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
                        },
                    ],
                }
            )
            oai.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": text},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
                    ],
                }
            )
        else:
            ant.append({"role": "user", "content": text})
            oai.append({"role": "user", "content": text})
        for k in range(draw(st.integers(0, 5))):
            ids = [f"c{t}_{k}_{j}" for j in range(draw(st.integers(1, 3)))]
            blocks: list[dict[str, Any]] = []
            if draw(st.booleans()):
                blocks.append(
                    {"type": "thinking", "thinking": " ".join(draw(st.lists(WORDS, max_size=40))), "signature": "s"}
                )
            blocks += [
                {
                    "type": "tool_use",
                    "id": i,
                    "name": draw(st.sampled_from(["read_file", "bash", "edit"])),
                    "input": {"path": f"src/m{t}.py"},
                }
                for i in ids
            ]
            ant.append({"role": "assistant", "content": blocks})
            oai.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": i, "type": "function", "function": {"name": "read_file", "arguments": "{}"}} for i in ids
                    ],
                }
            )
            results = []
            for i in ids:
                body = output(draw(st.integers(0, 150)), i)
                with_image = draw(st.integers(0, 9)) == 0
                content: Any = (
                    [
                        {"type": "text", "text": body},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
                    ]
                    if with_image
                    else body
                )
                results.append({"type": "tool_result", "tool_use_id": i, "content": content})
                oai.append({"role": "tool", "tool_call_id": i, "content": body})
            ant.append({"role": "user", "content": results})
        if draw(st.booleans()) or t < 6:
            ant.append({"role": "assistant", "content": " ".join(draw(st.lists(WORDS, min_size=1, max_size=20)))})
            oai.append({"role": "assistant", "content": ant[-1]["content"]})
        else:
            break
    return ant, oai


PROPERTY = CompactionConfig(threshold=24_000, keep_recent_tokens=3_000, output_reserve=1_000, checkpoint_max_tokens=600)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(pair=transcripts())
def test_pruned_and_compacted_lists_are_valid_and_within_budget(
    pair: tuple[list[dict[str, Any]], list[dict[str, Any]]], server: FakeLLMServer
) -> None:
    model = OpenAIChat("summarizer", base_url=server.openai_base_url, max_retries=0)
    for provider, msgs in zip(("anthropic", "openai"), pair, strict=True):
        assert structural_problems(msgs, provider) == []
        c = Compactor(model, provider=provider, config=PROPERTY, pruning=PruningConfig(hard_clear_after=4))
        c.sync(msgs)
        from stratamem.agentloop import prune_tool_results

        prune_tool_results(msgs, c.pruning)
        assert structural_problems(msgs, provider) == []
        result = c.compact(msgs)
        assert structural_problems(msgs, provider) == []
        assert c.count(msgs) + PROPERTY.output_reserve <= PROPERTY.threshold
        if result.status == "compacted":
            assert msgs[int(provider == "openai")]["content"].startswith(CHECKPOINT_HEADER)
            assert (
                msgs[real_user_indices(msgs)[-1]]
                == (pair[0] if provider == "anthropic" else pair[1])[real_user_indices(msgs)[-1]]
            )
