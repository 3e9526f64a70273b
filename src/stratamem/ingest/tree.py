"""Conversation files in a folder, and which of them changed: ``stratamem ingest DIR`` and ``watch``.

:func:`find_files` lists what a tool's own folder holds, by name, without
opening anything (a ``~/.claude`` folder also holds settings and credentials,
which are never read):

* JSON Lines anywhere (``*.jsonl``, ``*.ndjson``): Claude Code sessions and
  sub-agent logs (``~/.claude/projects``), Codex rollouts (``~/.codex/sessions``),
  Gemini CLI session logs (``~/.gemini/tmp/*/chats``), turns files;
* JSON by its tool's naming: Codex ``rollout-*.json``, Gemini ``session-*.json``,
  ``checkpoint-*.json`` and ``logs.json`` (only where there are no session logs
  beside it: they hold the same prompts), ChatGPT ``conversations*.json``;
  Claude Code's ``agent-*.meta.json`` are read with their log;
* aider histories (``*.chat.history.md``).

Other files, and folders that are version control or caches, are left out.
Files come oldest first (by modification time), so the newest conversation is
stored last and is the one a context continues by default.

:class:`Watcher` remembers what it saw of each file (size and time), so a poll
reports only files that changed, plus files whose last read held a reply back
and that have since been quiet long enough for it to count as complete.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FileState", "Watcher", "find_files", "is_conversation_file"]

_SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", "cache", "shell-snapshots"}
)
_LINES = (".jsonl", ".ndjson")
_AIDER = ".chat.history.md"


def is_conversation_file(path: Path) -> bool:
    """Whether a file's name says it is a conversation this package reads (see the module docstring)."""
    name = path.name
    if name.endswith(_LINES) or name.endswith(_AIDER):
        return True
    if not name.endswith(".json") or name.endswith(".meta.json"):
        return False
    if name.startswith(("rollout-", "session-", "checkpoint-", "conversations")):
        return True
    if name == "logs.json":
        # Gemini's prompt log repeats the prompts its session logs hold: read it only without them.
        chats = path.parent / "chats"
        return not (chats.is_dir() and any(chats.iterdir()))
    return False


def _walk(root: Path, unreadable: list[tuple[Path, str]]) -> Iterator[Path]:
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue  # removed since it was listed: nothing to read
        except OSError as exc:
            unreadable.append((folder, f"{type(exc).__name__}: {exc.strerror or exc}"))
            continue
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    if e.name not in _SKIP_DIRS:
                        stack.append(Path(e.path))
                elif e.is_file():
                    yield Path(e.path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                unreadable.append((Path(e.path), f"{type(exc).__name__}: {exc.strerror or exc}"))


def find_files(root: str | os.PathLike[str], unreadable: list[tuple[Path, str]] | None = None) -> list[Path]:
    """Conversation files under ``root`` (recursively), oldest first; ``root`` itself if it is a file.

    A folder or file that cannot be read (permissions, I/O) is never skipped in silence: it goes
    to ``unreadable`` as ``(path, reason)`` for the caller to report. One removed while the walk
    runs is simply gone.
    """
    base = Path(root)
    if base.is_file():
        return [base]
    problems: list[tuple[Path, str]] = [] if unreadable is None else unreadable
    found = []
    for p in _walk(base, problems):
        if is_conversation_file(p):
            try:
                found.append((p.stat().st_mtime_ns, str(p), p))
            except FileNotFoundError:
                continue
            except OSError as exc:
                problems.append((p, f"{type(exc).__name__}: {exc.strerror or exc}"))
    return [p for _, _, p in sorted(found)]


@dataclass(slots=True)
class FileState:
    """What a watcher last saw of a file."""

    size: int
    """Size in bytes when it was read."""
    mtime_ns: int
    """Modification time when it was read."""
    held_back: bool = False
    """The read held a reply back (the file was still changing): read again once it is quiet."""
    error: str | None = None
    """The error the read ended with, if any (not retried until the file changes)."""


@dataclass(slots=True)
class Watcher:
    """Which files under a folder need reading: new, changed, or quiet long enough to settle a held reply.

    Args:
        root: The folder (or one file).
        settle: Seconds a file must be unchanged before a held-back reply counts as complete.
    """

    root: Path
    settle: float
    seen: dict[Path, FileState] = field(default_factory=dict)
    unreadable: dict[Path, str] = field(default_factory=dict)
    """Folders and files the last :meth:`due` could not read, with the reason (for the caller to report)."""

    def due(self, now: float | None = None) -> list[Path]:
        """Files to read now, oldest change first."""
        now = time.time() if now is None else now
        out: list[tuple[int, str, Path]] = []
        problems: list[tuple[Path, str]] = []
        for p in find_files(self.root, problems):
            try:
                st = p.stat()
            except FileNotFoundError:
                continue  # removed since the walk: nothing to read
            except OSError as exc:
                problems.append((p, f"{type(exc).__name__}: {exc.strerror or exc}"))
                continue
            old = self.seen.get(p)
            changed = old is None or (old.size, old.mtime_ns) != (st.st_size, st.st_mtime_ns)
            settled = old is not None and old.held_back and now - st.st_mtime >= self.settle
            if changed or settled:
                out.append((st.st_mtime_ns, str(p), p))
        self.unreadable = dict(problems)
        return [p for _, _, p in sorted(out)]

    def done(self, path: Path, before: os.stat_result, *, held_back: bool, error: str | None = None) -> None:
        """Record that ``path`` was read as ``before`` (its stat taken just before reading).

        A file that grew while it was read differs from ``before`` and is due again at the next poll.
        """
        self.seen[path] = FileState(before.st_size, before.st_mtime_ns, held_back, error)
