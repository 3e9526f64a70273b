"""One speaker's account of one thing: a segment's kept statements grouped into items of several turns.

A person rarely tells a thing in one turn. "I went to a pottery class
yesterday" is followed, two turns later, by "I made a bowl, it took three
tries" and "The teacher said I could join the Saturday group": one account,
told across turns, each adding a fact (a detail, a date, a reason, an
outcome). The offline extractor (:mod:`stratamem.items.extract`) keeps the
turns whose statements are salient enough, and :func:`group` joins those of
one speaker in one segment that are about the same thing into one item, which
cites every one of them and quotes each one's statement.

A kept statement (a :class:`Piece`) joins the open group of its speaker when

* it is **near**: at most :data:`MAX_GAP` positions after the group's last
  turn in the session (the speaker's next turn or the one after);
* it is **about the same thing**: the stored vectors of its turn and of a
  turn of the group (the recall index's, made when the turns were written)
  have a cosine of at least :data:`JOIN_COSINE`; when a vector is missing
  (no embedder, another model), what its turn states shares at least
  :data:`JOIN_TERMS` content words with what the group's turns state (the
  speakers' names, stop words, date words and numbers do not count; nor do
  greetings or a shared photo's caption); or the conversation ties them: a
  turn of the other person between them is about the group's thing and about
  the statement's (by the same test: "Pottery! Did you make a bowl at the
  studio yet?" between the studio and the bowl);
* or it **points back**: a personal pronoun among its first
  :data:`BACK_WORDS` words (:func:`refers_back`: "His name's Ned", "She's shy
  with guests"; not an empty "it's" or "it sounds"), so it cannot be read
  without the account before it, whatever words it shares.

Otherwise it opens a new group. Some statements always stand alone: one that
sets an attribute (``Caroline:residence``), so that a later value supersedes
exactly that item and nothing told beside it; one that settles something in
so many words (a decision, a stated preference, a constraint), which must
stay crisp; and an agent's (an assistant turn without a speaker's name).

The figures that chose the constants are in ``docs/benchmarks.md`` ("memory
items of several turns"): on LoCoMo, the cosine threshold hardly moves the
share of cited turns among the joined ones (their salience does), it keeps the
groups on one subject; the gap keeps an item to one stretch of talk. The
thread and pointing-back rules ("accounts joined through the conversation")
cut items per 1,000 LoCoMo turns from 149 to 138 at the same threshold, which
the lower default threshold spends on covering more observations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["JOIN_COSINE", "JOIN_TERMS", "MAX_GAP", "Piece", "group", "refers_back", "related"]

# A pronoun that points back to what was said, among a statement's first words ("His name's Ned",
# "We got her last year", "It took three tries"): the statement continues an account.
_BACK = re.compile(
    r"\b(?:he|he's|his|him|she|she's|her|they|they're|them|their|it(?!'s| is| sounds| seems| looks))\b", re.I
)
BACK_WORDS = 4
"""How many opening words of a statement are read for a pronoun that points back."""

JOIN_COSINE = 0.45
"""Cosine of two turns' stored vectors from which they are about the same thing."""

JOIN_TERMS = 1
"""Without vectors: content words a statement must share with a group to be about the same thing."""

MAX_GAP = 6
"""Most positions in the session between a group's last turn and a turn that joins it."""


@dataclass(frozen=True, slots=True)
class Piece:
    """A turn's kept statement, as :func:`group` reads it."""

    turn_id: int
    """The turn's id (its vector's key)."""
    seq: int
    """The turn's position in its session."""
    speaker: str
    """Who said it (the turn's name, else its role)."""
    text: str
    """The statement the item quotes."""
    terms: frozenset[str]
    """The content words of what its turn states (the extractor leaves out names, dates and numbers)."""
    alone: bool = False
    """It stands on its own: sets an attribute, settles something, or is an agent's."""
    refers: bool = False
    """It opens by referring back to what was said (:func:`refers_back`): it cannot be read alone."""
    weak: bool = False
    """It may only continue an account (its turn is under the bar for an item of its own)."""


def refers_back(statement: str) -> bool:
    """Whether a statement opens by pointing back to something said before (a pronoun in its first words)."""
    return bool(_BACK.search(" ".join(statement.split()[:BACK_WORDS])))


def related(
    piece: Piece,
    members: Sequence[Piece],
    vectors: Mapping[int, np.ndarray] | None = None,
    between: Sequence[Piece] = (),
) -> bool:
    """Whether ``piece`` is about the same thing as a group's ``members`` (by the module's rule).

    ``between``: the other people's turns between the group's last turn and ``piece``; one that is
    about the group's thing and about ``piece``'s links them (the thread the conversation followed).
    """
    if _related(piece, members, vectors):
        return True
    return any(_related(b, members, vectors) and _related(piece, [b], vectors) for b in between)


def _related(piece: Piece, members: Sequence[Piece], vectors: Mapping[int, np.ndarray] | None) -> bool:
    mine = vectors.get(piece.turn_id) if vectors else None
    fallback = False
    for m in members:
        theirs = vectors.get(m.turn_id) if vectors else None
        if mine is None or theirs is None:
            fallback = True
            continue
        if _cosine(mine, theirs) >= JOIN_COSINE:
            return True
    if not fallback:
        return False
    shared = piece.terms & frozenset().union(*(m.terms for m in members))
    return len(shared) >= JOIN_TERMS


def group(
    pieces: Sequence[Piece],
    vectors: Mapping[int, np.ndarray] | None = None,
    context: Sequence[Piece] = (),
) -> list[list[Piece]]:
    """A segment's kept statements (in turn order) as groups, one per item, in the order they open.

    Args:
        pieces: The kept statements of one segment, in the order of their turns.
        vectors: Turn id -> the turn's stored unit vector, for the turns that have one.
        context: Every turn of the segment as a piece (kept or not), read only to find the thread
            between a group and a later statement (:func:`related`'s ``between``).

    Returns:
        The groups; each lists its pieces in turn order. Every piece is in exactly one, except a weak
        piece that continues no account, which is in none.
    """
    groups: list[list[Piece]] = []
    open_by: dict[str, list[Piece]] = {}
    for piece in pieces:
        if piece.alone:  # an item of its own (a weak one cannot have one, nor join: it stays a turn)
            if not piece.weak:
                groups.append([piece])
            continue
        current = open_by.get(piece.speaker)
        if current is not None and piece.seq - current[-1].seq <= MAX_GAP:
            between = [c for c in context if current[-1].seq < c.seq < piece.seq and c.speaker != piece.speaker]
            if piece.refers or related(piece, current, vectors, between):
                current.append(piece)
                continue
        if piece.weak:
            continue  # nothing to continue: it stays a turn
        current = [piece]
        groups.append(current)
        open_by[piece.speaker] = current
    return groups


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(np.dot(a, b)) / denom if denom > 0 else 0.0
