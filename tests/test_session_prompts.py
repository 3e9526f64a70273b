"""Instructions belong to their session: a context for session S shows S's system prompt, never another's.

30 support tickets whose system prompts differ only by "Today is <date>"
(issue 23): the context of ticket k holds exactly one system prompt, ticket
k's, and tells the model exactly one date, at 500, 1,000 and 2,000 tokens, in
every shell: the library, the CLI, the MCP server over stdio (the SDK's
client) and the HTTP API (uvicorn on 127.0.0.1). With no session given, the
newest session's. ``system_prompts="namespace"`` keeps every session's.

Each ticket's seven turns are one pyramid segment (``micro_chunk_size`` 7), so
older tickets are summarized and, when they fit, expanded into the context:
an expanded segment must not carry its system prompt in either.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from webserver import Server

from stratamem import Config, Memory, Turn, ValidationError
from stratamem.cli import main
from stratamem.records.ids import system_id

STRATAMEM = str(Path(sys.executable).with_name("stratamem"))
BASE = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
TICKETS = 30
BUDGETS = (500, 1000, 2000)
CONFIG = Config().replace(pyramid={"micro_chunk_size": 7}, embedding={"provider": "none"})
DATE = re.compile(r"Today is (\d{4}-\d{2}-\d{2})")


def day(k: int) -> str:
    return (BASE + timedelta(days=k - 1)).strftime("%Y-%m-%d")


def prompt(k: int) -> str:
    return (
        "You are Acme's support assistant. Be brief and polite, never promise refunds over 100 EUR "
        f"without a supervisor. Today is {day(k)}."
    )


def session(k: int) -> str:
    return f"ticket-{k:02d}"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tickets") / "m.db"
    with Memory(path, namespace="support", config=CONFIG, embedder=None) as mem:
        for k in range(1, TICKETS + 1):
            t0 = BASE + timedelta(days=k - 1)
            turns = [Turn(role="system", content=prompt(k), timestamp=t0)]
            for i in range(3):
                turns.append(
                    Turn(
                        role="user",
                        content=f"Ticket {k}: question {i + 1} about the refund of order {k * 100 + i}.",
                        timestamp=t0 + timedelta(minutes=2 * i + 1),
                    )
                )
                turns.append(
                    Turn(
                        role="assistant",
                        content=f"Answer {i + 1} for ticket {k}: the refund of order {k * 100 + i} is on its way.",
                        timestamp=t0 + timedelta(minutes=2 * i + 2),
                    )
                )
            mem.add(turns, session=session(k))
        assert len(mem.pyramid.nodes(level=1)) == TICKETS  # one segment per ticket: expansions are exercised
    return path


@pytest.fixture(scope="module")
def mem(db: Path) -> Iterator[Memory]:
    with Memory(db, namespace="support", config=CONFIG, embedder=None) as m:
        yield m


def told(text: str) -> list[str]:
    """The dates a context tells the model it is."""
    return DATE.findall(text)


def test_the_context_of_every_ticket_holds_its_own_prompt_only_at_every_budget(mem: Memory) -> None:
    expanded = 0
    for k in range(1, TICKETS + 1):
        for budget in BUDGETS:
            for query in (None, "refund of my order"):
                ctx = mem.context(query, budget=budget, session=session(k), format="text")
                shown = [i.id for i in ctx.manifest.items if i.reason == "system_prompt"]
                assert shown == [system_id(prompt(k))], (k, budget, query)
                assert told(ctx.text) == [day(k)], (k, budget, query)
                assert ctx.manifest.total_tokens <= budget
                expanded += sum(1 for i in ctx.manifest.items if i.reason == "expanded")
    assert expanded > 0  # other tickets' segments did come in, without their prompts


def test_without_a_session_the_newest_sessions_prompt_is_shown(mem: Memory) -> None:
    for budget in BUDGETS:
        ctx = mem.context(budget=budget, format="openai")
        assert ctx.messages[0]["role"] == "system"
        assert ctx.messages[0]["content"].startswith(f"## System prompt\n{prompt(TICKETS)}")
        assert told(json.dumps(ctx.messages)) == [day(TICKETS)]


def test_history_gets_the_room_other_prompts_took(mem: Memory) -> None:
    # Before the fix a 1,000-token context of ticket 7 held 25 prompts and no turn of the ticket.
    ctx = mem.context(budget=1000, session=session(7), format="text")
    window = [i for i in ctx.manifest.items if i.reason == "recent_window"]
    assert len(window) == 6
    assert ctx.text.count("## System prompt") == 1


def test_namespace_wide_prompts_are_there_when_asked(mem: Memory) -> None:
    ctx = mem.context(budget=2000, session=session(7), format="text", system_prompts="namespace")
    shown = [i.id for i in ctx.manifest.items if i.reason == "system_prompt"]
    # The session's own first, then every other session's, newest first.
    order = [7, *range(TICKETS, 7, -1), *range(6, 0, -1)]
    assert shown == [system_id(prompt(k)) for k in order]
    assert told(ctx.text)[:3] == [day(7), day(30), day(29)]
    with pytest.raises(ValidationError, match="system_prompts: unknown system_prompts 'everyone'"):
        mem.context(session=session(7), system_prompts="everyone")


def test_the_cli_shows_the_sessions_prompt_only(db: Path) -> None:
    runner = CliRunner()
    base = ["--db", str(db), "-n", "support", "--embedding", "none", "context", "--json"]
    for k, named in ((4, True), (22, True), (TICKETS, False)):
        for budget in BUDGETS:
            args = [*base, "--budget", str(budget), *(["-s", session(k)] if named else [])]
            result = runner.invoke(main, args)
            assert result.exit_code == 0, result.output
            out = json.loads(result.output)
            shown = [i["id"] for i in out["manifest"]["items"] if i["reason"] == "system_prompt"]
            assert shown == [system_id(prompt(k))]
            assert told(out["text"]) == [day(k)]
    result = runner.invoke(main, [*base, "-s", session(4), "--budget", "2000", "--system-prompts", "namespace"])
    assert result.exit_code == 0, result.output
    assert len(told(json.loads(result.output)["text"])) == TICKETS


def _env(db: Path) -> dict[str, str]:
    return {
        "STRATAMEM_DB": str(db),
        "STRATAMEM_NAMESPACE": "support",
        "STRATAMEM_EMBEDDING": "none",
        "PATH": os.environ.get("PATH", ""),
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }


def test_mcp_get_context_shows_the_sessions_prompt_only(db: Path) -> None:
    params = StdioServerParameters(command=STRATAMEM, args=["mcp"], env=_env(db))
    calls = [
        (k, {"budget": budget, "format": "text", **({"session": session(k)} if k != TICKETS else {})})
        for k in (9, TICKETS)
        for budget in BUDGETS
    ]
    calls.append((9, {"budget": 2000, "format": "text", "session": session(9), "system_prompts": "namespace"}))

    async def body() -> list[tuple[bool, str]]:
        async with Client(params, read_timeout_seconds=60) as client:
            out = []
            for _, args in calls:
                result = await client.call_tool("get_context", args)
                out.append((result.is_error, result.content[0].text))
            return out

    results = anyio.run(body)
    for (k, args), (error, text) in zip(calls, results, strict=True):
        assert error is False, text
        if "system_prompts" in args:
            assert len(told(text)) == TICKETS
        else:
            assert text.count("## System prompt") == 1, args
            assert told(text) == [day(k)], args


def test_http_context_shows_the_sessions_prompt_only(db: Path) -> None:
    server = Server(db, namespace="support", config=CONFIG)
    try:
        with server.client() as http:
            url = "/api/v1/namespaces/support/context"
            for k, named in ((13, True), (TICKETS, False)):
                for budget in BUDGETS:
                    body: dict[str, Any] = {"budget": budget, "format": "text"}
                    if named:
                        body["session"] = session(k)
                    for r in (http.post(url, json=body), http.get(url, params=body)):
                        assert r.status_code == 200, r.text
                        got = r.json()
                        shown = [i["id"] for i in got["manifest"]["items"] if i["reason"] == "system_prompt"]
                        assert shown == [system_id(prompt(k))]
                        assert told(got["text"]) == [day(k)]
            wide = http.post(url, json={"session": session(13), "budget": 2000, "system_prompts": "namespace"})
            assert wide.status_code == 200, wide.text
            assert sum(1 for i in wide.json()["manifest"]["items"] if i["reason"] == "system_prompt") == TICKETS
            bad = http.post(url, json={"session": session(13), "system_prompts": "all"})
            assert bad.status_code == 400
    finally:
        server.stop()
