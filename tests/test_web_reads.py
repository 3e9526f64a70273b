"""Reads write nothing and queries are bounded alike (issue 24, findings 8g and 8h).

* ``GET /context``, ``GET /search`` and the dashboard's context inspector
  leave the manifest table as it was; ``record=true`` or ``POST /context``
  record one, as ``Memory.context`` does by default (``record=False`` does not).
* One query limit, :data:`stratamem.text.MAX_QUERY_CHARS`, on the HTTP routes
  and the MCP tools: a query one character longer is refused on each, one of
  exactly that length is answered.
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
from webserver import Server, load_sample, web_config

from stratamem import Memory
from stratamem.store.open import open_store
from stratamem.text import MAX_QUERY_CHARS

NS = "/api/v1/namespaces/default"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("reads") / "memory.db")
    load_sample(srv.memory)
    yield srv
    srv.stop()


def manifests(srv: Server) -> int:
    return len(srv.memory.store.manifests.latest("default", 10_000))


def test_get_routes_and_the_inspector_page_record_no_manifest(server: Server) -> None:
    before = manifests(server)
    with server.client() as c:
        for q in ("retry policy", "database choice", "deploy window"):
            assert c.get(f"{NS}/context", params={"query": q, "budget": 800}).status_code == 200
            assert c.get(f"{NS}/search", params={"q": q}).status_code == 200
            assert c.get("/ns/default/context", params={"q": q, "budget": 800}).status_code == 200
        assert manifests(server) == before
        asked = c.get(f"{NS}/context", params={"query": "retry policy", "record": "true"})
        assert asked.status_code == 200 and manifests(server) == before + 1
        posted = c.post(f"{NS}/context", json={"query": "retry policy"})
        assert posted.status_code == 200 and manifests(server) == before + 2
        assert c.post(f"{NS}/context", json={"query": "retry policy", "record": False}).status_code == 200
        assert manifests(server) == before + 2
        latest = c.get(f"{NS}/manifests", params={"limit": 1}).json()["manifests"][0]
        assert latest["total_tokens"] == posted.json()["tokens"]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_memory_context_records_by_default_and_not_when_told(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        store: Any = tmp_path / "m.db"
    else:
        dsn = request.getfixturevalue("pg_dsn")
        store = open_store(schema_url(dsn, fresh_schema(dsn, "rec")))
    with Memory(store, config=web_config(), embedder=None) as m:
        m.add([{"role": "user", "content": "the ferry leaves at 7:40"}], session="s")
        m.context("ferry", record=False)
        assert m.store.manifests.latest("default", 10) == []
        m.context("ferry")
        m.context("ferry", record=True)
        assert len(m.store.manifests.latest("default", 10)) == 2


def test_http_refuses_a_query_over_the_limit_on_every_route(server: Server) -> None:
    assert MAX_QUERY_CHARS == 20_000
    long, ok = "q" * (MAX_QUERY_CHARS + 1), "q" * MAX_QUERY_CHARS
    with server.client() as c:

        def codes(q: str) -> list[int]:
            return [
                c.post(f"{NS}/context", json={"query": q, "budget": 500, "record": False}).status_code,
                c.get(f"{NS}/context", params={"query": q, "budget": 500}).status_code,
                c.get(f"{NS}/search", params={"q": q}).status_code,
                c.post(f"{NS}/items/recall", json={"query": q}).status_code,
                c.get("/ns/default/context", params={"q": q}).status_code,
            ]

        assert codes(long) == [400] * 5
        assert codes(ok) == [200] * 5


def test_mcp_refuses_a_query_over_the_same_limit(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, config=web_config(), embedder=None) as m:
        m.add([{"role": "user", "content": "the ferry leaves at 7:40"}], session="s")
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("stratamem")),
        args=["mcp"],
        env={
            "STRATAMEM_DB": str(db),
            "STRATAMEM_EMBEDDING": "none",
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        },
    )

    async def main() -> dict[str, list[tuple[bool, str]]]:
        out: dict[str, list[tuple[bool, str]]] = {}
        async with Client(params, read_timeout_seconds=60) as client:
            for tool in ("get_context", "search_memory", "memory_recall"):
                for q in ("q" * (MAX_QUERY_CHARS + 1), "q" * MAX_QUERY_CHARS):
                    res = await client.call_tool(tool, {"query": q})
                    out.setdefault(tool, []).append((bool(res.is_error), res.content[0].text[:80]))
        return out

    got = anyio.run(main)
    for tool, ((long_err, long_text), (ok_err, _)) in got.items():
        assert long_err is True and long_text.startswith("ValidationError: query:"), (tool, long_text)
        assert ok_err is False, tool


def test_a_get_that_asks_for_a_record_gets_the_manifest_it_wrote(server: Server) -> None:
    with httpx.Client(base_url=server.url) as c:
        body = c.get(f"{NS}/context", params={"query": "deploy window", "record": "true"}).json()
        latest = c.get(f"{NS}/manifests", params={"limit": 1}).json()["manifests"][0]
    assert latest["query"] == "deploy window" and latest["total_tokens"] == body["tokens"]
