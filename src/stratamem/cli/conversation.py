"""``stratamem conversation show``: the agent-loop state of a conversation.

Prints, per session with state: the compaction count, the last compaction's
status and error, summarizer failures, compactions the minimum-gain rule put
off, the last provider-reported usage, and the current checkpoint text.
"""

from __future__ import annotations

import click

from . import Settings, emit_json, pass_settings

__all__ = ["register"]


@click.group("conversation")
def conversation() -> None:
    """Agent-loop conversations (compaction state, checkpoints)."""


@conversation.command("show")
@click.option("--session", "-s", default=None, help="One session (default: every session with state).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_settings
def show(settings: Settings, session: str | None, as_json: bool) -> None:
    """Checkpoint, compaction count, failures and last usage of agent-loop conversations."""
    with settings.memory() as mem:
        from ..agentloop.report import conversation_report

        report = conversation_report(mem, session)
    if as_json:
        emit_json(report)
        return
    if not report["conversations"]:
        click.echo(f"no agent-loop conversations in namespace {report['namespace']!r}")
        return
    for c in report["conversations"]:
        usage = c["last_usage"]
        used = (
            f"{usage.get('input_tokens', '?'):,} in / {usage.get('output_tokens', '?')} out "
            f"(estimated {usage.get('estimated', '?'):,})"
            if usage
            else "none reported"
        )
        click.echo(
            f"session {c['session']}: {c['compaction_count']} compaction(s), last {c['last_status']}, "
            f"{c['failures']} failure(s), {c['deferred']} deferred, {c['turn_count']} message(s)"
        )
        if c["last_error"]:
            click.echo(f"  last error: {c['last_error']}")
        click.echo(f"  last usage: {used}")
        click.echo(
            f"  files: {len(c['files_read'])} read, {len(c['files_modified'])} modified; updated {c['updated_at']}"
        )
        click.echo("  checkpoint:" if c["checkpoint"] else "  checkpoint: none yet")
        for line in (c["checkpoint"] or "").splitlines():
            click.echo(f"    {line}")


def register(group: click.Group) -> None:
    """Add ``conversation`` to ``group``."""
    group.add_command(conversation)
