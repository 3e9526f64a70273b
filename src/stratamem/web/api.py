"""The JSON API under ``/api/v1``: one route per library operation, documented by the OpenAPI schema.

Every route resolves its namespace through :class:`~stratamem.web.spaces.Spaces`
(allow-list check, 404 for a namespace that holds nothing) and makes its
library calls under the spaces lock. Errors become the one JSON error body
(:mod:`stratamem.web.errors`).
"""

from __future__ import annotations

import hashlib
import io
import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import PlainTextResponse, Response

from ..errors import NotFoundError, ValidationError
from ..items.metrics import to_prometheus
from ..mcp_budget import MIN_BUDGET, hits_result
from ..memory.once import request_digest
from ..pyramid.metrics import PyramidMetrics, pyramid_prometheus
from ..text import MAX_QUERY_CHARS
from .convert import context_json, session_json, turn_json
from .errors import Conflict
from .idempotent import run_once
from .limits import COUNTERS
from .models import (
    AddItem,
    AddTurns,
    ContextQuery,
    ContextRequest,
    ErrorBody,
    IdempotencyKey,
    ItemType,
    RecallItems,
    StateChange,
    Supersede,
)
from .spaces import Spaces

__all__ = ["build_router"]

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in (
        (400, "Invalid input"),
        (401, "Missing or wrong token"),
        (403, "Namespace or origin not allowed"),
        (404, "Unknown namespace, session, node, item or manifest"),
        (408, "The request was not received in time"),
        (413, "Body too large"),
        (503, "Store or model failure, or the server is busy (see Retry-After)"),
    )
}


NodeId = Annotated[str, Path(description="A node id, as 50 or as search shows it: node:50.")]


def principal(request: Request) -> Any:
    """The caller, as the security middleware authenticated it."""
    return request.scope.get("state", {}).get("principal")


def build_router(spaces: Spaces) -> APIRouter:
    """The ``/api/v1`` routes over ``spaces``."""
    r = APIRouter(prefix="/api/v1", responses=_ERRORS)

    def mem(request: Request, namespace: str, *, must_exist: bool = True) -> Any:
        return spaces.get(namespace, principal(request), must_exist=must_exist)

    def once(m: Any, key: str | None, request: Request, body: Any, write: Any, ref: Any, rebuild: Any) -> Any:
        """``write()`` at most once per ``Idempotency-Key`` (:func:`~stratamem.web.idempotent.run_once`)."""
        digest = request_digest("http", request.method, request.url.path, body)
        return run_once(m, key, digest, write, ref, rebuild)

    def item_once(m: Any, key: str | None, request: Request, body: Any, write: Any) -> dict[str, Any]:
        """An item write under an idempotency key: the answer is the item as stored now."""
        return once(
            m, key, request, body, write, lambda d: {"item": d["id"]}, lambda r: m.items.get(r["item"]).to_dict()
        )

    # --- namespaces, status, metrics ------------------------------------------------------

    @r.get("/health", tags=["status"], summary="Liveness (answered on the event loop: never waits for the store)")
    async def health() -> dict[str, Any]:
        return {"ok": True}

    @r.get("/namespaces", tags=["namespaces"], summary="Namespaces this token may use, with their counts")
    def namespaces(request: Request) -> dict[str, Any]:
        who = principal(request)
        out = []
        for name in spaces.names(who):
            m = spaces.get(name, who)
            out.append(spaces.call(m.status).to_dict())
        return {"namespaces": out}

    @r.get("/namespaces/{namespace}/status", tags=["status"], summary="Counts, tiers, items and warnings")
    def status(request: Request, namespace: str) -> dict[str, Any]:
        m = mem(request, namespace)

        def run() -> dict[str, Any]:
            out = m.status().to_dict()
            out["items"] = m.items.status().to_dict()
            if m.config.pyramid.enabled:
                out["tiers"] = [s.to_dict() for s in m.pyramid.stats()]
                out["levels"] = [s.to_dict() for s in m.pyramid.level_stats()]
                out["summary_spend"] = m.pyramid.spend().to_dict()
            return out

        return spaces.call(run)

    @r.get(
        "/metrics",
        tags=["status"],
        summary="Prometheus text metrics of every allowed namespace",
        response_class=PlainTextResponse,
    )
    def metrics(request: Request) -> PlainTextResponse:
        who = principal(request)

        def run() -> str:
            mems = [spaces.get(n, who) for n in spaces.names(who)]
            lines = [to_prometheus([m.items.metrics() for m in mems]).rstrip("\n")]
            for name, help_text, get in (
                ("turns", "Stored turns.", lambda s: s.turns),
                ("tokens", "Exact tokens of the stored turns.", lambda s: s.tokens),
                ("sessions", "Sessions.", lambda s: s.sessions),
            ):
                lines += [f"# HELP stratamem_{name} {help_text}", f"# TYPE stratamem_{name} gauge"]
                for m in mems:
                    lines.append(f'stratamem_{name}{{namespace="{m.namespace}"}} {get(m.status())}')
            pyramids = [PyramidMetrics.of(m.pyramid) for m in mems if m.config.pyramid.enabled]
            if pyramids:
                lines.append(pyramid_prometheus(pyramids).rstrip("\n"))
            lines += [
                "# HELP stratamem_store_bytes Bytes the store occupies on disk.",
                "# TYPE stratamem_store_bytes gauge",
                f"stratamem_store_bytes {spaces.default.store.size_bytes()}",
                "# HELP stratamem_store_part_bytes Bytes of the store per part (every namespace).",
                "# TYPE stratamem_store_part_bytes gauge",
                *(
                    f'stratamem_store_part_bytes{{part="{part}"}} {size}'
                    for part, size in spaces.default.store.part_bytes().items()
                ),
                COUNTERS.prometheus().rstrip("\n"),
            ]
            return "\n".join(lines) + "\n"

        return PlainTextResponse(spaces.call(run), media_type="text/plain; version=0.0.4")

    # --- sessions and turns ----------------------------------------------------------------

    @r.get("/namespaces/{namespace}/sessions", tags=["turns"], summary="Sessions of a namespace")
    def sessions(request: Request, namespace: str) -> dict[str, Any]:
        m = mem(request, namespace)
        return {"sessions": [session_json(s) for s in spaces.call(lambda: m.store.sessions(namespace))]}

    @r.post(
        "/namespaces/{namespace}/turns",
        tags=["turns"],
        status_code=201,
        summary="Store messages as turns of a session (one transaction)",
    )
    def add_turns(request: Request, namespace: str, body: AddTurns, key: IdempotencyKey = None) -> dict[str, Any]:
        m = mem(request, namespace, must_exist=False)
        stored = spaces.call(
            lambda: m.add(
                body.messages,
                session=body.session,
                format=body.format,
                platform=body.platform,
                channel=body.channel,
                idempotency_key=key,  # claimed in the transaction that stores the turns
            )
        )
        return {"turns": [turn_json(t) for t in stored]}

    @r.get(
        "/namespaces/{namespace}/sessions/{session}/turns",
        tags=["turns"],
        summary="One page of a session's turns, by sequence number",
    )
    def list_turns(
        request: Request,
        namespace: str,
        session: str,
        after_seq: int = Query(0, ge=0, description="Return turns after this sequence number."),
        limit: int = Query(100, ge=1, le=1000),
    ) -> dict[str, Any]:
        m = mem(request, namespace)

        def run() -> list[Any]:
            m.store.session(namespace, session)
            return m.store.turns(namespace, session, min_seq=after_seq + 1, limit=limit)

        rows = spaces.call(run)
        nxt = rows[-1].seq if len(rows) == limit else None
        return {"turns": [turn_json(t) for t in rows], "next_after_seq": nxt}

    # --- context, manifests, search --------------------------------------------------------

    def assemble(request: Request, namespace: str, body: ContextRequest, record: bool | None) -> dict[str, Any]:
        m = mem(request, namespace)
        # The library's context, with the server's project: the same prompt as every other shell.
        ctx = spaces.call(
            lambda: m.context(
                body.query,
                budget=body.budget,
                session=body.session,
                format=body.format,
                policy=body.policy,
                now=body.now,
                provider=body.provider,
                model=body.model,
                project_dir=spaces.project_dir,
                system_prompts=body.system_prompts,
                record=record,
            )
        )
        return context_json(ctx)

    @r.post(
        "/namespaces/{namespace}/context",
        tags=["context"],
        summary="Assemble the context for the next model call, with its manifest",
    )
    def context(request: Request, namespace: str, body: ContextRequest) -> dict[str, Any]:
        return assemble(request, namespace, body, body.record)

    @r.get(
        "/namespaces/{namespace}/context",
        tags=["context"],
        summary="Assemble the context for the next model call (the POST route's fields as query parameters; "
        "records no manifest unless record=true)",
    )
    def context_get(request: Request, namespace: str, params: Annotated[ContextQuery, Query()]) -> dict[str, Any]:
        # A GET must not write: any web page can make a browser send one (the manifest only when asked).
        return assemble(request, namespace, params, bool(params.record))

    @r.get("/namespaces/{namespace}/manifests", tags=["context"], summary="Recorded manifests, newest first")
    def manifests(request: Request, namespace: str, limit: int = Query(20, ge=1, le=1000)) -> dict[str, Any]:
        m = mem(request, namespace)
        rows = spaces.call(lambda: m.store.manifests.latest(namespace, limit))
        return {"manifests": [{"id": x.id, "session": x.session, **x.data} for x in rows]}

    @r.get("/namespaces/{namespace}/manifests/{manifest_id}", tags=["context"], summary="One recorded manifest")
    def manifest(request: Request, namespace: str, manifest_id: int) -> dict[str, Any]:
        m = mem(request, namespace)
        found = spaces.call(lambda: m.store.manifests.get(namespace, manifest_id))
        if found is None:
            raise NotFoundError(f"no manifest {manifest_id} in namespace {namespace!r}")
        return {"id": found.id, "session": found.session, **found.data}

    @r.get(
        "/namespaces/{namespace}/search",
        tags=["context"],
        summary="Turns and summaries that match a query, best first (the shape of the MCP search_memory tool)",
    )
    def search(
        request: Request,
        namespace: str,
        q: str = Query(min_length=1, max_length=MAX_QUERY_CHARS),
        k: int = Query(10, ge=1, le=100, description="Most hits."),
        session: str | None = Query(None, description="Only this session's turns and segment summaries."),
        budget: int | None = Query(
            None,
            ge=MIN_BUDGET,
            le=1_000_000,
            description="Token budget of the result: fewer hits when they do not fit.",
        ),
    ) -> dict[str, Any]:
        m = mem(request, namespace)
        # Memory.search reads only (no manifest recorded); hits_result is what MCP returns.
        text = spaces.call(
            lambda: hits_result(m.search(q, k=k, session=session), budget=budget, count=m.tokenizer.count)
        )
        return json.loads(text)

    # --- pyramid ---------------------------------------------------------------------------

    @r.get("/namespaces/{namespace}/nodes", tags=["pyramid"], summary="Segments and consolidations")
    def nodes(
        request: Request,
        namespace: str,
        level: int | None = Query(None, ge=1),
        tier: str | None = None,
        session: str | None = None,
        limit: int = Query(200, ge=1, le=10_000),
        newest_first: bool = False,
    ) -> dict[str, Any]:
        m = mem(request, namespace)
        rows = spaces.call(
            lambda: m.pyramid.nodes(level=level, tier=tier, session=session, newest_first=newest_first, limit=limit)
        )
        return {"nodes": [n.to_dict() for n in rows]}

    @r.get(
        "/namespaces/{namespace}/nodes/{node_id}",
        tags=["pyramid"],
        summary="One node with its children and covered turn ids",
    )
    def node(request: Request, namespace: str, node_id: NodeId) -> dict[str, Any]:
        m = mem(request, namespace)

        def run() -> dict[str, Any]:
            n = m.pyramid.node(node_id)
            return {
                **n.to_dict(),
                "children": [c.id for c in m.pyramid.children(node_id)],
                "turn_ids": m.pyramid.turn_ids(node_id),
            }

        return spaces.call(run)

    @r.get(
        "/namespaces/{namespace}/nodes/{node_id}/expand",
        tags=["pyramid"],
        summary="The full turns a node covers, from wherever its tier holds them",
    )
    def expand(request: Request, namespace: str, node_id: NodeId) -> dict[str, Any]:
        m = mem(request, namespace)
        exp = spaces.call(lambda: m.pyramid.expansion(node_id))
        return {
            "turns": [turn_json(t) for t in exp.turns],
            "sources": {str(k): v for k, v in exp.sources.items()},
            "fallbacks": {str(k): v for k, v in exp.fallbacks.items()},
        }

    @r.get("/namespaces/{namespace}/tiers", tags=["pyramid"], summary="Storage per tier and size per level")
    def tiers(request: Request, namespace: str) -> dict[str, Any]:
        m = mem(request, namespace)
        return spaces.call(
            lambda: {
                "tiers": [s.to_dict() for s in m.pyramid.stats()],
                "levels": [s.to_dict() for s in m.pyramid.level_stats()],
                "summary_spend": m.pyramid.spend().to_dict(),
            }
        )

    @r.post(
        "/namespaces/{namespace}/sessions/{session}/seal",
        tags=["pyramid"],
        summary="Seal the session's open turns into a segment now (manual topic boundary; long work: queued)",
    )
    async def seal(request: Request, namespace: str, session: str, key: IdempotencyKey = None) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            m = mem(request, namespace)

            def write() -> dict[str, Any]:
                node = m.seal(session)
                return {"sealed": node is not None, "segment": node.to_dict() if node is not None else None}

            def rebuild(ref: dict[str, Any]) -> dict[str, Any]:
                node = m.pyramid.node(ref["node"]) if ref["node"] is not None else None
                return {"sealed": node is not None, "segment": node.to_dict() if node is not None else None}

            return once(m, key, request, None, write, lambda d: {"node": (d["segment"] or {}).get("id")}, rebuild)

        return await spaces.long(run)

    # --- memory items ----------------------------------------------------------------------

    @r.get("/namespaces/{namespace}/items", tags=["items"], summary="Memory items, filtered")
    def items(
        request: Request,
        namespace: str,
        tier: str | None = None,
        type: ItemType | None = None,
        review: Literal["pending", "confirmed", "rejected", "dropped", "none"] | None = None,
        live: bool = Query(False, description="Only live items (not superseded, rejected or dropped)."),
        session: str | None = Query(
            None, description="Only what this session sees: namespace-wide items and its own (default: every item)."
        ),
    ) -> dict[str, Any]:
        m = mem(request, namespace)
        rows = spaces.call(lambda: m.items.list(tier, include_dead=not live, session=session))
        if type is not None:
            rows = [i for i in rows if i.type == type]
        if review is not None:
            rows = [i for i in rows if (i.review or "none") == review]
        return {"items": [i.to_dict() for i in rows]}

    @r.post("/namespaces/{namespace}/items", tags=["items"], status_code=201, summary="Add a memory item")
    def add_item(request: Request, namespace: str, body: AddItem, key: IdempotencyKey = None) -> dict[str, Any]:
        m = mem(request, namespace, must_exist=False)

        def write() -> dict[str, Any]:
            return m.items.add(
                body.content,
                body.type,
                session=body.session,
                key=body.key,
                supersedes=body.supersedes,
                metadata=body.metadata,
                tier=body.tier,
                scope=body.scope,
            ).to_dict()

        return spaces.call(lambda: item_once(m, key, request, body.model_dump(mode="json"), write))

    @r.get("/namespaces/{namespace}/items/{item_id}", tags=["items"], summary="One memory item")
    def get_item(request: Request, namespace: str, item_id: int) -> dict[str, Any]:
        m = mem(request, namespace)
        return spaces.call(lambda: m.items.get(item_id).to_dict())

    @r.post(
        "/namespaces/{namespace}/items/recall",
        tags=["items"],
        summary="Recall warm/cold items (tracks access, may promote)",
    )
    def recall(request: Request, namespace: str, body: RecallItems) -> dict[str, Any]:
        m = mem(request, namespace)
        return spaces.call(
            lambda: m.items.recall(
                body.query,
                body.limit,
                auto_promote=body.auto_promote,
                types=body.types,
                include_superseded=body.include_superseded,
                session=body.session,
            ).to_dict()
        )

    @r.post("/namespaces/{namespace}/items/{item_id}/confirm", tags=["items"], summary="Confirm an extracted item")
    def confirm(request: Request, namespace: str, item_id: int, key: IdempotencyKey = None) -> dict[str, Any]:
        m = mem(request, namespace)
        return spaces.call(lambda: item_once(m, key, request, None, lambda: m.items.confirm(item_id).to_dict()))

    @r.post("/namespaces/{namespace}/items/{item_id}/reject", tags=["items"], summary="Reject an extracted item")
    def reject(request: Request, namespace: str, item_id: int, key: IdempotencyKey = None) -> dict[str, Any]:
        m = mem(request, namespace)
        return spaces.call(lambda: item_once(m, key, request, None, lambda: m.items.reject(item_id).to_dict()))

    @r.post(
        "/namespaces/{namespace}/items/{item_id}/supersede",
        tags=["items"],
        responses={409: _ERRORS[400]},
        summary="Mark an item as replaced by a newer one",
    )
    def supersede(
        request: Request, namespace: str, item_id: int, body: Supersede, key: IdempotencyKey = None
    ) -> dict[str, Any]:
        m = mem(request, namespace)

        def run() -> dict[str, Any]:
            old = m.items.get(item_id)
            if old.superseded_by is not None:
                raise Conflict(f"item {item_id} is already superseded by item {old.superseded_by}")
            return m.items.supersede(item_id, body.by).to_dict()

        return spaces.call(lambda: item_once(m, key, request, body.model_dump(mode="json"), run))

    # --- working state ---------------------------------------------------------------------

    def state_memory(request: Request, namespace: str) -> Any:
        if spaces.project_dir is None:
            raise NotFoundError("this server has no project directory (start it with --project-dir)")
        return mem(request, namespace, must_exist=False)

    def state(request: Request, namespace: str) -> Any:
        return state_memory(request, namespace).state(spaces.project_dir)

    @r.get("/namespaces/{namespace}/state", tags=["state"], summary="Working state and its prompt projection")
    def read_state(request: Request, namespace: str, budget: int | None = Query(None, ge=1)) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            ws = state(request, namespace)
            proj = ws.project(budget)
            return {
                "state": ws.read(),
                "projection": {"text": proj.text, "format": proj.format, "tokens": proj.tokens, "budget": proj.budget},
            }

        return spaces.call(run)

    @r.post("/namespaces/{namespace}/state", tags=["state"], summary="Apply one change to the working state")
    def change_state(request: Request, namespace: str, body: StateChange, key: IdempotencyKey = None) -> dict[str, Any]:
        def need(v: Any, what: str) -> Any:
            if v is None:
                raise ValidationError(f"{body.op} needs {what}", path=what)
            return v

        def run() -> dict[str, Any]:
            ws = state(request, namespace)
            op = body.op
            if op == "set_goal":
                return ws.set_goal(need(body.text, "text"))
            if op == "set_now":
                return ws.set_now(need(body.text, "text"))
            if op == "decide":
                return ws.decide(need(body.text, "text"), body.why or "")
            if op == "add_task":
                return ws.add_task(need(body.text, "text"))
            if op == "update_task":
                return ws.update_task(need(body.id, "id"), status=body.status, title=body.text)
            if op == "complete_task":
                return ws.complete_task(need(body.id, "id"))
            return ws.set_convention(need(body.key, "key"), body.value)

        def write() -> dict[str, Any]:
            # The working state is a file, not the store: its (small) answer is recorded as it is.
            return {"op": body.op, "result": run()}

        def keyed() -> dict[str, Any]:
            return once(state_memory(request, namespace), key, request, body.model_dump(mode="json"), write, dict, dict)

        return spaces.call(keyed)

    # --- export / import -------------------------------------------------------------------

    @r.get(
        "/namespaces/{namespace}/export",
        tags=["exchange"],
        response_class=PlainTextResponse,
        summary="The namespace's sessions and turns as JSON Lines",
    )
    def export(request: Request, namespace: str) -> Response:
        m = mem(request, namespace)
        out = io.StringIO()
        spaces.call(lambda: m.export(out))
        return Response(out.getvalue(), media_type="application/x-ndjson")

    @r.post(
        "/namespaces/{namespace}/import",
        tags=["exchange"],
        status_code=201,
        summary="Import an export (JSON Lines body) into the namespace, all or nothing",
        openapi_extra={
            "requestBody": {"required": True, "content": {"application/x-ndjson": {"schema": {"type": "string"}}}}
        },
    )
    async def import_(request: Request, namespace: str, key: IdempotencyKey = None) -> dict[str, Any]:
        raw = await request.body()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError("the import body is not UTF-8") from exc

        def run() -> dict[str, Any]:
            # Idempotent like the library: turns a session already holds are skipped;
            # a session holding different turns is a ConflictError (409).
            m = mem(request, namespace, must_exist=False)

            def write() -> dict[str, Any]:
                n_sessions, n_turns, n_skipped = m.import_(io.StringIO(text))
                return {"sessions": n_sessions, "turns": n_turns, "skipped": n_skipped}

            digest_of = hashlib.sha256(raw).hexdigest()  # the body's digest, not the body, goes into the key's digest
            return once(m, key, request, digest_of, write, dict, dict)

        # Long work: on the work queue's thread (never the event loop), under the lock there.
        return await spaces.long(run)

    return r
