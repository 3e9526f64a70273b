"""Every MCP tool refuses unknown arguments in one line, and the item tools take session scope and the
``message`` type — over a real ``stratamem mcp`` stdio subprocess driven by the SDK's client."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from stratamem import Memory
from stratamem.mcp import STATE_TOOLS, TOOLS

STRATAMEM = str(Path(sys.executable).with_name("stratamem"))

# Valid required arguments per tool, so the unknown one is the only thing wrong with each call.
_REQUIRED: dict[str, dict[str, Any]] = {
    "add_turns": {"messages": [{"role": "user", "content": "hi"}]},
    "add_memory": {"content": "a fact"},
    "memory_add": {"content": "a fact"},
    "search_memory": {"query": "x"},
    "memory_recall": {"query": "x"},
    "memory_promote": {"id": 1},
    "memory_state_update": {"op": "set_goal", "text": "ship"},
}


def _params(db: Path, project: Path) -> StdioServerParameters:
    env = {
        "STRATAMEM_DB": str(db),
        "STRATAMEM_NAMESPACE": "agent",
        "STRATAMEM_EMBEDDING": "none",
        "PATH": os.environ.get("PATH", ""),
        # A checkout run with PYTHONPATH=src serves its own code, not the installed one.
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    return StdioServerParameters(command=STRATAMEM, args=["mcp", "--project", str(project)], env=env)


def _run(server: StdioServerParameters, body: Any) -> Any:
    async def main() -> Any:
        async with Client(server, read_timeout_seconds=60) as client:
            return await body(client)

    return anyio.run(main)


def test_every_tool_refuses_an_unknown_argument_in_one_line_naming_it_and_the_known_ones(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()

    async def body(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        out = {}
        for name in tools:
            out[name] = await client.call_tool(name, {**_REQUIRED.get(name, {}), "sessionId": "s1"})
        # The seed's camelCase names, on the tools the seed defines.
        out["autoPromote"] = await client.call_tool("memory_recall", {"query": "x", "autoPromote": False})
        return tools, out

    tools, out = _run(_params(tmp_path / "m.db", tmp_path / "project"), body)
    assert set(tools) == set(TOOLS) | set(STATE_TOOLS)
    for name, tool in tools.items():
        known = ", ".join(tool.input_schema["properties"]) or "none"
        result = out[name]
        assert result.is_error, name
        assert [c.text for c in result.content] == [
            f"ValidationError: sessionId: unknown argument of {name} (known: {known})"
        ], name
    refusal = out["autoPromote"].content[0].text
    assert refusal.startswith(
        "ValidationError: autoPromote: unknown argument of memory_recall "
        "(known: query, limit, auto_promote, types, session, namespace)"
    )
    # Refused means not run: nothing was stored by add_turns / add_memory / memory_state_update.
    with Memory(tmp_path / "m.db", namespace="agent", embedder=None) as mem:
        assert mem.turns() == [] and mem.items.list() == []
    assert list((tmp_path / "project").iterdir()) == []


def test_item_tools_scope_items_to_a_session_and_take_the_message_type(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()

    async def body(client: Client) -> dict[str, Any]:
        async def call(name: str, args: dict[str, Any]) -> Any:
            result = await client.call_tool(name, args)
            assert not result.is_error, result.content[0].text
            return json.loads(result.content[0].text)

        mine = await call("add_memory", {"content": "the s1 budget is 10K", "session": "s1", "scope": "session"})
        turn = await call(
            "add_memory", {"content": "Turn 2: we agreed on a $50K budget", "type": "message", "session": "s2"}
        )
        await call("memory_spill", {"count": 2})
        orphan = await client.call_tool("add_memory", {"content": "x", "scope": "session"})
        return {
            "mine": mine,
            "turn": turn,
            "orphan": orphan,
            "s2": await call("memory_recall", {"query": "budget", "limit": 5, "session": "s2", "auto_promote": False}),
            "s1": await call("memory_recall", {"query": "budget", "limit": 5, "session": "s1", "auto_promote": False}),
            "none": await call("memory_recall", {"query": "budget", "limit": 5, "auto_promote": False}),
            "status_s2": await call("memory_status", {"session": "s2"}),
            "status": await call("memory_status", {}),
        }

    out = _run(_params(tmp_path / "m.db", tmp_path / "project"), body)
    assert (out["mine"]["scope"], out["turn"]["type"], out["turn"]["scope"]) == ("session", "message", "namespace")
    assert [i["id"] for i in out["s2"]["items"]] == [out["turn"]["id"]]
    assert {i["id"] for i in out["s1"]["items"]} == {out["turn"]["id"], out["mine"]["id"]}
    assert [i["id"] for i in out["none"]["items"]] == [out["turn"]["id"]]
    assert (out["status_s2"]["cold"]["items"], out["status"]["cold"]["items"]) == (1, 2)
    assert out["orphan"].is_error
    assert out["orphan"].content[0].text == "ValidationError: session: a session-scoped item needs session=<name>"
