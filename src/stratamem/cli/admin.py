"""Admin commands: ``forget``, ``search``, ``namespaces``.

``stratamem forget`` deletes for good, so it asks first: it shows what would
go and waits for ``y`` on a terminal. Without a terminal on stdin (a script,
a pipe, a cron job) there is nobody to ask, so it refuses unless ``--yes``
says the caller already decided.
"""

from __future__ import annotations

import sys

import click

from . import IdParam, Settings, emit_json, pass_settings

__all__ = ["register"]


@click.command()
@click.option(
    "--turn",
    "turns",
    type=IdParam("turn"),
    multiple=True,
    help="Id to forget (repeatable): turn:N or N, node:N (the turns a summary covers), "
    "system:HASH (every copy of a system prompt).",
)
@click.option("--session", "-s", default=None, help="Forget this whole session.")
@click.option("--all", "all_namespace", is_flag=True, help="Forget the whole namespace.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (required without a terminal).")
@click.option(
    "--vacuum",
    is_flag=True,
    help="Rebuild the storage afterwards (SQLite VACUUM; PostgreSQL "
    "VACUUM FULL of the affected tables, which locks them while it runs).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@pass_settings
def forget(
    settings: Settings,
    turns: tuple[str, ...],
    session: str | None,
    all_namespace: bool,
    yes: bool,
    vacuum: bool,
    as_json: bool,
) -> None:
    """Delete turns, a session or the whole namespace, with everything derived from them.

    --turn takes the ids search, contexts and manifests show (turn:805, node:50, system:HASH).

    Summaries are rebuilt from what remains, memory items lose the forgotten
    sources, archive files are rewritten; nothing can bring it back.
    """
    given = [
        name
        for name, on in (("--turn", bool(turns)), ("--session", session is not None), ("--all", all_namespace))
        if on
    ]
    if len(given) != 1:
        raise click.UsageError(f"give exactly one of --turn, --session, --all (got {', '.join(given) or 'none'})")
    target = (
        f"{len(turns)} id(s) ({', '.join(turns[:10])})"
        if turns
        else f"session {session!r}"
        if session is not None
        else "every session"
    )
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("stdin is not a terminal, so forget cannot ask for confirmation: pass --yes")
        click.confirm(
            f"Forget {target} of namespace {settings.namespace!r} and everything derived from it? "
            "This cannot be undone",
            abort=True,
        )
    with settings.memory() as mem:
        report = mem.forget(turns=list(turns) or None, session=session, all_namespace=all_namespace, vacuum=vacuum)
    if as_json:
        emit_json(report.to_dict())
        return
    click.echo(
        f"forgot {report.turns} turn(s) of namespace {report.namespace!r}: {report.nodes_rebuilt} "
        f"node(s) rebuilt, {report.nodes_removed} removed; {report.items_removed} item(s) removed, "
        f"{report.items_resourced} re-sourced; {report.manifests_removed} manifest(s) removed; "
        f"{len(report.archive_files)} archive file(s) rewritten"
    )
    for w in report.warnings:
        click.echo(f"warning: {w}", err=True)


@click.command()
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(1, 1000), default=10, show_default=True, help="Most hits.")
@click.option("--session", "-s", default=None, help="Only this session.")
@click.option("--json", "as_json", is_flag=True, help="Print hits as JSON (with score breakdowns).")
@pass_settings
def search(settings: Settings, query: str, k: int, session: str | None, as_json: bool) -> None:
    """Ranked turns and summaries for QUERY."""
    with settings.memory() as mem:
        hits = mem.search(query, k=k, session=session)
    if as_json:
        emit_json([h.to_dict() for h in hits])
        return
    for h in hits:
        text = " ".join(h.text.split())
        click.echo(f"{h.score:5.3f}  {h.id:<12} {h.session or '-':<14} {text[:100]}")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_settings
def namespaces(settings: Settings, as_json: bool) -> None:
    """Every namespace in the database with its sessions, turns and tokens."""
    with settings.memory() as mem:
        stats = mem.namespaces()
    if as_json:
        emit_json(
            [
                {
                    "namespace": s.namespace,
                    "sessions": s.sessions,
                    "turns": s.turns,
                    "tokens": s.tokens,
                    "text_bytes": s.text_bytes,
                }
                for s in stats
            ]
        )
        return
    for s in stats:
        click.echo(f"{s.namespace:<24} {s.sessions:>6} sessions {s.turns:>9} turns {s.tokens:>11} tokens")


def register(group: click.Group) -> None:
    """Add ``forget``, ``search`` and ``namespaces`` to ``group``."""
    for command in (forget, search, namespaces):
        group.add_command(command)
