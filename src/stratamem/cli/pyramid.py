"""Pyramid commands: seal, tiers, nodes, expand, retention."""

from __future__ import annotations

import click

from . import IdParam, Settings, emit_json, pass_settings

__all__ = ["register"]


@click.command()
@click.option("--session", "-s", default="default", show_default=True, help="Session whose open turns to seal.")
@pass_settings
def seal(settings: Settings, session: str) -> None:
    """Seal the open turns of a session into a segment now (a manual topic boundary)."""
    mem = settings.memory()
    node = mem.seal(session)
    click.echo(
        f"sealed node {node.id}: turns {node.seq_range[0]}-{node.seq_range[1]} of {session!r} "
        f"({node.turn_count} turns, {node.tokens} tokens)"
        if node and node.seq_range
        else f"nothing open in session {session!r}"
    )
    mem.close()


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_settings
def tiers(settings: Settings, as_json: bool) -> None:
    """Storage per tier (nodes, turns, tokens, bytes, compression) and summary compression per level."""
    mem = settings.memory()
    stats = [s.to_dict() for s in mem.pyramid.stats()]
    levels = [s.to_dict() for s in mem.pyramid.level_stats()]
    spend = mem.pyramid.spend().to_dict()
    mem.close()
    if as_json:
        emit_json({"tiers": stats, "levels": levels, "summary_spend": spend})
        return
    click.echo(f"{'tier':<6} {'nodes':>6} {'turns':>7} {'tokens':>9} {'view':>9} {'bytes':>10} {'ratio':>7}")
    for s in stats:
        click.echo(
            f"{s['tier']:<6} {s['nodes']:>6} {s['turns']:>7} {s['tokens']:>9} {s['view_tokens']:>9} "
            f"{s['bytes']:>10} {s['compression_ratio']:>7}"
        )
    click.echo(f"{'level':<6} {'nodes':>6} {'turns':>7} {'tokens':>9} {'summary':>9} {'ratio':>7}")
    for lv in levels:
        click.echo(
            f"{lv['level']:<6} {lv['nodes']:>6} {lv['turns']:>7} {lv['tokens']:>9} {lv['summary_tokens']:>9} "
            f"{lv['compression_ratio']:>7}"
        )
    # Seed 000: what summarizing cost beside what it saves per prompt.
    click.echo(
        f"summary spend: {spend['calls']} calls, {spend['input_tokens']} input + {spend['output_tokens']} "
        f"output tokens; saved per prompt: {spend['tokens_saved']} tokens"
    )
    for lv in spend["levels"]:
        click.echo(
            f"  level {lv['level']}: {lv['calls']} calls, {lv['input_tokens']} input + "
            f"{lv['output_tokens']} output tokens"
        )


@click.command()
@click.option("--level", type=int, default=None, help="Only this level (1 = segments).")
@click.option("--tier", type=click.Choice(["hot", "warm", "cold"]), default=None, help="Only this tier.")
@click.option("--session", "-s", default=None, help="Only segments of this session.")
@pass_settings
def nodes(settings: Settings, level: int | None, tier: str | None, session: str | None) -> None:
    """List pyramid nodes as JSON (summary, key facts, themes, provenance, tier)."""
    mem = settings.memory()
    emit_json([n.to_dict() for n in mem.pyramid.nodes(level=level, tier=tier, session=session)])
    mem.close()


@click.command()
@click.argument("id", type=IdParam("node"))
@pass_settings
def expand(settings: Settings, id: str) -> None:
    """Print the full turns behind an id as JSON Lines.

    ID is what search and contexts show: node:N (or N) the turns a node covers
    (from the archive for cold segments), turn:N that turn, system:HASH every
    copy of that system prompt.
    """
    import json

    with settings.memory() as mem:
        turns = mem.expand(id)
    for t in turns:
        click.echo(json.dumps({"id": t.id, "session": t.session, "seq": t.seq, **t.turn.to_dict()}, ensure_ascii=False))


@click.command()
@pass_settings
def retention(settings: Settings) -> None:
    """Expire archived cold content older than pyramid.cold_retention_days (0 = keep forever)."""
    from ..pyramid.retention import apply_retention

    mem = settings.memory()

    emit_json(apply_retention(mem.pyramid).to_dict())
    mem.close()


def register(group: click.Group) -> None:
    """Add the pyramid commands to ``group``."""
    for cmd in (seal, tiers, nodes, expand, retention):
        group.add_command(cmd)
