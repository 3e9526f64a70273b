"""``create_app``: the API, the dashboard, the error mapping and the security layer in one ASGI app."""

from __future__ import annotations

import logging
import os
from importlib import resources
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from ..errors import StratamemError
from .api import build_router
from .errors import Busy, error_body, status_for
from .guard import ErrorGuard
from .id_routes import build_id_router
from .limits import Limits
from .pages import build_pages, render_error
from .security import Security, SecurityMiddleware
from .spaces import Spaces

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["create_app"]

log = logging.getLogger("stratamem.web")

_HTTP_TYPES = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFoundError",
    405: "MethodNotAllowed",
    413: "PayloadTooLarge",
}


def create_app(
    memory: Memory,
    *,
    security: Security | None = None,
    bind_host: str = "127.0.0.1",
    project_dir: str | os.PathLike[str] | None = None,
    limits: Limits | None = None,
) -> Any:
    """The ASGI application serving ``memory``'s store.

    Args:
        memory: The memory to serve; other namespaces of its store are opened on demand.
        security: Tokens, hosts, origins and body limits (default: loopback, no token).
        bind_host: Address the server listens on (for the ``Host`` check).
        project_dir: Project directory of the working state routes (``None``: none).
        limits: Body deadline, waiting calls, lock wait and work queue
            (default: :class:`~stratamem.web.limits.Limits` ``()``).

    Returns:
        The application (an :class:`~stratamem.web.guard.ErrorGuard` around a
        :class:`~stratamem.web.security.SecurityMiddleware` around a FastAPI
        app; its ``.api`` attribute is the FastAPI app, whose ``openapi()``
        gives the schema, and ``.spaces`` the open memories).

    Raises:
        ConfigError: A non-loopback ``bind_host`` without a token, or a token under 16 characters.
    """
    security = security or Security()
    security.check_bind(bind_host)
    limits = limits or Limits()
    spaces = Spaces(memory, project_dir, limits)
    from importlib.metadata import version

    api = FastAPI(
        title="stratamem",
        version=version("stratamem"),
        description="Memory for LLM agents: turns, budgeted contexts with manifests, the pyramid of "
        "summaries, memory items and working state. Errors use one body: "
        '`{"error": {"type": ..., "message": ...}}`.',
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    api.state.spaces = spaces
    api.state.security = security
    api.include_router(build_router(spaces))
    api.include_router(build_id_router(spaces))
    api.include_router(build_pages(spaces))
    static = resources.files("stratamem.web") / "static"
    api.mount("/static", StaticFiles(directory=str(static)), name="static")

    def is_api(request: Request) -> bool:
        return request.url.path.startswith("/api/")

    def answer(request: Request, status: int, kind: str, message: str, path: str | None = None) -> Response:
        if is_api(request):
            return JSONResponse(error_body(kind, message, path), status_code=status)
        return render_error(request, status, kind, message)

    @api.exception_handler(StratamemError)
    async def library_error(request: Request, exc: StratamemError) -> Response:
        status = status_for(exc)
        if isinstance(exc, Busy):  # counted in /metrics; a busy server must not also flood its log
            out = answer(request, status, type(exc).__name__, str(exc))
            out.headers["retry-after"] = str(exc.retry_after)
            return out
        if status >= 500:
            log.warning("%s %s: %s", request.method, request.url.path, type(exc).__name__)
        return answer(request, status, type(exc).__name__, str(getattr(exc, "reason", exc)), getattr(exc, "path", None))

    @api.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {"msg": "invalid request", "loc": ()}
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or None
        return answer(request, 400, "ValidationError", str(first.get("msg")), where)

    @api.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        kind = _HTTP_TYPES.get(exc.status_code, "HTTPError")
        return answer(request, exc.status_code, kind, str(exc.detail))

    @api.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return answer(request, 500, "InternalError", "unexpected server error (see the server log)")

    app: Any = api
    if security.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app = CORSMiddleware(
            app,
            allow_origins=list(security.cors_origins),
            allow_methods=["GET", "POST"],
            allow_headers=["authorization", "content-type"],
        )
    outer = ErrorGuard(SecurityMiddleware(app, security, bind_host, limits=limits))
    outer.api = api  # type: ignore[attr-defined]
    outer.spaces = spaces  # type: ignore[attr-defined]
    return outer
