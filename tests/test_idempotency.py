"""``Idempotency-Key`` (issue 24, finding 8i): a retried write returns the first answer and stores nothing twice.

The store's key table on SQLite and PostgreSQL (claim, replay, release,
expiry); ``Memory.add(idempotency_key=...)`` on both backends, including two
writers racing with one key and a reopened store; the HTTP writes over real
sockets (a retry after the client's connection dropped, a different body,
a server restart, items, seal, import); the MCP ``add_turns`` tool over stdio.
"""

from __future__ import annotations

import io
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from pg import fresh_schema, schema_url
from webserver import Server, web_config

from stratamem import Memory
from stratamem.errors import ConflictError, ValidationError
from stratamem.store.idempotency import RETENTION
from stratamem.store.open import open_store

BACKENDS = ["sqlite", "postgres"]
NS = "/api/v1/namespaces/default"
MESSAGES = [{"role": "user", "content": "book the ferry"}, {"role": "assistant", "content": "booked for 7:40"}]


def target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh store's address: a SQLite file or a PostgreSQL schema."""
    if backend == "sqlite":
        return str(tmp_path / "m.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "idem"))


def memory(where: str) -> Memory:
    store: Any = open_store(where) if where.startswith("postgres") else where
    return Memory(store, config=web_config(), embedder=None)


@pytest.fixture(params=BACKENDS)
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return target(request.param, tmp_path, request)


# --- the store -------------------------------------------------------------------------------------


def test_a_key_is_claimed_once_recorded_released_and_expires(where: str) -> None:
    t0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    with memory(where) as m:
        keys = m.store.idempotency
        with m.store.transaction():
            assert keys.claim("a", "k", "d1", now=t0) is True
        with m.store.transaction():
            assert keys.claim("a", "k", "d2", now=t0) is False  # taken, whatever the digest
            assert keys.claim("b", "k", "d2", now=t0) is True  # keys are per namespace
        got = keys.get("a", "k", now=t0)
        assert (got.digest, got.result) == ("d1", None)
        keys.finish("a", "k", {"turns": [3, 4]})
        assert keys.get("a", "k", now=t0).result == {"turns": [3, 4]}
        keys.release("a", "k")  # a finished key stays
        assert keys.get("a", "k", now=t0).result == {"turns": [3, 4]}
        keys.release("b", "k")  # an unfinished one goes
        assert keys.get("b", "k", now=t0) is None
        later = t0 + RETENTION + timedelta(seconds=1)
        assert keys.get("a", "k", now=later) is None
        with m.store.transaction():
            assert keys.claim("a", "k", "d3", now=later) is True  # the expired row is gone
        assert keys.get("a", "k", now=later).digest == "d3"


# --- Memory.add ------------------------------------------------------------------------------------


def test_add_with_a_key_stores_once_and_returns_the_first_turns(where: str) -> None:
    with memory(where) as m:
        first = m.add(MESSAGES, session="trip", idempotency_key="k-1")
        again = m.add(MESSAGES, session="trip", idempotency_key="k-1")
        assert [t.id for t in again] == [t.id for t in first] and [t.seq for t in again] == [1, 2]
        assert [t.text for t in m.turns("trip")] == ["book the ferry", "booked for 7:40"]
        other = m.add(MESSAGES, session="trip", idempotency_key="k-2")  # a new key is a new write
        assert [t.seq for t in other] == [3, 4]
        with pytest.raises(ConflictError, match="already used for a different request"):
            m.add([{"role": "user", "content": "something else"}], session="trip", idempotency_key="k-1")
        with pytest.raises(ConflictError):
            m.add(MESSAGES, session="elsewhere", idempotency_key="k-1")
        assert m.status().turns == 4
    with memory(where) as reopened:  # the key lives in the store, not in the process
        assert [t.id for t in reopened.add(MESSAGES, session="trip", idempotency_key="k-1")] == [t.id for t in first]
        assert reopened.status().turns == 4


def test_a_forgotten_turn_is_not_brought_back_by_a_retry(where: str) -> None:
    with memory(where) as m:
        first = m.add(MESSAGES, session="trip", idempotency_key="k-f")
        m.forget(turns=[first[0].id])
        again = m.add(MESSAGES, session="trip", idempotency_key="k-f")
        assert [t.id for t in again] == [first[1].id] and m.status().turns == 1


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", 7])
def test_a_malformed_key_is_refused_and_nothing_stored(where: str, key: Any) -> None:
    with memory(where) as m:
        with pytest.raises(ValidationError, match="idempotency key"):
            m.add(MESSAGES, idempotency_key=key)
        assert not m.store.has_namespace("default")


def test_two_writers_racing_with_one_key_store_once(where: str) -> None:
    with memory(where) as m:
        m.add([{"role": "user", "content": "seed"}], session="seed")
    rounds = 5
    for r in range(rounds):
        mems = [memory(where), memory(where)]
        barrier = threading.Barrier(2)
        got: list[list[int]] = []

        def write(m: Memory, r: int = r, barrier: threading.Barrier = barrier, got: list[list[int]] = got) -> None:
            barrier.wait()
            got.append([t.id for t in m.add(MESSAGES, session="race", idempotency_key=f"race-{r}")])

        threads = [threading.Thread(target=write, args=(m,)) for m in mems]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for m in mems:
            m.close()
        assert len(got) == 2 and got[0] == got[1]
    with memory(where) as m:
        assert len(m.turns("race")) == 2 * rounds


# --- HTTP -----------------------------------------------------------------------------------------


@pytest.fixture
def server(where: str) -> Iterator[Server]:
    store: Any = open_store(where) if where.startswith("postgres") else Path(where)
    srv = Server(store, project_dir=None)
    yield srv
    srv.stop()


def raw_post_then_hang_up(port: int, path: str, body: bytes, key: str) -> None:
    """Send a whole POST and close the connection without reading the answer (a client that timed out)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nIdempotency-Key: {key}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    s.close()


def test_a_retry_after_a_dropped_connection_returns_the_first_turns(server: Server) -> None:
    body = json.dumps({"session": "retry", "messages": MESSAGES}).encode()
    with server.client() as c:
        for k in range(3):
            raw_post_then_hang_up(server.port, f"{NS}/turns", body, f"retry-{k}")
            time.sleep(0.2)
            r = c.post(
                f"{NS}/turns",
                content=body,
                headers={"content-type": "application/json", "Idempotency-Key": f"retry-{k}"},
            )
            assert r.status_code == 201
            assert [t["seq"] for t in r.json()["turns"]] == [2 * k + 1, 2 * k + 2]
        stored = c.get(f"{NS}/sessions/retry/turns").json()["turns"]
        assert [t["content"] for t in stored] == [m["content"] for m in MESSAGES] * 3
        other = c.post(
            f"{NS}/turns",
            json={"session": "retry", "messages": [{"role": "user", "content": "not the same"}]},
            headers={"Idempotency-Key": "retry-0"},
        )
        assert other.status_code == 409 and other.json()["error"]["type"] == "ConflictError"
        assert len(c.get(f"{NS}/sessions/retry/turns").json()["turns"]) == 6


def test_the_other_writes_answer_a_retry_with_the_first_answer(server: Server) -> None:
    server.memory.add([{"role": "user", "content": f"line {i}"} for i in range(4)], session="s")
    out = io.StringIO()
    with Memory(":memory:", config=web_config(), embedder=None) as src:
        src.add(MESSAGES, session="imported")
        src.export(out)
    with server.client() as c:

        def twice(method: str, path: str, key: str, **kw: Any) -> tuple[httpx.Response, httpx.Response]:
            first = c.request(method, path, headers={"Idempotency-Key": key}, **kw)
            return first, c.request(method, path, headers={"Idempotency-Key": key}, **kw)

        a, b = twice("POST", f"{NS}/items", "item-1", json={"content": "the ferry leaves at 7:40"})
        assert a.status_code == b.status_code == 201 and a.json()["id"] == b.json()["id"]
        assert [i["content"] for i in c.get(f"{NS}/items").json()["items"]] == ["the ferry leaves at 7:40"]
        a, b = twice("POST", f"{NS}/sessions/s/seal", "seal-1")
        assert a.json()["sealed"] is True and b.json() == a.json()  # without the key the retry says sealed: false
        a, b = twice("POST", f"{NS}/import", "imp-1", content=out.getvalue())  # without the key: turns 0, skipped 2
        assert a.status_code == b.status_code == 201 and a.json() == b.json() == {
            "sessions": 1,
            "turns": 2,
            "skipped": 0,
        }
        bad = c.post(f"{NS}/items", json={"content": "another"}, headers={"Idempotency-Key": "item-1"})
        assert bad.status_code == 409
        assert c.post(f"{NS}/turns", json={"messages": MESSAGES}, headers={"Idempotency-Key": ""}).status_code == 400


def test_a_key_survives_a_server_restart(where: str) -> None:
    store: Any = open_store(where) if where.startswith("postgres") else Path(where)
    srv = Server(store)
    try:
        with srv.client() as c:
            first = c.post(f"{NS}/turns", json={"messages": MESSAGES}, headers={"Idempotency-Key": "restart"}).json()
    finally:
        srv.stop()
    store = open_store(where) if where.startswith("postgres") else Path(where)
    srv = Server(store)
    try:
        with srv.client() as c:
            again = c.post(f"{NS}/turns", json={"messages": MESSAGES}, headers={"Idempotency-Key": "restart"})
            assert again.status_code == 201 and again.json() == first
            assert len(c.get(f"{NS}/sessions/default/turns").json()["turns"]) == 2
    finally:
        srv.stop()


# --- MCP ------------------------------------------------------------------------------------------


def test_mcp_add_turns_with_an_idempotency_key_stores_once(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("stratamem")),
        args=["mcp"],
        env={
            "STRATAMEM_DB": str(tmp_path / "m.db"),
            "STRATAMEM_EMBEDDING": "none",
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        },
    )

    async def main() -> list[Any]:
        async with Client(params, read_timeout_seconds=60) as client:
            out = []
            for messages in (MESSAGES, MESSAGES, [{"role": "user", "content": "other"}]):
                res = await client.call_tool("add_turns", {"messages": messages, "idempotency_key": "mcp-1"})
                out.append((res.is_error, res.content[0].text))
            return out

    first, again, other = anyio.run(main)
    assert first[0] is False and again == first
    assert json.loads(first[1])["stored"] == 2
    assert other[0] is True and other[1].startswith("ConflictError: idempotency_key:")
    with Memory(tmp_path / "m.db", embedder=None) as m:
        assert m.status().turns == 2
