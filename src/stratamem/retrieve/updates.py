"""Knowledge updates: when two recalled turns say different things about the same topic, the newer first.

"I moved to Denver" in March and "we just settled into our new place in
Austin" in September both answer "Where do I live?". Shown without a hint,
a model may take either. :func:`find_updates` groups the recalled turns that
speak about the same thing at different times; :func:`order_updates` gives
the newest of each group the best rank the group held (the others keep
theirs, in time order, newest first). The compact renderer's session date
headers say when each was said.

Labels are rarer than groups, because a wrong label misleads a model more
than none: ``(newer)`` and ``(superseded?)`` mark a pair only when the newer
turn *updates* the older one — a statement of each gives the same subject's
same attribute different values and the newer says it changed
(:func:`stratamem.summarize.slots.updates`: "we moved to Austin" after "I live
in Denver"; not two turns that merely talk about trips). Only people's turns
are labelled (a named speaker, or the user): an assistant's answers explain,
they do not update facts about anyone. Such a pair is grouped even when its
two turns are not similar enough by the relation below, among the top
:data:`TOP_UPDATES` hits.

"The same thing" is read generally, not from verbs like "moved": two hits
are grouped when

* both match the query well (fused score at least :data:`MIN_SHARE` of the
  best hit's, among the top :data:`TOP` hits),
* the same speaker said them (a user's fact is updated by the user),
* they were said on different days, and
* they resemble each other: cosine of their embeddings at least
  :data:`MIN_COSINE`, or, without an embedder, overlap (Jaccard) of their
  content words at least :data:`MIN_OVERLAP` — or one updates the other.

Groups are the connected components of that relation; one of more than
:data:`MAX_GROUP` turns is a topic many turns discuss (long answers on one
subject), not a changed fact, and is left alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ..records import StoredTurn
from ..summarize.slots import Reading, readings, updated
from ..text import remember_short
from .engine import Hit

__all__ = [
    "MAX_GROUP",
    "MIN_COSINE",
    "MIN_OVERLAP",
    "MIN_SHARE",
    "NEWER",
    "SUPERSEDED",
    "TOP",
    "TOP_UPDATES",
    "Update",
    "find_updates",
    "order_updates",
]

TOP = 10
"""Only the best hits are compared (an update is worth showing only if both sides are recalled)."""
MIN_SHARE = 0.6
"""A hit takes part when its fused score is at least this share of the best hit's."""
TOP_UPDATES = 25
"""Hits among which an update (:func:`stratamem.summarize.slots.updates`) is looked for, whatever their scores."""
MIN_COSINE = 0.3
"""Embedding cosine from which two same-speaker hits are about the same thing."""
MIN_OVERLAP = 0.25
"""Content-word Jaccard from which they are, when there are no embeddings."""
MAX_GROUP = 3
"""A larger group is a topic many turns talk about (long answers on one subject), not one
fact that changed: it is left unmarked."""
NEWER = "(newer)"
"""Label of the newest turn of a group that updates an older one."""
SUPERSEDED = "(superseded?)"
"""Label of the older turns it updates."""


@remember_short(4096)
def _readings(text: str, speaker: str, names: tuple[str, ...]) -> tuple[Reading, ...]:
    """:func:`~stratamem.summarize.slots.readings` of a turn, remembered for short texts.

    Consecutive contexts recall mostly the same turns (an agent loop asks about one
    topic), and reading a turn's clauses cost ~10 % of a warm context (issue 28).
    A pure function of its arguments, so remembering it changes nothing.
    """
    return tuple(readings(text, speaker, names))


@dataclass(frozen=True, slots=True)
class Update:
    """Recalled turns about the same thing, said at different times."""

    newest: int
    """Turn id of the newest."""
    older: tuple[int, ...]
    """Turn ids of the others, newest first."""
    replaced: tuple[int, ...] = ()
    """Those of ``older`` the newest updates (the labelled ones; none: the group is only reordered)."""


def _speaker(st: StoredTurn) -> str:
    return st.turn.name or st.role


def _person(st: StoredTurn) -> bool:
    """A person's turn (a named speaker, or the user), whose statements can update facts about them."""
    return bool(st.turn.name) or st.role == "user"


def find_updates(
    hits: Sequence[Hit],
    turn: Callable[[int], StoredTurn],
    similarity: Callable[[int, int], float],
    *,
    lexical: bool = False,
) -> list[Update]:
    """Groups of recalled turns that speak about the same thing on different days.

    Args:
        hits: Ranked hits, best first (turn hits: one turn id each).
        turn: The stored turn of an id.
        similarity: Cosine of two turns' embeddings, or their content-word Jaccard.
        lexical: ``similarity`` is a word overlap (no embedder): use :data:`MIN_OVERLAP`.
    """
    if not hits:
        return []
    best = hits[0].score.get("fused", 0.0)
    if best <= 0:
        return []
    ids = [h.turn_ids[0] for h in hits[:TOP] if h.score.get("fused", 0.0) >= MIN_SHARE * best]
    # An update is told by its words, not its rank: it is looked for deeper in the ranking.
    wide = list(dict.fromkeys([*ids, *(h.turn_ids[0] for h in hits[:TOP_UPDATES])]))
    turns = {i: turn(i) for i in wide}
    threshold = MIN_OVERLAP if lexical else MIN_COSINE
    parent = {i: i for i in wide}

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    names = tuple(sorted({st.turn.name for st in turns.values() if st.turn.name}))
    read: dict[int, Sequence[Reading]] = {}

    def update(old: StoredTurn, new: StoredTurn) -> bool:
        if not _person(new) or old.timestamp >= new.timestamp:
            return False
        for st in (old, new):
            if st.id not in read:
                read[st.id] = _readings(st.text, _speaker(st), names)
        return updated(read[old.id], read[new.id])

    near = set(ids)
    for n, a in enumerate(wide):
        for b in wide[n + 1 :]:
            ta, tb = turns[a], turns[b]
            if _speaker(ta) != _speaker(tb) or ta.timestamp.date() == tb.timestamp.date():
                continue
            similar = a in near and b in near and similarity(a, b) >= threshold
            if similar or update(ta, tb) or update(tb, ta):
                parent[root(a)] = root(b)
    groups: dict[int, list[int]] = {}
    for i in wide:
        groups.setdefault(root(i), []).append(i)
    out = []
    for members in groups.values():
        if not 2 <= len(members) <= MAX_GROUP:
            continue
        members.sort(key=lambda i: (turns[i].timestamp, i), reverse=True)
        newest = turns[members[0]]
        replaced = tuple(i for i in members[1:] if update(turns[i], newest))
        out.append(Update(members[0], tuple(members[1:]), replaced))
    return out


def order_updates(hits: Sequence[Hit], groups: Sequence[Update]) -> tuple[list[Hit], dict[int, str]]:
    """The hits with each group's rank slots refilled newest first, and the labels by turn id (updates only)."""
    out = list(hits)
    pos = {h.turn_ids[0]: n for n, h in enumerate(hits)}
    labels: dict[int, str] = {}
    for up in groups:
        members = [up.newest, *up.older]
        slots = sorted(pos[i] for i in members)
        by_id = {i: hits[pos[i]] for i in members}
        for slot, i in zip(slots, members, strict=True):
            out[slot] = by_id[i]
        if up.replaced:
            labels[up.newest] = NEWER
            labels.update((i, SUPERSEDED) for i in up.replaced)
    return out, labels


def update_labels(labels: Mapping[int, str]) -> str:
    """A one-line summary for the manifest, e.g. ``2 turn(s) newer, 3 superseded?``."""
    newer = sum(1 for v in labels.values() if v == NEWER)
    return f"{newer} turn(s) marked {NEWER}, {len(labels) - newer} marked {SUPERSEDED}"
