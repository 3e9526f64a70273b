"""The Memory facade on a real SQLite file: add, context, status, export/import."""

from __future__ import annotations

import io
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stratamem import Memory, NotFoundError
from stratamem.providers import structural_problems
from stratamem.store import SQLiteStore
from stratamem.tokens import get_tokenizer

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def _chat(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message number {i} about topic {i % 7}",
             "timestamp": (T0 + timedelta(minutes=i)).isoformat()} for i in range(n)]


def test_add_assigns_gap_free_sequences_and_exact_tokens(memory: Memory) -> None:
    stored = memory.add(_chat(5), session="s1")
    stored += memory.add(_chat(3), session="s1")
    assert [t.seq for t in stored] == list(range(1, 9))
    tok = get_tokenizer()
    assert stored[0].tokens == 3 + tok.count("message number 0 about topic 0")
    assert memory.status().turns == 8


def test_turns_round_trip_through_the_file(db_path: Path) -> None:
    with Memory(db_path, namespace="a") as mem:
        written = mem.add(_chat(4), session="s")
    with Memory(db_path, namespace="a") as mem:
        read = mem.turns("s")
    assert [t.turn for t in read] == [t.turn for t in written]
    assert [t.id for t in read] == [t.id for t in written]


def test_context_returns_the_most_recent_turns_that_fit(memory: Memory) -> None:
    memory.add(_chat(40), session="s")
    ctx = memory.context("anything", budget=120, session="s")
    assert ctx.tokens <= 120
    texts = [m["content"] for m in ctx.messages if m["role"] != "system"]
    assert texts[-1] == "message number 39 about topic 4"
    # contiguous, newest last, starting at a user turn
    numbers = [int(t.split()[2]) for t in texts]
    assert numbers == list(range(numbers[0], 40))
    assert numbers[0] % 2 == 0
    assert [i.reason for i in ctx.manifest.items if i.kind == "turn"] == ["recent_window"] * len(texts)
    assert any(m.reason == "over_budget" and m.kind == "turn" for m in ctx.manifest.near_misses)


def test_context_window_never_opens_with_an_orphaned_tool_result(memory: Memory) -> None:
    memory.add([
        {"role": "user", "content": "run it"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 2000},
        {"role": "assistant", "content": "done"},
    ], session="s")
    # The big tool result does not fit: OpenAI may open with the assistant's
    # reply, Anthropic needs a user turn first, so its window is empty.
    assert [m["role"] for m in memory.context(budget=60, session="s").messages] == ["assistant"]
    assert memory.context(budget=60, session="s", format="anthropic").messages == ()
    ctx = memory.context(budget=2000, session="s", format="anthropic")
    assert [m["role"] for m in ctx.messages] == ["user", "assistant", "user", "assistant"]
    assert structural_problems(ctx.messages, "anthropic") == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=3, max_value=3000), fmt=st.sampled_from(["openai", "anthropic", "text"]))
def test_the_budget_is_never_exceeded(tmp_path_factory: pytest.TempPathFactory, budget: int, fmt: str) -> None:
    mem = _shared_memory(tmp_path_factory)
    ctx = mem.context(budget=budget, session="s", format=fmt)
    assert ctx.tokens <= budget
    tok = get_tokenizer()
    if fmt == "text":
        assert tok.count(ctx.text) == ctx.tokens
    else:
        assert structural_problems(ctx.messages, fmt) == []


_SHARED: dict[str, Memory] = {}


def _shared_memory(factory: pytest.TempPathFactory) -> Memory:
    if "m" not in _SHARED:
        mem = Memory(factory.mktemp("budget") / "m.db", namespace="p")
        msgs = []
        for i in range(30):
            msgs.append({"role": "user", "content": f"step {i}: " + "word " * (i * 7 % 50)})
            if i % 3 == 0:
                msgs.append({"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": "grep", "arguments": '{"q": "x"}'}}]})
                msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": "line\n" * (i % 9)})
            msgs.append({"role": "assistant", "content": f"answer {i}"})
        mem.add(msgs, session="s")
        _SHARED["m"] = mem
    return _SHARED["m"]


def test_namespaces_do_not_see_each_other(db_path: Path) -> None:
    with Memory(db_path, namespace="alice") as alice:
        alice.add(_chat(3), session="s")
        bob = alice.for_namespace("bob")
        bob.add(_chat(2), session="s")
        assert alice.status().turns == 3 and bob.status().turns == 2
        assert {t.namespace for t in bob.turns()} == {"bob"}
        carol = alice.for_namespace("carol")
        with pytest.raises(NotFoundError, match="unknown namespace 'carol'"):
            carol.context(budget=100)


def test_export_then_import_reproduces_the_namespace(tmp_path: Path) -> None:
    src = Memory(tmp_path / "src.db", namespace="x")
    src.add(_chat(6), session="one", platform="cli")
    src.add([{"role": "user", "content": [{"type": "text", "text": "multi\npart"}]}], session="two")
    buf = io.StringIO()
    assert src.export(buf) == (2, 7)
    dst = Memory(tmp_path / "dst.db", namespace="y")
    assert dst.import_(io.StringIO(buf.getvalue())) == (2, 7)
    assert [t.turn for t in dst.turns()] == [t.turn for t in src.turns()]
    assert [(s.name, s.platform) for s in dst.store.sessions("y")] == [("one", "cli"), ("two", None)]
    out = io.StringIO()
    dst.export(out)
    # Identical apart from the header (namespace, export time).
    assert out.getvalue().splitlines()[1:] == buf.getvalue().splitlines()[1:]


def test_store_reports_integrity_and_size(db_path: Path) -> None:
    with Memory(db_path) as mem:
        mem.add(_chat(10))
        assert isinstance(mem.store, SQLiteStore)
        assert mem.store.integrity_check() == "ok"
        assert mem.status().store_bytes > 0


def test_the_default_session_is_the_one_written_last(memory: Memory) -> None:
    memory.add(_chat(2), session="zeta")
    memory.add(_chat(2), session="alpha")
    memory.add([{"role": "user", "content": "back to zeta"}], session="zeta")
    assert memory.store.latest_session("test") == "zeta"
    ctx = memory.context(budget=200)
    assert ctx.messages[-1]["content"] == "back to zeta"
