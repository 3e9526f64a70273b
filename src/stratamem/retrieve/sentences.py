"""Sentence vectors for short turns: a fact said in one clause of a turn about something else (issue 30).

A user turn often asks about one thing and mentions another in passing
("Is there anything I should avoid? Side note: I'm just back from a work trip
to Ljubljana."). The turn's vector is about the request; a question about the
trip finds it only through its words. So every short turn (at most
:data:`~stratamem.retrieve.passages.LONG_TERMS` content words; longer ones
have passage vectors, :mod:`stratamem.retrieve.passages`) made of at least two
sentences of at least three words gets one vector per sentence, embedded as
``Speaker: sentence`` like the turn. LoCoMo's photo captions (``[shares a
photo of …]``, appended by the ingester) count as a sentence of their own.

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

__all__ = ["MAX_SENTENCES", "MIN_WORDS", "sentence_texts", "split_sentences"]

MIN_WORDS = 3
"""Words a sentence needs to get a vector ("Thanks!" says nothing of its own)."""

MAX_SENTENCES = 12
"""Most sentence vectors per turn (the first ones): bounds the embedding work one turn adds."""

_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+|\s*(?=\[shares )")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` with at least :data:`MIN_WORDS` words (a caption is one of its own)."""
    return [s.strip() for s in _SPLIT.split(text) if len(s.split()) >= MIN_WORDS]


def sentence_texts(st: StoredTurn, term_count: int) -> list[str]:
    """What a turn's sentences are embedded as (``Speaker: sentence``); empty for a long turn
    (``term_count`` content words over ``LONG_TERMS``) or one of fewer than two such sentences."""
    if term_count > LONG_TERMS:
        return []
    parts = split_sentences(st.text)
    if len(parts) < 2:
        return []
    speaker = st.turn.name or st.role
    return [f"{speaker}: {s}" for s in parts[:MAX_SENTENCES]]
