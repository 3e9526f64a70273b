"""Derived-data consistency of one namespace: pyramid coverage, tier content, items, conversation state.

Turns are the canonical record; everything else is derived from them and
must agree with them. :func:`check_derived` reads a namespace through the
public read APIs (``Memory.pyramid``, ``Memory.items``, the store's
conversation states) and counts every disagreement:

* **coverage** — every turn belongs to at most one node per level; per
  session, the level-1 segments cover seq 1..n with no gap or overlap and each
  holds exactly the session's turns of its sequence range; a node of level
  ≥ 2 holds exactly its children's turns, and the nodes of each level that
  have a parent form a prefix of that level (consolidation never skips one);
* **content** — every cold segment's archive reference reads back (read
  directly from the archive) to exactly its canonical turns, and every warm or
  cold segment expands to exactly them;
* **items** — no auto-extracted fact is stored twice;
* **conversation state** — a checkpoint exists iff a compaction succeeded,
  and the state never counts more messages than the session stores.

Used by the crash drill (:func:`stratamem.testing.drills.crash_drill`) after
every SIGKILL; usable on any store to audit a deployment.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import StratamemError

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["DerivedCheck", "check_derived"]

_MAX_PROBLEMS = 20


@dataclass(frozen=True, slots=True)
class DerivedCheck:
    """Disagreements between a namespace's derived data and its turns (all zero when consistent)."""

    nodes: int
    """Pyramid nodes examined."""
    levels: int
    """Levels present."""
    overlaps: int
    """Turns found in more than one node of the same level."""
    gaps: int
    """Breaks in coverage: a session's segments not starting at seq 1 or not contiguous,
    or a parented node after an unparented one at the same level."""
    bad_provenance: int
    """Nodes whose turn ids differ from the turns they should cover."""
    unreadable: int
    """Warm or cold segments whose content does not expand to the canonical turns
    (archive frame missing, corrupt or different)."""
    archived: int
    """Cold segments with an archive reference (each one read back)."""
    warm: int
    """Warm segments (each one decoded)."""
    pending_summaries: int
    """Nodes still waiting for a summary (not an error: the next update summarizes them)."""
    duplicate_items: int
    """Auto-extracted items whose fact another auto-extracted item already states."""
    state_errors: int
    """Conversation states that contradict themselves or the store."""
    problems: tuple[str, ...] = ()
    """The first disagreements, described."""

    @property
    def ok(self) -> bool:
        """No overlap, gap, wrong provenance, unreadable content, duplicate item or bad state."""
        return not (
            self.overlaps
            or self.gaps
            or self.bad_provenance
            or self.unreadable
            or self.duplicate_items
            or self.state_errors
        )


def _fact_key(text: str) -> str:
    # The same normalisation Items uses to call two facts equal: case, spacing, final period.
    return re.sub(r"\s+", " ", text).strip().rstrip(".").casefold()


class _Tally:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.problems: list[str] = []

    def add(self, kind: str, message: str) -> None:
        self.counts[kind] += 1
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(message)


def check_derived(memory: Memory) -> DerivedCheck:
    """Count every disagreement between ``memory``'s derived data and its turns.

    Reads only; safe on a store another process writes (the answer is then
    a snapshot per query, so run it while nobody writes).

    Returns:
        The counts; :attr:`DerivedCheck.ok` when everything agrees.

    Raises:
        BackendError: The store failed.
    """
    store, ns = memory.store, memory.namespace
    tally = _Tally()
    canonical = {st.id: st for st in store.iter_turns(ns, batch_size=5000)}
    by_seq = {(st.session, st.seq): st.id for st in canonical.values()}
    nodes_seen = levels = archived = warm = pending = 0
    if memory.config.pyramid.enabled:
        pyramid = memory.pyramid
        below: list = []  # nodes of the level below, in creation order
        level = 1
        while True:
            nodes = pyramid.nodes(level=level)
            if not nodes:
                break
            levels, nodes_seen = level, nodes_seen + len(nodes)
            owner: Counter[int] = Counter()
            ids_of: dict[int, list[int]] = {}
            for node in nodes:
                ids = pyramid.turn_ids(node.id)
                ids_of[node.id] = ids
                owner.update(ids)
                pending += node.summary_status == "pending"
                if node.turn_count != len(ids) or (
                    ids and (ids[0], ids[-1]) != (node.first_turn_id, node.last_turn_id)
                ):
                    tally.add(
                        "provenance",
                        f"node {node.id}: counts {node.turn_count} turns "
                        f"({node.first_turn_id}..{node.last_turn_id}) but holds {len(ids)}",
                    )
            for tid, n in owner.items():
                if n > 1:
                    tally.add("overlap", f"level {level}: turn {tid} is in {n} nodes")
            if level == 1:
                _check_segments(nodes, ids_of, by_seq, tally)
                for node in nodes:
                    if node.tier in ("warm", "cold"):
                        warm += node.tier == "warm"
                        archived += node.tier == "cold" and node.archive_ref is not None
                        _check_content(memory, node, ids_of[node.id], canonical, tally)
            else:
                _check_consolidations(memory, level, nodes, ids_of, tally)
            if below:
                # Per-session consolidation (the default) keeps a prefix per session.
                per_session = memory.config.pyramid.consolidation_scope == "session"
                for group in {n.session for n in below} if per_session else {None}:
                    _check_prefix(level - 1, [n for n in below if not per_session or n.session == group], tally)
            below = nodes
            level += 1
    duplicates = _duplicate_items(memory)
    for key in duplicates:
        tally.add("duplicate_item", f"auto-extracted fact stored twice: {key[:60]!r}")
    _check_states(memory, canonical, tally)
    c = tally.counts
    return DerivedCheck(
        nodes_seen,
        levels,
        c["overlap"],
        c["gap"],
        c["provenance"],
        c["unreadable"],
        archived,
        warm,
        pending,
        c["duplicate_item"],
        c["state"],
        tuple(tally.problems),
    )


def _check_segments(
    nodes: list, ids_of: dict[int, list[int]], by_seq: dict[tuple[str, int], int], tally: _Tally
) -> None:
    """Per session: seq 1..n covered once, in order, each segment holding exactly the turns left in its range."""
    sessions: dict[str, list] = {}
    for node in nodes:
        sessions.setdefault(node.session, []).append(node)
    for session, segs in sessions.items():
        segs.sort(key=lambda n: n.seq_range[0])
        expected = 1
        for node in segs:
            first, last = node.seq_range
            if first != expected:
                tally.add("gap", f"session {session!r}: segment {node.id} starts at seq {first}, expected {expected}")
            # Forget keeps sequence numbers (a forgotten turn leaves a gap in its segment's
            # range, a forgotten segment's span goes to a neighbour): compare with the turns
            # that exist in the range.
            want = [by_seq[(session, s)] for s in range(first, last + 1) if (session, s) in by_seq]
            if want != ids_of[node.id]:
                tally.add(
                    "provenance",
                    f"segment {node.id} ({session!r} seq {first}..{last}) holds "
                    f"{len(ids_of[node.id])} turn ids that are not that range's turns",
                )
            expected = last + 1


def _check_content(memory: Memory, node: Any, ids: list[int], canonical: dict, tally: _Tally) -> None:
    """A cold segment's archive frame, and what a warm or cold segment expands to, equal its canonical turns.

    The archive frame is read directly: ``expand`` may serve canonical turns
    when a frame is unreadable, which would hide a broken reference. A
    segment counts once however many of its copies are wrong.
    """
    want = [canonical.get(i) for i in ids]
    wrong: list[str] = []
    archive = memory.pyramid.archive
    if node.tier == "cold" and node.archive_ref is not None and archive is not None:
        try:
            records = archive.read_node(node.archive_ref, node.id)
            if not _same(memory.pyramid.archived_turns(records), want):
                wrong.append(f"archive frame {node.archive_ref} differs from its {len(ids)} turns")
        except StratamemError as exc:
            wrong.append(f"archive {node.archive_ref}: {type(exc).__name__}: {exc}")
    try:
        if not _same(memory.pyramid.expand(node.id), want):
            wrong.append(f"expanded content differs from its {len(ids)} canonical turns")
    except StratamemError as exc:
        wrong.append(f"expand: {type(exc).__name__}: {exc}")
    if wrong:
        tally.add("unreadable", f"segment {node.id}: " + "; ".join(wrong))


def _same(got: list, want: list) -> bool:
    return len(got) == len(want) and all(
        w is not None and (g.id, g.session, g.seq, g.turn.to_dict()) == (w.id, w.session, w.seq, w.turn.to_dict())
        for g, w in zip(got, want, strict=True)
    )


def _check_consolidations(memory: Memory, level: int, nodes: list, ids_of: dict[int, list[int]], tally: _Tally) -> None:
    """A consolidation holds exactly the union of its children's turns."""
    pyramid = memory.pyramid
    for node in nodes:
        children = pyramid.children(node.id)
        union = sorted(t for c in children for t in pyramid.turn_ids(c.id))
        if not children or any(c.level != level - 1 for c in children) or union != ids_of[node.id]:
            tally.add(
                "provenance",
                f"level {level} node {node.id}: its {len(ids_of[node.id])} turns are not "
                f"the union of its {len(children)} children's",
            )


def _check_prefix(level: int, nodes: list, tally: _Tally) -> None:
    """Nodes of ``level`` (creation order; of one session when consolidation is per session) that have a
    parent come before every node that has none."""
    first_open = next((i for i, n in enumerate(nodes) if n.parent_id is None), len(nodes))
    for node in nodes[first_open:]:
        if node.parent_id is not None:
            tally.add("gap", f"level {level}: node {node.id} was consolidated although an older node was not")


def _duplicate_items(memory: Memory) -> list[str]:
    if not hasattr(memory.store, "items"):
        return []
    seen: Counter[str] = Counter(
        _fact_key(it.content) for it in memory.items.list(include_dead=True) if it.source == "extracted"
    )
    return [k for k, n in seen.items() if n > 1]


def _check_states(memory: Memory, canonical: dict, tally: _Tally) -> None:
    """Every saved conversation state: checkpoint iff a compaction succeeded; no more messages than stored."""
    states = getattr(memory.store, "conversations", None)
    if states is None:
        return
    stored = Counter(st.session for st in canonical.values())
    for session in states.sessions(memory.namespace):
        state = states.get(memory.namespace, session)
        if state is None:
            continue
        if (state.summary is not None) != (state.compaction_count > 0):
            tally.add(
                "state",
                f"conversation {session!r}: {state.compaction_count} compactions but "
                f"{'a' if state.summary is not None else 'no'} checkpoint",
            )
        if state.turn_count > stored[session]:
            tally.add(
                "state",
                f"conversation {session!r} counts {state.turn_count} messages; the store holds {stored[session]}",
            )
