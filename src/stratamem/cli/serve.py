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
) -> None:
    """Serve the JSON API (OpenAPI at /api/openapi.json) and the dashboard."""
    try:
        import uvicorn

        from ..web import Security, create_app
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
        app = create_app(mem, security=security, bind_host=host, project_dir=project_dir)
        click.echo(
            f"stratamem: serving {settings.db} on http://{host}:{port}/ (API at /api/v1, "
            f"reference at /api/docs){' with a token' if tokens else ''}",
            err=True,
        )
        uvicorn.run(app, host=host, port=port, log_level="warning", server_header=False)
    finally:
        mem.close()


def register(group: click.Group) -> None:
    """Add ``serve`` to ``group``."""
    group.add_command(serve)
