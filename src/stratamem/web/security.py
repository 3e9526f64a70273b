"""Who may call the server, and from where: tokens, namespace allow-lists, Host/Origin checks, body limits.

The rules (see ``docs/web.md``):

* **Loopback by default.** Binding any other address needs at least one token
  (:meth:`Security.check_bind`).
* **Bearer tokens**, compared in constant time (:func:`hmac.compare_digest`)
  against every configured token, so timing tells nothing about which one
  nearly matched. The dashboard keeps the token in an ``HttpOnly``,
  ``SameSite=Strict`` cookie set by its login form.
* **Namespace allow-list per token** (``None``: every namespace). Routes ask
  :func:`allowed` before opening a namespace.
* **DNS rebinding**: the ``Host`` header must name the server (loopback names,
  the bound address, or configured extra hosts), and an ``Origin`` header, when
  sent, must be the server's own origin or a configured CORS origin.
* **Bounded bodies, by route, after authentication**: ``GET``/``HEAD``/``OPTIONS``
  take no body, the open paths (login form, static files) a few KiB, the import
  route (``POST /api/v1/namespaces/{ns}/import``) :attr:`Security.max_import_bytes`
  and only for an authenticated caller, anything else :attr:`Security.max_body_bytes`.
  A declared ``Content-Length`` over the limit is refused (413) before a byte of
  the body is read, an unauthenticated request (401) likewise, and both answers
  carry ``Connection: close`` so the server never drains the body. A body
  must arrive within :meth:`Limits.receipt_deadline` (408 after); a client that
  hangs up half-way reaches no route.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import urlsplit

import anyio

from ..errors import ConfigError
from .errors import error_body
from .limits import Limits

__all__ = ["COOKIE", "Principal", "Security", "SecurityMiddleware", "allowed", "is_loopback"]

COOKIE = "stratamem_token"
"""Cookie the dashboard login sets (HttpOnly, SameSite=Strict)."""

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

OPEN_BODY_BYTES = 8 * 1024
"""Largest body on an open path (the login form posts one token)."""

_IMPORT_ROUTE = re.compile(r"/api/v1/namespaces/[^/]+/import")
_NO_BODY = frozenset({"GET", "HEAD", "OPTIONS"})
_CLOSE = [(b"connection", b"close")]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address) is the loopback interface."""
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts as."""

    namespaces: frozenset[str] | None
    """Namespaces it may use; ``None`` for all."""


@dataclass(frozen=True)
class Security:
    """The server's access rules.

    Args:
        tokens: Bearer token → namespaces it may use (``None``: all). Empty:
            no token needed (allowed on loopback only).
        allowed_hosts: Extra host names the ``Host`` header may carry (for a
            server behind a name, e.g. ``memory.internal``).
        cors_origins: Origins (``https://app.example``) allowed to call the API
            from a browser; CORS headers are sent for these only.
        max_body_bytes: Largest request body accepted (413 above).
        max_import_bytes: Largest body accepted by the import route.
    """

    tokens: Mapping[str, frozenset[str] | None] = field(default_factory=dict)
    allowed_hosts: Collection[str] = ()
    cors_origins: Collection[str] = ()
    max_body_bytes: int = 1 << 20
    max_import_bytes: int = 64 << 20

    def check_bind(self, host: str) -> None:
        """Refuse to serve a non-loopback address without a token.

        Raises:
            ConfigError: ``host`` is not loopback and no token is configured.
        """
        if not is_loopback(host) and not self.tokens:
            raise ConfigError(f"serving on {host!r} (not loopback) needs a token: pass --token or set STRATAMEM_TOKEN")
        for token in self.tokens:
            if len(token) < 16:
                raise ConfigError("a token must be at least 16 characters")

    def authenticate(self, presented: str | None) -> Principal | None:
        """The principal a presented token stands for; ``None`` if it matches no token.

        Every configured token is compared (constant time each), whatever matches.
        """
        if not self.tokens:
            return Principal(None)
        if not presented:
            return None
        found: Principal | None = None
        given = presented.encode()
        for token, spaces in self.tokens.items():
            if hmac.compare_digest(given, token.encode()):
                found = Principal(spaces)
        return found


def allowed(principal: Principal | None, namespace: str) -> bool:
    """Whether ``principal`` may use ``namespace``."""
    return principal is not None and (principal.namespaces is None or namespace in principal.namespaces)


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def _presented_token(scope: Scope) -> str | None:
    auth = _header(scope, b"authorization")
    if auth and auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    cookie = _header(scope, b"cookie")
    if cookie:
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(cookie)
        except CookieError:  # a malformed cookie header is treated as no cookie
            return None
        if COOKIE in jar:
            return jar[COOKIE].value
    return None


class SecurityMiddleware:
    """ASGI middleware applying :class:`Security` before any route runs.

    Args:
        app: The wrapped application.
        security: The rules.
        bind_host: The address the server listens on (its name is an allowed ``Host``).
        open_paths: Path prefixes served without a token (login page, static files).
    """

    def __init__(
        self,
        app: Any,
        security: Security,
        bind_host: str,
        open_paths: tuple[str, ...] = ("/login", "/static/"),
        limits: Limits | None = None,
    ) -> None:
        self.app = app
        self.security = security
        self.open_paths = open_paths
        self.limits = limits or Limits()
        hosts = {h.lower().strip("[]") for h in security.allowed_hosts}
        if is_loopback(bind_host):
            hosts |= _LOOPBACK_NAMES
        elif bind_host not in ("0.0.0.0", "::", ""):
            hosts.add(bind_host.lower().strip("[]"))
        else:
            # Listening everywhere with no host list: the token is the guard.
            hosts = hosts if security.allowed_hosts else set()
        self.hosts = frozenset(hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Every refusal before the body is read closes the connection when a body is on its way.
        close = _CLOSE if _has_body(scope) else []
        host = _header(scope, b"host") or ""
        hostname = (urlsplit(f"//{host}").hostname or "").lower()
        if self.hosts and hostname not in self.hosts:
            await _deny(send, 403, "Forbidden", f"host {host!r} is not served here (DNS rebinding guard)", close)
            return
        origin = _header(scope, b"origin")
        if origin is not None and not self._origin_ok(origin, host):
            await _deny(send, 403, "Forbidden", f"origin {origin!r} may not call this server", close)
            return
        path, method = scope.get("path", ""), scope.get("method", "")
        # A CORS preflight carries no credentials by design; the CORS layer answers it.
        preflight = method == "OPTIONS" and origin in self.security.cors_origins
        is_open = any(path.startswith(p) for p in self.open_paths)
        if not preflight and not is_open:
            principal = self.security.authenticate(_presented_token(scope))
            if principal is None:
                if method == "GET" and not path.startswith("/api/"):
                    await _redirect(send, "/login")
                    return
                extra = [(b"www-authenticate", b'Bearer realm="stratamem"'), *close]
                await _deny(send, 401, "Unauthorized", "a valid bearer token is required", extra)
                return
            scope.setdefault("state", {})["principal"] = principal
        limit = self.body_limit(method, path, is_open)
        try:
            body = await _read_bounded(scope, receive, limit, self.limits)
        except _Disconnected:
            return  # the client hung up mid-body: nothing to answer, and no route sees half a body
        except TimeoutError:
            await _deny(send, 408, "RequestTimeout", "the request body was not received in time", _CLOSE)
            return
        if body is None:
            await _deny(send, 413, "PayloadTooLarge", f"the request body is over {limit:,} bytes", _CLOSE)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def body_limit(self, method: str, path: str, is_open: bool) -> int:
        """Largest body ``method path`` may carry (called once the caller is authenticated, or for an open path)."""
        if method in _NO_BODY:
            return 0
        if is_open:
            return OPEN_BODY_BYTES
        if method == "POST" and _IMPORT_ROUTE.fullmatch(path):
            return self.security.max_import_bytes
        return self.security.max_body_bytes

    def _origin_ok(self, origin: str, host: str) -> bool:
        if origin in self.security.cors_origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


class _Disconnected(Exception):
    """The client went away before the end of the body."""


def _has_body(scope: Scope) -> bool:
    if _header(scope, b"transfer-encoding") is not None:
        return True
    declared = _header(scope, b"content-length")
    return declared is not None and declared.strip() not in ("", "0")


async def _read_bounded(scope: Scope, receive: Receive, limit: int, limits: Limits) -> bytes | None:
    """The whole body, or ``None`` as soon as it is over ``limit`` bytes.

    A declared ``Content-Length`` over the limit is refused without reading.
    The body must arrive within ``limits.receipt_deadline`` of its declared
    length (of ``limit`` when none is declared); under ``stratamem serve`` the
    protocol's own deadline closes a slow connection first.

    Raises:
        TimeoutError: The body did not arrive in time.
        _Disconnected: The client hung up before the end of the body.
    """
    declared = _header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    if not _has_body(scope):
        return b""
    expected = int(declared) if declared is not None and declared.isdigit() else limit
    chunks: list[bytes] = []
    total = 0
    with anyio.fail_after(limits.receipt_deadline(expected)):
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise _Disconnected
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > limit:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


async def _deny(
    send: Send, status: int, kind: str, message: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps(error_body(kind, message)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


async def _redirect(send: Send, location: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [(b"location", location.encode()), (b"content-length", b"0")],
        }
    )
    await send({"type": "http.response.body", "body": b""})
