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
* **Bounded bodies**: larger requests get 413 before any handler runs.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import urlsplit

from ..errors import ConfigError
from .errors import error_body

__all__ = ["COOKIE", "Principal", "Security", "SecurityMiddleware", "allowed", "is_loopback"]

COOKIE = "stratamem_token"
"""Cookie the dashboard login sets (HttpOnly, SameSite=Strict)."""

_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})

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
        self, app: Any, security: Security, bind_host: str, open_paths: tuple[str, ...] = ("/login", "/static/")
    ) -> None:
        self.app = app
        self.security = security
        self.open_paths = open_paths
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
        host = _header(scope, b"host") or ""
        hostname = (urlsplit(f"//{host}").hostname or "").lower()
        if self.hosts and hostname not in self.hosts:
            await _deny(send, 403, "Forbidden", f"host {host!r} is not served here (DNS rebinding guard)")
            return
        origin = _header(scope, b"origin")
        if origin is not None and not self._origin_ok(origin, host):
            await _deny(send, 403, "Forbidden", f"origin {origin!r} may not call this server")
            return
        path = scope.get("path", "")
        # A CORS preflight carries no credentials by design; the CORS layer answers it.
        preflight = scope.get("method") == "OPTIONS" and origin in self.security.cors_origins
        if not preflight and not any(path.startswith(p) for p in self.open_paths):
            principal = self.security.authenticate(_presented_token(scope))
            if principal is None:
                if scope.get("method") == "GET" and not path.startswith("/api/"):
                    await _redirect(send, "/login")
                    return
                await _deny(
                    send,
                    401,
                    "Unauthorized",
                    "a valid bearer token is required",
                    [(b"www-authenticate", b'Bearer realm="stratamem"')],
                )
                return
            scope.setdefault("state", {})["principal"] = principal
        limit = self.security.max_import_bytes if path.endswith("/import") else self.security.max_body_bytes
        body = await _read_bounded(scope, receive, limit)
        if body is None:
            await _deny(send, 413, "PayloadTooLarge", f"the request body is over {limit:,} bytes")
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _origin_ok(self, origin: str, host: str) -> bool:
        if origin in self.security.cors_origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


async def _read_bounded(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The whole body, or ``None`` as soon as it is over ``limit`` bytes."""
    declared = _header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    total = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
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
