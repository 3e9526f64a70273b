"""Intake commands: ``ingest`` (a file or a whole folder of logs) and ``watch`` (keep a store current).

Both read through :func:`stratamem.ingest.read_file` and store with
:meth:`stratamem.Memory.ingest`, one transaction per file and namespace, so a
refused file stores nothing and the others still go in; a log read again
stores only what is new. ``watch`` polls a folder: a bounded number of files
per poll, a progress line on stderr, and a clean stop on Ctrl-C or SIGTERM
with a summary.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections import Counter, defaultdict
from contextlib import ExitStack
from pathlib import Path
from types import FrameType
from typing import Any

import click
from tqdm import tqdm

from ..errors import StratamemError
from ..ingest import INGEST_FORMATS, SETTLE_SECONDS, IngestReport, IngestSession, read_file
from ..ingest.tree import Watcher, find_files
from . import Settings, pass_settings

__all__ = ["register"]

# Inputs with more turns than this get a progress bar (on a terminal).
_PROGRESS_MIN_TURNS = 500

_FORMAT = click.option(
    "--format",
    "fmt",
    type=click.Choice(INGEST_FORMATS),
    default="auto",
    show_default=True,
    help="Input format (docs/formats.md); auto detects it.",
)
_SESSION = click.option("--session", "-s", default=None, help="Session for inputs that name none (default: 'default').")
_SETTLE = click.option(
    "--settle",
    type=click.FloatRange(min=0),
    default=SETTLE_SECONDS,
    show_default=True,
    help="Seconds a log must be unchanged before a reply at its end counts as complete (0: always).",
)


class _Tally:
    """What an ingest of one or more files did, for the summary lines."""

    def __init__(self) -> None:
        self.stored = 0
        self.skipped = 0
        self.held = 0
        self.continued = 0
        self.files = 0
        self.failed: list[tuple[str, str]] = []
        self.sessions: dict[str, dict[str, int]] = defaultdict(dict)  # namespace -> session -> stored
        self.records: Counter[str] = Counter()
        self.branched: dict[str, str] = {}

    def add(self, sessions: list[IngestSession], reports: dict[str, IngestReport]) -> None:
        self.files += 1
        for s in sessions:
            self.records.update(s.skipped)
        for ns, r in reports.items():
            self.stored += r.total_stored
            self.skipped += r.total_skipped
            self.held += sum(r.held_back.values())
            self.continued += r.continued
            self.branched.update(r.branched)
            for name, n in r.stored.items():
                self.sessions[ns][name] = self.sessions[ns].get(name, 0) + n

    def lines(self, default_ns: str) -> list[str]:
        n_sessions = sum(len(v) for v in self.sessions.values())
        out = [
            f"ingested {self.stored} turns in {n_sessions} session(s) into {len(self.sessions)} namespace(s): "
            f"{', '.join(self.sessions)}; {self.skipped} already stored (skipped)"
        ]
        for ns, by in self.sessions.items():
            # Conversations before their sub-agent and branch sessions.
            names = sorted(by, key=lambda n: any(m in n for m in (".agent-", ".sidechain-", ".branch-")))
            shown = ", ".join(names[:3]) + (f", ... ({len(names)} in all)" if len(names) > 3 else "")
            out.append(f"  {ns}: session(s) {shown}: {sum(by.values())} stored")
        if self.held:
            out.append(
                f"  {self.held} turn(s) held back: the log is still being written; "
                "they are stored by a later ingest (or `watch`) once it settles"
            )
        if self.continued:
            out.append(f"  {self.continued} stored repl(ies) had grown: their new blocks were stored as continuations")
        for old, new in self.branched.items():
            out.append(f"  {old}: a rewind abandoned its stored turns; the conversation continues in {new}")
        if self.records:
            out.append(
                "  records that are not messages, skipped: "
                + ", ".join(f"{k} {n}" for k, n in sorted(self.records.items(), key=lambda kv: (-kv[1], kv[0])))
            )
        others = [ns for ns in self.sessions if ns != default_ns]
        if others:
            out.append(f"  read it with: stratamem -n {others[0]} context --explain")
        return out


def _store(
    settings: Settings,
    sessions: list[IngestSession],
    dedupe: bool,
    mems: dict[str, Any] | None = None,
    progress: Any = None,
) -> dict[str, IngestReport]:
    """Store sessions, one ingest (one transaction) per namespace; ``mems`` keeps memories open across calls."""
    by_ns: dict[str, list[IngestSession]] = defaultdict(list)
    for s in sessions:
        by_ns[s.namespace or settings.namespace].append(s)
    reports = {}
    for ns, group in by_ns.items():
        if mems is not None:
            reports[ns] = mems[ns].ingest(group, dedupe=dedupe, progress=progress)
            continue
        with settings.memory(ns) as mem:
            # The bar counts turns as they are embedded and indexed (batches after the commit).
            reports[ns] = mem.ingest(group, dedupe=dedupe, progress=progress)
    return reports


@click.command()
@click.argument("path", type=click.Path(exists=True))
@_FORMAT
@_SESSION
@click.option(
    "--dedupe",
    type=click.Choice(["on", "off"]),
    default="on",
    show_default=True,
    help="Skip messages already stored (off: store them again).",
)
@_SETTLE
@pass_settings
def ingest(settings: Settings, path: str, fmt: str, session: str | None, dedupe: str, settle: float) -> None:
    """Read a conversation file, or every log in a folder, into memory: Claude Code, Codex, Gemini CLI,
    aider, a ChatGPT export, OpenAI/Anthropic/Responses messages, JSON Lines of turns, LoCoMo.

    A file is validated whole first and stored in one transaction, so a bad
    file stores nothing. Messages already stored are skipped, so ingesting a
    file again (or a log that has grown) stores only what is new; a reply still
    being written is held back until the log settles (--settle). A folder
    (e.g. ~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp) is read file
    by file: a refused file is reported and the others still go in (exit 1 if
    any was refused). LoCoMo samples go to their own namespaces: ``locomo-<id>``,
    or the ``-n`` namespace (a prefix ``<n>-<id>`` when the file holds several).
    """
    source = click.get_current_context().find_root().get_parameter_source("namespace")
    explicit = source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT")
    namespace = settings.namespace if explicit else None
    tally = _Tally()
    if Path(path).is_dir():
        unreadable: list[tuple[Path, str]] = []
        files = find_files(path, unreadable)
        for p, why in unreadable:
            tally.failed.append((str(p.relative_to(path)), f"cannot read: {why}"))
            click.echo(f"refused {p.relative_to(path)}: cannot read: {why}", err=True)
        for f in tqdm(files, unit="file", desc="ingest", disable=None if len(files) > 1 else True, file=sys.stderr):
            try:
                sessions = read_file(f, fmt, session=session, namespace=namespace, settle=settle)
                tally.add(sessions, _store(settings, sessions, dedupe == "on"))
            except StratamemError as exc:
                tally.failed.append((str(f.relative_to(path)), str(exc)))
                tqdm.write(f"refused {f.relative_to(path)}: {type(exc).__name__}: {exc}", file=sys.stderr)
        for line in tally.lines(settings.namespace):
            click.echo(line)
        click.echo(f"  {tally.files} file(s) read, {len(tally.failed)} refused, of {len(files)} under {path}")
        if tally.failed:
            raise SystemExit(1)
        return
    sessions = read_file(path, fmt, session=session, namespace=namespace, settle=settle)
    total = sum(len(s.turns) for s in sessions)
    bar = tqdm(
        total=total, unit="turn", desc="ingest", disable=None if total > _PROGRESS_MIN_TURNS else True, file=sys.stderr
    )
    try:
        tally.add(sessions, _store(settings, sessions, dedupe == "on", progress=bar.update))
    finally:
        bar.close()
    for line in tally.lines(settings.namespace):
        click.echo(line)


@click.command()
@click.argument("path", type=click.Path(exists=True))
@_FORMAT
@_SESSION
@_SETTLE
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05, max=3600),
    default=2.0,
    show_default=True,
    help="Seconds between polls of the folder.",
)
@click.option(
    "--max-files",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Files read per poll at most (the rest wait for the next poll).",
)
@pass_settings
def watch(
    settings: Settings, path: str, fmt: str, session: str | None, settle: float, interval: float, max_files: int
) -> None:
    """Keep memory current with a folder of logs (or one log): store what is new as it is written.

    Polls PATH every --interval seconds and ingests each log that changed
    (new turns only; replies still being written wait until the log settles).
    Prints a progress line on stderr; stops cleanly on Ctrl-C or SIGTERM,
    finishing the file it is reading, with a summary.
    """
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, _stop) for s in (signal.SIGINT, signal.SIGTERM)}
    watcher = Watcher(Path(path), settle)
    tally = _Tally()
    reported: set[Path] = set()
    polls = 0
    started = time.monotonic()
    click.echo(f"watching {path} every {interval:g}s (Ctrl-C to stop)")
    try:
        with ExitStack() as stack:
            mems: dict[str, Any] = _Memories(settings, stack)
            while not stop.is_set():
                polls += 1
                before = (tally.stored, len(tally.failed))
                due = watcher.due()
                for p, why in watcher.unreadable.items():
                    if p not in reported:  # once, until it is readable again and fails anew
                        reported.add(p)
                        tally.failed.append((str(p), f"cannot read: {why}"))
                        click.echo(f"refused {p}: cannot read: {why}", err=True)
                reported &= set(watcher.unreadable)
                for f in due[:max_files]:
                    if stop.is_set():
                        break
                    _watch_one(settings, watcher, f, fmt, session, settle, tally, mems)
                if (tally.stored, len(tally.failed)) != before or polls == 1:
                    read = min(len(due), max_files)
                    waiting = sum(1 for st in watcher.seen.values() if st.held_back)
                    click.echo(
                        f"[watch] poll {polls}: {read} file(s) read, {len(due) - read} waiting; "
                        f"{tally.stored} turns stored in all, {waiting} log(s) with a reply still being written",
                        err=True,
                    )
                stop.wait(interval)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    click.echo(
        f"stopped after {polls} poll(s) in {time.monotonic() - started:.1f}s: {tally.files} read(s) of "
        f"{len(watcher.seen)} file(s), {tally.stored} turns stored, {tally.skipped} already stored, "
        f"{len(tally.failed)} refused"
    )


class _Memories(dict[str, Any]):
    """One open :class:`~stratamem.Memory` per namespace, opened on first use, closed with the stack."""

    def __init__(self, settings: Settings, stack: ExitStack) -> None:
        super().__init__()
        self._settings = settings
        self._stack = stack

    def __missing__(self, ns: str) -> Any:
        mem = self._stack.enter_context(self._settings.memory(ns))
        self[ns] = mem
        return mem


def _watch_one(
    settings: Settings,
    watcher: Watcher,
    f: Path,
    fmt: str,
    session: str | None,
    settle: float,
    tally: _Tally,
    mems: dict[str, Any],
) -> None:
    """Read one due file and store what is new; a refused file is reported once and left until it changes."""
    try:
        before = f.stat()
    except FileNotFoundError:
        return  # removed since it was listed; a file that cannot be read is refused by read_file below
    try:
        sessions = read_file(f, fmt, session=session, settle=settle)
        reports = _store(settings, sessions, True, mems)
    except StratamemError as exc:
        watcher.done(f, before, held_back=False, error=str(exc))
        tally.failed.append((str(f), str(exc)))
        click.echo(f"refused {f}: {type(exc).__name__}: {exc}", err=True)
        return
    tally.add(sessions, reports)
    watcher.done(f, before, held_back=any(s.held_back for s in sessions))


def register(group: click.Group) -> None:
    """Add the intake commands to ``group``."""
    for cmd in (ingest, watch):
        group.add_command(cmd)
