"""Working state: one schema-validated ``state.json`` per namespace, and its update API.

The working state (seed 004) is the project's operational memory: the goal,
what is being done now, recent decisions with their reasons, tasks with their
status, and conventions. ``state.json`` is the canonical document, validated
against ``schemas/state.schema.json`` on every read and write; ``state.toon``
beside it is derived (the prompt projection of :mod:`stratamem.state.prompt`)
and may be deleted at any time.

Files live under ``<project>/<workdir>/state/<namespace>/`` (``workdir`` is
``config.state.workdir``, default ``.stratamem``). Writes go to a temporary
file that is renamed over the old one, under an exclusive lock, so a reader
never sees half a document and a refused update leaves the file as it was.

Instruction files live in :mod:`stratamem.state.instructions`; session logs in
:mod:`stratamem.state.sessionlog`.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from ..config import StateConfig
from ..errors import BackendError, BudgetError, DecodeError, NotFoundError, ValidationError
from ..records import check_name
from ..tokens import Tokenizer, get_tokenizer
from .prompt import StateProjection, project_state

try:  # POSIX advisory locks; Windows has none, where concurrent writers are not supported.
    import fcntl
except ImportError:  # pragma: no cover - exercised only on Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["SCHEMA_VERSION", "TASK_STATUSES", "WorkingState", "empty_state", "parse_stamp", "validate_state"]

log = logging.getLogger("stratamem.state")

SCHEMA_VERSION = 1
"""Version of the state document this module reads and writes."""
TASK_STATUSES = ("open", "in_progress", "blocked", "done", "dropped")
"""Allowed task statuses; ``done`` and ``dropped`` age out of the prompt."""

_AUTO_ID = re.compile(r"^[TD]-(\d+)$")


@lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    schema = json.loads(resources.files("stratamem").joinpath("schemas/state.schema.json").read_text("utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_stamp(value: str) -> datetime:
    """Parse a state timestamp (validated ISO 8601 with offset) as an aware datetime."""
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def empty_state(at: datetime) -> dict[str, Any]:
    """A new, valid state document stamped ``at``."""
    return {
        "schema_version": SCHEMA_VERSION,
        "updated_at": _stamp(at),
        "goal": "",
        "now": "",
        "decisions": [],
        "tasks": [],
        "conventions": {},
    }


def validate_state(doc: Any) -> dict[str, Any]:
    """Check a state document against the schema and the rules it cannot express.

    Returns:
        ``doc`` itself, when valid.

    Raises:
        ValidationError: The first violation; ``path`` is its place in the
            document (``$.tasks[0].status``) and the message names the schema
            path of the rule it breaks.
    """
    error = next(iter(_validator().iter_errors(doc)), None)
    if error is not None:
        schema_path = "/" + "/".join(str(p) for p in error.schema_path)
        raise ValidationError(f"{error.message} (schema path {schema_path})", path=error.json_path)
    for key in ("decisions", "tasks"):
        seen: set[str] = set()
        for i, entry in enumerate(doc[key]):
            if entry["id"] in seen:
                raise ValidationError(
                    f"duplicate id {entry['id']!r} (ids are unique within {key})", path=f"$.{key}[{i}].id"
                )
            seen.add(entry["id"])
    stamps = [("$.updated_at", doc["updated_at"])]
    stamps += [(f"$.decisions[{i}].ts", d["ts"]) for i, d in enumerate(doc["decisions"])]
    stamps += [(f"$.tasks[{i}].updated_at", t["updated_at"]) for i, t in enumerate(doc["tasks"])]
    for path, value in stamps:
        try:
            parse_stamp(value)
        except ValueError:
            raise ValidationError(f"not a valid date-time: {value!r}", path=path) from None
    return doc


def _next_id(entries: list[dict[str, Any]], prefix: str) -> str:
    numbers = [int(m.group(1)) for e in entries if (m := _AUTO_ID.match(e["id"])) and e["id"][0] == prefix]
    return f"{prefix}-{max(numbers, default=0) + 1}"


class WorkingState:
    """The working state of one namespace, kept in files under a project directory.

    Every update reads the current document, applies the change, stamps it,
    validates the result and writes it atomically; a refused update changes
    nothing on disk.

    Args:
        project_dir: The project (repository) the state belongs to.
        namespace: Whose state; each namespace has its own files.
        config: The ``state`` section of the configuration.
        tokenizer: Counts tokens for the prompt projection (default: ``o200k_base``).
        clock: Returns the current time (injectable for tests).

    Raises:
        ValidationError: Invalid namespace name.
    """

    def __init__(
        self,
        project_dir: str | os.PathLike[str],
        namespace: str = "default",
        *,
        config: StateConfig | None = None,
        tokenizer: Tokenizer | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.namespace = check_name(namespace, "namespace")
        self.config = config or StateConfig()
        self.tokenizer = tokenizer or get_tokenizer("o200k_base")
        self.clock = clock or (lambda: datetime.now(UTC))
        self.directory = Path(project_dir) / self.config.workdir / "state" / self.namespace
        self.path = self.directory / "state.json"
        """The canonical document."""
        self.toon_path = self.directory / "state.toon"
        """The derived prompt projection, rewritten after every update and when a read finds
        ``state.json`` changed since it was made (a hand edit)."""

    # --- reading -----------------------------------------------------------------

    def read(self) -> dict[str, Any]:
        """The current document (a fresh empty one if none was written yet).

        Raises:
            DecodeError: ``state.json`` is not JSON.
            ValidationError: ``state.json`` breaks the schema (edited by hand?).
            BackendError: The file cannot be read.
        """
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return empty_state(self.clock())
        except (OSError, UnicodeDecodeError) as exc:
            raise BackendError(f"cannot read {self.path}: {exc}") from exc
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise DecodeError(f"{self.path} is not valid JSON: {exc}") from None
        doc = validate_state(doc)
        self._sync_toon(doc, text)
        return doc

    def _sync_toon(self, doc: dict[str, Any], text: str) -> None:
        """Regenerate ``state.toon`` when ``state.json`` changed behind our back (edited by hand).

        ``state.toon.src`` beside it holds the SHA-256 of the ``state.json`` it was
        made from; a different hash (or a missing file) means the projection is stale.
        Derived and disposable: a failure to rewrite it is logged, never raised.
        """
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        try:
            if self.toon_path.exists() and self._src_path.read_text(encoding="utf-8").strip() == digest:
                return
        except OSError:
            pass
        try:
            projection = project_state(doc, self.tokenizer, config=self.config, budget=None, now=self.clock())
            _atomic_write(self.toon_path, projection.text + "\n")
            _atomic_write(self._src_path, digest + "\n")
        except (BackendError, BudgetError) as exc:
            log.warning("state.toon of %s not regenerated: %s", self.path, exc)

    @property
    def _src_path(self) -> Path:
        return self.directory / "state.toon.src"

    def project(self, budget: int | None = None) -> StateProjection:
        """The state rendered for a prompt within ``budget`` tokens (see :mod:`stratamem.state.prompt`).

        Raises:
            BudgetError: ``budget`` is outside ``[config.min_tokens, config.max_tokens]``.
        """
        return project_state(self.read(), self.tokenizer, config=self.config, budget=budget, now=self.clock())

    # --- writing -----------------------------------------------------------------

    def replace(self, doc: Any) -> dict[str, Any]:
        """Validate ``doc`` and make it the state, as given (``updated_at`` included).

        Raises:
            ValidationError: ``doc`` is invalid; the stored state is unchanged.
            BackendError: The files cannot be written.
        """
        doc = validate_state(copy.deepcopy(doc))
        with self._locked():
            self._write(doc)
        return doc

    def set_goal(self, text: str) -> dict[str, Any]:
        """Set the goal (the project's current objective)."""
        return self._update(lambda d, at: d.__setitem__("goal", text))

    def set_now(self, text: str) -> dict[str, Any]:
        """Set what is being done now."""
        return self._update(lambda d, at: d.__setitem__("now", text))

    def decide(self, title: str, why: str = "", *, id: str | None = None) -> dict[str, Any]:
        """Record a decision and its reason, stamped now; returns the decision.

        Raises:
            ValidationError: Empty title, duplicate or malformed id, text too long.
        """
        made: dict[str, Any] = {}

        def change(d: dict[str, Any], at: str) -> None:
            made.update(id=id or _next_id(d["decisions"], "D"), title=title, why=why, ts=at)
            d["decisions"].append(made)

        self._update(change)
        return made

    def add_task(
        self, title: str, *, id: str | None = None, status: str = "open", note: str | None = None
    ) -> dict[str, Any]:
        """Add a task, stamped now; returns it.

        Raises:
            ValidationError: Empty title, unknown status, duplicate or malformed id.
        """
        made: dict[str, Any] = {}

        def change(d: dict[str, Any], at: str) -> None:
            made.update(id=id or _next_id(d["tasks"], "T"), title=title, status=status, updated_at=at)
            if note is not None:
                made["note"] = note
            d["tasks"].append(made)

        self._update(change)
        return made

    def update_task(
        self, id: str, *, status: str | None = None, title: str | None = None, note: str | None = None
    ) -> dict[str, Any]:
        """Change a task's status, title or note, stamped now; returns it.

        Raises:
            NotFoundError: No task has this id.
            ValidationError: Unknown status or invalid text.
        """
        found: dict[str, Any] = {}

        def change(d: dict[str, Any], at: str) -> None:
            task = self._task(d, id)
            for key, value in (("status", status), ("title", title), ("note", note)):
                if value is not None:
                    task[key] = value
            task["updated_at"] = at
            found.update(task)

        self._update(change)
        return found

    def complete_task(self, id: str) -> dict[str, Any]:
        """Mark a task done (it ages out of the prompt after ``done_tasks_max_age_days``)."""
        return self.update_task(id, status="done")

    def remove_task(self, id: str) -> None:
        """Delete a task from the state.

        Raises:
            NotFoundError: No task has this id.
        """
        self._update(lambda d, at: d["tasks"].remove(self._task(d, id)))

    def set_convention(self, key: str, value: str | None) -> dict[str, Any]:
        """Set a convention (``language: Python``); ``None`` removes it.

        Raises:
            NotFoundError: Removing a convention that does not exist.
        """

        def change(d: dict[str, Any], at: str) -> None:
            if value is not None:
                d["conventions"][key] = value
            elif key in d["conventions"]:
                del d["conventions"][key]
            else:
                raise NotFoundError(f"no convention {key!r}")

        return self._update(change)

    def promote(self, done: Sequence[str] = (), decisions: Sequence[tuple[str, str]] = ()) -> tuple[int, int]:
        """Record completed work and settled decisions (seed 004: "when something is completed or
        stabilized, promote to medium-term"), in one update; returns ``(tasks, decisions)`` changed.

        A finished item whose title matches an unfinished task (ignoring case) marks that task
        ``done``; an unknown one is added as a ``done`` task; one already done is skipped. A
        decision whose title is already recorded is skipped. Titles are cut to 300 characters.

        Raises:
            ValidationError: The result would break the schema (nothing is written).
        """
        counts = [0, 0]

        def change(d: dict[str, Any], at: str) -> None:
            titles = {t["title"].casefold(): t for t in d["tasks"]}
            for title in dict.fromkeys(t.strip()[:300] for t in done if t.strip()):
                task = titles.get(title.casefold())
                if task is None:
                    task = {"id": _next_id(d["tasks"], "T"), "title": title, "status": "done", "updated_at": at}
                    d["tasks"].append(task)
                    titles[title.casefold()] = task
                elif task["status"] in ("done", "dropped"):
                    continue
                task.update(status="done", updated_at=at)
                counts[0] += 1
            known = {x["title"].casefold() for x in d["decisions"]}
            for title, why in decisions:
                title = title.strip()[:300]
                if title and title.casefold() not in known:
                    d["decisions"].append({"id": _next_id(d["decisions"], "D"), "title": title, "why": why, "ts": at})
                    known.add(title.casefold())
                    counts[1] += 1

        self._update(change)
        return counts[0], counts[1]

    # --- internals ---------------------------------------------------------------

    @staticmethod
    def _task(doc: dict[str, Any], id: str) -> dict[str, Any]:
        for task in doc["tasks"]:
            if task["id"] == id:
                return task
        raise NotFoundError(f"no task {id!r}")

    def _update(self, change: Callable[[dict[str, Any], str], Any]) -> dict[str, Any]:
        with self._locked():
            doc = self.read()
            at = _stamp(self.clock())
            change(doc, at)
            doc["updated_at"] = at
            validate_state(doc)
            self._write(doc)
        return doc

    @contextmanager
    def _locked(self) -> Iterator[None]:
        # Read-modify-write must not interleave between processes (CLI and agent).
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle = open(self.directory / ".lock", "a+")  # held for the block
        except OSError as exc:
            raise BackendError(f"cannot open the state directory {self.directory}: {exc}") from exc
        try:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_EX)
            yield
        finally:
            handle.close()  # closing releases the lock

    def _write(self, doc: dict[str, Any]) -> None:
        projection = project_state(doc, self.tokenizer, config=self.config, budget=None, now=self.clock())
        text = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
        _atomic_write(self.path, text)
        _atomic_write(self.toon_path, projection.text + "\n")
        _atomic_write(self._src_path, hashlib.sha256(text.encode("utf-8")).hexdigest() + "\n")

    def __repr__(self) -> str:
        return f"WorkingState({str(self.path)!r})"


def _atomic_write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so readers see the old or the new file, never half."""
    tmp = None
    try:
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False
        ) as fh:
            tmp = fh.name
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise BackendError(f"cannot write {path}: {exc}") from exc
