"""Copy a store into another (SQLite into PostgreSQL) and prove the copy is exact.

Each namespace is copied inside one transaction of the target: sessions with
their labels and creation times, then every turn in session order, so each
target session gets the same gap-free sequence numbers. Before committing, the
target's rows are read back and compared with the source by count and by a
checksum over every field that defines a turn; a mismatch rolls the namespace
back. Turn ids are assigned by the target and may differ.

Only the canonical record (namespaces, sessions, turns) is copied; derived
data (segments, items, embeddings) is rebuilt from it on the target.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby

from ...errors import BackendError, NotFoundError, ValidationError
from ...records import Session, StoredTurn, format_timestamp
from ..base import Store, TurnBatch

__all__ = ["NamespaceCopy", "checksum", "copy_store"]

# Tagged with its algorithm so a future format change is detected, not mixed up.
_PREFIX = "sha256:"


@dataclass(frozen=True, slots=True)
class NamespaceCopy:
    """What was copied for one namespace, and the checksum both sides agree on."""

    namespace: str
    """The namespace."""
    sessions: int
    """Sessions copied."""
    turns: int
    """Turns copied."""
    checksum: str
    """``sha256:`` digest of the sessions and turns (see :func:`checksum`)."""


def checksum(sessions: Sequence[Session], turns: Iterable[StoredTurn]) -> tuple[str, int]:
    """Digest of a namespace's canonical record, independent of store-assigned ids.

    Covers each session's name, labels and creation time, and each turn's
    session, sequence number, token count and full canonical form.

    Returns:
        ``(digest, number of turns)``.
    """
    h = hashlib.sha256()
    for s in sessions:
        h.update(
            json.dumps(
                ["session", s.name, s.platform, s.channel, format_timestamp(s.created_at)], ensure_ascii=False
            ).encode()
        )
        h.update(b"\n")
    n = 0
    for t in turns:
        h.update(
            json.dumps(
                ["turn", t.session, t.seq, t.tokens, t.turn.to_dict()], ensure_ascii=False, sort_keys=True
            ).encode()
        )
        h.update(b"\n")
        n += 1
    return _PREFIX + h.hexdigest(), n


def copy_store(
    source: Store, target: Store, *, namespaces: Sequence[str] | None = None, batch_turns: int = 2000
) -> list[NamespaceCopy]:
    """Copy namespaces from ``source`` into ``target`` and verify each copy.

    Args:
        source: Store to read (not modified).
        target: Store to write; the namespaces must not hold sessions there yet.
        namespaces: Which namespaces (default: all of ``source``).
        batch_turns: Turns per ``append`` call (all inside the namespace's transaction).

    Returns:
        One :class:`NamespaceCopy` per namespace, in the order copied.

    Raises:
        NotFoundError: A requested namespace is not in ``source``.
        ValidationError: A namespace already has sessions in ``target``.
        BackendError: A store failed, or the copy did not verify (that
            namespace was rolled back; earlier namespaces stay copied).
    """
    names = list(namespaces) if namespaces is not None else source.namespaces()
    for ns in names:
        if not source.has_namespace(ns):
            raise NotFoundError(f"unknown namespace {ns!r} in the source store")
        if target.sessions(ns):
            raise ValidationError(f"namespace {ns!r} already has sessions in the target store; copy into an empty one")
    return [_copy_namespace(source, target, ns, batch_turns) for ns in names]


def _copy_namespace(source: Store, target: Store, ns: str, batch_turns: int) -> NamespaceCopy:
    sessions = source.sessions(ns)
    expected, count = checksum(sessions, source.iter_turns(ns))
    with target.transaction():
        for s in sessions:
            target.ensure_session(ns, s.name, platform=s.platform, channel=s.channel, created_at=s.created_at)
        pending: list[StoredTurn] = []
        for t in source.iter_turns(ns):
            pending.append(t)
            if len(pending) >= batch_turns:
                _flush(target, ns, pending)
        _flush(target, ns, pending)
        got, got_count = checksum(target.sessions(ns), target.iter_turns(ns))
        if (got, got_count) != (expected, count):
            raise BackendError(
                f"copy of namespace {ns!r} did not verify ({got_count} of {count} turns, "
                f"checksum {got} != {expected}); rolled back"
            )
    return NamespaceCopy(ns, len(sessions), count, expected)


def _flush(target: Store, ns: str, pending: list[StoredTurn]) -> None:
    batches = [
        TurnBatch(name, [t.turn for t in group], [t.tokens for t in group])
        for name, group in ((k, list(g)) for k, g in groupby(pending, key=lambda t: t.session))
    ]
    target.append(ns, batches)
    pending.clear()
