"""Extractors: from turns to the statements worth a memory item. The offline :class:`RuleExtractor` is the default.

An :class:`Extractor` reads a segment's turns and returns
:class:`~stratamem.records.candidates.Candidate` statements;
:meth:`stratamem.items.Items.extract` stores them (one item per fact,
supersession, the review queue's cap). The pyramid runs the memory's
extractor on every summarized segment when ``pyramid.auto_extract_facts`` is
on; items do not depend on which summarizer ran. Pass your own to
``Memory(extractor=...)``: anything with a ``name`` and an ``extract`` method
will do. The model-powered one is :class:`stratamem.items.extract_llm.LLMExtractor`.

:class:`RuleExtractor`, per user or assistant turn (system and tool turns
never give items):

1. reads the turn's statements (:func:`stratamem.summarize.statements.statements`:
   sentences cleaned of greetings, vocatives and photo captions, with their
   features; the people talking are the segment's speakers);
2. scores the turn: its salience is its best statement's
   (:func:`stratamem.summarize.salience.salience`, weights fitted by
   ``benchmarks/items_fit.py``); a turn below ``min_salience`` gives nothing —
   greetings, reactions, questions and compliments stay turns, recallable as such —
   unless a statement settles something in so many words (a decision, a stated
   preference, a constraint: :func:`stratamem.summarize.facts.explicit`), which is
   kept with a salience of at least :data:`EXPLICIT_SALIENCE`;
3. quotes the statement that states the fact (:func:`~stratamem.summarize.salience.choice`),
   prefixed with the speaker: ``"Caroline: I went to a LGBTQ support group yesterday."``;
4. types it (:func:`stratamem.summarize.facts.fact_type`); an event's
   ``valid_from`` is the day its time expression names, read against the turn's
   time (``"last Friday"`` → that Friday); other items hold from when they were said;
5. reads the attribute it sets, if any (:func:`stratamem.summarize.slots.slot`),
   so a later value supersedes it;
6. joins the kept statements of one speaker that tell one thing across turns
   (:mod:`stratamem.items.grouping`: near in the session, and about the same
   thing by the turns' stored vectors, else by shared words) into one item that
   cites every one of those turns and quotes each statement in turn order
   (``"Nadia: I went to my first pottery class last Saturday. The bowl came out
   lopsided after three tries. I'm going back next Saturday to glaze it."``);
   type, valid time, salience and attribute are its most salient statement's.
   A statement that sets an attribute or settles something stays an item of its own.
   A turn under ``min_salience`` but at :data:`JOIN_SALIENCE` or above may join an
   account this way (it adds to what its speaker is telling); it never opens an item.

An assistant turn without a speaker's name is an agent's, not a person's:
only its decisions become items (its prose explains, it does not tell about anyone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

import numpy as np

from ..config import ItemsConfig
from ..records import StoredTurn
from ..records.candidates import Candidate
from ..retrieve.timewords import read_windows
from ..summarize._text import DATE_WORDS, STOPWORDS
from ..summarize._units import turn_text
from ..summarize.facts import explicit, fact_type
from ..summarize.salience import choice, salience
from ..summarize.slots import Slot, slot
from ..summarize.statements import asks, statements
from .grouping import Piece, group, refers_back
from .search import content_terms

__all__ = ["DEFAULT_MIN_SALIENCE", "EXPLICIT_SALIENCE", "JOIN_SALIENCE", "Extractor", "RuleExtractor", "rule_extractor"]

DEFAULT_MIN_SALIENCE = 0.75
"""The salience a turn needs by default: chosen leave one LoCoMo conversation out, as the threshold that covers
most observations with at most 150 items per 1,000 turns and grounded at least 0.85 on the other nine
(``benchmarks/items_threshold_cv.py`` over an ``items_quality.py`` sweep). With the default embedder (MiniLM:
the stored turn vectors decide what joins, :mod:`.grouping`) the folds pick 0.74-0.76, median 0.75; held out:
149 items per 1,000, grounded 0.877, covered 0.429, source precision 0.80. Without an embedder they pick 0.74
(nine of ten); at 0.75 both stay within 150. Quiet sessions' last turns are sealed and extracted too
(``pyramid.seal_idle_minutes``)."""

JOIN_SALIENCE = 0.6
"""The salience from which a turn under ``min_salience`` still adds to an account its speaker is telling (it
joins a kept statement's item by the rules of :mod:`.grouping`; it never makes an item of its own). The
salience is a calibrated probability that the turn states a fact about someone; 0.6 is the middle of the
range measured in ``docs/benchmarks.md`` (0.5-0.7: lower covers more LoCoMo observations with the same
number of items, at a lower share of cited source turns)."""

EXPLICIT_SALIENCE = 0.9
"""The salience at least of a statement that settles something in so many words (a decision, a stated
preference, a constraint: :func:`stratamem.summarize.facts.explicit`). LoCoMo, which the weights are
fitted on, holds almost none, so the fitted score cannot know them; an agent must not lose them."""


@runtime_checkable
class Extractor(Protocol):
    """Reads turns, proposes the statements worth an item.

    Implementations may also offer ``take_usage() -> (calls, input_tokens,
    output_tokens)`` (model spend since the last take, recorded in ``item_spend``),
    ``extract_groups(groups)`` (several segments in one call; a list per group) and
    ``reads_vectors = True`` (the pyramid then passes ``vectors=``: turn id -> the
    turn's stored recall-index vector, as :class:`RuleExtractor` takes them).
    """

    name: str
    """Short label for events and status (``rules``, ``llm``)."""

    def extract(self, turns: Sequence[StoredTurn], *, before: Sequence[StoredTurn] = ()) -> list[Candidate]:
        """Candidates from ``turns`` (a segment, in order); ``before``: the turns just before, for context only.

        Raises:
            StratamemError: The extraction failed (the caller records it; turns are never lost).
        """
        ...


class RuleExtractor:
    """The offline extractor: salient statements by fitted weights, typed and keyed by fixed rules.

    Args:
        min_salience: Salience a turn needs to give an item (0-1; default
            :data:`DEFAULT_MIN_SALIENCE`). Higher keeps fewer, surer items.

    Raises:
        ValueError: ``min_salience`` is outside 0-1.
    """

    name = "rules"
    reads_vectors = True
    """The pyramid passes the segment's stored turn vectors to :meth:`extract` (``vectors=``)."""

    def __init__(self, *, min_salience: float = DEFAULT_MIN_SALIENCE) -> None:
        if not 0.0 <= min_salience <= 1.0:
            raise ValueError(f"min_salience must be from 0 to 1, got {min_salience!r}")
        self.min_salience = float(min_salience)

    def extract(
        self,
        turns: Sequence[StoredTurn],
        *,
        before: Sequence[StoredTurn] = (),
        vectors: Mapping[int, np.ndarray] | None = None,
    ) -> list[Candidate]:
        """The segment's salient statements, grouped into one item per account (see the module docstring).

        Args:
            turns: The segment's turns, in order.
            before: The turn just before the segment (context: did it ask what the segment answers?).
            vectors: Turn id -> the turn's stored vector (the recall index's), for the turns that have
                one; without, "about the same thing" is read from shared words.
        """
        names = sorted({t.turn.name for t in [*before, *turns] if t.turn.name})
        skip = {w.lower() for n in names for w in n.split()}
        kept: dict[int, _Kept] = {}
        pieces: list[Piece] = []
        # Every turn of a person (a named speaker), for the thread between an account and a later statement.
        # An agent's reply (no name) is not a thread: it answers everything the user said, so it would tie
        # anything to anything.
        context: list[Piece] = []
        previous = before[-1] if before else None
        for st in turns:
            prior, previous = previous, st
            if st.role not in ("user", "assistant"):
                continue
            found = self._kept(st, prior, names)
            if found is not None:
                terms = _topic_words(found.said, skip)
                kept[st.id] = found
                refers = refers_back(found.statement)
                pieces.append(
                    Piece(st.id, st.seq, found.speaker, found.statement, terms, found.alone, refers, found.weak)
                )
                if st.turn.name:
                    context.append(pieces[-1])
            elif st.turn.name:
                said = " ".join(s.text for s in statements(turn_text(st), names))
                context.append(Piece(st.id, st.seq, st.turn.name or st.role, said, _topic_words(said, skip)))
        return [self._candidate([kept[p.turn_id] for p in g]) for g in group(pieces, vectors, context)]

    def _kept(self, st: StoredTurn, prior: StoredTurn | None, names: Sequence[str]) -> _Kept | None:
        """The statement a turn gives an item with, if its salience (or an explicit statement) keeps it."""
        speaker = st.turn.name or st.role
        answers = prior is not None and (prior.turn.name or prior.role) != speaker and asks(turn_text(prior))
        found = statements(turn_text(st), names, answers=answers, opening=st.seq <= 2)
        if not found:
            return None
        score = max(salience(s.features) for s in found)
        settled = [s for s in found if explicit(s.text)]
        if settled:  # decisions, stated preferences, constraints: kept whatever the fitted score says
            best = max(settled, key=lambda s: choice(s.features))
            score = max(score, EXPLICIT_SALIENCE)
        elif score >= min(self.min_salience, JOIN_SALIENCE):
            best = max(found, key=lambda s: choice(s.features))
        else:
            return None
        kind = fact_type(best.text)
        agent = st.role == "assistant" and not st.turn.name
        if agent and kind != "decision":
            return None  # an agent's prose explains; only what it settles is kept
        attr = slot(best.text, speaker, names)
        said = " ".join(s.text for s in found)  # all it states, without greetings or a photo's caption
        alone = bool(settled or attr or agent)
        weak = not settled and score < self.min_salience
        if weak and alone:
            return None  # under the bar and unable to join an account
        return _Kept(st, speaker, best.text, kind, round(score, 4), attr, alone, said, weak)

    @staticmethod
    def _candidate(parts: Sequence[_Kept]) -> Candidate:
        """One item of a group: the speaker's statements in turn order; type, slot and time of the most salient."""
        lead = max(parts, key=lambda k: k.salience)
        attr = lead.attr
        return Candidate(
            f"{lead.speaker}: {_joined([k.statement for k in parts])}",
            lead.kind,
            tuple(k.turn.id for k in parts),
            lead.salience,
            attr.subject if attr else None,
            attr.attribute if attr else None,
            attr.value if attr else None,
            _valid_from(lead.statement, lead.kind, lead.turn.timestamp),
        )


@dataclass(frozen=True, slots=True)
class _Kept:
    """A turn the extractor keeps: its speaker, the statement it quotes, its type, salience, slot, all it states."""

    turn: StoredTurn
    speaker: str
    statement: str
    kind: str
    salience: float
    attr: Slot | None
    alone: bool
    said: str
    weak: bool = False
    """Under ``min_salience`` (at :data:`JOIN_SALIENCE` or above): it may only continue an account."""


def _topic_words(text: str, skip: set[str]) -> frozenset[str]:
    """The words a turn is about: content words without the speakers' names, dates, numbers or short words."""
    return frozenset(
        w
        for w in content_terms(text)
        if len(w) > 2 and not w.isdigit() and w not in skip and w not in STOPWORDS and w not in DATE_WORDS
    )


def _joined(statements: Sequence[str]) -> str:
    """Statements as one text: each but the last ends a sentence (a full stop added where it has none)."""
    head = [s if s.rstrip()[-1:] in ".!?…" else f"{s.rstrip()}." for s in statements[:-1]]
    return " ".join([*head, statements[-1]])


def rule_extractor(config: ItemsConfig) -> RuleExtractor:
    """The offline extractor at the configured ``min_salience`` (``None``: :data:`DEFAULT_MIN_SALIENCE`)."""
    return RuleExtractor(min_salience=DEFAULT_MIN_SALIENCE if config.min_salience is None else config.min_salience)


def _valid_from(sentence: str, kind: str, said: datetime) -> datetime:
    """An event's day (its time expression read against when it was said); otherwise when it was said."""
    if kind == "event":
        windows = read_windows(sentence, said)
        if windows:
            return min(w.start for w in windows)
    return said
