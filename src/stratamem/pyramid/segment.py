"""Segmenters: where a run of turns is sealed into a level-1 segment.

A segmenter is a pure rule over the unsealed turns of one session: given them
in order, it returns the segments to seal now and the turns that stay open.
It keeps no state, so replaying the same turns one by one or all at once
seals the same segments. Three rules exist:

* :class:`FixedSegmenter` — every N turns (seed 000's micro chunks, N = 10).
* :class:`TopicSegmenter` — at topic boundaries (seed 002): a user turn with a
  boundary phrase ("new topic", "let's move on" …, typographic quotes read as
  plain ones), a silence of at least 30 minutes, a change of subject seen in
  the turns' stored vectors, or the open topic reaching 60 % of the
  current-topic allocation.
* :class:`UserTurnSegmenter` — one user request and everything up to the next.

A manual seal (``Memory.seal``, ``stratamem seal``) is not a segmenter: it
seals whatever is open, whichever rule is in use. Consolidation of segments
into higher levels lives in :mod:`stratamem.pyramid`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, runtime_checkable

import numpy as np

from ..records import StoredTurn

__all__ = ["FixedSegmenter", "Seal", "Segmenter", "Split", "TopicSegmenter", "UserTurnSegmenter"]


@dataclass(frozen=True, slots=True)
class Seal:
    """A run of turns to seal, and why."""

    turns: tuple[StoredTurn, ...]
    """The turns, consecutive within one session."""
    reason: str
    """``size``, ``phrase``, ``gap``, ``subject``, ``tokens``, ``user_turn`` (or ``manual``, from a manual
    seal, and ``idle``, from the pyramid sealing a quiet session)."""


@dataclass(frozen=True, slots=True)
class Split:
    """What a segmenter decided for the open turns of a session."""

    seals: tuple[Seal, ...]
    """Segments to seal now, oldest first."""
    open: tuple[StoredTurn, ...]
    """Turns that stay unsealed."""


@runtime_checkable
class Segmenter(Protocol):
    """Decides segment boundaries over the unsealed turns of one session."""

    kind: str
    """Kind recorded on the segments it seals (``micro``, ``topic``, ``request``)."""

    def split(self, turns: Sequence[StoredTurn], vectors: Mapping[int, np.ndarray] | None = None) -> Split:
        """Split the session's unsealed turns (in sequence order) into sealed runs and the open rest.

        ``vectors`` (turn id -> unit vector, from the recall index) is read only by
        a segmenter that looks at meaning (:class:`TopicSegmenter`)."""
        ...


class FixedSegmenter:
    """Seal every ``size`` turns (seed 000's micro chunks).

    Args:
        size: Turns per segment (at least 1).

    Raises:
        ValueError: ``size`` is below 1.
    """

    kind = "micro"

    def __init__(self, size: int = 10) -> None:
        if size < 1:
            raise ValueError("segment size must be at least 1")
        self.size = size

    def split(self, turns: Sequence[StoredTurn], vectors: Mapping[int, np.ndarray] | None = None) -> Split:
        """Full runs of ``size`` turns are sealed; the remainder stays open (``vectors`` unused)."""
        full = len(turns) // self.size * self.size
        seals = tuple(Seal(tuple(turns[i : i + self.size]), "size") for i in range(0, full, self.size))
        return Split(seals, tuple(turns[full:]))


_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'", "`": "'", "\u00b4": "'"})
"""Typographic apostrophes (``Let’s``) read as the plain one, in phrases and in turns alike."""

SUBJECT_AHEAD = 4
"""Turns after a candidate boundary whose mean vector is compared with the topic before it."""
SUBJECT_BEFORE = 8
"""Most turns of the open topic (the newest before the candidate) its mean vector is made of."""
SUBJECT_MIN_TURNS = 6
"""A topic holds at least this many turns before a change of subject may close it."""


def _unit_mean(vectors: Sequence[np.ndarray | None]) -> np.ndarray:
    total = np.asarray(np.sum([v for v in vectors if v is not None], axis=0, dtype=np.float64))
    norm = float(np.linalg.norm(total))
    return total / norm if norm > 0 else total


class TopicSegmenter:
    """Seal at topic boundaries (seed 002).

    A boundary falls *before* a user turn that contains a boundary phrase (as
    whole words, case-insensitive, typographic apostrophes read as plain ones),
    and before any turn that follows the previous one by at least ``silence``;
    it falls *after* the turn that brings the open topic to ``max_tokens`` or more.

    A change of subject (seed 002's Tier 2) is read from the turns' stored
    vectors: a user turn starts a new topic when the mean vector of it and the
    :data:`SUBJECT_AHEAD` - 1 turns after it has a cosine below ``similarity``
    with the mean vector of the (up to :data:`SUBJECT_BEFORE`) topic turns
    before it, and at least :data:`SUBJECT_MIN_TURNS` turns precede it in the
    topic. The boundary is decided when the last of those turns arrives, from
    turns already stored only, so replaying turns one by one or all at once
    seals the same segments. Without vectors for all those turns, no boundary.

    Args:
        phrases: Boundary phrases.
        silence: Gap that starts a new topic.
        max_tokens: Token size at which the open topic is sealed (seed 002: 60 %
            of the current-topic allocation).
        similarity: Cosine below which the subject has changed; 0 turns the rule off.

    Raises:
        ValueError: ``max_tokens`` is below 1.
    """

    kind = "topic"

    def __init__(self, phrases: Sequence[str], silence: timedelta, max_tokens: int, similarity: float = 0.0) -> None:
        if max_tokens < 1:
            raise ValueError("max_tokens must be at least 1")
        alternatives = "|".join(
            re.escape(p.strip().lower().translate(_QUOTES)).replace(r"\ ", r"\s+") for p in phrases if p.strip()
        )
        self._phrase = re.compile(rf"(?<![\w'])(?:{alternatives})(?![\w'])", re.IGNORECASE) if alternatives else None
        self.silence = silence
        self.max_tokens = max_tokens
        self.similarity = similarity

    def boundary_before(self, prev: StoredTurn | None, turn: StoredTurn) -> str | None:
        """Why a new topic starts at ``turn`` (``phrase`` or ``gap``), or ``None``."""
        if prev is None:
            return None
        if turn.role == "user" and self._phrase is not None and self._phrase.search(turn.text.translate(_QUOTES)):
            return "phrase"
        if turn.timestamp - prev.timestamp >= self.silence:
            return "gap"
        return None

    def subject_change(self, run: Sequence[StoredTurn], vectors: Mapping[int, np.ndarray]) -> int | None:
        """Index in ``run`` (the open topic, its newest turn just added) where a new subject starts, or ``None``."""
        at = len(run) - SUBJECT_AHEAD
        if self.similarity <= 0 or at < SUBJECT_MIN_TURNS or run[at].role != "user":
            return None
        before = [vectors.get(t.id) for t in run[max(0, at - SUBJECT_BEFORE) : at]]
        ahead = [vectors.get(t.id) for t in run[at:]]
        if any(v is None for v in before + ahead):
            return None
        cosine = float(_unit_mean(before) @ _unit_mean(ahead))
        return at if cosine < self.similarity else None

    def split(self, turns: Sequence[StoredTurn], vectors: Mapping[int, np.ndarray] | None = None) -> Split:
        """Apply the boundary rules in order; the turns after the last boundary stay open."""
        seals: list[Seal] = []
        run: list[StoredTurn] = []
        tokens = 0
        for turn in turns:
            why = self.boundary_before(run[-1] if run else None, turn)
            if why is not None:
                seals.append(Seal(tuple(run), why))
                run, tokens = [], 0
            run.append(turn)
            tokens += turn.tokens
            at = self.subject_change(run, vectors) if vectors else None
            if at is not None:
                seals.append(Seal(tuple(run[:at]), "subject"))
                run = run[at:]
                tokens = sum(t.tokens for t in run)
            if tokens >= self.max_tokens:
                seals.append(Seal(tuple(run), "tokens"))
                run, tokens = [], 0
        return Split(tuple(seals), tuple(run))


class UserTurnSegmenter:
    """One user request and everything after it, up to the next user turn.

    Turns before the first user turn (a system prompt, say) join the first request.
    """

    kind = "request"

    def split(self, turns: Sequence[StoredTurn], vectors: Mapping[int, np.ndarray] | None = None) -> Split:
        """Seal before every user turn that follows a request already open (``vectors`` unused)."""
        seals: list[Seal] = []
        run: list[StoredTurn] = []
        for turn in turns:
            if turn.role == "user" and any(t.role == "user" for t in run):
                seals.append(Seal(tuple(run), "user_turn"))
                run = []
            run.append(turn)
        return Split(tuple(seals), tuple(run))
