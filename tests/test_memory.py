"""The Memory facade on a real SQLite file: add, context, status, export/import."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stratamem import Config, Memory, NotFoundError
from stratamem.context.render import recent_window
from stratamem.providers import structural_problems
from stratamem.store import SQLiteStore
from stratamem.tokens import get_tokenizer

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _chat(n: int) -> list[dict]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"message number {i} about topic {i % 7}",
            "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
        }
        for i in range(n)
    ]


def test_add_assigns_gap_free_sequences_and_exact_tokens(memory: Memory) -> None:
    stored = memory.add(_chat(5), session="s1")
    stored += memory.add(_chat(3), session="s1")
    assert [t.seq for t in stored] == list(range(1, 9))
    tok = get_tokenizer()
    assert stored[0].tokens == 3 + tok.count("message number 0 about topic 0")
    assert memory.status().turns == 8


def test_turns_round_trip_through_the_file(db_path: Path) -> None:
    with Memory(db_path, namespace="a", embedder=None) as mem:
        written = mem.add(_chat(4), session="s")
    with Memory(db_path, namespace="a", embedder=None) as mem:
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
    memory.add(
        [
            {"role": "user", "content": "run it"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "run", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "x" * 2000},
            {"role": "assistant", "content": "done"},
        ],
        session="s",
    )
    # The big tool result does not fit: OpenAI may open with the assistant's
    # reply, Anthropic needs a user turn first, so its window is empty.
    assert [m["role"] for m in memory.context(budget=60, session="s").messages] == ["assistant"]
    assert memory.context(budget=60, session="s", format="anthropic").messages == ()
    ctx = memory.context(budget=2000, session="s", format="anthropic")
    assert [m["role"] for m in ctx.messages] == ["user", "assistant", "user", "assistant"]
    assert structural_problems(ctx.messages, "anthropic") == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# From 4: 3 Anthropic tokens are 2 o200k tokens, below the request overhead (test_shells checks it raises).
@given(budget=st.integers(min_value=4, max_value=3000), fmt=st.sampled_from(["openai", "anthropic", "text"]))
def test_the_budget_is_never_exceeded(tmp_path_factory: pytest.TempPathFactory, budget: int, fmt: str) -> None:
    mem = _shared_memory(tmp_path_factory)
    ctx = mem.context(budget=budget, session="s", format=fmt)
    assert ctx.tokens <= budget
    tok = get_tokenizer()
    if fmt == "text":
        assert tok.count(ctx.text) == ctx.tokens
    elif ctx.messages or fmt == "openai":
        assert structural_problems(ctx.messages, fmt) == []
    else:
        # An empty Anthropic request is invalid; it only happens when nothing fits at all.
        assert ctx.manifest.items == ()


_SHARED: dict[str, Memory] = {}


def _shared_memory(factory: pytest.TempPathFactory) -> Memory:
    if "m" not in _SHARED:
        mem = Memory(factory.mktemp("budget") / "m.db", namespace="p", embedder=None)
        msgs = []
        for i in range(30):
            msgs.append({"role": "user", "content": f"step {i}: " + "word " * (i * 7 % 50)})
            if i % 3 == 0:
                msgs.append(
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": f"c{i}", "type": "function", "function": {"name": "grep", "arguments": '{"q": "x"}'}}
                        ],
                    }
                )
                msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": "line\n" * (i % 9)})
            msgs.append({"role": "assistant", "content": f"answer {i}"})
        mem.add(msgs, session="s")
        _SHARED["m"] = mem
    return _SHARED["m"]


def test_namespaces_do_not_see_each_other(db_path: Path) -> None:
    with Memory(db_path, namespace="alice", embedder=None) as alice:
        alice.add(_chat(3), session="s")
        bob = alice.for_namespace("bob")
        bob.add(_chat(2), session="s")
        assert alice.status().turns == 3 and bob.status().turns == 2
        assert {t.namespace for t in bob.turns()} == {"bob"}
        carol = alice.for_namespace("carol")
        with pytest.raises(NotFoundError, match="unknown namespace 'carol'"):
            carol.context(budget=100)


def test_export_then_import_reproduces_the_namespace(tmp_path: Path) -> None:
    src = Memory(tmp_path / "src.db", namespace="x", embedder=None)
    src.add(_chat(6), session="one", platform="cli")
    src.add([{"role": "user", "content": [{"type": "text", "text": "multi\npart"}]}], session="two")
    buf = io.StringIO()
    assert src.export(buf) == (2, 7)
    dst = Memory(tmp_path / "dst.db", namespace="y", embedder=None)
    assert dst.import_(io.StringIO(buf.getvalue())) == (2, 7, 0)
    assert [t.turn for t in dst.turns()] == [t.turn for t in src.turns()]
    assert [(s.name, s.platform) for s in dst.store.sessions("y")] == [("one", "cli"), ("two", None)]
    out = io.StringIO()
    dst.export(out)
    # Identical apart from the header (namespace, export time).
    assert out.getvalue().splitlines()[1:] == buf.getvalue().splitlines()[1:]


def test_store_reports_integrity_and_size(db_path: Path) -> None:
    with Memory(db_path, embedder=None) as mem:
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


# --- provider validity at the edges of the window (review #8) ------------------------------------


def _call(call_id: str) -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
    }


def _no_pyramid() -> Memory:
    return Memory(":memory:", config=Config().replace(pyramid={"enabled": False}), embedder=None)


def test_a_trailing_tool_call_without_its_result_leaves_the_window() -> None:
    with _no_pyramid() as mem:
        mem.add([{"role": "user", "content": "list files"}, _call("c1")], format="openai")
        for fmt in ("openai", "anthropic"):
            ctx = mem.context(budget=2000, format=fmt)
            assert list(ctx.messages) == [{"role": "user", "content": "list files"}]
            assert structural_problems(ctx.messages, fmt) == []
        # Once answered, the call and its result are in the window.
        mem.add({"role": "tool", "tool_call_id": "c1", "content": "a.py"}, format="openai")
        assert [m["role"] for m in mem.context(budget=2000).messages] == ["user", "assistant", "tool"]
        window = recent_window(mem.turns(newest_first=True), 2000, get_tokenizer(), "anthropic")
        assert structural_problems(window.messages, "anthropic") == []
        assert [i.id for i in window.manifest.items] == ["turn:1", "turn:2", "turn:3"]


def test_a_partly_answered_trailing_call_leaves_with_its_results() -> None:
    with _no_pyramid() as mem:
        mem.add(
            [
                {"role": "user", "content": "go"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": f"c{i}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
                        for i in (1, 2)
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "one"},
            ],
            format="openai",
        )
        for fmt in ("openai", "anthropic"):
            assert [m["role"] for m in mem.context(budget=2000, format=fmt).messages] == ["user"]


def test_anthropic_sections_travel_in_a_user_message_when_the_window_has_no_user_turn() -> None:
    with _no_pyramid() as mem:
        mem.add({"role": "user", "content": "remember: the vault code is 4471 " * 3}, session="old")
        mem.add(
            [{"role": "user", "content": "q " * 400}, {"role": "assistant", "content": "long answer " * 50}],
            session="s",
        )
        ctx = mem.context("vault code", budget=300, session="s", format="anthropic")
        assert ctx.system == ""
        [message] = ctx.messages
        assert message["role"] == "user"
        assert message["content"].startswith("## Earlier conversation (recalled, verbatim)\n")
        assert "the vault code is 4471" in message["content"]
        assert structural_problems(ctx.messages, "anthropic") == []
        assert ctx.tokens <= 300


def test_an_empty_anthropic_message_list_is_flagged() -> None:
    assert structural_problems([], "anthropic") == ["messages: empty; the Messages API needs at least one user message"]
    assert structural_problems([], "openai") == []


@st.composite
def _agent_session(draw: st.DrawFn) -> list[dict]:
    """OpenAI messages of one session: text turns and tool calls; the last call may lack results."""
    kinds = draw(st.lists(st.sampled_from(["user", "assistant", "call"]), min_size=1, max_size=7))
    if draw(st.booleans()):  # a window with no user turn at all
        kinds = [k for k in kinds if k != "user"] or ["call"]
    msgs: list[dict] = []
    for i, kind in enumerate(kinds):
        words = "word " * draw(st.integers(min_value=0, max_value=60))
        if kind == "user":
            msgs.append({"role": "user", "content": f"request {i} {words}"})
        elif kind == "assistant":
            msgs.append({"role": "assistant", "content": f"reply {i} {words}"})
        else:
            n = draw(st.integers(min_value=1, max_value=2))
            ids = [f"c{i}_{j}" for j in range(n)]
            msgs.append(
                {
                    "role": "assistant",
                    "content": draw(st.sampled_from([None, "checking"])),
                    "tool_calls": [
                        {"id": c, "type": "function", "function": {"name": "ls", "arguments": "{}"}} for c in ids
                    ],
                }
            )
            last = i == len(kinds) - 1
            answered = draw(st.integers(min_value=0, max_value=n)) if last else n
            msgs += [{"role": "tool", "tool_call_id": c, "content": f"out {words}"} for c in ids[:answered]]
    return msgs


@settings(max_examples=60, deadline=None)
@given(
    session=_agent_session(),
    budget=st.integers(min_value=4, max_value=1500),
    policy=st.sampled_from(["hybrid", "recall", "state_first"]),
    query=st.sampled_from([None, "vault code"]),
)
def test_contexts_are_valid_requests_for_both_providers(
    session: list[dict], budget: int, policy: str, query: str | None
) -> None:
    with _no_pyramid() as mem:
        mem.add(
            [
                {"role": "user", "content": "the vault code is 4471"},
                {"role": "assistant", "content": "noted, vault code 4471"},
            ],
            session="old",
        )
        mem.add(session, session="s", format="openai")
        for fmt in ("openai", "anthropic"):
            ctx = mem.context(query, budget=budget, session="s", format=fmt, policy=policy)
            assert ctx.tokens <= budget
            # Something in the context means something to send, and it is a valid request.
            assert bool(ctx.messages) == bool(ctx.manifest.items)
            if ctx.messages:
                assert structural_problems(ctx.messages, fmt) == []
            window = recent_window(mem.turns("s", newest_first=True), budget, get_tokenizer(), fmt)
            if window.messages:
                assert structural_problems(window.messages, fmt) == []
