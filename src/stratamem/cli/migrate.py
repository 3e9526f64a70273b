"""``stratamem migrate``: copy the SQLite store into PostgreSQL, verified."""

from __future__ import annotations

import click

from ..errors import ConfigError
from . import Settings, emit_json, pass_settings

__all__ = ["register"]


@click.command()
@click.option("--to", "backend", type=click.Choice(["postgres"]), required=True, help="Target backend.")
@click.argument("dsn")
@click.option(
    "--only",
    "namespaces",
    multiple=True,
    metavar="NAMESPACE",
    help="Copy only this namespace (repeatable; default: all).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@pass_settings
def migrate(settings: Settings, backend: str, dsn: str, namespaces: tuple[str, ...], as_json: bool) -> None:
    """Copy the store named by --db into PostgreSQL at DSN and verify it.

    Each namespace is copied in one transaction and checked by turn count and
    a checksum of every session and turn before it commits; namespaces that
    already have sessions in the target are refused. Add ``?schema=NAME`` to
    the DSN to copy into a schema.
    """
    from ..store.open import is_postgres_url, open_store
    from ..store.postgres.migrate import copy_store
    from ..tokens import get_tokenizer

    if not is_postgres_url(dsn):
        raise ConfigError(f"--to {backend} needs a postgresql:// URL, got {dsn!r}")
    if is_postgres_url(settings.db):
        raise ConfigError("--db must name the SQLite file to copy from")
    tokenizer = get_tokenizer(settings.config.tokenizer).name
    source = open_store(settings.db, config=settings.config.store, tokenizer=tokenizer)
    try:
        target = open_store(dsn, config=settings.config.store, tokenizer=tokenizer)
        try:
            copies = copy_store(source, target, namespaces=list(namespaces) or None)
        finally:
            target.close()
    finally:
        source.close()
    if as_json:
        emit_json(
            [
                {"namespace": c.namespace, "sessions": c.sessions, "turns": c.turns, "checksum": c.checksum}
                for c in copies
            ]
        )
        return
    for c in copies:
        click.echo(f"{c.namespace}: {c.sessions} sessions, {c.turns} turns, verified {c.checksum}")
    click.echo(f"copied {len(copies)} namespaces, {sum(c.turns for c in copies)} turns")


def register(group: click.Group) -> None:
    """Add ``migrate`` to the ``stratamem`` command group."""
    group.add_command(migrate)
