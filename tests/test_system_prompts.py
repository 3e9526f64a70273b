"""System prompts are standing instructions: in the fixed section, kept before history, shown once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from stratamem import Config, Memory
from stratamem.cli import main

PROMPT = "You are Larkspur's support agent. Always answer in French."


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    """Memory without the pyramid, so the context holds only the window and the fixed section."""
    m = Memory(tmp_path / "s.db", namespace="n", config=Config().replace(pyramid={"enabled": False}))
    yield m
    m.close()


def _chat(m: Memory, session: str, n: int) -> None:
    for i in range(n):
        m.add(
            [
                {"role": "user", "content": f"question {i} about order {1000 + i}"},
                {"role": "assistant", "content": f"answer {i}: it ships on day {i}"},
            ],
            session=session,
        )


def test_a_system_prompt_is_an_instruction_not_a_history_line(mem: Memory) -> None:
    mem.add({"role": "system", "content": PROMPT}, session="s")
    _chat(mem, "s", 3)
    ctx = mem.context(session="s", budget=4000, format="openai")
    assert ctx.messages[0] == {"role": "system", "content": f"## System prompt\n{PROMPT}"}
    assert [m["role"] for m in ctx.messages[1:]] == ["user", "assistant"] * 3
    [item] = [it for it in ctx.manifest.items if it.kind == "instructions"]
    assert item.reason == "system_prompt" and item.id.startswith("system:")
    assert all(it.reason == "recent_window" for it in ctx.manifest.items if it.kind == "turn")


def test_a_small_budget_drops_history_before_the_system_prompt(mem: Memory) -> None:
    mem.add({"role": "system", "content": PROMPT}, session="s")
    _chat(mem, "s", 30)
    ctx = mem.context(session="s", budget=120, format="openai")
    assert ctx.messages[0]["content"] == f"## System prompt\n{PROMPT}"
    assert ctx.manifest.total_tokens <= 120
    kept = [m["content"] for m in ctx.messages[1:]]
    assert kept and kept[-1] == "answer 29: it ships on day 29"
    assert "question 0 about order 1000" not in kept


def test_a_session_shows_its_own_prompts_once_each_in_order_and_no_other_sessions(mem: Memory) -> None:
    for s in ("a", "b", "c"):
        mem.add({"role": "system", "content": PROMPT}, session=s)
        _chat(mem, s, 1)
    mem.add({"role": "system", "content": "Sign every answer as Larkspur."}, session="c")
    mem.add({"role": "system", "content": PROMPT}, session="c")  # repeated in the session too
    mem.add({"role": "system", "content": "Answer in German."}, session="b")
    ctx = mem.context(session="c", budget=4000, format="text")
    assert ctx.text.count(PROMPT) == 1
    assert "German" not in ctx.text
    assert [it.reason for it in ctx.manifest.items if it.kind == "instructions"] == ["system_prompt"] * 2
    assert ctx.text.startswith(f"## System prompt\n{PROMPT}\n\n## System prompt\nSign every answer as Larkspur.")
    other = mem.context(session="a", budget=4000, format="text")
    assert other.text.startswith(f"## System prompt\n{PROMPT}\n\n[")  # then its history, nothing of b or c
    assert "Larkspur." not in other.text.replace(PROMPT, "") and "German" not in other.text
    newest = mem.context(budget=4000, format="text")  # no session: the newest one, b
    assert newest.text.startswith(f"## System prompt\n{PROMPT}\n\n## System prompt\nAnswer in German.\n\n[")


def test_namespace_wide_prompts_keep_the_earlier_rule(mem: Memory) -> None:
    for s in ("a", "b", "c"):
        mem.add({"role": "system", "content": PROMPT}, session=s)
        _chat(mem, s, 1)
    mem.add({"role": "system", "content": "Sign every answer as Larkspur."}, session="c")
    mem.add({"role": "system", "content": "Answer in German."}, session="b")
    ctx = mem.context(session="a", budget=4000, format="text", system_prompts="namespace")
    # The session's own first, then the others' newest first, each text once.
    assert ctx.text.startswith(
        f"## System prompt\n{PROMPT}\n\n## System prompt\nAnswer in German.\n\n"
        "## System prompt\nSign every answer as Larkspur.\n\n["
    )


def test_anthropic_system_is_a_string_even_when_empty(mem: Memory) -> None:
    _chat(mem, "s", 2)
    ctx = mem.context(session="s", budget=2000, format="anthropic")
    assert ctx.system == ""
    mem.add({"role": "system", "content": PROMPT}, session="s")
    _chat(mem, "s", 1)
    ctx = mem.context(session="s", budget=2000, format="anthropic")
    assert ctx.system == f"## System prompt\n{PROMPT}"
    assert ctx.messages[0]["role"] == "user"


def test_cli_add_system_then_context_puts_it_first(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    runner = CliRunner()
    assert runner.invoke(main, ["--db", db, "add", "--role", "system", "-c", PROMPT]).exit_code == 0
    for text in ("Where is order 1001?", "It left the depot today."):
        role = "user" if text.startswith("Where") else "assistant"
        assert runner.invoke(main, ["--db", db, "add", "--role", role, "-c", text]).exit_code == 0
    out = runner.invoke(main, ["--db", db, "--embedding", "none", "context", "--budget", "80"]).output
    assert out.startswith(f"## System prompt\n{PROMPT}\n\n")
    assert out.count(PROMPT) == 1
