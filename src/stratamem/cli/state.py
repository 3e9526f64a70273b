"""``stratamem state``: show and update the working state, instruction files and session logs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from ..tokens import get_tokenizer
from . import LazyChoice, Settings, emit_json, pass_settings

if TYPE_CHECKING:
    from ..state.working import WorkingState


__all__ = ["register"]


def _task_statuses() -> tuple[str, ...]:
    """The task statuses (imported on demand: :mod:`stratamem.state` opens stores, numpy included)."""
    from ..state.working import TASK_STATUSES

    return tuple(TASK_STATUSES)


def _state(settings: Settings, project_dir: str) -> WorkingState:
    from ..state.working import WorkingState

    cfg = settings.config
    return WorkingState(project_dir, settings.namespace, config=cfg.state, tokenizer=get_tokenizer(cfg.tokenizer))


_project = click.option(
    "--project-dir",
    "-C",
    envvar="STRATAMEM_PROJECT_DIR",
    default=".",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Project directory holding .stratamem/.",
)


@click.group()
def state() -> None:
    """The working state: goal, now, decisions, tasks, conventions (state.json)."""


@state.command()
@_project
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["prompt", "json"]),
    default="prompt",
    show_default=True,
    help="prompt: the projection a model sees; json: the canonical state.json.",
)
@click.option("--budget", type=int, default=None, help="Token budget of the projection (default: state.max_tokens).")
@pass_settings
def show(settings: Settings, project_dir: str, fmt: str, budget: int | None) -> None:
    """Print the working state, and what the projection left out."""
    ws = _state(settings, project_dir)
    if fmt == "json":
        emit_json(ws.read())
        return
    p = ws.project(budget)
    click.echo(p.text)
    left = ", ".join(f"{o.kind} {o.id} ({o.reason})" for o in p.omitted) or "nothing"
    note = f"; json because {p.format_reason}" if p.format_reason else ""
    click.echo(f"# {p.tokens}/{p.budget} tokens, {p.format}{note}; left out: {left}", err=True)


@state.command(name="set")
@_project
@click.argument("field", type=click.Choice(["goal", "now"]))
@click.argument("text")
@pass_settings
def set_(settings: Settings, project_dir: str, field: str, text: str) -> None:
    """Set the goal or what is being done now."""
    ws = _state(settings, project_dir)
    (ws.set_goal if field == "goal" else ws.set_now)(text)
    click.echo(f"{field} set")


@state.command()
@_project
@click.argument("title")
@click.option("--why", default="", help="The reason for the decision.")
@click.option("--id", "id_", default=None, help="Decision id (default: the next D-<n>).")
@pass_settings
def decide(settings: Settings, project_dir: str, title: str, why: str, id_: str | None) -> None:
    """Record a decision and its reason."""
    made = _state(settings, project_dir).decide(title, why, id=id_)
    click.echo(f"decision {made['id']} recorded")


@state.group()
def task() -> None:
    """Add and update tasks."""


@task.command(name="add")
@_project
@click.argument("title")
@click.option("--id", "id_", default=None, help="Task id (default: the next T-<n>).")
@click.option("--status", type=LazyChoice(_task_statuses), default="open", show_default=True)
@click.option("--note", default=None, help="A note, e.g. what blocks it.")
@pass_settings
def task_add(settings: Settings, project_dir: str, title: str, id_: str | None, status: str, note: str | None) -> None:
    """Add a task."""
    made = _state(settings, project_dir).add_task(title, id=id_, status=status, note=note)
    click.echo(f"task {made['id']} added")


@task.command(name="update")
@_project
@click.argument("task_id")
@click.option("--status", type=LazyChoice(_task_statuses), default=None)
@click.option("--title", default=None)
@click.option("--note", default=None)
@pass_settings
def task_update(
    settings: Settings, project_dir: str, task_id: str, status: str | None, title: str | None, note: str | None
) -> None:
    """Change a task's status, title or note."""
    made = _state(settings, project_dir).update_task(task_id, status=status, title=title, note=note)
    click.echo(f"task {made['id']} is {made['status']}")


@task.command(name="done")
@_project
@click.argument("task_id")
@pass_settings
def task_done(settings: Settings, project_dir: str, task_id: str) -> None:
    """Mark a task done."""
    _state(settings, project_dir).complete_task(task_id)
    click.echo(f"task {task_id} is done")


@task.command(name="rm")
@_project
@click.argument("task_id")
@pass_settings
def task_rm(settings: Settings, project_dir: str, task_id: str) -> None:
    """Delete a task."""
    _state(settings, project_dir).remove_task(task_id)
    click.echo(f"task {task_id} removed")


@state.command()
@_project
@click.argument("key")
@click.argument("value", required=False)
@click.option("--unset", is_flag=True, help="Remove the convention.")
@pass_settings
def convention(settings: Settings, project_dir: str, key: str, value: str | None, unset: bool) -> None:
    """Set (KEY VALUE) or remove (KEY --unset) a convention."""
    if unset == (value is not None):
        raise click.UsageError("give a VALUE or --unset, not both or neither")
    _state(settings, project_dir).set_convention(key, None if unset else value)
    click.echo(f"convention {key} {'removed' if unset else 'set'}")


@state.command()
@_project
@pass_settings
def instructions(settings: Settings, project_dir: str) -> None:
    """List STRATAMEM.md and STRATAMEM.local.md with their token counts."""
    from ..state.instructions import load_instructions

    files = load_instructions(project_dir, get_tokenizer(settings.config.tokenizer))
    emit_json([{"path": str(f.path), "scope": f.scope, "tokens": f.tokens} for f in files])


@state.command()
@_project
@pass_settings
def logs(settings: Settings, project_dir: str) -> None:
    """Rebuild the session logs (.stratamem/sessions/<namespace>/*.jsonl) from the store."""
    mem = settings.memory()
    try:
        from ..state.sessionlog import SessionLogs

        counts = SessionLogs(project_dir, mem.namespace, workdir=settings.config.state.workdir).rebuild(mem.store)
    finally:
        mem.close()
    click.echo(f"rebuilt {len(counts)} session log(s), {sum(counts.values())} turns")


def register(group: click.Group) -> None:
    """Add the ``state`` command group."""
    group.add_command(state)
