"""Core commands: init, add, context, status, export, import, demo (``ingest`` and ``watch``: :mod:`.intake`).

Every command opens its memory in a ``with`` block, so the store is closed even
when the command fails, and a file it cannot open or write is one line on
stderr (exit 1), never a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from importlib import resources
from typing import IO, Any

import click

from ..text import CONTEXT_FORMATS, SYSTEM_PROMPTS
from ..tokens import PROVIDER_FACTORS
from . import LazyChoice, Settings, emit_json, pass_settings
from .intake import ingest

__all__ = ["register"]


def _policy_names() -> tuple[str, ...]:
    """The context policies (imported on demand: :mod:`stratamem.context` is the whole assembly)."""
    from ..context.policies import policy_names

    return tuple(policy_names())


@contextmanager
def _file(path: str, mode: str) -> Iterator[IO[str]]:
    """Open ``path`` as UTF-8 text; any OS error (open, read, write) becomes one clear CLI error."""
    verb = "write" if "w" in mode else "read"
    try:
        with open(path, mode, encoding="utf-8", errors="strict") as handle:
            yield handle
    except OSError as exc:
        raise click.ClickException(f"cannot {verb} {path}: {exc.strerror or exc}") from exc


@click.command()
@pass_settings
def init(settings: Settings) -> None:
    """Create the database (and its schema) if it does not exist."""
    with settings.memory() as mem:
        mem.store.ensure_session(mem.namespace, "default")
    click.echo(f"initialized {settings.db} (namespace {mem.namespace!r})")


@click.command()
@click.option("--role", type=click.Choice(["system", "user", "assistant"]), default="user", show_default=True)
@click.option("--content", "-c", required=True, help="Message text ('-' reads stdin).")
@click.option("--session", "-s", default="default", show_default=True)
@click.option("--name", default=None, help="Speaker name.")
@pass_settings
def add(settings: Settings, role: str, content: str, session: str, name: str | None) -> None:
    """Add one message to a session."""
    if content == "-":
        content = sys.stdin.read()
    msg = {"role": role, "content": content}
    if name:
        msg["name"] = name
    with settings.memory() as mem:
        [stored] = mem.add(msg, session=session, format="turns")
    click.echo(f"turn {stored.id} (session {stored.session!r} #{stored.seq}, {stored.tokens} tokens)")


@click.command()
@click.argument("query", required=False)
@click.option("--budget", "-b", type=int, default=None, help="Token budget (default from config).")
@click.option("--session", "-s", default=None, help="Session (default: the most recent).")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(CONTEXT_FORMATS),
    default="text",
    show_default=True,
    help="text, or provider messages as JSON: openai (Chat Completions), responses (Responses input items), anthropic.",
)
@click.option(
    "--policy", type=LazyChoice(_policy_names), default=None, help="Budget policy (default from config: hybrid)."
)
@click.option("--explain", is_flag=True, help="Print the manifest: every item, its tokens and reason.")
@click.option("--json", "as_json", is_flag=True, help="Print the rendered context and manifest as JSON.")
@click.option(
    "--now",
    "now",
    default=None,
    metavar="ISO",
    help="When the query is asked (ISO 8601; naive = UTC) for relative times such as "
    "'two weeks ago' (default: the newest turn's time).",
)
@click.option(
    "--project-dir",
    "-C",
    "project_dir",
    envvar="STRATAMEM_PROJECT_DIR",
    type=click.Path(file_okay=False),
    default=None,
    help="Project whose instruction files (STRATAMEM.md) and working state go into the context.",
)
@click.option(
    "--provider",
    type=click.Choice(sorted(PROVIDER_FACTORS)),
    default=None,
    help="Whose token counting the budget is in (default: the format's provider).",
)
@click.option("--model", default=None, help="Target model (recorded in the manifest's counting).")
@click.option(
    "--system-prompts",
    "system_prompts",
    type=click.Choice(SYSTEM_PROMPTS),
    default="session",
    show_default=True,
    help="Whose system prompts go in: the session's own, or every session's of the namespace.",
)
@pass_settings
def context(
    settings: Settings,
    query: str | None,
    budget: int | None,
    session: str | None,
    fmt: str,
    policy: str | None,
    explain: bool,
    as_json: bool,
    now: str | None = None,
    project_dir: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    system_prompts: str = "session",
) -> None:
    """Assemble the context for the next model call within a token budget."""
    when = None
    if now is not None:
        try:
            when = datetime.fromisoformat(now)
        except ValueError as exc:
            raise click.BadParameter(f"not an ISO 8601 date/time: {now!r}", param_hint="--now") from exc
    with settings.memory() as mem:
        ctx = mem.context(
            query,
            budget=budget,
            session=session,
            format=fmt,
            policy=policy,
            now=when,
            provider=provider,
            model=model,
            project_dir=project_dir,
            system_prompts=system_prompts,
        )
    if as_json:
        emit_json(ctx.to_dict())
        return
    if fmt == "text":
        click.echo(ctx.text)
    else:
        emit_json({"system": ctx.system, "messages": list(ctx.messages)} if fmt == "anthropic" else list(ctx.messages))
    if explain:
        m = ctx.manifest
        click.echo(
            f"\n# manifest: {m.total_tokens}/{m.budget} tokens ({_counted(m.counting, m.tokenizer)}), "
            f"policy {m.policy}, {len(m.items)} item(s)"
        )
        for note in m.notes:
            click.echo(f"# note: {note}")
        for it in m.items:
            score = " ".join(f"{k}={v:.3g}" for k, v in it.score.items())
            click.echo(
                f"#  {it.id:<16} {it.kind:<13} {it.tier or '-':<5} {it.format:<8} {it.tokens:>6} "
                f"{it.reason} {score}".rstrip()
            )
        for nm in m.near_misses:
            dup = f" duplicate_of={nm.duplicate_of}" if nm.duplicate_of else ""
            click.echo(f"#  (left out) {nm.id:<16} {nm.kind:<13} {nm.tokens:>6} {nm.reason}{dup}")


def _counted(counting: Any, tokenizer: str) -> str:
    """How the manifest's totals were counted, e.g. ``o200k_base x 1.07 for anthropic``."""
    if not counting or counting.get("factor", 1.0) == 1.0:
        return tokenizer
    return f"{counting['counter']} x {counting['factor']:g} for {counting['provider']}, {counting['source']}"


@click.command()
@click.option("--limit", "-l", type=int, default=10, show_default=True, help="How many, newest first.")
@click.option("--id", "manifest_id", type=int, default=None, help="Show one manifest in full.")
@pass_settings
def manifests(settings: Settings, limit: int, manifest_id: int | None) -> None:
    """Recorded context manifests: what each assembled prompt held and why."""
    with settings.memory() as mem:
        if manifest_id is not None:
            found = mem.store.manifests.get(mem.namespace, manifest_id)
            if found is None:
                raise click.ClickException(f"NotFoundError: no manifest {manifest_id} in {mem.namespace!r}")
            emit_json({"id": found.id, "session": found.session, **found.data})
            return
        rows = mem.store.manifests.latest(mem.namespace, limit)
    for m in rows:
        d = m.data
        reasons: dict[str, int] = {}
        for it in d["items"]:
            reasons[it["reason"]] = reasons.get(it["reason"], 0) + 1
        summary = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
        click.echo(
            f"#{m.id:<6} {d['timestamp']}  {d['total_tokens']:>6}/{d['budget_tokens']:<6} {d['policy']:<11} "
            f"{m.session or '-'}: {summary or 'empty'}"
        )


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_settings
def status(settings: Settings, as_json: bool) -> None:
    """Counts, tokens and bytes of the namespace, and the store's bytes per part (bytes.turns, ...)."""
    with settings.memory() as mem:
        st = mem.status()
    if as_json:
        emit_json(st.to_dict())
        return
    for key, value in st.to_dict().items():
        if key == "part_bytes":
            for part, size in value.items():
                click.echo(f"{'bytes.' + part:<21} {size:,}")
            continue
        click.echo(f"{key:<21} {value:,}" if isinstance(value, int) else f"{key:<21} {value}")


@click.command("export")
@click.argument("path", type=click.Path(dir_okay=False, allow_dash=True), default="-")
@pass_settings
def export_cmd(settings: Settings, path: str) -> None:
    """Export the namespace's sessions and turns as JSON Lines (to PATH or stdout)."""
    with settings.memory() as mem:
        if path == "-":
            n_sessions, n_turns = mem.export(sys.stdout)
        else:
            with _file(path, "w") as out:
                n_sessions, n_turns = mem.export(out)
    click.echo(f"exported {n_turns} turns in {n_sessions} session(s)", err=True)


@click.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option(
    "--dedupe",
    type=click.Choice(["on", "off"]),
    default="on",
    show_default=True,
    help="Skip turns the namespace already holds (off: refuse existing sessions).",
)
@pass_settings
def import_cmd(settings: Settings, path: str, dedupe: str) -> None:
    """Import an export file into the namespace (all or nothing; turns already held are skipped)."""
    with settings.memory() as mem:
        if path == "-":
            n_sessions, n_turns, skipped = mem.import_(sys.stdin, dedupe=dedupe == "on")
        else:
            with _file(path, "r") as src:
                n_sessions, n_turns, skipped = mem.import_(src, dedupe=dedupe == "on")
    click.echo(
        f"imported {n_turns} turns in {n_sessions} session(s) into {mem.namespace!r}; "
        f"{skipped} already stored (skipped)"
    )


@click.command()
@click.option(
    "--query",
    "-q",
    default="What did we decide about the database and the retry policy?",
    show_default=True,
    help="Query for the demo context.",
)
@click.option("--budget", "-b", type=int, default=1500, show_default=True)
@pass_settings
def demo(settings: Settings, query: str, budget: int) -> None:
    """Ingest the bundled sample conversation and assemble a context with its manifest."""
    sample = resources.files("stratamem") / "data" / "sample_conversation.jsonl"
    with resources.as_file(sample) as path:
        ctx = click.get_current_context()
        with settings.memory() as mem:
            fresh = mem.status().turns == 0
        if fresh:
            ctx.invoke(ingest, path=str(path), fmt="auto", session=None, dedupe="on", settle=0.0)
        else:
            click.echo(f"{settings.db} already holds namespace {settings.namespace!r}; not ingesting again")
    click.echo(f"\n$ stratamem context {json.dumps(query)} --budget {budget} --explain\n")
    ctx.invoke(context, query=query, budget=budget, session=None, fmt="text", policy=None, explain=True, as_json=False)
    click.echo("\n$ stratamem status\n")
    ctx.invoke(status, as_json=False)


def register(group: click.Group) -> None:
    """Add the core commands to ``group``."""
    for cmd in (init, add, context, manifests, status, export_cmd, import_cmd, demo):
        group.add_command(cmd)
