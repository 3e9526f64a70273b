"""The default assembly's window always shows the newest tool step (issue 26, default layout).

Before, with ``context.cache_layout`` off (the default), a newest tool result
larger than the window's share was dropped, a question about the past shrank
the window past it, and an Anthropic window that did not reach back to the
user's request was empty. Replayed at B 2,000, the real Claude Code logs below
hid the newest tool results from the model on 141-147 of ~145 calls in the
Anthropic format and on up to 117 of 149 in the OpenAI format. Now the step is
shown (cut to fit when it must be), after a stub user message in Anthropic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED
from wire import result_ids

from stratamem import Config, Memory
from stratamem.context.render import STEP_STUB
from stratamem.ingest import read_file
from stratamem.providers import structural_problems

LOGS = SHARED / "data" / "transcripts" / "claude_code"
PAST = "what did we decide about the database schema?"


def _memory(path: Path | str = ":memory:") -> Memory:
    return Memory(path, config=Config().replace(pyramid={"enabled": False}), embedder=None)


def _loop(mem: Memory, result: str) -> None:
    """A request, two earlier tool steps, and a newest step whose result is ``result``."""
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "fix the failing test in the acme package"}]
    for i, out in enumerate(["tests/test_a.py\ntests/test_b.py", "def f():\n    return 1\n" * 40, result]):
        msgs.append(
            {
                "role": "assistant",
                "content": f"step {i}",
                "tool_calls": [{"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})
    mem.add(msgs, session="s", format="openai")


def test_a_newest_result_larger_than_the_window_is_shown_cut_in_both_formats() -> None:
    result = "FAILED tests/test_b.py::test_limit - AssertionError\n" + "trace line\n" * 3000 + "1 failed in 0.4s"
    with _memory() as mem:
        _loop(mem, result)
        for fmt in ("openai", "anthropic"):
            ctx = mem.context("continue", budget=1000, session="s", format=fmt)
            assert ctx.tokens <= 1000
            messages = list(ctx.messages)
            assert structural_problems(messages, fmt) == []
            assert "c2" in result_ids(messages)
            text = ctx.text
            # Head and tail of the result, and where the whole text is.
            assert "FAILED tests/test_b.py::test_limit" in text and "1 failed in 0.4s" in text
            assert "all of it is stored as turn:7" in text
            window = [i.id for i in ctx.manifest.items if i.reason == "recent_window"]
            assert window == ["turn:6", "turn:7"]
        # No user turn in the Anthropic window and no sections: the stub opens the request.
        assert ctx.messages[0] == {"role": "user", "content": STEP_STUB}


def test_a_question_about_the_past_does_not_shrink_the_newest_step_away() -> None:
    with _memory() as mem:
        mem.add(
            [
                {"role": "user", "content": "we decided the database schema keeps one table per tenant"},
                {"role": "assistant", "content": "noted: one table per tenant"},
            ],
            session="old",
        )
        _loop(mem, "1 passed in 0.2s\n" * 40)
        for fmt in ("openai", "anthropic"):
            ctx = mem.context(PAST, budget=2000, session="s", format=fmt)
            assert any("window keeps 10% of its share" in n for n in ctx.manifest.notes)
            window = [i.id for i in ctx.manifest.items if i.reason == "recent_window"]
            assert window == ["turn:8", "turn:9"]  # the newest call and its result, whatever the query
            assert structural_problems(list(ctx.messages), fmt) == []
            assert ctx.tokens <= 2000


@pytest.mark.parametrize(
    ("log", "query", "unseen"),
    [
        ("258c7280-ae70-4798-800f-63464d01a85d.jsonl", "continue", {"openai": 0, "anthropic": 0}),
        ("8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", PAST, {"openai": 0, "anthropic": 2}),
    ],
)
def test_every_call_of_a_real_claude_code_log_sees_its_newest_results(
    tmp_path: Path, log: str, query: str, unseen: dict[str, int]
) -> None:
    """Replayed turn by turn at B 2,000, a context before each model call that follows a tool step.

    The steps not shown are Anthropic ones whose call carries thinking blocks, which are never
    cut (their signature must stay whole), larger than the window's room.
    """
    (session,) = [s for s in read_file(LOGS / log) if not s.session.count(".")]
    missed = {"openai": 0, "anthropic": 0}
    calls = 0
    newest: tuple[str, ...] = ()
    with _memory(tmp_path / "log.db") as mem:
        for turn in session.turns:
            if turn.role == "assistant" and newest:
                calls += 1
                for fmt in ("openai", "anthropic"):
                    ctx = mem.context(query, budget=2000, session=session.session, format=fmt)
                    assert ctx.tokens <= 2000
                    messages = list(ctx.messages)
                    assert structural_problems(messages, fmt) == []
                    missed[fmt] += not set(newest) <= result_ids(messages)
            mem.add(turn, session=session.session)
            if turn.role == "assistant" and turn.tool_use_ids:
                newest = turn.tool_use_ids
            elif turn.role == "user":
                newest = ()
    assert calls > 140
    assert missed == unseen
