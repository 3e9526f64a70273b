"""The dashboard: server-rendered pages (Jinja2) that work with JavaScript off.

Pages: overview (``/``), context inspector (``/ns/{ns}/context``, past
manifests at ``/ns/{ns}/manifests/{id}``), session timeline with the pyramid
and the *seal current topic* button (``/ns/{ns}/timeline``), a node's turns
(``/ns/{ns}/nodes/{id}``), memory items with review buttons
(``/ns/{ns}/items``, ``/ns/{ns}/items/{id}``) and the token login form.
Every action is a plain HTML form posting back and redirecting (303).
The data for each page comes from :mod:`stratamem.web.views`.
"""

from __future__ import annotations

from importlib import resources
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from ..context.policies import policy_names
from ..errors import NotFoundError
from ..records.items import ITEM_TYPES, TIERS
from ..text import MAX_QUERY_CHARS
from .api import principal
from .apiref import operations
from .security import COOKIE
from .spaces import Spaces
from .views import SECTION_COLORS, inspect_manifest, item_page, overview, timeline

__all__ = ["build_pages", "render_error"]

_templates = Jinja2Templates(directory=str(resources.files("stratamem.web") / "templates"))
_templates.env.filters["num"] = lambda v: f"{v:,}" if isinstance(v, int) else v
_templates.env.filters["score"] = lambda s: ", ".join(f"{k} {v:.3f}" for k, v in dict(s).items()) or "—"


def _page(request: Request, name: str, code: int = 200, **ctx: Any) -> HTMLResponse:
    spaces: Spaces = request.app.state.spaces
    names = spaces.names(principal(request)) if principal(request) is not None else []
    return _templates.TemplateResponse(request, name, {"namespaces": names, **ctx}, status_code=code)


def render_error(request: Request, status: int, kind: str, message: str) -> HTMLResponse:
    """An error as an HTML page (the API answers JSON instead).

    Rendered on the event loop by the error handlers, so it reads nothing
    under the store's lock: the page has no namespace switcher.
    """
    ctx = {"namespaces": [], "status": status, "kind": kind, "message": message, "ns": None}
    return _templates.TemplateResponse(request, "error.html", ctx, status_code=status)


_PER_PAGE = 50


def _safe_next(value: str | None, fallback: str) -> str:
    """A same-site path to go back to (never an absolute URL: no open redirect)."""
    if value and value.startswith("/") and not value.startswith("//"):
        return value
    return fallback


def build_pages(spaces: Spaces) -> APIRouter:
    """The dashboard routes over ``spaces`` (left out of the OpenAPI schema)."""
    r = APIRouter(include_in_schema=False)

    def mem(request: Request, ns: str) -> Any:
        return spaces.get(ns, principal(request))

    @r.get("/login", response_class=HTMLResponse)
    def login_form(request: Request) -> Response:
        return _templates.TemplateResponse(request, "login.html", {"namespaces": [], "ns": None, "failed": False})

    @r.post("/login")
    def login(request: Request, token: str = Form(max_length=500)) -> Response:
        security = request.app.state.security
        if security.authenticate(token) is None:
            return _templates.TemplateResponse(
                request, "login.html", {"namespaces": [], "ns": None, "failed": True}, status_code=401
            )
        resp = RedirectResponse("/", status_code=303)
        resp.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https")
        return resp

    @r.get("/", response_class=HTMLResponse)
    def home(request: Request) -> Response:
        names = spaces.names(principal(request))

        def card(name: str) -> dict[str, Any]:
            return spaces.call(lambda: overview(spaces.get(name, principal(request)))) | {"name": name}

        cards = [card(n) for n in names]
        return _page(
            request,
            "overview.html",
            cards=cards,
            ns=None,
            store_bytes=spaces.call(lambda: spaces.default.store.size_bytes()),
            part_bytes=spaces.call(lambda: spaces.default.store.part_bytes()),
        )

    @r.get("/api/docs", response_class=HTMLResponse)
    def api_docs(request: Request) -> Response:
        schema = request.app.openapi()
        ops = operations(schema)
        return _page(
            request,
            "apidocs.html",
            ns=None,
            ops=ops,
            version=schema["info"]["version"],
            tags=list(dict.fromkeys(o["tag"] for o in ops)),
        )

    @r.get("/ns/{ns}/context", response_class=HTMLResponse)
    def context_page(
        request: Request,
        ns: str,
        q: str | None = Query(None, max_length=MAX_QUERY_CHARS),
        budget: int | None = None,
        policy: str | None = None,
        session: str | None = None,
    ) -> Response:
        m = mem(request, ns)

        def run() -> dict[str, Any]:
            out: dict[str, Any] = {
                "sessions": [s.name for s in m.store.sessions(ns)],
                "past": m.store.manifests.latest(ns, 30),
            }
            if q is not None:
                # A look, not a model call: a GET page records nothing (any site can make a browser load it).
                ctx = m.context(
                    q or None,
                    budget=budget,
                    session=session or None,
                    format="text",
                    policy=policy or None,
                    project_dir=spaces.project_dir,
                    record=False,
                )
                out["view"] = inspect_manifest(m, ctx.manifest.to_dict())
                out["text"] = ctx.text
            return out

        data = spaces.call(run)
        return _page(
            request,
            "context.html",
            ns=ns,
            q=q or "",
            budget=budget or m.config.context.default_budget,
            policy=policy or m.config.context.policy,
            session=session or "",
            policies=policy_names(),
            colors=SECTION_COLORS,
            **data,
        )

    @r.get("/ns/{ns}/manifests/{manifest_id}", response_class=HTMLResponse)
    def manifest_page(request: Request, ns: str, manifest_id: int) -> Response:
        m = mem(request, ns)

        def run() -> dict[str, Any]:
            found = m.store.manifests.get(ns, manifest_id)
            if found is None:
                raise NotFoundError(f"no manifest {manifest_id} in namespace {ns!r}")
            return {"found": found, "view": inspect_manifest(m, found.data), "past": m.store.manifests.latest(ns, 30)}

        data = spaces.call(run)
        return _page(request, "manifest.html", ns=ns, colors=SECTION_COLORS, **data)

    @r.get("/ns/{ns}/timeline", response_class=HTMLResponse)
    def timeline_page(request: Request, ns: str, session: str | None = None) -> Response:
        m = mem(request, ns)

        def run() -> dict[str, Any]:
            sessions = [s.name for s in m.store.sessions(ns)]
            current = session or m.store.latest_session(ns) or (sessions[0] if sessions else None)
            return {"sessions": sessions, "tl": timeline(m, current) if current else None}

        return _page(request, "timeline.html", ns=ns, **spaces.call(run))

    @r.post("/ns/{ns}/seal")
    def seal(request: Request, ns: str, session: str = Form(max_length=200)) -> Response:
        m = mem(request, ns)
        spaces.call(lambda: m.seal(session))
        return RedirectResponse(f"/ns/{ns}/timeline?session={quote(session)}", status_code=303)

    @r.get("/ns/{ns}/nodes/{node_id}", response_class=HTMLResponse)
    def node_page(request: Request, ns: str, node_id: int) -> Response:
        m = mem(request, ns)

        def run() -> dict[str, Any]:
            node = m.pyramid.node(node_id)
            exp = m.pyramid.expansion(node_id)
            return {
                "node": node,
                "children": m.pyramid.children(node_id),
                "turns": exp.turns,
                "sources": sorted(set(exp.sources.values())),
                "fallbacks": exp.fallbacks,
                "parent": m.pyramid.node(node.parent_id) if node.parent_id else None,
            }

        return _page(request, "node.html", ns=ns, **spaces.call(run))

    @r.get("/ns/{ns}/items", response_class=HTMLResponse)
    def items_page(
        request: Request,
        ns: str,
        type: str | None = None,
        tier: str | None = None,
        review: str | None = None,
        page: int = Query(1, ge=1),
    ) -> Response:
        m = mem(request, ns)
        rows = spaces.call(lambda: m.items.list(tier or None))
        rows = [i for i in rows if (not type or i.type == type) and (not review or (i.review or "none") == review)]
        rows.sort(key=lambda i: (i.review != "pending", -i.id))
        status = spaces.call(lambda: m.items.status())
        pages = max(1, -(-len(rows) // _PER_PAGE))
        shown = rows[(page - 1) * _PER_PAGE : page * _PER_PAGE]
        return _page(
            request,
            "items.html",
            ns=ns,
            items=shown,
            total=len(rows),
            page=page,
            pages=pages,
            type=type or "",
            tier=tier or "",
            review=review or "",
            types=ITEM_TYPES,
            tiers=TIERS,
            status=status,
            here=str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""),
        )

    @r.get("/ns/{ns}/items/{item_id}", response_class=HTMLResponse)
    def item_detail(request: Request, ns: str, item_id: int) -> Response:
        m = mem(request, ns)
        return _page(request, "item.html", ns=ns, **spaces.call(lambda: item_page(m, item_id)))

    @r.post("/ns/{ns}/items/{item_id}/{action}")
    def review(
        request: Request, ns: str, item_id: int, action: str, next: str | None = Form(None, max_length=2000)
    ) -> Response:
        if action not in ("confirm", "reject"):
            raise NotFoundError(f"no item action {action!r}")
        m = mem(request, ns)
        spaces.call(lambda: getattr(m.items, action)(item_id))
        return RedirectResponse(_safe_next(next, f"/ns/{ns}/items"), status_code=303)

    return r
