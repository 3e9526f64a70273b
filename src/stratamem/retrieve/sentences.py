"""Sentence vectors for short turns: a fact said in one clause of a turn about something else (issue 30).

A user turn often asks about one thing and mentions another in passing
("Is there anything I should avoid? Side note: I'm just back from a work trip
to Ljubljana."). The turn's vector is about the request; a question about the
trip finds it only through its words. So a short turn (at most
:data:`~stratamem.retrieve.passages.LONG_TERMS` content words; longer ones
have passage vectors, :mod:`stratamem.retrieve.passages`) of at least
:data:`MIN_TERMS` content words, made of at least two sentences of at least
:data:`MIN_WORDS` words, gets one vector per such sentence, embedded as
``Speaker: sentence`` like the turn. LoCoMo's photo captions (``[shares a
photo of …]``, appended by the ingester) count as a sentence of their own.

The two floors are measured (issue 28): with the first rule (every short
turn of two sentences of three words) 83% of LoCoMo's turns had a row,
~1.1 KB each, more than the rest of the store; a turn of fewer content words,
or a clause of fewer words, says one thing that the turn's own vector reads
already. With the floors 55% of LoCoMo's turns and 30% of the chat set's
have rows, and recall@10 and the budget hit rate are unchanged on both sets
(``benchmarks/locomo_recall.py``; docs/retrieval.md).

The ranking uses them only for questions that need several turns (a
:class:`~stratamem.retrieve.plan.QueryPlan` other than ``single``): there the
turn-vector signal mixes in the best cosine over the turn and its sentences
(:attr:`~stratamem.retrieve.plan.PlanSettings.sentence_mix`); on every question
they cost single-answer questions more than they gave (docs/retrieval.md).
"""

from __future__ import annotations

import re

from ..records import StoredTurn
from .passages import LONG_TERMS

__all__ = ["MAX_SENTENCES", "MIN_TERMS", "MIN_WORDS", "sentence_texts", "split_sentences"]

MIN_WORDS = 5
"""Words a sentence needs to get a vector ("Thanks!" or "That's so cool!" says nothing of its own)."""

MIN_TERMS = 12
"""Content words a turn needs to get sentence vectors: a shorter one says one thing, which its vector reads."""

MAX_SENTENCES = 12
"""Most sentence vectors per turn (the first ones): bounds the embedding work one turn adds."""

_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+|\s*(?=\[shares )")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` with at least :data:`MIN_WORDS` words (a caption is one of its own)."""
    return [s.strip() for s in _SPLIT.split(text) if len(s.split()) >= MIN_WORDS]


def sentence_texts(st: StoredTurn, term_count: int) -> list[str]:
    """What a turn's sentences are embedded as (``Speaker: sentence``); empty for a long turn
    (``term_count`` content words over ``LONG_TERMS``), a turn of fewer than :data:`MIN_TERMS`
    or one of fewer than two such sentences."""
    if term_count > LONG_TERMS or term_count < MIN_TERMS:
        return []
    parts = split_sentences(st.text)
    if len(parts) < 2:
        return []
    speaker = st.turn.name or st.role
    return [f"{speaker}: {s}" for s in parts[:MAX_SENTENCES]]
