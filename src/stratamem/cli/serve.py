"""``stratamem serve``: the JSON API and the dashboard over HTTP (the ``web`` extra).

Reads ``STRATAMEM_TOKEN`` (the bearer token) here, in the shell, like every
other environment variable. See ``docs/web.md``.
"""

from __future__ import annotations

import click

from ..errors import ConfigError
from . import Settings, pass_settings

__all__ = ["register"]


@click.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on. Anything but loopback needs --token."
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="Port.")
@click.option(
    "--token",
    envvar="STRATAMEM_TOKEN",
    default=None,
    help="Bearer token every request must carry (at least 16 characters).",
)
@click.option(
    "--allow-namespace",
    "allow_namespaces",
    multiple=True,
    help="Namespace the token may use (repeatable; default: all).",
)
@click.option(
    "--allowed-host", "allowed_hosts", multiple=True, help="Extra host name the Host header may carry (repeatable)."
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    help="Origin allowed to call the API from a browser (repeatable; default: none).",
)
@click.option(
    "--project-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Project directory whose working state the state routes use.",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(1024),
    default=1 << 20,
    show_default=True,
    help="Largest request body accepted (413 above); imports may be 64x larger.",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(0.5, 600),
    default=10.0,
    show_default=True,
    help="Seconds a client has to send a request's headers (408 and closed after); a body "
    "earns one more second per 16 KiB.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1),
    default=None,
    help="Open connections at most; one more is answered 503 and closed "
    "[default: 1000, or fewer if the open-file limit leaves less room].",
)
@pass_settings
def serve(
    settings: Settings,
    host: str,
    port: int,
    token: str | None,
    allow_namespaces: tuple[str, ...],
    allowed_hosts: tuple[str, ...],
    cors_origins: tuple[str, ...],
    project_dir: str | None,
    max_body_bytes: int,
    header_timeout: float,
    max_connections: int | None,
) -> None:
    """Serve the JSON API (OpenAPI at /api/openapi.json) and the dashboard."""
    try:
        import uvicorn

        from ..web import Security, create_app
        from ..web.limits import Limits
        from ..web.serving import connection_cap, quiet_logs, uvicorn_config
    except ImportError as exc:
        raise ConfigError("stratamem serve needs the 'web' extra: pip install 'stratamem[web]'") from exc
    if allow_namespaces and not token:
        raise click.UsageError("--allow-namespace restricts a token: give --token too")
    tokens = {token: frozenset(allow_namespaces) or None} if token else {}
    security = Security(
        tokens=tokens,
        allowed_hosts=allowed_hosts,
        cors_origins=cors_origins,
        max_body_bytes=max_body_bytes,
        max_import_bytes=max_body_bytes * 64,
    )
    mem = settings.memory()
    try:
        # Counted once the store is open: the cap leaves its files (and a reserve) room under the limit.
        cap, backlog = connection_cap(max_connections)
        if max_connections is not None and cap < max_connections:
            click.echo(f"stratamem: --max-connections lowered to {cap} (the open-file limit)", err=True)
        limits = Limits(header_timeout=header_timeout, max_connections=cap, backlog=backlog)
        app = create_app(mem, security=security, bind_host=host, project_dir=project_dir, limits=limits)
        click.echo(
            f"stratamem: serving {settings.db} on http://{host}:{port}/ (API at /api/v1, "
            f"reference at /api/docs){' with a token' if tokens else ''}; at most {cap} connections",
            err=True,
        )
        config = uvicorn_config(app, host, port, limits)
        quiet_logs()  # after uvicorn's logging setup
        uvicorn.Server(config).run()
    finally:
        mem.close()


def register(group: click.Group) -> None:
    """Add ``serve`` to ``group``."""
    group.add_command(serve)
