"""The JSON API over real HTTP: every route, every error mapping, and the security rules.

A real uvicorn server on 127.0.0.1 (tests/webserver.py) over a real SQLite file;
httpx as the client. Row counts are read with a separate ``Memory`` on the same file.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from webserver import Server, free_port, load_sample

from stratamem import ConfigError, Memory
from stratamem.store.manifest_rows import SCORE_DECIMALS
from stratamem.web import Security, create_app

NS = "/api/v1/namespaces/default"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("web_api")
    srv = Server(tmp / "memory.db", project_dir=tmp / "project")
    load_sample(srv.memory)
    yield srv
    srv.stop()


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def counts(db: Path, namespace: str) -> tuple[int, int]:
    """(turns, items) of a namespace, read through a separate Memory on the same file."""
    with Memory(db, namespace=namespace) as m:
        return m.status().turns, len(m.items.list())


def test_openapi_schema_covers_every_api_route(client: httpx.Client) -> None:
    schema = client.get("/api/openapi.json").json()
    paths = set(schema["paths"])
    for p in (
        "/api/v1/namespaces",
        "/api/v1/metrics",
        "/api/v1/namespaces/{namespace}/turns",
        "/api/v1/namespaces/{namespace}/sessions/{session}/turns",
        "/api/v1/namespaces/{namespace}/context",
        "/api/v1/namespaces/{namespace}/manifests",
        "/api/v1/namespaces/{namespace}/search",
        "/api/v1/namespaces/{namespace}/forget",
        "/api/v1/namespaces/{namespace}/expand/{id}",
        "/api/v1/namespaces/{namespace}/nodes/{node_id}/expand",
        "/api/v1/namespaces/{namespace}/tiers",
        "/api/v1/namespaces/{namespace}/sessions/{session}/seal",
        "/api/v1/namespaces/{namespace}/items/{item_id}/supersede",
        "/api/v1/namespaces/{namespace}/state",
        "/api/v1/namespaces/{namespace}/import",
    ):
        assert p in paths, p
    assert not any(p.startswith("/ns/") or p == "/" for p in paths)  # pages stay out of the API schema
    assert schema["components"]["schemas"]["ErrorBody"]["required"] == ["error"]


def test_namespaces_status_and_metrics(client: httpx.Client) -> None:
    spaces = client.get("/api/v1/namespaces").json()["namespaces"]
    assert [(s["namespace"], s["sessions"], s["turns"]) for s in spaces] == [("default", 6, 276)]
    st = client.get(f"{NS}/status").json()
    assert st["turns"] == 276 and {t["tier"] for t in st["tiers"]} == {"hot", "warm", "cold", "open"}
    assert sum(t["turns"] for t in st["tiers"]) == 276
    assert st["items_review_cap"] == 500 and st["items_pending_review"] == st["items"]["review"]["pending"]
    text = client.get("/api/v1/metrics")
    assert text.headers["content-type"].startswith("text/plain; version=0.0.4")
    assert 'stratamem_turns{namespace="default"} 276' in text.text
    assert 'stratamem_memory_recalls_total{namespace="default"}' in text.text


def test_add_turns_then_page_through_the_session(client: httpx.Client, server: Server) -> None:
    msgs = [{"role": "user", "content": f"paging message {i}"} for i in range(5)]
    r = client.post("/api/v1/namespaces/pages/turns", json={"session": "s1", "messages": msgs})
    assert r.status_code == 201
    assert [t["seq"] for t in r.json()["turns"]] == [1, 2, 3, 4, 5]
    first = client.get("/api/v1/namespaces/pages/sessions/s1/turns", params={"limit": 2}).json()
    assert [t["content"] for t in first["turns"]] == ["paging message 0", "paging message 1"]
    assert first["next_after_seq"] == 2
    rest = client.get("/api/v1/namespaces/pages/sessions/s1/turns", params={"after_seq": 4, "limit": 2}).json()
    assert [t["seq"] for t in rest["turns"]] == [5] and rest["next_after_seq"] is None
    assert [s["name"] for s in client.get("/api/v1/namespaces/pages/sessions").json()["sessions"]] == ["s1"]


def test_context_returns_messages_within_budget_and_is_recorded(client: httpx.Client) -> None:
    r = client.post(f"{NS}/context", json={"query": "retry policy for the database", "budget": 900})
    assert r.status_code == 200
    body = r.json()
    assert body["tokens"] <= 900 and body["manifest"]["budget_tokens"] == 900
    assert body["manifest"]["items"] and all("reason" in i for i in body["manifest"]["items"])
    latest = client.get(f"{NS}/manifests", params={"limit": 1}).json()["manifests"][0]
    assert latest["query"] == "retry policy for the database" and latest["total_tokens"] == body["tokens"]
    one = client.get(f"{NS}/manifests/{latest['id']}").json()
    # Stored manifests keep each score to SCORE_DECIMALS decimals (store/manifest_rows.py); everything else is equal.
    assert one["items"] == [
        {**i, "score": {k: round(v, SCORE_DECIMALS) for k, v in (i.get("score") or {}).items()}} if "score" in i else i
        for i in body["manifest"]["items"]
    ]


def test_search_ranks_matching_turns_and_summaries(client: httpx.Client) -> None:
    body = client.get(f"{NS}/search", params={"q": "retry"}).json()
    hits = body["hits"]
    assert hits and body["total"] == len(hits) <= 10
    keys = ["id", "kind", "score", "text", "turn_ids", "session", "timestamp", "tier", "scores"]
    assert all(list(h) == keys for h in hits)  # SearchHit.to_dict(), as MCP's search_memory returns it
    assert all("retry" in h["text"].lower() for h in hits[:3])
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_pyramid_nodes_node_expand_and_tiers(client: httpx.Client) -> None:
    segs = client.get(f"{NS}/nodes", params={"level": 1, "session": "kickoff"}).json()["nodes"]
    assert segs and all(n["level"] == 1 and n["session"] == "kickoff" for n in segs)
    node = client.get(f"{NS}/nodes/{segs[0]['id']}").json()
    exp = client.get(f"{NS}/nodes/{segs[0]['id']}/expand").json()
    assert [t["id"] for t in exp["turns"]] == node["turn_ids"]
    assert len(node["turn_ids"]) == segs[0]["turn_count"]
    tiers = client.get(f"{NS}/tiers").json()
    assert [t["tier"] for t in tiers["tiers"]] == ["hot", "warm", "cold", "open"]
    assert tiers["levels"][0]["level"] == 1


def test_seal_makes_a_segment_of_the_open_turns(client: httpx.Client) -> None:
    client.post(
        "/api/v1/namespaces/sealing/turns",
        json={
            "session": "t",
            "messages": [
                {"role": "user", "content": "first open turn"},
                {"role": "assistant", "content": "second open turn"},
            ],
        },
    )
    r = client.post("/api/v1/namespaces/sealing/sessions/t/seal").json()
    assert r["sealed"] is True and r["segment"]["turn_count"] == 2 and r["segment"]["reason"] == "manual"
    assert client.post("/api/v1/namespaces/sealing/sessions/t/seal").json() == {"sealed": False, "segment": None}


def test_items_add_list_recall_confirm_reject_supersede(client: httpx.Client) -> None:
    base = "/api/v1/namespaces/items-ns/items"
    old = client.post(base, json={"content": "The budget is 50K", "type": "fact", "tier": "cold"})
    assert old.status_code == 201
    new = client.post(base, json={"content": "The budget is 80K", "type": "fact", "tier": "cold"}).json()
    sup = client.post(f"{base}/{old.json()['id']}/supersede", json={"by": new["id"]}).json()
    assert sup["superseded_by"] == new["id"]
    again = client.post(f"{base}/{old.json()['id']}/supersede", json={"by": new["id"]})
    assert again.status_code == 409 and again.json()["error"]["type"] == "Conflict"
    recalled = client.post(f"{base}/recall", json={"query": "budget", "auto_promote": False}).json()
    assert [i["id"] for i in recalled["items"]] == [new["id"]]
    assert client.get(f"{base}/{new['id']}").json()["access_count"] == 1
    pending = client.get(f"{NS}/items", params={"review": "pending"}).json()["items"]
    assert len(pending) >= 2 and all(i["source"] == "extracted" for i in pending)
    ok = client.post(f"{NS}/items/{pending[0]['id']}/confirm").json()
    no = client.post(f"{NS}/items/{pending[1]['id']}/reject").json()
    assert (ok["review"], no["review"]) == ("confirmed", "rejected")
    live = client.get(f"{NS}/items", params={"live": True}).json()["items"]
    assert pending[1]["id"] not in {i["id"] for i in live}
    refused = client.post(f"{base}/{new['id']}/confirm")  # added through the API: not reviewable
    assert refused.status_code == 400 and refused.json()["error"]["type"] == "ValidationError"


def test_working_state_read_and_change(client: httpx.Client) -> None:
    r = client.post(f"{NS}/state", json={"op": "set_goal", "text": "Ship the web dashboard"})
    assert r.status_code == 200
    state = client.get(f"{NS}/state").json()
    assert (
        state["state"]["goal"] == "Ship the web dashboard" and "Ship the web dashboard" in state["projection"]["text"]
    )
    bad = client.post(f"{NS}/state", json={"op": "add_task"})
    assert bad.status_code == 400 and bad.json()["error"]["path"] == "text"


def test_export_then_import_round_trips_reimport_skips_and_a_differing_session_conflicts(
    client: httpx.Client, server: Server
) -> None:
    exported = client.get("/api/v1/namespaces/pages/export")
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    r = client.post(
        "/api/v1/namespaces/pages-copy/import",
        content=exported.content,
        headers={"content-type": "application/x-ndjson"},
    )
    assert r.status_code == 201 and r.json() == {"sessions": 1, "turns": 5, "skipped": 0}
    before = counts(server.db, "pages-copy")
    again = client.post("/api/v1/namespaces/pages-copy/import", content=exported.content)
    assert again.status_code == 201 and again.json() == {"sessions": 1, "turns": 0, "skipped": 5}
    assert counts(server.db, "pages-copy") == before
    # Two namespaces whose session "s" starts differently: importing one into the other is a conflict.
    for ns, text in (("clash-a", "alpha"), ("clash-b", "beta")):
        assert (
            client.post(
                f"/api/v1/namespaces/{ns}/turns", json={"messages": [{"role": "user", "content": text}], "session": "s"}
            ).status_code
            == 201
        )
    before = counts(server.db, "clash-b")
    clash = client.post(
        "/api/v1/namespaces/clash-b/import", content=client.get("/api/v1/namespaces/clash-a/export").content
    )
    assert clash.status_code == 409 and clash.json()["error"]["type"] == "ConflictError"
    assert "differs from the export at seq 1" in clash.json()["error"]["message"]
    assert counts(server.db, "clash-b") == before
    garbage = client.post("/api/v1/namespaces/pages-copy2/import", content=b'{"not": "an export"}\n')
    assert garbage.status_code == 400 and garbage.json()["error"]["type"] == "DecodeError"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "kind"),
    [
        ("post", f"{NS}/context", {"budget": 0}, 400, "BudgetError"),
        ("post", f"{NS}/context", {"budget": "lots"}, 400, "ValidationError"),
        ("post", f"{NS}/context", {"nonsense": 1}, 400, "ValidationError"),
        ("post", f"{NS}/turns", {"messages": [{"role": "wizard", "content": "x"}]}, 400, "InvalidTurnError"),
        (
            "post",
            f"{NS}/turns",
            {"messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]},
            400,
            "InvalidTurnError",
        ),
        (
            "post",
            "/api/v1/namespaces/bad name!/turns",
            {"messages": [{"role": "user", "content": "x"}]},
            400,
            "ValidationError",
        ),
        ("get", "/api/v1/namespaces/unknown/status", None, 404, "NotFoundError"),
        ("post", "/api/v1/namespaces/unknown/context", {}, 404, "NotFoundError"),
        ("get", f"{NS}/sessions/unknown/turns", None, 404, "NotFoundError"),
        ("get", f"{NS}/nodes/999999", None, 404, "NotFoundError"),
        ("get", f"{NS}/items/999999", None, 404, "NotFoundError"),
        ("get", f"{NS}/manifests/999999", None, 404, "NotFoundError"),
        ("get", "/api/v1/no/such/route", None, 404, "NotFoundError"),
        ("get", f"{NS}/nodes", {"tier": "lukewarm"}, 400, "ValidationError"),
    ],
)
def test_errors_map_to_statuses_with_one_body(
    client: httpx.Client, method: str, path: str, body: object, status: int, kind: str
) -> None:
    if method == "post":
        r = client.post(path, json=body)
    else:
        r = client.get(path, params=body)  # type: ignore[arg-type]
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["type"] == kind and err["message"]


def test_oversized_body_is_refused_with_413_and_nothing_stored(client: httpx.Client, server: Server) -> None:
    before = counts(server.db, "default")
    huge = {"messages": [{"role": "user", "content": "x" * (1 << 20)}]}
    r = client.post(f"{NS}/turns", json=huge)
    assert r.status_code == 413 and r.json()["error"]["type"] == "PayloadTooLarge"
    assert counts(server.db, "default") == before


def test_a_locked_store_maps_to_503_and_stores_nothing(client: httpx.Client, server: Server) -> None:
    before = counts(server.db, "default")
    lock = sqlite3.connect(server.db, isolation_level=None)
    try:
        lock.execute("BEGIN EXCLUSIVE")
        r = client.post(f"{NS}/turns", json={"messages": [{"role": "user", "content": "blocked"}]})
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    assert r.status_code == 503 and r.json()["error"]["type"] == "BackendError"
    assert counts(server.db, "default") == before


# --- security -------------------------------------------------------------------------------------

TOKEN = "s3cret-token-for-tests-0123456789"
OTHER = "another-token-limited-to-team-b"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("web_sec")
    sec = Security(tokens={TOKEN: None, OTHER: frozenset({"team-b"})})
    srv = Server(tmp / "memory.db", namespace="team-a", security=sec)
    srv.memory.add([{"role": "user", "content": "team a secret plan"}], session="s")
    srv.memory.for_namespace("team-b").add([{"role": "user", "content": "team b notes"}], session="s")
    yield srv
    srv.stop()


WRITES = [
    ("post", "/api/v1/namespaces/team-a/turns", {"messages": [{"role": "user", "content": "intruder"}]}),
    ("post", "/api/v1/namespaces/team-a/items", {"content": "intruder item"}),
    ("post", "/api/v1/namespaces/team-a/sessions/s/seal", None),
    ("post", "/api/v1/namespaces/team-a/forget", {"all_namespace": True, "confirm": "team-a"}),
]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": "Bearer wrong-token-of-same-length-000"},
        {"authorization": f"Basic {TOKEN}"},
        {"cookie": "stratamem_token=nope"},
    ],
    ids=["no-token", "wrong-token", "wrong-scheme", "wrong-cookie"],
)
def test_requests_without_a_valid_token_are_refused_and_change_nothing(
    guarded: Server, headers: dict[str, str]
) -> None:
    before = counts(guarded.db, "team-a")
    with guarded.client(headers=headers) as c:
        for method, path, body in WRITES:
            r = c.request(method.upper(), path, json=body)
            assert r.status_code == 401 and r.json()["error"]["type"] == "Unauthorized"
            assert r.headers["www-authenticate"].startswith("Bearer")
        assert c.get("/api/v1/namespaces/team-a/status").status_code == 401
        page = c.get("/ns/team-a/items", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"] == "/login"
    assert counts(guarded.db, "team-a") == before


def test_a_token_cannot_use_a_namespace_outside_its_list(guarded: Server) -> None:
    before = counts(guarded.db, "team-a")
    with guarded.client(headers={"authorization": f"Bearer {OTHER}"}) as c:
        for method, path, body in WRITES:
            r = c.request(method.upper(), path, json=body)
            assert r.status_code == 403 and r.json()["error"]["type"] == "Forbidden"
        assert c.get("/api/v1/namespaces/team-a/status").status_code == 403
        assert c.get("/ns/team-a/items").status_code == 403
        assert [s["namespace"] for s in c.get("/api/v1/namespaces").json()["namespaces"]] == ["team-b"]
        assert 'namespace="team-a"' not in c.get("/api/v1/metrics").text
        ok = c.post("/api/v1/namespaces/team-b/turns", json={"messages": [{"role": "user", "content": "fine"}]})
        assert ok.status_code == 201
    assert counts(guarded.db, "team-a") == before


def test_the_right_token_works_by_header_and_by_login_cookie(guarded: Server) -> None:
    with guarded.client(headers={"authorization": f"Bearer {TOKEN}"}) as c:
        names = [s["namespace"] for s in c.get("/api/v1/namespaces").json()["namespaces"]]
        assert names == ["team-a", "team-b"]
        no_state = c.get("/api/v1/namespaces/team-a/state")  # this server has no --project-dir
        assert no_state.status_code == 404 and "--project-dir" in no_state.json()["error"]["message"]
    with guarded.client() as c:
        bad = c.post("/login", data={"token": "not it"}, follow_redirects=False)
        assert bad.status_code == 401 and "stratamem_token" not in bad.headers.get("set-cookie", "")
        r = c.post("/login", data={"token": TOKEN}, follow_redirects=False)
        assert r.status_code == 303 and "httponly" in r.headers["set-cookie"].lower()
        assert "samesite=strict" in r.headers["set-cookie"].lower()
        assert c.get("/ns/team-a/items").status_code == 200


def test_dns_rebinding_and_foreign_origins_are_refused(server: Server) -> None:
    before = counts(server.db, "default")
    with server.client() as c:
        r = c.get(f"{NS}/status", headers={"host": f"attacker.example:{server.port}"})
        assert r.status_code == 403 and "DNS rebinding" in r.json()["error"]["message"]
        r = c.post(
            f"{NS}/turns",
            json={"messages": [{"role": "user", "content": "csrf"}]},
            headers={"origin": "http://attacker.example"},
        )
        assert r.status_code == 403
        r = c.post(f"{NS}/turns", json={"messages": [{"role": "user", "content": "csrf"}]}, headers={"origin": "null"})
        assert r.status_code == 403
        same = c.get(f"{NS}/status", headers={"origin": server.url})
        assert same.status_code == 200 and "access-control-allow-origin" not in same.headers
        assert c.get(f"{NS}/status", headers={"host": f"localhost:{server.port}"}).status_code == 200
    assert counts(server.db, "default") == before


def test_cors_is_sent_only_for_configured_origins(tmp_path: Path) -> None:
    srv = Server(tmp_path / "m.db", security=Security(cors_origins=("http://app.example",)))
    try:
        with srv.client() as c:
            ok = c.get("/api/v1/namespaces", headers={"origin": "http://app.example"})
            assert ok.headers["access-control-allow-origin"] == "http://app.example"
            assert c.get("/api/v1/namespaces", headers={"origin": "http://other.example"}).status_code == 403
            pre = c.options(
                "/api/v1/namespaces", headers={"origin": "http://app.example", "access-control-request-method": "POST"}
            )
            assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "http://app.example"
    finally:
        srv.stop()


def test_a_non_loopback_bind_needs_a_token(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db") as mem:
        with pytest.raises(ConfigError, match="needs a token"):
            create_app(mem, bind_host="0.0.0.0")
        with pytest.raises(ConfigError, match="at least 16"):
            create_app(mem, bind_host="0.0.0.0", security=Security(tokens={"short": None}))
        create_app(mem, bind_host="0.0.0.0", security=Security(tokens={TOKEN: None}))


def test_stratamem_serve_runs_as_a_real_process(tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "stratamem", "--db", str(tmp_path / "m.db"), "--embedding", "none"]
    refused = subprocess.run([*cli, "serve", "--host", "0.0.0.0"], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and "needs a token" in refused.stderr
    port = free_port()
    proc = subprocess.Popen([*cli, "serve", "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/api/v1/health").json() == {"ok": True}:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.1)
        r = httpx.post(
            f"{url}/api/v1/namespaces/default/turns",
            json={"messages": [{"role": "user", "content": "over a real process"}]},
        )
        assert r.status_code == 201
    finally:
        proc.terminate()
        proc.wait(10)
    with Memory(tmp_path / "m.db") as m:
        assert [t.text for t in m.turns()] == ["over a real process"]


# --- invariants and docs ---------------------------------------------------------------------------


def test_every_library_error_class_has_a_status() -> None:
    import stratamem.errors as errors
    from stratamem.web.errors import status_for

    expected = {
        "ValidationError": 400,
        "InvalidTurnError": 400,
        "BudgetError": 400,
        "ConfigError": 400,
        "DecodeError": 400,
        "NotFoundError": 404,
        "BackendError": 503,
        "MigrationError": 503,
        "ArchiveError": 503,
        "ModelError": 503,
        "CompactionCancelled": 409,
        "ConflictError": 409,
        "StratamemError": 500,
    }
    assert {name: status_for(getattr(errors, name)("x")) for name in errors.__all__} == expected


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
_turn_like = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "wizard", ""]), "content": _json}
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.one_of(
        _json,
        st.fixed_dictionaries({"messages": st.lists(_turn_like, max_size=3)}),
        st.fixed_dictionaries({"messages": _json}),
    )
)
def test_any_body_gets_a_stored_answer_or_a_400_that_stores_nothing(
    client: httpx.Client, server: Server, body: object
) -> None:
    before = counts(server.db, "fuzz")
    r = client.post("/api/v1/namespaces/fuzz/turns", json=body)
    if r.status_code == 201:
        assert counts(server.db, "fuzz")[0] == before[0] + len(r.json()["turns"])
        return
    assert r.status_code == 400, r.text
    assert set(r.json()) == {"error"} and r.json()["error"]["type"].endswith("Error")
    assert counts(server.db, "fuzz") == before


def test_the_api_reference_matches_the_schema() -> None:
    import importlib.util

    script = Path(__file__).resolve().parents[1] / "scripts" / "api_docs.py"
    spec = importlib.util.spec_from_file_location("api_docs", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.render(mod.schema()) == mod.OUT.read_text(encoding="utf-8"), "run scripts/api_docs.py"


def test_the_timeline_shows_the_newest_segments_of_a_long_session(tmp_path: Path) -> None:
    from webserver import web_config

    from stratamem.web.views import timeline

    with Memory(tmp_path / "m.db", config=web_config()) as mem:
        mem.add(
            [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message number {i}"} for i in range(63)],
            session="long",
        )
        tl = timeline(mem, "long", segments=4, open_limit=2)
        shown = [g["segment"].seq_range for g in tl["groups"]]
        assert shown == [(37, 42), (43, 48), (49, 54), (55, 60)]
        assert tl["hidden_segments"] == 6
        assert [[t.seq for t in g["turns"]] for g in tl["groups"]][0] == [37, 38, 39, 40, 41, 42]
        assert tl["open_count"] == 3 and [t.seq for t in tl["open_turns"]] == [62, 63]
