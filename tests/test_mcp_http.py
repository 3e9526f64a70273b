"""The MCP server over streamable HTTP (``stratamem mcp --http``) and over ``python -m stratamem``.

A real server subprocess on a free 127.0.0.1 port, driven by the official
``mcp`` SDK's streamable-HTTP client (``mcp.Client`` given the URL); the
loopback-only rule of the shell; and the stdio server started as a module.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from stratamem import Memory
from stratamem.cli.mcp import is_loopback
from stratamem.mcp import STATE_TOOLS, TOOLS

STRATAMEM = str(Path(sys.executable).with_name("stratamem"))
START_TIMEOUT_S = 30.0


def _env(db: Path, namespace: str) -> dict[str, str]:
    # Lexical recall (no embedder) keeps the scores exact and the start-up fast.
    return {
        "STRATAMEM_DB": str(db),
        "STRATAMEM_NAMESPACE": namespace,
        "STRATAMEM_EMBEDDING": "none",
        "PATH": os.environ.get("PATH", ""),
        # A checkout run with PYTHONPATH=src serves its own code, not the installed one.
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_until_listening(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """Block until 127.0.0.1:``port`` accepts a connection; fail clearly if the server dies or stalls."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            pytest.fail(f"the MCP server exited with {proc.returncode} before listening:\n{log.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the MCP server did not accept connections on 127.0.0.1:{port} within "
                    f"{START_TIMEOUT_S:.0f} s:\n{log.read_text()}"
                )
            time.sleep(0.05)


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``stratamem mcp --http`` on a free loopback port; yields (URL, database path)."""
    db = tmp_path / "m.db"
    with Memory(db, namespace="agent-h", embedder=None) as mem:
        mem.add(
            [{"role": "user", "content": "Our budget is $50K."}, {"role": "assistant", "content": "Noted: $50K."}],
            session="s1",
        )
    port = _free_port()
    log = tmp_path / "server.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [STRATAMEM, "mcp", "--http", "--port", str(port)],
            env=_env(db, "agent-h"),
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
        )
    try:
        _wait_until_listening(proc, port, log)
        yield f"http://127.0.0.1:{port}/mcp", db
    finally:
        proc.kill()
        proc.wait(10)


def _run(server: Any, body: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with Client(server, read_timeout_seconds=60) as client:
            return await body(client)

    return anyio.run(main)


def _json(result: Any) -> Any:
    assert result.is_error is False, result.content[0].text
    return json.loads(result.content[0].text)


def test_http_server_round_trips_add_spill_recall_status_context(http_server: tuple[str, Path]) -> None:
    url, db = http_server

    async def body(client: Client) -> dict[str, Any]:
        return {
            "tools": {t.name for t in (await client.list_tools()).tools},
            "added": _json(await client.call_tool("memory_add", {"content": "The budget is $50K", "type": "fact"})),
            "spilled": _json(await client.call_tool("memory_spill", {"count": 1})),
            "recalled": _json(await client.call_tool("memory_recall", {"query": "what was the budget?"})),
            "status": _json(await client.call_tool("memory_status", {})),
            "context": _json(
                await client.call_tool(
                    "memory_context",
                    {"query": "budget", "budget": 800, "session": "s1", "format": "openai", "explain": True},
                )
            ),
        }

    out = _run(url, body)
    assert out["tools"] == set(TOOLS) | set(STATE_TOOLS)
    item = out["added"]["id"]
    assert (out["added"]["tier"], out["added"]["namespace"], out["added"]["tokens"]) == ("hot", "agent-h", 6)
    assert out["spilled"] == {"spilled_count": 1, "spilled": [item], "to_warm": [], "to_cold": [item], "tokens": 6}
    assert out["recalled"]["mode"] == "lexical"
    assert [i["content"] for i in out["recalled"]["items"]] == ["The budget is $50K"]
    assert out["recalled"]["promoted"] == [item]
    assert out["status"]["hot"] == {"items": 1, "tokens": 6, "limit": 4000, "utilization_percent": 0.15}
    assert (out["status"]["cold"], out["status"]["warm"]) == ({"items": 0, "tokens": 0}, {"items": 0, "tokens": 0})
    metrics = out["status"]["metrics"]
    assert (metrics["spills"], metrics["recalls"], metrics["recall_hits"], metrics["promotions"]) == (1, 1, 1, 1)
    ctx = out["context"]
    assert ctx["messages"] == [
        {"role": "system", "content": "## Remembered facts\n- (fact) The budget is $50K"},
        {"role": "user", "content": "Our budget is $50K."},
        {"role": "assistant", "content": "Noted: $50K."},
    ]
    # The whole result, manifest included, keeps the budget; the context inside it had less room.
    assert ctx["tokens"] < 800 and ctx["manifest_full"]["budget_tokens"] == 800
    assert ctx["manifest"].startswith("[manifest] 3 items")
    assert [i["id"] for i in ctx["manifest_full"]["items"] if i["kind"] == "item"] == [f"item:{item}"]
    # The server wrote the file the library reads.
    with Memory(db, namespace="agent-h", embedder=None) as mem:
        assert [i.content for i in mem.items.hot()] == ["The budget is $50K"]


def test_http_server_returns_invalid_input_and_library_errors_as_mcp_errors(http_server: tuple[str, Path]) -> None:
    url, _ = http_server

    async def body(client: Client) -> list[Any]:
        return [
            await client.call_tool("memory_add", {"content": "x", "type": "opinion"}),
            await client.call_tool("memory_context", {"budget": 0}),
            await client.call_tool("memory_promote", {"id": 999}),
            await client.call_tool("memory_status", {"namespace": "someone-else"}),
        ]

    bad_type, bad_budget, missing, other_ns = _run(url, body)
    assert [r.is_error for r in (bad_type, bad_budget, missing, other_ns)] == [True, True, True, True]
    assert (
        "Input should be 'fact', 'decision', 'entity', 'preference', 'event', 'context' or 'message'"
        in bad_type.content[0].text
    )
    assert bad_budget.content[0].text == "ValidationError: budget: Input should be greater than or equal to 64"
    assert missing.content[0].text == "NotFoundError: no memory item 999 in namespace 'agent-h'"
    assert (
        "ValidationError: namespace: this server serves namespace 'agent-h'; 'someone-else' is not allowed"
        in other_ns.content[0].text
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.7", "example.com"])
def test_http_server_refuses_a_non_loopback_host_without_allow_remote(host: str, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    proc = subprocess.run(
        [STRATAMEM, "mcp", "--http", "--host", host, "--port", str(_free_port())],
        env=_env(db, "agent-h"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert f"Error: Invalid value for --host: '{host}' is not a loopback address" in proc.stderr
    assert "--allow-remote" in proc.stderr
    assert not db.exists()  # refused before anything was opened


def test_loopback_hosts_are_recognised() -> None:
    assert [is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "localhost", "LOCALHOST", "::1", "[::1]")] == [True] * 6
    assert [is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com", "localhost.example.com", "")] == [
        False
    ] * 6


def test_stdio_server_started_as_python_module(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "stratamem", "mcp"], env=_env(tmp_path / "m.db", "agent-m")
    )

    async def body(client: Client) -> tuple[set[str], dict[str, Any], dict[str, Any]]:
        tools = {t.name for t in (await client.list_tools()).tools}
        added = _json(
            await client.call_tool("memory_add", {"content": "Deploys go out on Fridays", "type": "decision"})
        )
        return tools, added, _json(await client.call_tool("memory_status", {}))

    tools, added, status = _run(params, body)
    assert tools == set(TOOLS) | set(STATE_TOOLS)
    assert (added["namespace"], added["type"], added["tier"]) == ("agent-m", "decision", "hot")
    assert status["hot"]["items"] == 1 and status["namespace"] == "agent-m"
