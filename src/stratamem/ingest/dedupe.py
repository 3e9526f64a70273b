"""Which ingested turns a namespace already holds: the plan behind idempotent ingest.

:meth:`stratamem.Memory.ingest` calls :func:`plan_ingest` inside the
transaction that stores the turns, then records the new keys with
:func:`key_rows`, so running the same import twice stores it once. A key is
the source's message id or a hash of the record's position and content (see
:mod:`stratamem.ingest._common`); keys are scoped to a namespace and session.

Three rules make a log that is still growing safe to read again and again:

* **Parts.** A turn built from several records records every record's key. If
  a stored turn's record gained parts since (a reply that was still streaming),
  a turn of the new parts' blocks continues it, so their tool results still
  answer a stored call (readers hold such replies back while the file is live,
  so this is the rare case of a reply that paused longer than that).
* **Families.** The sessions of one conversation tree (``family``: a session
  and its ``.branch-``/``.agent-`` sessions) share keys: a turn stored in any of
  them is not stored again when a later read places it elsewhere.
* **Paths.** New turns go after the session's stored turns only if its last
  stored turn is on their path. When a rewind has since abandoned it, they
  start a branch session (``<session>.branch-<first new record>``) instead of
  being mixed after turns the conversation no longer contains.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import InvalidTurnError, ValidationError
from ..records import Block, StoredTurn, Turn, check_name
from ._common import IngestReport, IngestSession, Part, branch_session, content_key

__all__ = ["IngestPlan", "at_source", "key_rows", "plan_ingest", "report"]


@dataclass(slots=True)
class IngestPlan:
    """Sessions reduced to their new turns, with the keys each stored turn records."""

    sessions: list[IngestSession] = field(default_factory=list)
    """Sessions with at least one new turn, turns in order (named by the session they go to)."""
    keys: list[list[tuple[str, ...]]] = field(default_factory=list)
    """Per planned session and turn, the keys to record for it (none: with dedupe off, a repeat)."""
    stored: dict[str, int] = field(default_factory=dict)
    """Turns to store, by session (every input session listed)."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Turns already held, by session."""
    held_back: dict[str, int] = field(default_factory=dict)
    """Turns the reader held back, by session."""
    continued: int = 0
    """Stored turns continued by a turn of their new parts."""
    branched: dict[str, str] = field(default_factory=dict)
    """Input session -> the branch session its new turns went to."""


def _blocks_of(turn: Turn, parts: Sequence[Part], fresh: Sequence[bool]) -> list[Block]:
    """The blocks of ``turn`` that came from the parts marked fresh."""
    out: list[Block] = []
    at = 0
    for p, new in zip(parts, fresh, strict=True):
        if new:
            out.extend(turn.blocks[at : at + p.blocks])
        at += p.blocks
    return out


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
            its keys (or parts) do not match its turns.
    """
    out = IngestPlan()
    seen: dict[str, str] = {}  # key -> session planned for, within this input
    for s in sessions:
        if s.namespace not in (None, namespace):
            raise ValidationError(f"session {s.session!r} belongs to namespace {s.namespace!r}, not {namespace!r}")
        name = check_name(s.session or "default", "session")
        keys: Sequence[str] = s.keys or [content_key(i, t.to_dict()) for i, t in enumerate(s.turns)]
        if len(keys) != len(s.turns):
            raise ValidationError(f"session {name!r}: {len(keys)} keys for {len(s.turns)} turns")
        parts: Sequence[tuple[Part, ...]] = s.parts or [()] * len(s.turns)
        if len(parts) != len(s.turns):
            raise ValidationError(f"session {name!r}: parts for {len(parts)} of {len(s.turns)} turns")
        for turn, ps in zip(s.turns, parts, strict=True):
            if ps and sum(p.blocks for p in ps) != len(turn.blocks):
                raise ValidationError(f"session {name!r}: a turn's parts do not add up to its blocks")
        lines = s.lines if len(s.lines) == len(s.turns) else (None,) * len(s.turns)
        out.skipped.setdefault(name, 0)
        out.stored.setdefault(name, 0)
        if s.held_back:
            out.held_back[name] = out.held_back.get(name, 0) + s.held_back
        wanted = [*keys, *(p.key for ps in parts for p in ps)]
        holders = _holders(keys_store, namespace, name, s.family, wanted) if keys else {}
        wanted_set = set(wanted)
        holders.update((k, v) for k, v in seen.items() if k in wanted_set)
        new: list[tuple[Turn, tuple[str, ...], int | None]] = []
        known = dict(holders)  # grows with this input's own new records, so a repeat within it is caught
        for turn, key, ps, line in zip(s.turns, keys, parts, lines, strict=True):
            part_keys = tuple(p.key for p in ps if p.key != key)
            if key not in known:
                new.append((turn, (key, *part_keys), line))
                # A record repeated later in this input is a repeat of this one.
                known.update(dict.fromkeys((key, *part_keys), name))
                continue
            if not dedupe:
                new.append((turn, (), line))
                continue
            fresh = [p.key not in known for p in ps]
            # Parts never recorded at all: the turn was stored whole (by an earlier version); leave it.
            if not ps or all(fresh) or not any(fresh):
                out.skipped[name] += 1
                continue
            blocks = _blocks_of(turn, ps, fresh)
            if not blocks:
                out.skipped[name] += 1
                continue
            cont = replace(turn, content=tuple(blocks), metadata={**turn.metadata, "continues": key})
            cont_keys = tuple(p.key for p, f in zip(ps, fresh, strict=True) if f)
            new.append((cont, cont_keys, line))
            known.update(dict.fromkeys(cont_keys, name))
            out.continued += 1
        if not new:
            continue
        target = (
            name if not dedupe else _target(keys_store, namespace, name, s.family, keys, wanted, holders, new[0][1])
        )
        if target != name:
            out.branched[name] = target
            out.stored.setdefault(target, 0)
        for _, ks, _ in new:
            seen.update(dict.fromkeys(ks, target))
        out.stored[target] += len(new)
        out.sessions.append(
            replace(
                s,
                session=target,
                turns=[t for t, _, _ in new],
                keys=tuple(ks[0] if ks else "" for _, ks, _ in new),
                parts=(),
                lines=tuple(n for _, _, n in new),
            )
        )
        out.keys.append([tuple(dict.fromkeys(ks)) for _, ks, _ in new])
    return out


def _holders(keys_store: Any, namespace: str, name: str, family: str | None, wanted: list[str]) -> dict[str, str]:
    """key -> the session holding it: the session itself, or any session of its family."""
    sessions = keys_store.family(namespace, family) if family else []
    if name not in sessions:
        sessions.append(name)
    held: dict[str, str] = {}
    for session in sessions:
        for k in keys_store.known(namespace, session, wanted):
            held.setdefault(k, session)
    return held


def _target(
    keys_store: Any,
    namespace: str,
    name: str,
    family: str | None,
    keys: Sequence[str],
    wanted: list[str],
    holders: dict[str, str],
    first_new: tuple[str, ...],
) -> str:
    """Where new turns go: after the latest stored turn of their path, if that is its session's last turn."""
    if not family:
        return name
    anchor = next((holders[k] for k in reversed(keys) if k in holders), None)
    if anchor is None:
        return name
    tail = keys_store.tail_keys(namespace, anchor)
    if tail is None or not tail or tail & set(wanted):
        return anchor
    return branch_session(name, first_new[0] if first_new else "x")


def key_rows(plan: IngestPlan, stored: Sequence[StoredTurn]) -> list[tuple[str, str, int]]:
    """``(session, key, turn_id)`` rows for the planned turns, given what the store returned (in order)."""
    flat = [ks for keys in plan.keys for ks in keys]
    if len(flat) != len(stored):
        raise ValidationError(f"stored {len(stored)} turns for {len(flat)} planned")
    return [(st.session, k, st.id) for ks, st in zip(flat, stored, strict=True) for k in ks]


def report(plan: IngestPlan, stored: Sequence[StoredTurn]) -> IngestReport:
    """The caller's account of an ingest."""
    return IngestReport(
        stored=dict(plan.stored),
        skipped=dict(plan.skipped),
        turn_ids=tuple(st.id for st in stored),
        held_back=dict(plan.held_back),
        continued=plan.continued,
        branched=dict(plan.branched),
    )


def at_source(session: IngestSession, exc: InvalidTurnError) -> InvalidTurnError:
    """An error about ``messages[i]`` of an imported session, placed at its file and line when known."""
    path = exc.path or ""
    if not (session.source and path.startswith("messages[") and "]" in path):
        return exc
    i = int(path[len("messages[") : path.index("]")])
    line = session.lines[i] if i < len(session.lines) else None
    rest = path[path.index("]") + 1 :].lstrip(".")
    where = f"{session.source}:{line}" if line is not None else session.source
    return InvalidTurnError(exc.reason, path=f"{where}: {rest}" if rest else where)
