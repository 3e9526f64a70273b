"""Signal weights and their fusion: how the per-turn signals of a query become one score.

:class:`Weights` says how much each signal of :class:`~stratamem.retrieve.engine.HybridIndex`
counts; :func:`fuse_signals` normalises each similarity signal per query and sums
them with those weights (pure: the tuning and cross-validation scripts call it on
cached signals). The index itself is in :mod:`stratamem.retrieve.engine`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

import numpy as np

from ..errors import ValidationError

__all__ = ["LEXICAL_WEIGHTS", "NORMALISERS", "Weights", "fuse_signals"]

NORMALISERS = ("max", "z", "rank")
_BOOSTS = ("speaker", "date", "date_window", "event_date", "recency", "role")


@dataclass(frozen=True, slots=True)
class Weights:
    """How much each signal counts in the fused score.

    Chosen by joint leave-one-conversation-out cross-validation over LoCoMo and
    the synthetic assistant-chat set (each fold holds out one conversation of
    both and chooses, on the other 9 + 9, the best setting for both sets
    together among those that keep LoCoMo recall@10 at 0.80); this is the
    setting most folds chose (docs/retrieval.md). No weight is tuned on one
    dataset alone.
    """

    lexical: float = 0.5
    """BM25 of the turn's own words."""
    lexical_window: float = 0.8
    """BM25 of the turn with its neighbours."""
    lexical_session: float = 0.15
    """BM25 of the turn's whole session."""
    vector: float = 1.5
    """Cosine of the turn's embedding."""
    vector_window: float = 0.5
    """Cosine of the window's embedding."""
    vector_passage: float = 0.0
    """Best cosine over the turn's own embedding and its passages' (long turns only,
    :mod:`stratamem.retrieve.passages`): a fact deep in a long answer is seen by the vectors.
    Non-zero makes the index embed the passages of long turns. Off by default: joint
    cross-validation preferred the turn vector with role routing (docs/retrieval.md)."""
    vector_session: float = 0.0
    """Cosine of the session's mean embedding."""
    lexical_prev: float = 0.5
    """BM25 of the turn before (a reply is found through the question it answers)."""
    lexical_next: float = 0.1
    """BM25 of the turn after (a remark is found through its answer)."""
    vector_prev: float = 0.0
    """Cosine of the turn before."""
    vector_next: float = 0.0
    """Cosine of the turn after."""
    speaker: float = 0.5
    """Boost for turns spoken by a person the query names."""
    role: float = 0.8
    """Boost for the turns of the role a query asks about (:mod:`stratamem.retrieve.roles`): "what did
    you suggest" → the assistant's turns, "what car do I drive" → the user's (unnamed speakers only)."""
    date: float = 0.5
    """Boost for turns whose session date matches a date the query names."""
    date_window: float = 0.5
    """Boost for turns whose session falls in a relative time the query names ("two weeks
    ago", "last Saturday"), resolved against ``now``; softened outside the window."""
    event_date: float = 0.5
    """Boost for turns that tell of a day inside a time the query names ("yesterday I …" said the day
    after the Wednesday a question asks about), the day resolved when the turn was written
    (:mod:`stratamem.retrieve.eventdates`); softened outside the window."""
    recency: float = 0.3
    """For a query about the present ("now", "currently", "these days", "most recent"): a boost
    growing linearly with the session's date from the oldest (0) to the newest (1), so the
    latest statement of a changed fact outranks the superseded one."""
    substance: float = 1.3
    """Prior for turns with more to say: ``1 - exp(-terms / substance_terms)`` of the turn's
    content words, added only to turns that match the query at all (greetings and
    acknowledgements rarely hold the answer)."""
    substance_terms: float = 12.0
    """Content words at which the substance prior reaches 63% of its weight (must be positive)."""
    lexical_passage: float = 0.0
    """BM25 of the turn's best passage (``passage_terms`` content words, half overlapping):
    a long answer is scored by the part that talks about the query, not by its whole length."""
    passage_terms: int = 0
    """Content words per passage; turns longer than this are split (0: no passage index)."""
    window: int = 3
    """Neighbours on each side that form a turn's window."""
    feedback_docs: int = 0
    """Pseudo-relevance feedback: top turns of a first pass that lend terms (0: off)."""
    feedback_terms: int = 10
    """Expansion terms taken from those turns."""
    feedback_weight: float = 0.3
    """Weight of each expansion term relative to a query term."""
    normalise: str = "max"
    """How each similarity signal is put on a common scale per query before weighting:
    ``max`` (divide by its maximum over the turns), ``z`` (z-score over the turns, clipped
    at 0) or ``rank`` (``rank_k / (rank_k + rank)`` for turns that score above 0)."""
    rank_k: float = 10.0
    """Rank offset of the ``rank`` normalisation."""

    def __post_init__(self) -> None:
        if self.normalise not in NORMALISERS:
            raise ValidationError(f"normalise must be one of {NORMALISERS}, got {self.normalise!r}")
        for f in fields(self):
            if f.name == "normalise":
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValidationError(f"weight {f.name} must be a non-negative number, got {value!r}")
        if self.substance_terms <= 0:
            raise ValidationError(f"substance_terms must be positive, got {self.substance_terms!r}")


def _normalised(x: np.ndarray, how: str, rank_k: float) -> np.ndarray:
    """One signal on the common per-query scale (see :attr:`Weights.normalise`)."""
    if not x.size:
        return x.astype(np.float64)
    if how == "max":
        top = float(x.max())
        return x / top if top > 0 else np.zeros(len(x))
    if how == "z":
        sd = float(x.std())
        return np.clip((x - float(x.mean())) / sd, 0, None) if sd > 0 else np.zeros(len(x))
    out = np.zeros(len(x))
    hit = np.flatnonzero(x > 0)
    ranks = np.empty(len(hit))
    ranks[np.argsort(-x[hit], kind="stable")] = np.arange(len(hit))
    out[hit] = rank_k / (rank_k + ranks)
    return out


LEXICAL_WEIGHTS = replace(Weights(), lexical=1.0)
"""The default of an index without vectors: the turn's own words count double. With vectors
the turn cosine carries the direct match; without them, ``lexical`` at the weight of
``lexical_prev`` would let a reply rank level with the turn that holds the query's words.
Scored with the cached lexical-only signals of both benchmarks (in sample, three nearby
settings): r@10 / b@1024 estimate LoCoMo 0.782 / 0.848 vs 0.781 / 0.843 at 0.5, chats
0.278 / 0.293 vs 0.272 / 0.273."""


def fuse_signals(
    sig: Mapping[str, np.ndarray], weights: Weights, substance: np.ndarray | None
) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """Fused per-turn scores from raw signals: ``(fused, weighted parts, prior)``.

    Every weighted similarity signal is normalised per query (``weights.normalise``)
    and multiplied by its weight; the speaker and date boosts are 0/1 already. The
    substance prior (``substance``: the turns' ``1 - exp(-terms / scale)``, or
    ``None``) is added last, only to turns whose fused score is already positive, so
    a query that matches nothing still recalls nothing. Pure: the tuning scripts
    call it on cached signals.
    """
    n = len(next(iter(sig.values()))) if sig else 0
    fused = np.zeros(n)
    parts: dict[str, np.ndarray] = {}
    for name, v in sig.items():
        w = getattr(weights, name, 0.0)
        if w <= 0:
            continue
        part = v * w if name in _BOOSTS else _normalised(v, weights.normalise, weights.rank_k)
        if name not in _BOOSTS:
            part *= w  # in place: _normalised returned a fresh array
        parts[name] = part
        fused += part
    prior = np.zeros(0)
    if weights.substance > 0 and n and substance is not None:
        prior = weights.substance * substance
        prior[fused <= 0] = 0.0
        fused += prior
    return fused, parts, prior
