"""The MCP tools named after what clients know, over a real ``stratamem mcp`` stdio subprocess.

Driven by the SDK's own client: conversation turns in OpenAI and Anthropic
shapes, search with scores, a context whose whole result keeps its budget
(a hypothesis test over budgets, formats and ``explain``), forgetting,
namespace listing, strict one-line argument errors, the install hint and
the startup line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from stratamem import Memory
from stratamem.mcp import ALIASES, STATE_TOOLS, TOOLS
from stratamem.tokens import get_tokenizer

STRATAMEM = str(Path(sys.executable).with_name("stratamem"))
O200K = get_tokenizer("o200k_base")


def _params(db: Path, namespace: str, *extra: str) -> StdioServerParameters:
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


def _text(result: Any) -> str:
    assert result.is_error is False, result.content[0].text
    assert len(result.content) == 1
    return result.content[0].text


def _json(result: Any) -> Any:
    return json.loads(_text(result))


def _conversation(db: Path, namespace: str = "agent-a", n: int = 60) -> None:
    with Memory(db, namespace=namespace) as mem:
        for i in range(n):
            mem.add(
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"Message {i}: we talked about the Lisbon trip budget of {100 + i} euros "
                    f"and the hotel near the river, booking number B{i:03d}.",
                },
                session=f"s{i // 20}",
            )


def test_turns_search_context_namespaces_forget_and_seal_through_the_new_tool_names(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, namespace="other") as other:
        other.add({"role": "user", "content": "not yours"})

    async def body(client: Client) -> dict[str, Any]:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        openai = _json(
            await client.call_tool(
                "add_turns",
                {
                    "session": "trip",
                    "messages": [
                        {"role": "user", "content": "The ferry to Porto leaves at 7:40 from pier 3."},
                        {"role": "assistant", "content": "Noted: ferry 7:40, pier 3."},
                    ],
                },
            )
        )
        anthropic = _json(
            await client.call_tool(
                "add_turns",
                {
                    "session": "trip",
                    "format": "anthropic",
                    "messages": [
                        {"role": "user", "content": [{"type": "text", "text": "And the return is on Sunday evening."}]}
                    ],
                },
            )
        )
        hits = _json(await client.call_tool("search_memory", {"query": "when does the ferry leave", "k": 2}))
        ctx = _text(await client.call_tool("get_context", {"query": "ferry", "budget": 200}))
        spaces = _json(await client.call_tool("list_namespaces", {}))
        sealed = _json(await client.call_tool("seal_topic", {}))
        forgotten = _json(await client.call_tool("forget", {"turns": [openai["turn_ids"][0]]}))
        after = _json(await client.call_tool("search_memory", {"query": "ferry pier", "k": 5}))
        whole = await client.call_tool("forget", {"all_namespace": True})
        return {
            "tools": tools,
            "openai": openai,
            "anthropic": anthropic,
            "hits": hits,
            "ctx": ctx,
            "spaces": spaces,
            "sealed": sealed,
            "forgotten": forgotten,
            "after": after,
            "whole": whole,
        }

    out = _run(_params(db, "agent-a"), body)
    assert set(out["tools"]) == set(TOOLS) | set(STATE_TOOLS)
    assert all(t.input_schema.get("additionalProperties") is False for t in out["tools"].values())
    assert all(out["tools"][old].description.startswith(f"Alias of {new}") for old, new in ALIASES.items())
    assert out["openai"]["stored"] == 2 and out["openai"]["session"] == "trip"
    assert out["anthropic"]["stored"] == 1
    first = out["openai"]["turn_ids"][0]
    assert out["hits"]["total"] == 2 and out["hits"]["hits"][0]["id"] == f"turn:{first}"
    assert out["hits"]["hits"][0]["score"] == 1.0 and out["hits"]["hits"][0]["scores"]["fused"] > 0
    assert "ferry to Porto leaves at 7:40" in out["ctx"] and "[manifest]" in out["ctx"]
    assert O200K.count(out["ctx"]) <= 200
    # Only the namespaces this server may serve are listed.
    assert out["spaces"] == {
        "served": "agent-a",
        "namespaces": [
            {"namespace": "agent-a", "sessions": 1, "turns": 3, "tokens": out["spaces"]["namespaces"][0]["tokens"]}
        ],
    }
    assert out["sealed"]["session"] == "trip" and out["sealed"]["sealed"] is True
    assert out["forgotten"]["turns"] == 1 and out["forgotten"]["nodes_rebuilt"] >= 1
    assert all(h["id"] != f"turn:{first}" for h in out["after"]["hits"])
    assert out["whole"].is_error
    assert out["whole"].content[0].text == (
        "ValidationError: confirm: forgetting the whole namespace needs confirm='agent-a'"
    )
    with Memory(db, namespace="agent-a") as mem:
        assert [t.text for t in mem.turns()] == ["Noted: ferry 7:40, pier 3.", "And the return is on Sunday evening."]


def test_unknown_arguments_and_schema_errors_are_refused_in_one_line(tmp_path: Path) -> None:
    async def body(client: Client) -> list[Any]:
        return [
            await client.call_tool("memory_recall", {"query": "x", "autoPromote": False}),
            await client.call_tool("get_context", {"sessionId": "s1"}),
            await client.call_tool("add_memory", {"content": "x", "type": "opinion"}),
            await client.call_tool("add_turns", {"messages": [{"role": "wizard", "content": "hi"}]}),
            await client.call_tool("forget", {"turns": [1], "session": "s1"}),
            await client.call_tool("seal_topic", {}),
            await client.call_tool("search_memory", {"query": "x", "k": 0, "budget": 10}),
        ]

    results = _run(_params(tmp_path / "m.db", "agent-a"), body)
    texts = [r.content[0].text for r in results]
    assert all(r.is_error for r in results)
    assert all("\n" not in t for t in texts)
    assert texts[0].startswith("ValidationError: autoPromote: unknown argument of memory_recall (known: query,")
    assert texts[1].startswith("ValidationError: sessionId: unknown argument of get_context")
    assert texts[2] == (
        "ValidationError: type: Input should be 'fact', 'decision', 'entity', 'preference', 'event', 'context' or "
        "'message'"
    )
    assert texts[3].startswith("InvalidTurnError: messages[0]")
    assert texts[4] == (
        "ValidationError: say exactly one of turns=[ids], session=name or all_namespace=True (got turns, session)"
    )
    assert texts[5] == "NotFoundError: namespace 'agent-a' has no session to seal"
    assert texts[6] == "ValidationError: k: Input should be greater than or equal to 1 (and 1 more)"


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    calls=st.lists(
        st.tuples(
            st.integers(64, 3000),
            st.sampled_from(["text", "openai", "anthropic"]),
            st.booleans(),
            st.sampled_from([None, "Lisbon hotel booking", "river budget"]),
        ),
        min_size=3,
        max_size=6,
    )
)
def test_get_context_keeps_every_result_within_its_budget_over_stdio(tmp_path_factory: Any, calls: list) -> None:
    db = tmp_path_factory.mktemp("ctx") / "m.db"
    _conversation(db)

    async def body(client: Client) -> list[tuple[int, str]]:
        out = []
        for budget, fmt, explain, query in calls:
            args = {"budget": budget, "format": fmt, "explain": explain, **({"query": query} if query else {})}
            out.append((budget, _text(await client.call_tool("get_context", args))))
            hits = _text(await client.call_tool("search_memory", {"query": query or "trip", "k": 20, "budget": budget}))
            out.append((budget, hits))
        return out

    for budget, text in _run(_params(db, "agent-a"), body):
        assert O200K.count(text) <= budget
        assert text.strip()


def test_the_old_context_tool_no_longer_overruns_a_small_budget(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _conversation(db, n=200)

    async def body(client: Client) -> list[str]:
        return [
            _text(
                await client.call_tool(
                    "memory_context", {"query": "hotel booking", "budget": 500, "format": f, "explain": True}
                )
            )
            for f in ("openai", "text")
        ]

    for text in _run(_params(db, "agent-a"), body):
        assert 300 < O200K.count(text) <= 500


def test_mcp_without_the_extra_prints_one_install_line_and_exits_2(tmp_path: Path) -> None:
    code = "import sys; sys.modules['mcp'] = None; from stratamem.cli import main; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, "--db", str(tmp_path / "m.db"), "mcp"], capture_output=True, text=True, timeout=60
    )
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "stratamem mcp needs the 'mcp' extra: pip install 'stratamem[mcp]'\n"
    assert not (tmp_path / "m.db").exists()


def test_the_server_announces_name_db_namespace_and_transport_on_stderr(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    # The documented host form: options after `mcp`; a relative path is shown absolute.
    proc = subprocess.Popen(
        [STRATAMEM, "mcp", "--db", "m.db", "-n", "alice"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "STRATAMEM_EMBEDDING": "none"},
    )
    try:
        line = proc.stderr.readline()  # type: ignore[union-attr]
    finally:
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=30)
    assert line == f"stratamem mcp: name=stratamem db={db} namespace=alice transport=stdio\n"
