"""The ``Store`` protocol: the domain operations every storage backend provides.

Turns are the canonical record; every other table is derived from them and can
be rebuilt. A store keeps namespaces strictly apart: every method takes the
namespace and touches only its rows. Every write runs in one transaction, so a
failure half-way leaves the store as it was. Backend exceptions never escape:
they are mapped to :class:`~stratamem.errors.BackendError`.

Backends: :mod:`stratamem.store.sqlite` (embedded default) and
:mod:`stratamem.store.postgres` (scale-out).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar, runtime_checkable

from ..records import ConversationState, Session, StoredTurn, Turn

T = TypeVar("T")

__all__ = ["ConversationStore", "NamespaceStats", "Store", "TurnBatch"]


@dataclass(frozen=True, slots=True)
class TurnBatch:
    """Turns to append to one session, with their exact token counts."""

    session: str
    """Session name (created if missing)."""
    turns: Sequence[Turn]
    """Turns in order."""
    tokens: Sequence[int]
    """Token count of each turn, same length as ``turns``."""
    platform: str | None = None
    """Platform label used when the session is created."""
    channel: str | None = None
    """Channel label used when the session is created."""


@dataclass(frozen=True, slots=True)
class NamespaceStats:
    """Counts and sizes for one namespace."""

    namespace: str
    """The namespace."""
    sessions: int
    """Number of sessions."""
    turns: int
    """Number of turns."""
    tokens: int
    """Sum of the turns' token counts."""
    text_bytes: int
    """UTF-8 bytes of the turns' stored content."""


@runtime_checkable
class Store(Protocol):
    """Durable storage for namespaces, sessions and turns (and, later, derived data)."""

    backend: str
    """``sqlite`` or ``postgres``."""

    tokenizer: str
    """Name of the tokenizer the store's token counts were made with (recorded on
    first use; e.g. ``o200k_base``). A ``Memory`` counting with another one is refused."""

    # Feature stores (one module per backend: ``store/<backend>_<feature>.py``).
    # Both built-in backends have all of them; ``Memory`` checks at construction
    # that a store has the ones its configuration uses. Read-only: a backend
    # builds each on first use (``SharedFeatures``).
    @property
    def embeddings(self) -> Any:
        """Content-addressed embedding cache."""
        ...

    @property
    def nodes(self) -> Any:
        """Pyramid nodes (segments, consolidations, tiers)."""
        ...

    @property
    def conversations(self) -> Any:
        """Agent-loop conversation state."""
        ...

    @property
    def items(self) -> Any:
        """Long-term memory items."""
        ...

    @property
    def manifests(self) -> Any:
        """Recorded context manifests."""
        ...

    @property
    def ingest_keys(self) -> Any:
        """Dedupe keys of ingested records (used by ``Memory.ingest``)."""
        ...

    @property
    def idempotency(self) -> Any:
        """Idempotency keys of writes (used by ``Memory.add(idempotency_key=...)`` and the HTTP writes)."""
        ...

    @property
    def forgetting(self) -> Any:
        """Deleting turns and everything derived from them (``apply`` a forget plan)."""
        ...

    def append(self, namespace: str, batches: Sequence[TurnBatch]) -> list[StoredTurn]:
        """Store turns in one transaction: all of them or none.

        Creates the namespace and sessions as needed and assigns each turn the
        next gap-free sequence number of its session.

        Returns:
            The stored turns, in input order.

        Raises:
            BackendError: The write failed; nothing was stored.
        """
        ...

    def ensure_session(
        self,
        namespace: str,
        session: str,
        *,
        platform: str | None = None,
        channel: str | None = None,
        created_at: datetime | None = None,
    ) -> Session:
        """Return the session, creating it (and the namespace) if missing.

        ``platform``, ``channel`` and ``created_at`` apply only when it is created.
        """
        ...

    def session(self, namespace: str, session: str) -> Session:
        """Return an existing session.

        Raises:
            NotFoundError: No such namespace or session.
        """
        ...

    def sessions(self, namespace: str) -> list[Session]:
        """All sessions of a namespace, oldest first (empty if the namespace is unknown)."""
        ...

    def namespaces(self) -> list[str]:
        """All namespace names, sorted."""
        ...

    def has_namespace(self, namespace: str) -> bool:
        """Whether the namespace exists."""
        ...

    def namespace_stats(self) -> list[NamespaceStats]:
        """Every namespace with its counts, sorted by name."""
        ...

    def turns(
        self,
        namespace: str,
        session: str | None = None,
        *,
        ids: Sequence[int] | None = None,
        min_seq: int | None = None,
        max_seq: int | None = None,
        newest_first: bool = False,
        limit: int | None = None,
        role: str | None = None,
    ) -> list[StoredTurn]:
        """Turns of a namespace (optionally one session), ordered by session then sequence.

        ``newest_first`` reverses the order; ``ids`` restricts to those turn ids
        (ids of another namespace are never returned); ``role`` to turns of that role.
        """
        ...

    def latest_session(self, namespace: str) -> str | None:
        """The session of the most recently stored turn (``None`` if there is none)."""
        ...

    def iter_turns(self, namespace: str, *, batch_size: int = 1000) -> Iterator[StoredTurn]:
        """Every turn of a namespace in (session, sequence) order, streamed."""
        ...

    def turn_ids(self, namespace: str) -> list[int]:
        """Ids of every turn of the namespace, ascending (no content is read)."""
        ...

    def turn_count(self, namespace: str) -> int:
        """Number of turns in the namespace."""
        ...

    def has_tool_call(self, namespace: str, session: str, tool_use_id: str) -> bool:
        """Whether an assistant turn of the session made the tool call ``tool_use_id``."""
        ...

    def stats(self, namespace: str) -> NamespaceStats:
        """Counts and sizes for the namespace."""
        ...

    def size_bytes(self) -> int:
        """Bytes the store occupies on disk (0 if not file-backed)."""
        ...

    def part_bytes(self) -> dict[str, int]:
        """Bytes per part (turns, recall index, items, pyramid, manifests, ...; see ``store/part_bytes.py``)."""
        ...

    def transaction(self) -> AbstractContextManager[None]:
        """A write transaction: store calls inside it commit or roll back together."""
        ...

    def in_transaction(self) -> bool:
        """Whether the calling thread is inside :meth:`transaction`."""
        ...

    def retrying(self, work: Callable[[], T]) -> T:
        """``work()``, run again while the database rolls its transaction back under contention (a transient error)."""
        ...

    def close(self) -> None:
        """Release connections. Idempotent."""
        ...


class ConversationStore(Protocol):
    """Where conversation states live."""

    def get(self, namespace: str, session: str) -> ConversationState | None:
        """The saved state, or ``None`` if the conversation has none yet."""
        ...

    def put(self, state: ConversationState) -> None:
        """Save ``state``, replacing any earlier one for its (namespace, session)."""
        ...
