"""Memory-item commands: ``stratamem items add|recall|spill|promote|status|list|confirm|reject`` and ``metrics``.

Each command opens the selected namespace's memory, makes one call on
:class:`stratamem.items.Items` and prints its JSON form (``metrics`` prints
Prometheus text by default).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from ..records.items import ITEM_TYPES, SCOPES, TIERS
from . import Settings, emit_json, pass_settings

__all__ = ["register"]


def _with_items(settings: Settings, fn: Callable[[Any], Any]) -> Any:
    mem = settings.memory()
    try:
        return fn(mem.items)
    finally:
        mem.close()


@click.group()
def items() -> None:
    """Long-term memory items in hot / warm / cold tiers (seed 003)."""


@items.command("add")
@click.argument("content")
@click.option("--type", "kind", type=click.Choice(ITEM_TYPES), default="fact", show_default=True, help="Item type.")
@click.option("--key", default=None, help="Subject key; replaces live items with the same key.")
@click.option("--supersedes", type=int, multiple=True, help="Id of an older item this one replaces (repeatable).")
@click.option("--session", "-s", default=None, help="Session the item is added in.")
@click.option(
    "--scope",
    type=click.Choice(SCOPES),
    default="namespace",
    show_default=True,
    help="namespace: every session sees it; session: only --session does.",
)
@click.option("--tier", type=click.Choice(TIERS), default="hot", show_default=True, help="Tier to add to.")
@pass_settings
def add_cmd(
    settings: Settings,
    content: str,
    kind: str,
    key: str | None,
    supersedes: tuple[int, ...],
    session: str | None,
    scope: str,
    tier: str,
) -> None:
    """Add CONTENT as an item (spilling older hot items if the hot limit would be passed)."""
    emit_json(
        _with_items(
            settings,
            lambda it: it.add(
                content, kind, key=key, supersedes=supersedes, session=session, tier=tier, scope=scope
            ).to_dict(),
        )
    )


@items.command("recall")
@click.argument("query")
@click.option("--limit", "-k", type=click.IntRange(min=1), default=3, show_default=True, help="Most items.")
@click.option("--no-promote", is_flag=True, help="Do not promote matches to hot.")
@click.option("--type", "types", type=click.Choice(ITEM_TYPES), multiple=True, help="Only this type (repeatable).")
@click.option("--include-superseded", is_flag=True, help="Also return superseded items.")
@click.option(
    "--session",
    "-s",
    default=None,
    help="The session reading: namespace-wide items and its own (default: namespace-wide only).",
)
@pass_settings
def recall_cmd(
    settings: Settings,
    query: str,
    limit: int,
    no_promote: bool,
    types: tuple[str, ...],
    include_superseded: bool,
    session: str | None,
) -> None:
    """Search warm and cold items for QUERY (access counts are updated; matches may be promoted)."""
    emit_json(
        _with_items(
            settings,
            lambda it: it.recall(
                query,
                limit,
                auto_promote=False if no_promote else None,
                types=types or None,
                include_superseded=include_superseded,
                session=session,
            ).to_dict(),
        )
    )


@items.command("spill")
@click.option("--count", type=click.IntRange(min=1), default=None, help="How many (default: config spill_count).")
@click.option("--id", "ids", type=int, multiple=True, help="A specific hot item (repeatable).")
@click.option("--session", "-s", default=None, help="Choose among the hot items this session sees.")
@pass_settings
def spill_cmd(settings: Settings, count: int | None, ids: tuple[int, ...], session: str | None) -> None:
    """Move hot items to warm/cold: lowest relevance and oldest first, or the given ids."""
    emit_json(_with_items(settings, lambda it: it.spill(count, ids=ids or None, session=session).to_dict()))


@items.command("promote")
@click.argument("item_id", type=int)
@pass_settings
def promote_cmd(settings: Settings, item_id: int) -> None:
    """Move ITEM_ID to hot, spilling others if needed."""
    emit_json(_with_items(settings, lambda it: it.promote(item_id).to_dict()))


@items.command("status")
@click.option("--session", "-s", default=None, help="Count only what this session sees (default: every item).")
@pass_settings
def status_cmd(settings: Settings, session: str | None) -> None:
    """Items and tokens per tier, hot utilization, suggestions and metrics."""
    emit_json(_with_items(settings, lambda it: it.status(session).to_dict()))


@items.command("list")
@click.option("--tier", type=click.Choice(TIERS), default=None, help="Only this tier.")
@click.option("--live", is_flag=True, help="Leave out superseded and rejected items.")
@click.option(
    "--session",
    "-s",
    default=None,
    help="Only what this session sees: namespace-wide items and its own (default: every item).",
)
@pass_settings
def list_cmd(settings: Settings, tier: str | None, live: bool, session: str | None) -> None:
    """Items of the namespace, by id."""
    emit_json(
        _with_items(settings, lambda it: [i.to_dict() for i in it.list(tier, include_dead=not live, session=session)])
    )


@items.command("confirm")
@click.argument("item_id", type=int)
@pass_settings
def confirm_cmd(settings: Settings, item_id: int) -> None:
    """Confirm an auto-extracted item."""
    emit_json(_with_items(settings, lambda it: it.confirm(item_id).to_dict()))


@items.command("reject")
@click.argument("item_id", type=int)
@pass_settings
def reject_cmd(settings: Settings, item_id: int) -> None:
    """Reject an auto-extracted item (kept, marked, out of hot and recall)."""
    emit_json(_with_items(settings, lambda it: it.reject(item_id).to_dict()))


@click.command("metrics")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("prometheus", "json")),
    default="prometheus",
    show_default=True,
    help="Output format.",
)
@click.option("--all-namespaces", is_flag=True, help="Every namespace of the store, not just the selected one.")
@pass_settings
def metrics_cmd(settings: Settings, fmt: str, all_namespaces: bool) -> None:
    """Memory-item metrics: hot utilization, spills, recalls, promotions, recall latency, hit rate."""
    from ..items.metrics import to_prometheus
    from ..pyramid.metrics import PyramidMetrics, pyramid_prometheus

    mem = settings.memory()
    try:
        names = mem.store.namespaces() if all_namespaces else [mem.namespace]
        found = [mem.for_namespace(n).items.metrics() for n in names]
        pyramids = (
            [PyramidMetrics.of(mem.for_namespace(n).pyramid) for n in names]
            if mem.config.pyramid.enabled and hasattr(mem.store, "nodes")
            else []
        )
    finally:
        mem.close()
    if fmt == "json":
        emit_json([m.to_dict() for m in found])
    else:
        click.echo(to_prometheus(found) + (pyramid_prometheus(pyramids) if pyramids else ""), nl=False)


def register(group: click.Group) -> None:
    """Add ``items`` and ``metrics`` to ``group``."""
    group.add_command(items)
    group.add_command(metrics_cmd)
