"""Ids that round-trip: every id search, a context or a manifest shows is taken back by forget and expand.

``turn:N``, ``node:N`` and ``system:<hash>`` (and a bare number: a turn for
forget, a node for expand, as before) are read by one parser
(:func:`stratamem.records.ids.parse_ref`) and accepted by ``Memory.forget`` and
``Memory.expand``, the CLI (``forget --turn``, ``expand``), the MCP tools
(``forget``, ``expand``, over stdio with the SDK's client) and the HTTP API
(``POST …/forget``, ``GET …/expand/{id}``, ``GET …/nodes/node:N``); other ids
(``item:3``, ``state``) and malformed ones are refused with a ValidationError,
never a bare ValueError. Also here: MCP ``get_context`` with ``explain`` really
explains within its budget, and HTTP search answers in the shape of MCP's and
the library's.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from hypothesis import assume, given
from hypothesis import strategies as st
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from webserver import Server, load_sample

from stratamem import Config, Memory, NotFoundError, ValidationError
from stratamem.cli import main
from stratamem.mcp_budget import hits_result
from stratamem.records.ids import Ref, parse_ref, parse_refs, system_id
from stratamem.tokens import get_tokenizer

STRATAMEM = str(Path(sys.executable).with_name("stratamem"))
CONFIG = Config().replace(pyramid={"micro_chunk_size": 6, "mini_chunk_size": 3}, embedding={"provider": "none"})
PROMPT = "You are the release planner of the Tern project. Dates are ISO 8601."
O200K = get_tokenizer("o200k_base")
SHOWN = re.compile(r"^(turn:[1-9][0-9]*|node:[1-9][0-9]*|system:[0-9a-f]{12})$")


# --- the parser ---------------------------------------------------------------------------


def test_the_parser_reads_the_shown_forms_and_bare_numbers() -> None:
    assert parse_ref("turn:805") == Ref("turn", 805)
    assert parse_ref("node:50") == Ref("node", 50)
    assert parse_ref("system:f5ac7b929a86") == Ref("system", "f5ac7b929a86")
    assert parse_ref(" Turn:7 ") == Ref("turn", 7)
    assert parse_ref(85) == Ref("turn", 85) and parse_ref("85") == Ref("turn", 85)
    assert parse_ref(50, bare="node") == Ref("node", 50)
    assert parse_refs(["turn:3", 3, "node:3"]) == [Ref("turn", 3), Ref("node", 3)]
    assert system_id(PROMPT) == "system:" + __import__("hashlib").sha256(PROMPT.encode()).hexdigest()[:12]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "item:3",
            "ids[0]: 'item:3' names a memory item (reject it, or forget the turns it came from), not stored turns",
        ),
        ("state", "ids[0]: 'state' names the working state (change it with the state commands), not stored turns"),
        (
            "turn:0",
            "ids[0]: 'turn:0' is not an id: expected turn:N, node:N, system:<12 hex digits> or a positive integer",
        ),
        ("system:abc", "ids[0]: 'system:abc' is not an id: expected turn:N, node:N, system:<12 hex digits>"),
        (0, "ids[0]: an id must be a positive 64-bit integer, got 0"),
        (2**63, "ids[0]: an id must be a positive 64-bit integer, got 9223372036854775808"),
        (10**40, "ids[0]: an id must be a positive 64-bit integer, got an integer of 133 bits"),
        ("turn:9223372036854775808", "ids[0]: 'turn:9223372036854775808' is not an id"),
        (True, "ids[0]: an id must be a string such as 'turn:12' or an integer, got bool"),
        (2.5, "ids[0]: an id must be a string such as 'turn:12' or an integer, got float"),
    ],
)
def test_other_ids_are_refused_with_a_validation_error(value: Any, message: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_refs([value])
    assert type(err.value) is ValidationError
    assert str(err.value).startswith(message)


@given(
    kind=st.sampled_from(["turn", "node"]),
    n=st.integers(1, 2**63 - 1),
    digest=st.text("0123456789abcdef", min_size=12, max_size=12),
)
def test_every_shown_id_reads_back_as_itself(kind: str, n: int, digest: str) -> None:
    for ref in (parse_ref(f"{kind}:{n}"), parse_ref(f"system:{digest}")):
        assert parse_ref(str(ref)) == ref and SHOWN.match(str(ref))


@given(st.text(max_size=40))
def test_any_other_text_is_a_validation_error(text: str) -> None:
    assume(not SHOWN.match(text.strip().lower()) and not re.fullmatch(r"[1-9][0-9]{0,18}", text.strip()))
    with pytest.raises(ValidationError):
        parse_ref(text)


# --- one stored conversation, copied per test that changes it --------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample conversation (6 sessions, 276 turns) with a pyramid, and one system prompt in two sessions."""
    db = tmp_path_factory.mktemp("ids") / "m.db"
    with Memory(db, config=CONFIG, embedder=None) as mem:
        load_sample(mem)
        sessions = [s.name for s in mem.store.sessions(mem.namespace)]
        for s in (sessions[0], sessions[-1]):
            mem.add({"role": "system", "content": PROMPT}, session=s)
    return db


@pytest.fixture
def db(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "m.db"
    shutil.copy(built, copy)
    if Path(f"{built}.archive").exists():
        shutil.copytree(f"{built}.archive", f"{copy}.archive")
    return copy


@pytest.fixture
def mem(db: Path) -> Iterator[Memory]:
    with Memory(db, config=CONFIG, embedder=None) as m:
        yield m


def _shown(mem: Memory) -> tuple[list[Any], list[Any]]:
    """Search hits and context manifest items as the shells show them."""
    hits = mem.search("what did we decide about the budget", k=20)
    ctx = mem.context("budget", budget=2000, format="text")
    return hits, list(ctx.manifest.items)


def test_every_id_search_and_a_context_show_expands_to_its_turns(mem: Memory) -> None:
    hits, items = _shown(mem)
    kinds = {h.kind for h in hits} | {i.id.split(":")[0] for i in items}
    assert {"turn", "segment", "system"} <= kinds
    for h in hits:
        assert sorted(t.id for t in mem.expand(h.id)) == sorted(h.turn_ids), h.id
    for item in items:
        if item.id.startswith("system:"):
            got = mem.expand(item.id)
            assert got and all(t.role == "system" and system_id(t.text) == item.id for t in got)
        elif item.id.startswith(("turn:", "node:")):
            assert sorted(t.id for t in mem.expand(item.id)) == sorted(item.turn_ids), item.id
    assert system_id(PROMPT) in {i.id for i in items}
    assert [(t.role, t.text) for t in mem.expand(system_id(PROMPT))] == [("system", PROMPT)] * 2  # both copies
    node = next(h for h in hits if h.kind != "turn")
    number = int(node.id.split(":")[1])
    assert mem.expand(number) == mem.expand(node.id) == mem.pyramid.expand(node.id) == mem.pyramid.expand(number)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda m: m.pyramid.expand("node:abc"), ValidationError, "node_id: 'node:abc' is not an id"),
        (
            lambda m: m.pyramid.expand("turn:5"),
            ValidationError,
            "node_id: 'turn:5' names turn turns, not a pyramid node",
        ),
        (lambda m: m.pyramid.node("node:999999"), NotFoundError, "no node 999999"),
        (lambda m: m.expand("item:1"), ValidationError, "id: 'item:1' names a memory item"),
        (lambda m: m.expand("turn:999999"), NotFoundError, "no turn 999999 in namespace 'default'"),
        (lambda m: m.expand("system:000000000000"), NotFoundError, "no system prompt system:000000000000"),
        (lambda m: m.forget(turns=["node:999999"]), NotFoundError, "no node 999999"),
        (lambda m: m.forget(turns=["turn:5", "item:2"]), ValidationError, "turns[1]: 'item:2' names a memory item"),
        (lambda m: m.forget(turns=[]), ValidationError, "turns: the list is empty"),
    ],
)
def test_bad_ids_get_errors_from_the_tree_and_nothing_is_forgotten(
    mem: Memory, call: Any, error: type[Exception], message: str
) -> None:
    before = mem.status().turns
    with pytest.raises(error) as err:
        call(mem)
    assert type(err.value) is error and str(err.value).startswith(message), str(err.value)
    assert mem.status().turns == before


def test_forget_takes_turn_node_and_system_ids(mem: Memory) -> None:
    hits, _ = _shown(mem)
    turn = next(h for h in hits if h.kind == "turn")
    node = next(h for h in hits if h.kind == "segment" and not set(h.turn_ids) & set(turn.turn_ids))
    before = mem.status().turns
    assert mem.forget(turns=[turn.id, turn.turn_ids[0]]).turns == 1  # the shown id and the bare number: one turn
    report = mem.forget(turns=[node.id])
    assert report.turns == len(node.turn_ids) and report.nodes_removed >= 1
    assert mem.forget(turns=[system_id(PROMPT)]).turns == 2  # every copy of the prompt
    assert mem.status().turns == before - 1 - len(node.turn_ids) - 2
    left = {t.id for t in mem.turns()}
    assert not left & {*turn.turn_ids, *node.turn_ids}
    assert all(t.text != PROMPT for t in mem.turns())
    with pytest.raises(NotFoundError):
        mem.expand(turn.id)


# --- CLI ------------------------------------------------------------------------------------


def test_the_cli_forgets_and_expands_shown_ids(db: Path) -> None:
    with Memory(db, config=CONFIG, embedder=None) as mem:
        hits, _ = _shown(mem)
    turn = next(h for h in hits if h.kind == "turn")
    node = next(h for h in hits if h.kind == "segment" and not set(h.turn_ids) & set(turn.turn_ids))
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str]:
        result = runner.invoke(main, ["--db", str(db), "--embedding", "none", *args])
        return result.exit_code, result.output

    code, out = run("expand", node.id)
    assert code == 0 and [json.loads(line)["id"] for line in out.splitlines()] == sorted(node.turn_ids)
    assert run("expand", node.id.split(":")[1]) == (0, out)  # a bare number is a node, as before
    code, out = run("expand", turn.id)
    assert code == 0 and [json.loads(line)["id"] for line in out.splitlines()] == list(turn.turn_ids)
    code, out = run("expand", system_id(PROMPT))
    assert code == 0 and [json.loads(line)["content"] for line in out.splitlines()] == [PROMPT, PROMPT]
    code, out = run("expand", "item:4")
    assert code == 2 and "Invalid value for 'ID': 'item:4' names a memory item" in out
    code, out = run("forget", "--turn", "bogus", "--yes")
    assert code == 2 and "Invalid value for '--turn': 'bogus' is not an id" in out
    code, out = run("forget", "--turn", turn.id, "--turn", node.id, "--yes", "--json")
    assert code == 0, out
    assert json.loads(out)["turns"] == 1 + len(node.turn_ids)
    code, out = run("expand", turn.id)
    assert code == 1 and out.strip() == f"Error: NotFoundError: no turn {turn.turn_ids[0]} in namespace 'default'"


# --- MCP over stdio -------------------------------------------------------------------------


def _params(db: Path) -> StdioServerParameters:
    env = {
        "STRATAMEM_DB": str(db),
        "STRATAMEM_EMBEDDING": "none",
        "PATH": os.environ.get("PATH", ""),
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    return StdioServerParameters(command=STRATAMEM, args=["mcp"], env=env)


def _mcp(db: Path, calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[bool, str]]:
    async def body() -> list[tuple[bool, str]]:
        async with Client(_params(db), read_timeout_seconds=120) as client:
            out = []
            for name, args in calls:
                result = await client.call_tool(name, args)
                out.append((bool(result.is_error), result.content[0].text))
            return out

    return anyio.run(body)


def test_mcp_forget_and_expand_take_shown_ids(db: Path) -> None:
    with Memory(db, config=CONFIG, embedder=None) as mem:
        hits, _ = _shown(mem)
    turn = next(h for h in hits if h.kind == "turn")
    node = next(h for h in hits if h.kind == "segment" and not set(h.turn_ids) & set(turn.turn_ids))
    out = _mcp(
        db,
        [
            ("expand", {"id": node.id}),
            ("expand", {"id": node.id, "budget": 100}),
            ("expand", {"id": system_id(PROMPT)}),
            ("expand", {"id": "item:3"}),
            ("forget", {"turns": [turn.id, node.id]}),
            ("forget", {"turns": [system_id(PROMPT)]}),
            ("expand", {"id": turn.id}),
        ],
    )
    assert [error for error, _ in out] == [False, False, False, True, False, False, True]
    whole = json.loads(out[0][1])
    assert (whole["id"], [t["id"] for t in whole["turns"]], whole["total"]) == (
        node.id,
        sorted(node.turn_ids),
        len(node.turn_ids),
    )
    cut = json.loads(out[1][1])
    assert O200K.count(out[1][1]) <= 100 and cut["total"] == len(node.turn_ids)
    assert [t["id"] for t in cut["turns"]] == sorted(node.turn_ids)[: len(cut["turns"])] and len(cut["turns"]) < cut[
        "total"
    ]
    assert [t["content"] for t in json.loads(out[2][1])["turns"]] == [PROMPT, PROMPT]
    assert out[3][1] == (
        "ValidationError: id: 'item:3' names a memory item (reject it, or forget the turns it came from), "
        "not stored turns"
    )
    assert json.loads(out[4][1])["turns"] == 1 + len(node.turn_ids)
    assert json.loads(out[5][1])["turns"] == 2
    assert out[6][1] == f"NotFoundError: no turn {turn.turn_ids[0]} in namespace 'default'"


@pytest.mark.parametrize("fmt", ["text", "openai"])
def test_mcp_explain_adds_the_explanation_within_the_budget(db: Path, fmt: str) -> None:
    budgets = (300, 800, 2000, 8000)
    calls = [
        ("get_context", {"query": "budget", "budget": b, "format": fmt, "explain": explain})
        for b in budgets
        for explain in (False, True)
    ]
    out = _mcp(db, calls)
    assert not any(error for error, _ in out), out
    ids: set[str] = set()
    for i, b in enumerate(budgets):
        plain, explained = out[2 * i][1], out[2 * i + 1][1]
        assert explained != plain
        assert O200K.count(plain) <= b and O200K.count(explained) <= b
        body = json.loads(explained) if fmt != "text" else {}
        if "manifest_full" in body:  # the full manifest fitted
            ids |= {it["id"] for it in body["manifest_full"]["items"]}
            continue
        text = body.get("manifest", "") if body else explained
        if "\n\n[manifest json] {" in text:  # the full manifest fitted
            ids |= {it["id"] for it in json.loads(text.split("\n\n[manifest json] ", 1)[1])["items"]}
            continue
        # Otherwise one line per item of the manifest, with the ids forget and expand take.
        lines = [line for line in text.splitlines() if line.startswith("[item] ")]
        announced = re.search(r"^\[manifest\] (\d+) items", text, re.M)
        assert announced and len(lines) == int(announced.group(1)) > 0, text[-400:]
        ids |= {line.split()[1] for line in lines}
    if fmt == "text":
        # Every id the explanation shows is one the expand tool takes back.
        shown = sorted(i for i in ids if SHOWN.match(i))
        assert shown and any(i.startswith("turn:") for i in shown)
        answers = _mcp(db, [("expand", {"id": i, "budget": 64}) for i in shown])
        assert [error for error, _ in answers] == [False] * len(shown)


# --- HTTP -----------------------------------------------------------------------------------


def test_http_forget_expand_and_search_take_and_give_the_same_ids(db: Path) -> None:
    with Memory(db, config=CONFIG, embedder=None) as mem:
        hits, _ = _shown(mem)
        want = json.loads(hits_result(mem.search("budget", k=10), budget=None, count=O200K.count))
        session_hits = json.loads(
            hits_result(mem.search("budget", k=5, session="kickoff"), budget=None, count=O200K.count)
        )
    turn = next(h for h in hits if h.kind == "turn")
    node = next(h for h in hits if h.kind == "segment" and not set(h.turn_ids) & set(turn.turn_ids))
    server = Server(db, config=CONFIG)
    try:
        with server.client() as http:
            ns = "/api/v1/namespaces/default"
            got = http.get(f"{ns}/search", params={"q": "budget", "k": 10})
            assert got.status_code == 200 and got.json() == want
            assert {"turn", "segment"} <= {h["kind"] for h in want["hits"]}
            assert http.get(f"{ns}/search", params={"q": "budget", "k": 5, "session": "kickoff"}).json() == session_hits
            small = http.get(f"{ns}/search", params={"q": "budget", "k": 10, "budget": 200})
            assert O200K.count(small.text) <= 200 and len(small.json()["hits"]) < len(want["hits"])
            r = http.get(f"{ns}/expand/{node.id}")
            assert r.status_code == 200 and [t["id"] for t in r.json()["turns"]] == sorted(node.turn_ids)
            assert http.get(f"{ns}/nodes/{node.id}/expand").json()["turns"] == r.json()["turns"]
            assert http.get(f"{ns}/nodes/{node.id}").json()["turn_ids"] == sorted(node.turn_ids)
            assert http.get(f"{ns}/expand/{system_id(PROMPT)}").json()["total"] == 2
            bad = http.get(f"{ns}/expand/item:3")
            assert bad.status_code == 400 and bad.json()["error"]["type"] == "ValidationError"
            assert http.get(f"{ns}/nodes/turn:5").status_code == 400
            refused = http.post(f"{ns}/forget", json={"turns": [turn.id, "state"]})
            assert refused.status_code == 400 and refused.json()["error"]["path"] == "turns[1]"
            assert http.post(f"{ns}/forget", json={"all_namespace": True}).json()["error"]["path"] == "confirm"
            done = http.post(f"{ns}/forget", json={"turns": [turn.id, node.id]})
            assert done.status_code == 200, done.text
            assert done.json()["turns"] == 1 + len(node.turn_ids)
            gone = http.get(f"{ns}/expand/{turn.id}")
            assert gone.status_code == 404 and gone.json()["error"]["type"] == "NotFoundError"
    finally:
        server.stop()
