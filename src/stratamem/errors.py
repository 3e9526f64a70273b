"""One exception tree for everything stratamem raises.

Callers catch :class:`StratamemError` to handle any failure of ours; the
subclasses are chosen by what the caller will do about it::

    StratamemError
    ├── ConfigError            bad configuration (file, keys, values)        [ValueError]
    ├── ValidationError        bad input at a public entry point             [ValueError]
    │   ├── InvalidTurnError   a message/turn that cannot be stored
    │   └── BudgetError        a token budget that is zero, negative or unusable
    ├── NotFoundError          unknown namespace, session, node, item         [LookupError]
    ├── DecodeError            a CTF document or import file that will not parse [ValueError]
    ├── BackendError           the storage engine failed (I/O, locks, disk full, connection)
    │   ├── MigrationError     the schema cannot be brought to this version's head
    │   └── ArchiveError       the cold archive is missing, corrupt or out of bounds
    ├── ModelError             a summarizer, embedder or chat model call failed
    └── CompactionCancelled    a pre-compaction handler cancelled the compaction

Backend exceptions (``sqlite3.Error``, ``psycopg.Error``, ``OSError`` from the
archive) never escape: stores map them to :class:`BackendError` and re-raise
``from`` the original so the cause stays visible.
"""

from __future__ import annotations

__all__ = [
    "ArchiveError",
    "BackendError",
    "BudgetError",
    "CompactionCancelled",
    "ConflictError",
    "ConfigError",
    "DecodeError",
    "InvalidTurnError",
    "MigrationError",
    "ModelError",
    "NotFoundError",
    "StratamemError",
    "ValidationError",
]


class StratamemError(Exception):
    """Base class of every error stratamem raises."""


class ConfigError(StratamemError, ValueError):
    """The configuration is invalid (unknown key, wrong type, out-of-range value)."""


class ValidationError(StratamemError, ValueError):
    """Input to a public entry point was rejected before anything was stored.

    Attributes:
        path: Where in the input the problem is (e.g. ``"messages[3].content"``), if known.
        reason: The message without the path.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        self.path = path
        self.reason = message
        super().__init__(f"{path}: {message}" if path else message)

    def under(self, prefix: str) -> ValidationError:
        """The same error re-anchored below ``prefix`` (e.g. ``messages[3]``)."""
        path = f"{prefix}.{self.path}" if self.path else prefix
        return type(self)(self.reason, path=path)


class InvalidTurnError(ValidationError):
    """A message or turn cannot be stored (role, content, blocks, encoding)."""


class BudgetError(ValidationError):
    """A token budget is zero, negative, or too small for what must be included."""


class ConflictError(ValidationError):
    """The request clashes with what is stored (e.g. an import whose session differs from the stored one)."""


class NotFoundError(StratamemError, LookupError):
    """A namespace, session, node or item does not exist."""


class DecodeError(StratamemError, ValueError):
    """A serialized document (CTF, import file) is malformed.

    The message names where: ``<source>:<line>: <reason>`` when both are
    known (the form compilers use), ``line <line>: <reason>`` without a source.

    Attributes:
        line: 1-based line number of the first problem, if known.
        source: The file (its name) the problem is in, if known.
        reason: The message without the place.
    """

    def __init__(self, message: str, *, line: int | None = None, source: str | None = None) -> None:
        self.line = line
        self.source = source
        self.reason = message
        if source and line is not None:
            text = f"{source}:{line}: {message}"
        elif source:
            text = f"{source}: {message}"
        else:
            text = f"line {line}: {message}" if line is not None else message
        super().__init__(text)


class BackendError(StratamemError):
    """The storage backend failed: I/O error, lock timeout, disk full, lost connection.

    Attributes:
        transient: The database rolled the whole transaction back because it
            collided with another writer's (PostgreSQL's deadlock or
            serialization failure): nothing was stored, and running the same
            call again is safe. The library retries its own writes a few times
            before it gives up with such an error.
    """

    def __init__(self, *args: object, transient: bool = False) -> None:
        super().__init__(*args)
        self.transient = transient


class MigrationError(BackendError):
    """The database schema is newer than this version, or a migration failed."""


class ArchiveError(BackendError):
    """An archive reference is invalid, outside the archive, missing or corrupt."""


class ModelError(StratamemError):
    """A call to a summarizer, embedder or chat model failed or timed out."""


class CompactionCancelled(StratamemError):
    """A pre-compaction handler cancelled the compaction."""


# Tracebacks show ``stratamem.X``, the public name, rather than ``stratamem.errors.X``.
for _name in __all__:
    globals()[_name].__module__ = "stratamem"
del _name
