"""The MCP server over a real stdio subprocess (``stratamem mcp``), driven by the SDK's own client."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from stratamem import Memory
from stratamem.mcp import STATE_TOOLS, TOOLS, build_server

STRATAMEM = str(Path(sys.executable).with_name("stratamem"))


def _params(db: Path, namespace: str, *extra: str) -> StdioServerParameters:
    # Env vars only: the shell reads STRATAMEM_DB / STRATAMEM_NAMESPACE, the library never does.
    # Lexical recall keeps the scores these tests assert exact; the hybrid path is
    # covered with the real model in test_items.py.
    env = {
        "STRATAMEM_DB": str(db),
        "STRATAMEM_NAMESPACE": namespace,
        "STRATAMEM_EMBEDDING": "none",
        "PATH": os.environ.get("PATH", ""),
        # A checkout run with PYTHONPATH=src serves its own code, not the installed one.
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    return StdioServerParameters(command=STRATAMEM, args=["mcp", *extra], env=env)


def _run(server: Any, body: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with Client(server, read_timeout_seconds=60) as client:
            return await body(client)

    return anyio.run(main)


def _json(result: Any) -> Any:
    assert result.is_error is False, result.content[0].text
    return json.loads(result.content[0].text)


def test_stdio_server_lists_tools_with_validated_schemas_and_round_trips_items(tmp_path: Path) -> None:
    db = tmp_path / "m.db"

    async def body(client: Client) -> dict[str, Any]:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        added = _json(await client.call_tool("memory_add", {"content": "The budget is $50K", "type": "fact"}))
        spilled = _json(await client.call_tool("memory_spill", {"count": 1}))
        recalled = _json(await client.call_tool("memory_recall", {"query": "what was the budget?"}))
        status = _json(await client.call_tool("memory_status", {}))
        return {"tools": tools, "added": added, "spilled": spilled, "recalled": recalled, "status": status}

    out = _run(_params(db, "agent-a"), body)
    assert set(out["tools"]) == set(TOOLS) | set(STATE_TOOLS)
    schema = out["tools"]["memory_add"].input_schema
    assert schema["required"] == ["content"]
    assert schema["properties"]["type"]["enum"] == [
        "fact",
        "decision",
        "entity",
        "preference",
        "event",
        "context",
        "message",
    ]
    assert out["added"]["tier"] == "hot" and out["added"]["namespace"] == "agent-a"
    assert out["spilled"]["to_cold"] == [out["added"]["id"]]
    assert [i["content"] for i in out["recalled"]["items"]] == ["The budget is $50K"]
    assert out["recalled"]["promoted"] == [out["added"]["id"]]
    assert out["status"]["hot"] == {"items": 1, "tokens": 6, "limit": 4000, "utilization_percent": 0.15}
    assert out["status"]["metrics"]["recalls"] == 1 and out["status"]["metrics"]["promotions"] == 1
    assert out["status"]["review"] == {"pending": 0, "cap": 500, "dropped": 0}
    # The subprocess wrote the same file the library reads.
    with Memory(db, namespace="agent-a", embedder=None) as mem:
        assert [i.content for i in mem.items.hot()] == ["The budget is $50K"]


def test_bad_input_and_library_errors_come_back_as_clear_tool_errors(tmp_path: Path) -> None:
    async def body(client: Client) -> list[Any]:
        return [
            await client.call_tool("memory_add", {"content": "x", "type": "opinion"}),
            await client.call_tool("memory_recall", {"query": "x", "limit": 0}),
            await client.call_tool("memory_promote", {"id": 999}),
            await client.call_tool("memory_status", {"namespace": "someone-else"}),
            await client.call_tool("memory_add", {"content": "   "}),
        ]

    bad_type, bad_limit, missing, other_ns, blank = _run(_params(tmp_path / "m.db", "agent-a"), body)
    assert all(r.is_error for r in (bad_type, bad_limit, missing, other_ns, blank))
    assert (
        "Input should be 'fact', 'decision', 'entity', 'preference', 'event', 'context' or 'message'"
        in bad_type.content[0].text
    )
    assert "greater than or equal to 1" in bad_limit.content[0].text
    assert "NotFoundError: no memory item 999 in namespace 'agent-a'" in missing.content[0].text
    assert "ValidationError: namespace: this server serves namespace 'agent-a'" in other_ns.content[0].text
    assert "ValidationError: content: must not be empty" in blank.content[0].text


def test_context_seal_and_working_state_tools(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, namespace="agent-a", embedder=None) as mem:
        mem.add(
            [{"role": "user", "content": "Our budget is $50K."}, {"role": "assistant", "content": "Noted: $50K."}],
            session="s1",
        )

    async def body(client: Client) -> Any:
        ctx = _json(await client.call_tool("memory_context", {"query": "budget", "budget": 200, "format": "openai"}))
        sealed = _json(await client.call_tool("memory_seal_topic", {"session": "s1"}))
        again = _json(await client.call_tool("memory_seal_topic", {"session": "s1"}))
        goal = _json(await client.call_tool("memory_state_update", {"op": "set_goal", "text": "Ship v1"}))
        task = _json(await client.call_tool("memory_state_update", {"op": "add_task", "text": "Write docs"}))
        missing = await client.call_tool("memory_state_update", {"op": "complete_task"})
        read = _json(await client.call_tool("memory_state_read", {"budget": 300}))
        return ctx, sealed, again, goal, task, missing, read

    ctx, sealed, again, goal, task, missing, read = _run(
        _params(db, "agent-a", "--project", str(tmp_path / "proj")), body
    )
    assert [m["content"] for m in ctx["messages"]] == ["Our budget is $50K.", "Noted: $50K."]
    assert ctx["tokens"] <= 200 and ctx["manifest"].startswith("[manifest] 2 items")
    assert sealed["sealed"] is True and again == {"session": "s1", "sealed": False, "segment": None}
    assert goal["result"]["goal"] == "Ship v1" and task["result"]["title"] == "Write docs"
    assert missing.is_error and "ValidationError: id: complete_task needs id" in missing.content[0].text
    assert read["state"]["goal"] == "Ship v1" and [t["title"] for t in read["state"]["tasks"]] == ["Write docs"]
    assert read["projection"]["tokens"] <= 300 and "Ship v1" in read["projection"]["text"]
    assert (tmp_path / "proj" / ".stratamem" / "state" / "agent-a" / "state.json").exists()


def test_allowed_namespaces_are_reachable_and_stay_apart(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", namespace="a", embedder=None)
    server = build_server(mem, allow_namespaces=["b"])

    async def body(client: Client) -> Any:
        _json(await client.call_tool("memory_add", {"content": "secret of b", "namespace": "b"}))
        return (
            _json(await client.call_tool("memory_status", {})),
            _json(await client.call_tool("memory_status", {"namespace": "b"})),
        )

    mine, theirs = _run(server, body)
    assert mine["hot"]["items"] == 0 and theirs["hot"]["items"] == 1
    mem.close()
