"""One limit for every JSON value that enters, and reads that never fail on what is stored (issue 24, finding 2).

A value nested more than ``MAX_JSON_DEPTH`` levels, or holding an integer
outside 64 bits, is refused the same way through ``Memory.add``, HTTP, MCP,
ingest files and import files: a clear error, nothing stored. A store written
before the limit may hold deeper values: every read (listing, export, search,
every context format, every HTTP route) still answers, with the levels past
the limit kept as JSON text. Files may open with a UTF-8 byte order mark.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from pg import fresh_schema, schema_url
from psycopg import sql
from webserver import Server

from stratamem import Memory
from stratamem.errors import DecodeError, InvalidTurnError, ValidationError
from stratamem.ingest import read_file
from stratamem.store.open import open_store

LIMIT = 64  # stratamem.records.checks.MAX_JSON_DEPTH (spelled out: the test must run on code without it)
CLIPPED = "$nested_json"


def test_the_limits_are_the_documented_ones() -> None:
    from stratamem.records import checks

    assert (checks.MAX_JSON_DEPTH, checks.MAX_DOCUMENT_DEPTH, checks.MAX_JSON_INT) == (LIMIT, 80, 2**63 - 1)
    assert checks.CLIPPED == CLIPPED


def nested(depth: int) -> dict[str, Any]:
    """An object nested ``depth`` levels deep: ``{"a": {"a": ... {"leaf": 1}}}``."""
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


def tool_call(tool_input: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "please run the tool"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t9", "name": "probe", "input": tool_input}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "ok"}]},
        {"role": "assistant", "content": "done"},
    ]


# --- the library ------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(min_value=1, max_value=400), where=st.sampled_from(["metadata", "tool input"]))
def test_a_value_within_the_limit_round_trips_and_a_deeper_one_stores_nothing(
    tmp_path_factory: pytest.TempPathFactory, depth: int, where: str
) -> None:
    db = tmp_path_factory.mktemp("depth") / "d.db"
    with Memory(db, namespace="n", embedder=None) as mem:
        value = nested(depth)
        if where == "metadata":
            messages = [{"role": "user", "content": "deep metadata", "metadata": value}]
        else:
            messages = tool_call(value)
        if depth <= LIMIT:
            mem.add(messages, session="s", format="anthropic" if where == "tool input" else "auto")
            stored = mem.turns("s")
            got = stored[0].turn.metadata if where == "metadata" else stored[1].turn.content[0].input  # type: ignore[union-attr]
            assert got == value
        else:
            with pytest.raises(InvalidTurnError, match=f"nested more than {LIMIT} levels deep"):
                mem.add(messages, session="s", format="anthropic" if where == "tool input" else "auto")
            assert mem.status().turns == 0


@pytest.mark.parametrize(
    "value, fragment",
    [
        ({"n": 2**63}, "integer 9223372036854775808 is outside the 64-bit range"),
        ({"n": [-(2**63) - 1]}, "integer -9223372036854775809 is outside the 64-bit range"),
        ({"n": 10**400}, "integer of 1329 bits is outside the 64-bit range"),
    ],
)
def test_integers_beyond_64_bits_are_refused_in_metadata_and_items(
    memory: Memory, value: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(InvalidTurnError, match=fragment):
        memory.add({"role": "user", "content": "big", "metadata": value})
    with pytest.raises(ValidationError, match=fragment):
        memory.items.add("a fact", metadata=value)
    memory.add({"role": "user", "content": "ok", "metadata": {"n": 2**63 - 1, "m": -(2**63)}})
    assert memory.turns()[0].turn.metadata == {"n": 2**63 - 1, "m": -(2**63)}
    with pytest.raises(ValidationError, match=f"nested more than {LIMIT} levels deep"):
        memory.items.add("a fact", metadata=nested(LIMIT + 1))
    assert memory.items.list(include_dead=True) == []


def _lines(*rows: Any) -> str:
    return "\n".join(json.dumps(r) for r in rows) + "\n"


@pytest.mark.parametrize(
    "text, error, fragment",
    [
        (
            _lines({"role": "user", "content": "ok"}, {"role": "user", "content": "x", "metadata": nested(LIMIT + 1)}),
            DecodeError,
            f"in.jsonl:2: metadata: nested more than {LIMIT} levels deep",
        ),
        (
            _lines({"role": "user", "content": "ok"}, {"role": "user", "content": "x", "metadata": nested(300)}),
            DecodeError,
            "in.jsonl:2: invalid JSON: nested more than 80 levels deep",
        ),
        (
            _lines({"role": "user", "content": "ok"}, {"role": "user", "content": "x", "n": 2**64}),
            DecodeError,
            "in.jsonl:2: invalid JSON: integer 18446744073709551616 is outside the 64-bit range",
        ),
        (
            '{"role": "user", "content": "x", "n": 1e400}\n',
            DecodeError,
            "in.jsonl:1: invalid JSON: not JSON-serializable",
        ),
    ],
)
def test_ingest_files_meet_the_same_limit_and_store_nothing(
    memory: Memory, tmp_path: Path, text: str, error: type[Exception], fragment: str
) -> None:
    f = tmp_path / "in.jsonl"
    f.write_text(text)
    with pytest.raises(error) as info:
        memory.ingest(read_file(f))
    assert fragment in str(info.value)
    assert memory.status().turns == 0


def _export(metadata: Any) -> str:
    with Memory(":memory:", namespace="x", embedder=None) as src:
        src.add({"role": "user", "content": "deep import"}, session="s")
        out = io.StringIO()
        src.export(out)
    lines = out.getvalue().splitlines()
    turn = json.loads(lines[2])
    turn["turn"]["metadata"] = metadata
    lines[2] = json.dumps(turn, separators=(",", ":"))
    import hashlib

    end = json.loads(lines[3])
    end["sha256"] = hashlib.sha256((lines[2] + "\n").encode()).hexdigest()
    lines[3] = json.dumps(end)
    return "\n".join(lines) + "\n"


def test_an_import_holding_a_deep_value_stores_nothing(memory: Memory) -> None:
    with pytest.raises(DecodeError, match=f"line 3: turn.metadata: nested more than {LIMIT} levels deep"):
        memory.import_(io.StringIO(_export(nested(LIMIT + 1))))
    assert memory.namespaces() == []
    memory.import_(io.StringIO(_export(nested(LIMIT))))  # the limit itself goes in
    assert depth_of(memory.turns()[0].turn.metadata) == LIMIT


# --- files with a byte order mark -------------------------------------------------------------


def test_files_opening_with_a_utf8_bom_read_like_plain_ones(tmp_path: Path) -> None:
    rows = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"turn {i} naïve café",
            "timestamp": f"2024-05-0{i + 1}",
        }
        for i in range(4)
    ]
    plain, bom = tmp_path / "plain.jsonl", tmp_path / "bom.jsonl"
    plain.write_text(_lines(*rows), encoding="utf-8")
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    plain_json, bom_json = tmp_path / "plain.json", tmp_path / "bom.json"
    plain_json.write_text(json.dumps(rows), encoding="utf-8")
    bom_json.write_bytes(b"\xef\xbb\xbf" + plain_json.read_bytes())

    # Equal but for the file each session was read from (the name errors and reports cite).
    def unsourced(path: Path) -> list[Any]:
        return [dataclasses.replace(s, source=None) for s in read_file(path, session="s")]

    assert unsourced(bom) == unsourced(plain)
    assert unsourced(bom_json) == unsourced(plain_json)
    with Memory(tmp_path / "m.db", namespace="n", embedder=None) as mem:
        mem.ingest(read_file(plain, session="s"))
        export = tmp_path / "export.jsonl"
        with export.open("w", encoding="utf-8") as out:
            mem.export(out)
    export_bom = tmp_path / "export-bom.jsonl"
    export_bom.write_bytes(b"\xef\xbb\xbf" + export.read_bytes())
    db = tmp_path / "cli.db"
    out = subprocess.run(
        [sys.executable, "-m", "stratamem", "--db", str(db), "-n", "n", "import", str(export_bom)],
        capture_output=True,
        text=True,
        env={**os.environ, "STRATAMEM_EMBEDDING": "none"},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    with Memory(db, namespace="n", embedder=None) as mem:
        assert [t.text for t in mem.turns()] == [r["content"] for r in rows]


# --- a store written before the limit ---------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def old_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A store holding turns nested 300 deep (metadata and a tool input), as a version before the limit wrote them."""
    if request.param == "sqlite":
        target = str(tmp_path / "old.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        schema = fresh_schema(dsn, "deep")
        target = schema_url(dsn, schema)
    mem = Memory(open_store(target), namespace="default", embedder=None)
    mem.add({"role": "user", "content": "deep metadata", "metadata": {"a": 1}}, session="meta")
    mem.add(tool_call({"a": 1}), session="tool", format="anthropic")
    deep = nested(300)
    meta_id = mem.turns("meta")[0].id
    tool_turn = mem.turns("tool")[1]
    blocks = [b.to_dict() for b in tool_turn.turn.content]  # type: ignore[union-attr]
    blocks[0]["input"] = deep
    content = json.dumps(blocks, separators=(",", ":"))
    meta = json.dumps(deep, separators=(",", ":"))
    if request.param == "sqlite":
        with sqlite3.connect(target) as conn:
            conn.execute("UPDATE turns SET metadata = ? WHERE id = ?", (meta, meta_id))
            conn.execute("UPDATE turns SET content = ? WHERE id = ?", (content, tool_turn.id))
    else:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
            conn.execute("UPDATE turns SET metadata = %s WHERE id = %s", (meta, meta_id))
            conn.execute("UPDATE turns SET content = %s WHERE id = %s", (content, tool_turn.id))
    yield mem
    mem.close()


def test_every_read_answers_on_values_stored_before_the_limit(old_store: Memory) -> None:
    mem = old_store
    meta = mem.turns("meta")[0].turn.metadata
    tool_input = mem.turns("tool")[1].turn.content[0].input  # type: ignore[union-attr]
    for value in (meta, tool_input):
        assert depth_of(value) == LIMIT
        # The levels past the limit are kept as JSON text: nothing is lost.
        inner = value
        for _ in range(LIMIT - 1):
            inner = inner["a"]
        assert list(inner) == [CLIPPED]
        assert json.loads(inner[CLIPPED]) == nested(300 - LIMIT + 1)
    out = io.StringIO()
    assert mem.export(out) == (2, 5)
    for fmt in ("text", "openai", "anthropic", "responses"):
        ctx = mem.context("deep", session="tool", format=fmt, budget=4000)
        json.dumps(ctx.to_dict())
    assert mem.search("deep metadata", k=5)
    # The clipped export imports anywhere: it is within the limit now.
    with Memory(":memory:", namespace="default", embedder=None) as other:
        assert other.import_(io.StringIO(out.getvalue())) == (2, 5, 0)


# --- HTTP and MCP -----------------------------------------------------------------------------


def test_http_refuses_deep_writes_and_answers_every_read_of_an_old_store(tmp_path: Path) -> None:
    db = tmp_path / "web.db"
    with Memory(db, namespace="default", embedder=None) as mem:
        mem.add({"role": "user", "content": "first"}, session="ok")
    srv = Server(db)
    try:
        api = f"{srv.url}/api/v1/namespaces/default"
        deep = nested(LIMIT + 1)
        r = httpx.post(
            f"{api}/turns", json={"session": "meta", "messages": [{"role": "user", "content": "x", "metadata": deep}]}
        )
        assert (r.status_code, r.json()["error"]["type"]) == (400, "InvalidTurnError")
        assert f"nested more than {LIMIT} levels deep" in r.json()["error"]["message"]
        r = httpx.post(f"{api}/turns", json={"session": "tool", "format": "anthropic", "messages": tool_call(deep)})
        assert r.status_code == 400
        r = httpx.post(
            f"{srv.url}/api/v1/namespaces/imp/import",
            content=_export(deep).encode(),
            headers={"content-type": "application/x-ndjson"},
        )
        assert (r.status_code, r.json()["error"]["type"]) == (400, "DecodeError")
        assert [s["name"] for s in httpx.get(f"{api}/sessions").json()["sessions"]] == ["ok"]
        assert httpx.get(f"{srv.url}/api/v1/namespaces/imp/sessions").status_code == 404
    finally:
        srv.stop()


def test_http_reads_of_deep_rows_written_before_the_limit(old_store: Memory) -> None:
    srv = Server(old_store.store)  # type: ignore[arg-type]
    try:
        api = f"{srv.url}/api/v1/namespaces/default"
        reads = [f"/sessions/{s}/turns" for s in ("meta", "tool")] + ["/search?q=deep", "/export"]
        reads += [f"/context?session=tool&format={f}" for f in ("text", "openai", "anthropic", "responses")]
        codes = {path: httpx.get(api + path, timeout=60).status_code for path in reads}
        assert codes == dict.fromkeys(reads, 200)
    finally:
        srv.stop()


def test_mcp_refuses_a_deep_turn_with_one_line_and_stores_nothing(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    env = {
        "STRATAMEM_DB": str(db),
        "STRATAMEM_EMBEDDING": "none",
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "stratamem", "mcp"], env=env)
    msg = [{"role": "user", "content": "x", "metadata": nested(LIMIT + 1)}]

    async def main() -> Any:
        async with Client(params, read_timeout_seconds=60) as client:
            return await client.call_tool("add_turns", {"session": "mcp", "messages": msg})

    result = anyio.run(main)
    assert result.is_error
    assert f"InvalidTurnError: messages[0].metadata: nested more than {LIMIT} levels deep" in result.content[0].text
    with Memory(db, embedder=None) as mem:
        assert mem.namespaces() == []
