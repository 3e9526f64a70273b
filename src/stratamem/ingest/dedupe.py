"""Which ingested turns a namespace already holds: the plan behind idempotent ingest.

:meth:`stratamem.Memory.ingest` calls :func:`plan_ingest` inside the
transaction that stores the turns, then records the new keys with
:func:`key_rows`, so running the same import twice stores it once. A key is
the source's message id or a hash of the record's position and content (see
:mod:`stratamem.ingest._common`); keys are scoped to a namespace and session.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import ValidationError
from ..records import StoredTurn, check_name
from ._common import IngestReport, IngestSession, content_key

__all__ = ["IngestPlan", "key_rows", "plan_ingest", "report"]


@dataclass(frozen=True, slots=True)
class IngestPlan:
    """Sessions reduced to their new turns, with the keys of those turns."""

    sessions: list[IngestSession]
    """Sessions with at least one new turn, turns in order."""
    keys: list[list[str]]
    """Keys of each planned session's turns (same shape as ``sessions``)."""
    record: list[list[bool]]
    """Whether each key is new to the store (with dedupe off, a repeated turn is stored but its key is not)."""
    stored: dict[str, int]
    """Turns to store, by session (every input session listed)."""
    skipped: dict[str, int]
    """Turns already held, by session."""


def plan_ingest(
    keys_store: Any, namespace: str, sessions: Iterable[IngestSession], *, dedupe: bool = True
) -> IngestPlan:
    """Drop the turns a session already holds (or repeats within the input) when ``dedupe``.

    Args:
        keys_store: The store's ``ingest_keys`` feature store.
        namespace: The namespace written to.
        sessions: Sessions as read by an importer.
        dedupe: ``False`` stores every turn (keys already known are not recorded again).

    Raises:
        ValidationError: A session names another namespace, has a bad name, or
            its keys do not match its turns.
    """
    out = IngestPlan([], [], [], {}, {})
    for s in sessions:
        if s.namespace not in (None, namespace):
            raise ValidationError(f"session {s.session!r} belongs to namespace {s.namespace!r}, not {namespace!r}")
        name = check_name(s.session or "default", "session")
        keys: Sequence[str] = s.keys or [content_key(i, t.to_dict()) for i, t in enumerate(s.turns)]
        if len(keys) != len(s.turns):
            raise ValidationError(f"session {name!r}: {len(keys)} keys for {len(s.turns)} turns")
        known = keys_store.known(namespace, name, keys) if keys else set()
        seen: set[str] = set()
        turns, kept, fresh = [], [], []
        for turn, key in zip(s.turns, keys, strict=True):
            repeat = key in known or key in seen
            if repeat and dedupe:
                out.skipped[name] = out.skipped.get(name, 0) + 1
                continue
            turns.append(turn)
            kept.append(key)
            fresh.append(not repeat)
            seen.add(key)
        out.stored[name] = out.stored.get(name, 0) + len(turns)
        out.skipped.setdefault(name, 0)
        if turns:
            out.sessions.append(replace(s, session=name, turns=turns, keys=tuple(kept)))
            out.keys.append(kept)
            out.record.append(fresh)
    return out


def key_rows(plan: IngestPlan, stored: Sequence[StoredTurn]) -> list[tuple[str, str, int]]:
    """``(session, key, turn_id)`` rows for the planned turns, given what the store returned (in order)."""
    flat = [(k, r) for keys, rec in zip(plan.keys, plan.record, strict=True) for k, r in zip(keys, rec, strict=True)]
    if len(flat) != len(stored):
        raise ValidationError(f"stored {len(stored)} turns for {len(flat)} planned")
    return [(st.session, k, st.id) for (k, new), st in zip(flat, stored, strict=True) if new]


def report(plan: IngestPlan, stored: Sequence[StoredTurn]) -> IngestReport:
    """The caller's account of an ingest."""
    return IngestReport(stored=dict(plan.stored), skipped=dict(plan.skipped), turn_ids=tuple(st.id for st in stored))
