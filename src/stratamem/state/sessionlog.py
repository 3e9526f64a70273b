"""Session logs: one JSON Lines file per session under the project's ``.stratamem/``.

Seed 004 keeps a readable log of each session beside the project. In
stratamem the store is canonical, so the logs are a derived, disposable copy:
:meth:`SessionLogs.append` adds turns as they are stored, and
:meth:`SessionLogs.rebuild` rewrites every log of a namespace from the store.

Layout: ``<project>/<workdir>/sessions/<namespace>/<session>.jsonl``. Each line
is a stored turn: ``id``, ``seq`` and ``tokens`` followed by the canonical turn
fields (:meth:`stratamem.records.Turn.to_dict`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..errors import BackendError, DecodeError, NotFoundError, ValidationError
from ..records import StoredTurn, check_name
from ..store.base import Store

__all__ = ["SessionLogs", "log_line"]


def log_line(stored: StoredTurn) -> str:
    """The JSON Lines record of one stored turn (without the newline)."""
    record: dict[str, Any] = {"id": stored.id, "seq": stored.seq, "tokens": stored.tokens}
    record.update(stored.turn.to_dict())
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


class SessionLogs:
    """The session logs of one namespace in a project directory.

    Args:
        project_dir: The project's root.
        namespace: Whose sessions.
        workdir: Directory under the project (``config.state.workdir``).

    Raises:
        ValidationError: Invalid namespace name.
    """

    def __init__(self, project_dir: str | os.PathLike[str], namespace: str, *, workdir: str = ".stratamem") -> None:
        self.namespace = check_name(namespace, "namespace")
        self.directory = Path(project_dir) / workdir / "sessions" / self.namespace
        """Where this namespace's logs live."""

    def path(self, session: str) -> Path:
        """The log file of ``session``."""
        return self.directory / f"{check_name(session, 'session')}.jsonl"

    def append(self, turns: Iterable[StoredTurn]) -> int:
        """Append stored turns to their sessions' logs; returns how many were written.

        Raises:
            ValidationError: A turn belongs to another namespace.
            BackendError: A log cannot be written.
        """
        by_session: dict[str, list[str]] = {}
        for st in turns:
            if st.namespace != self.namespace:
                raise ValidationError(f"turn {st.id} belongs to namespace {st.namespace!r}, not {self.namespace!r}")
            by_session.setdefault(st.session, []).append(log_line(st))
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            for session, lines in by_session.items():
                with open(self.path(session), "a", encoding="utf-8") as fh:
                    fh.write("\n".join(lines) + "\n")
        except OSError as exc:
            raise BackendError(f"cannot write session log in {self.directory}: {exc}") from exc
        return sum(map(len, by_session.values()))

    def rebuild(self, store: Store) -> dict[str, int]:
        """Rewrite every session log of the namespace from ``store``; returns turns per session.

        Each file is written to a temporary name and renamed, so a reader sees
        the old log or the new one. Logs of sessions the store does not know
        are left alone.

        Raises:
            BackendError: The store or the files failed.
        """
        counts: dict[str, int] = {}
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            for session in store.sessions(self.namespace):
                target = self.path(session.name)
                tmp = target.with_name(f".{target.name}.tmp")
                n = 0
                with open(tmp, "w", encoding="utf-8") as fh:
                    for st in store.turns(self.namespace, session.name):
                        fh.write(log_line(st) + "\n")
                        n += 1
                os.replace(tmp, target)
                counts[session.name] = n
        except OSError as exc:
            raise BackendError(f"cannot rebuild session logs in {self.directory}: {exc}") from exc
        return counts

    def read(self, session: str) -> list[dict[str, Any]]:
        """The records of one session's log, in order.

        Raises:
            NotFoundError: The session has no log.
            DecodeError: A line is not JSON (``line`` names it).
            BackendError: The file cannot be read.
        """
        path = self.path(session)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise NotFoundError(f"no session log for {session!r} at {path}") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise BackendError(f"cannot read {path}: {exc}") from exc
        out = []
        # Split on LF only: JSON written with ensure_ascii=False may hold U+2028, which splitlines() breaks on.
        for i, line in enumerate(text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"), 1):
            try:
                out.append(json.loads(line))
            except ValueError as exc:
                raise DecodeError(f"{path}: not JSON: {exc}", line=i) from None
        return out
