"""How likely a statement is a fact worth keeping: a logistic score over its shallow features.

An item is a statement about a person, a plan, a preference, a possession, a
relationship, an event with its date, a decision or a constraint — not a
greeting, a reaction, a question or a compliment. Two logistic scores over a
:class:`~stratamem.summarize.statements.Statement`'s features
(:data:`~stratamem.summarize.statements.FEATURES`) decide:

* :func:`salience` — does the statement's turn state a fact about someone?
  A turn's salience is its best statement's; the extractor keeps turns whose
  salience reaches ``items.min_salience``;
* :func:`choice` — is this the sentence that states it? The extractor quotes
  the statement of a kept turn that ranks first.

The constants below are fitted, not chosen: ``benchmarks/items_fit.py`` fits
both on the 10 LoCoMo conversations (salience: an observation of LoCoMo cites
the turn; choice: it does and shares the statement's content words), chooses
each L2 strength by held-out log-loss, reports every figure leave one
conversation out, and writes the final fit here. :data:`THRESHOLDS` maps a
target volume (items per 1,000 turns on LoCoMo) to the salience that gives
it; ``items.min_salience`` defaults to the one for 150. The features are shallow
on purpose, so each weight can be read: long first-person statements with a
verb of possession, plan or event, a date or a name score high; questions,
second person and reactions score low. They were fitted on chat between two
friends: expect them to be rougher on other kinds of conversation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .statements import FEATURES

__all__ = [
    "CHOICE_BIAS",
    "CHOICE_WEIGHTS",
    "SALIENCE_BIAS",
    "SALIENCE_WEIGHTS",
    "THRESHOLDS",
    "choice",
    "salience",
]

# --- fitted by benchmarks/items_fit.py (do not edit by hand; run it with --write) ---
# LoCoMo, 10 conversations; L2 0.001 (salience), 0.001 (choice).
# Held out (leave one conversation out), per target volume:
#   100 per 1k: kept 100, grounded 0.891, covered 0.237, on topic 0.678
#   150 per 1k: kept 150, grounded 0.849, covered 0.337, on topic 0.634
#   200 per 1k: kept 200, grounded 0.815, covered 0.424, on topic 0.613
#   250 per 1k: kept 249, grounded 0.791, covered 0.507, on topic 0.588
#   300 per 1k: kept 300, grounded 0.763, covered 0.586, on topic 0.566
SALIENCE_WEIGHTS: dict[str, float] = {
    "words": -0.2930,
    "first_person": 0.3355,
    "fp_verb": 0.1733,
    "date": 0.8111,
    "number": -0.1232,
    "entity": 0.3642,
    "question": 0.0356,
    "second_person": 0.0962,
    "reaction": -0.2586,
    "cleaned_share": -0.2160,
    "turn_words": 2.3916,
    "turn_question_share": -0.9974,
    "turn_second_share": -1.0058,
    "turn_sentences": -0.9413,
    "photo": 0.1338,
    "answers": 0.8450,
    "opening": 0.9391,
}
SALIENCE_BIAS = -6.1182
CHOICE_WEIGHTS: dict[str, float] = {
    "words": 1.9146,
    "first_person": 0.3018,
    "fp_verb": 0.2618,
    "date": 0.8380,
    "number": 0.1539,
    "entity": 1.0435,
    "question": -0.6055,
    "second_person": -0.8529,
    "reaction": -0.9748,
    "cleaned_share": -0.8010,
    "turn_words": 0.1575,
    "turn_question_share": -0.0181,
    "turn_second_share": -0.1136,
    "turn_sentences": -0.0989,
    "photo": 0.0380,
    "answers": 0.6043,
    "opening": 0.3780,
}
CHOICE_BIAS = -6.5498
THRESHOLDS: dict[int, float] = {
    100: 0.8669,
    150: 0.8163,
    200: 0.7630,
    250: 0.7093,
    300: 0.6453,
}
# --- end of fitted constants


def _logistic(weights: Mapping[str, float], bias: float, features: Mapping[str, float]) -> float:
    z = bias + sum(weights[name] * float(features.get(name, 0.0)) for name in FEATURES)
    return 1.0 / (1.0 + math.exp(-z))


def salience(features: Mapping[str, float]) -> float:
    """The probability (0-1) that the turn of a statement with these features states a fact about someone."""
    return _logistic(SALIENCE_WEIGHTS, SALIENCE_BIAS, features)


def choice(features: Mapping[str, float]) -> float:
    """How likely (0-1) this statement is the one that states its turn's fact (ranks a turn's statements)."""
    return _logistic(CHOICE_WEIGHTS, CHOICE_BIAS, features)
