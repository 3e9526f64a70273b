"""Integers beyond 64 bits and values of the wrong JSON type are refused, never a 500 (issue 24, 8b and 8f).

Every integer parameter of the HTTP API (read from its OpenAPI schema), the
MCP tools that take ids and budgets, and the library calls behind them, on
both backends: SQLite could not bind such a value (a 500), PostgreSQL compared
it as ``numeric`` and answered 200 with nothing found, or assembled a context
for a budget of 2^64 tokens. Both now refuse it as a caller's mistake. A
JSON body says ``2000``, not ``"2000"``, ``2000.0`` or ``true``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from pg import fresh_schema, schema_url
from webserver import Server

from stratamem import Memory
from stratamem.errors import BudgetError, InvalidTurnError, ValidationError
from stratamem.store.open import open_store

BIG = [2**64, 2**63, -(2**63) - 1]


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "i.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "ints"))


@pytest.fixture
def mem(target: str) -> Iterator[Memory]:
    m = Memory(open_store(target), namespace="default", embedder=None)
    m.add([{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(24)], session="s1")
    yield m
    m.close()


@pytest.mark.parametrize("value", BIG)
def test_library_calls_refuse_integers_outside_64_bits(mem: Memory, value: int) -> None:
    store: Any = mem.store
    calls = {
        "turns": lambda: store.turns("default", "s1", min_seq=value),
        "manifest": lambda: store.manifests.get("default", value),
        "node": lambda: mem.pyramid.node(value),
        "nodes": lambda: mem.pyramid.nodes(level=value),
        "item": lambda: mem.items.get(value),
        "forget": lambda: mem.forget(turns=[value]),
    }
    refused = {}
    for name, call in calls.items():
        with pytest.raises(ValidationError) as info:
            call()
        refused[name] = str(info.value)
    if value > 0:  # (a negative one may meet another bound first: "level must be at least 1")
        assert all("64-bit" in message for message in refused.values()), refused
    with pytest.raises(BudgetError, match="above the largest accepted, 100,000,000 tokens"):
        mem.context("turn", budget=abs(value))
    assert mem.status().turns == 24  # nothing forgotten


def _int_params(schema: dict[str, Any]) -> Iterator[tuple[str, str, str, str]]:
    """``(method, path, where, name)`` of every integer path or query parameter."""
    for path, ops in schema["paths"].items():
        for method, op in ops.items():
            for p in op.get("parameters", []):
                types = {p["schema"].get("type")} | {s.get("type") for s in p["schema"].get("anyOf", [])}
                if "integer" in types:
                    yield method.upper(), path, p["in"], p["name"]


def test_every_integer_parameter_of_the_http_api_refuses_values_past_64_bits(mem: Memory) -> None:
    item = mem.items.add("Alice likes Paris").id
    srv = Server(mem.store)  # type: ignore[arg-type]
    try:
        schema = httpx.get(f"{srv.url}/api/openapi.json").json()
        params = list(_int_params(schema))
        assert len(params) >= 10
        answers: dict[str, int] = {}
        for method, path, where, name in params:
            for value in BIG:
                url = path.replace("{namespace}", "default").replace("{session}", "s1")
                query: dict[str, Any] = {}
                if where == "path":
                    url = url.replace("{" + name + "}", str(value))
                else:
                    query[name] = value
                url = url.replace("{item_id}", "1").replace("{node_id}", "1").replace("{manifest_id}", "1")
                r = httpx.request(method, srv.url + url, params=query, json={} if method == "POST" else None)
                answers[f"{method} {url} {name}={value}"] = r.status_code
        refused = {k: v for k, v in answers.items() if 400 <= v < 500}
        assert refused == answers  # every one a 4xx, none a 500 or a 200
        api = f"{srv.url}/api/v1/namespaces/default"
        for body in ({"budget": 2**64}, {"budget": 2**63}):
            assert httpx.post(f"{api}/context", json=body).status_code == 400
        assert httpx.post(f"{api}/items/{item}/supersede", json={"by": 2**64}).status_code == 400
    finally:
        srv.stop()


def test_wrong_json_types_in_bodies_are_refused_not_coerced(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with Memory(db, embedder=None) as m:
        m.add({"role": "user", "content": "hello there"}, session="s")
    srv = Server(db)
    try:
        api = f"{srv.url}/api/v1/namespaces/default"
        for body in ({"budget": "500"}, {"budget": 500.0}, {"budget": True}, {"query": 5}):
            r = httpx.post(f"{api}/context", json=body)
            assert r.status_code == 400, (body, r.text)
        assert httpx.post(f"{api}/context", json={"budget": 500}).status_code == 200
        assert httpx.get(f"{api}/context", params={"budget": "500"}).status_code == 200  # query values are text
        call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
        messages = [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ]
        r = httpx.post(f"{api}/turns", json={"session": "types", "format": "openai", "messages": messages})
        assert r.status_code == 400
        assert r.json()["error"] == {
            "type": "InvalidTurnError",
            "message": "tool call arguments must be a string of JSON, got dict",
            "path": "messages[0].tool_calls[0].function.arguments",
        }
        assert httpx.get(f"{api}/sessions/types/turns").status_code == 404  # nothing stored
        r = httpx.post(f"{api}/items", json={"content": "x", "supersedes": ["1"]})
        assert r.status_code == 400
    finally:
        srv.stop()


def test_openai_arguments_must_be_a_json_string(memory: Memory) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
    with pytest.raises(InvalidTurnError, match="tool call arguments must be a string of JSON, got dict"):
        memory.add([{"role": "assistant", "content": None, "tool_calls": [call]}], format="openai")
    call["function"]["arguments"] = '{"a": 1}'  # type: ignore[index]
    memory.add(
        [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        ],
        format="openai",
    )
    assert memory.turns()[0].turn.content[0].input == {"a": 1}  # type: ignore[union-attr]


def test_mcp_tools_refuse_integers_past_64_bits_with_a_library_error(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, embedder=None) as m:
        m.add({"role": "user", "content": "hello there"}, session="s")
    env = {
        "STRATAMEM_DB": str(db),
        "STRATAMEM_EMBEDDING": "none",
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "stratamem", "mcp"], env=env)
    calls = [("forget", {"turns": [2**64]}), ("memory_promote", {"id": 2**64}), ("get_context", {"budget": 2**64})]

    async def main() -> list[Any]:
        async with Client(params, read_timeout_seconds=60) as client:
            return [await client.call_tool(name, args) for name, args in calls]

    results = anyio.run(main)
    texts = [r.content[0].text for r in results]
    assert all(r.is_error for r in results), texts
    assert "ValidationError: turns[0]: an id must be a positive 64-bit integer" in texts[0]
    assert "ValidationError: id: item ids are 64-bit integers (up to 2^63-1)" in texts[1]
    assert "less than or equal to 1000000" in texts[2]  # the tool's own bound answers first
    with Memory(db, embedder=None) as m:
        assert m.status().turns == 1
