"""``stratamem mcp``: serve the selected namespace's memory to agent hosts over MCP.

stdio by default (what desktop agent hosts launch); ``--http`` serves
streamable HTTP on a loopback address (127.0.0.1 unless ``--host`` names
another loopback address). The server has no authentication, so a
non-loopback ``--host`` is refused unless ``--allow-remote`` says the caller
put something in front of it. The database and namespace come from the usual
options or ``STRATAMEM_DB`` / ``STRATAMEM_NAMESPACE``.
"""

from __future__ import annotations

import ipaddress
import os

import click

from . import Settings, pass_settings

__all__ = ["is_loopback", "register", "sdk_installed"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine: ``localhost`` or a loopback IP (127.0.0.0/8, ``::1``).

    Other host names are not resolved: a name could resolve to anything, so it counts as remote.
    """
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@click.command("mcp")
@click.option("--http", "http", is_flag=True, help="Serve streamable HTTP instead of stdio.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="HTTP bind address; must be loopback unless --allow-remote."
)
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True, help="HTTP port.")
@click.option(
    "--allow-remote",
    is_flag=True,
    help="Allow a non-loopback --host. The server has no authentication: put a proxy with "
    "authentication and TLS in front of it.",
)
@click.option(
    "--allow-namespace",
    "allowed",
    multiple=True,
    help="Another namespace tool calls may name (repeatable; '*' allows any).",
)
@click.option(
    "--project",
    type=click.Path(file_okay=False),
    default=".",
    show_default=True,
    help="Project directory: the state tools use its working state, and get_context puts its "
    "instruction files (STRATAMEM.md) and working state in every context.",
)
@click.option(
    "--db",
    "db",
    default=None,
    help="Database (SQLite file or postgresql:// URL); same as the global "
    "--db, accepted here so host configurations can read `stratamem mcp --db /abs/path.db`.",
)
@click.option("--namespace", "-n", "namespace", default=None, help="Namespace; same as the global --namespace.")
@pass_settings
def mcp_cmd(
    settings: Settings,
    http: bool,
    host: str,
    port: int,
    allow_remote: bool,
    allowed: tuple[str, ...],
    project: str,
    db: str | None,
    namespace: str | None,
) -> None:
    """Run the MCP server.

    Tools: add_turns, add_memory, search_memory, get_context, forget, list_namespaces,
    seal_topic, memory_recall, memory_spill, memory_promote, memory_status (and the
    aliases memory_add, memory_context, memory_seal_topic), memory_state_read,
    memory_state_update.
    """
    # Checked before the store is opened: a refused bind must not create a database.
    if http and not allow_remote and not is_loopback(host):
        raise click.BadParameter(
            f"{host!r} is not a loopback address; the MCP server has no authentication. "
            "Pass --allow-remote to serve other hosts (behind an authenticating proxy)",
            param_hint="--host",
        )
    if not sdk_installed():
        click.echo("stratamem mcp needs the 'mcp' extra: pip install 'stratamem[mcp]'", err=True)
        raise SystemExit(2)
    from ..mcp import build_server

    if db is not None:
        settings.db = db
    if namespace is not None:
        settings.namespace = namespace
    mem = settings.memory()
    try:
        server = build_server(mem, allow_namespaces=allowed, project_dir=project)
        transport = f"streamable-http http://{host}:{port}/mcp" if http else "stdio"
        # One line on stderr (stdout is the stdio transport): what this server serves, where.
        click.echo(
            f"stratamem mcp: name=stratamem db={_shown_db(settings.db)} namespace={mem.namespace} "
            f"transport={transport}",
            err=True,
        )
        server.run("streamable-http", host=host, port=port) if http else server.run("stdio")
    finally:
        mem.close()


def _shown_db(db: str) -> str:
    """The database as the startup line shows it: an absolute path, or a DSN without its password."""
    from ..store.open import is_postgres_url

    if is_postgres_url(db):
        from ..store.postgres.store import redact_dsn

        return redact_dsn(db)
    return os.path.abspath(db)


def sdk_installed() -> bool:
    """Whether the ``mcp`` SDK (the ``mcp`` extra) can be imported."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        return False
    return True


def register(group: click.Group) -> None:
    """Add ``mcp`` to ``group``."""
    group.add_command(mcp_cmd)
