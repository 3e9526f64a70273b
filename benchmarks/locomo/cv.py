"""Leave-one-conversation-out cross-validation of the engine's weights.

For each conversation (fold), the weights are chosen on the *other*
conversations and the held-out one is scored with them; the reported figure
is never measured on data that chose it. Choosing is fast because the raw
signals of every question are computed once (:func:`collect`) and each
normalisation is applied once, with the engine's own function; a weight
setting is then one matrix product per question. The objective is recall@10
plus an estimate of budget recall at 1,024 tokens (the ranking walked with each
turn's stored token count, skipping turns that no longer fit, as
:func:`stratamem.retrieve.pack_turns` does).

A signal is *kept* when the best setting with it beats the best setting
without it under this cross-validation (:func:`ablation`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from stratamem.retrieve import HybridIndex, Weights
from stratamem.retrieve.engine import _BOOSTS, _normalised

from .protocol import Conversation

__all__ = ["LEVELS", "Cached", "ablation", "choose", "collect", "folds", "grid", "score_points"]

SIGNALS = ("lexical", "lexical_passage", "lexical_window", "lexical_session", "lexical_prev", "lexical_next",
           "vector", "vector_window", "vector_session", "vector_prev", "vector_next", "speaker", "date")
"""Every signal the engine can compute (weights of other names are not tuned here)."""

LEVELS: dict[str, tuple[float, ...]] = {
    "lexical": (0.0, 0.5, 1.0), "lexical_passage": (0.0, 0.5, 1.0), "lexical_window": (0.0, 0.4, 0.8),
    "lexical_session": (0.0, 0.25, 0.5), "lexical_prev": (0.0, 0.25, 0.5), "lexical_next": (0.0, 0.1),
    "vector": (0.0, 0.5, 1.0, 1.5), "vector_window": (0.0, 0.5, 1.0), "vector_session": (0.0,),
    "vector_prev": (0.0,), "vector_next": (0.0,), "speaker": (0.0, 0.5), "date": (0.0, 0.5),
}
"""Values each weight may take in the random grid (0 switches a signal off)."""

PRIOR_LEVELS = {"max": (0.0, 0.7, 1.3, 2.0), "rank": (0.0, 0.7, 1.3, 2.0), "z": (0.0, 2.0, 5.0, 10.0)}
"""Substance prior weights per normalisation (z-scores run larger than 1)."""

BUDGET = 1024
WALK = 40  # ranks walked for the budget estimate


def folds(samples: Sequence[str]) -> list[tuple[tuple[str, ...], str]]:
    """Leave-one-out folds: ``(training samples, held-out sample)`` for each sample, in order.

    Raises:
        ValueError: Fewer than two samples, or a sample named twice.
    """
    if len(set(samples)) != len(samples):
        raise ValueError("samples must be distinct")
    if len(samples) < 2:
        raise ValueError("leave-one-out needs at least two conversations")
    return [(tuple(s for s in samples if s != held), held) for held in samples]


@dataclass(slots=True)
class Cached:
    """One question's raw signals and what scoring needs."""

    sample: str
    category: int | str
    signals: dict[str, np.ndarray]
    terms: np.ndarray
    """Content words per turn (for the substance prior)."""
    tokens: np.ndarray
    """Stored token count per turn (for the budget estimate)."""
    gold: np.ndarray
    """Boolean mask of gold turns."""


def collect(convs: Sequence[Conversation], embedder: object | None, passage_terms: int = 64) -> list[Cached]:
    """Every signal of every question, computed once with the passage index on."""
    out = []
    base = replace(Weights(), passage_terms=passage_terms)
    for conv in convs:
        index = HybridIndex(embedder=embedder, weights=base)
        index.add_turns(conv.turns)
        terms = np.array([len(t) for t in index._corpus.terms], dtype=np.float64)
        tokens = np.array([st.tokens for st in index.turns], dtype=np.float64)
        for q in conv.questions:
            sig, _ = index.signals(q.text)
            gold = np.array([conv.dia_of[st.id] in q.gold for st in index.turns])
            out.append(Cached(conv.sample, q.category, sig, terms, tokens, gold))
    return out


def grid(points: int, seed: int = 0, normalisers: Sequence[str] = ("max", "z", "rank"),
         base: Weights | None = None) -> list[Weights]:
    """A seeded random grid: per normaliser, ``base`` itself, ``base`` minus each signal, and random points."""
    rng = random.Random(seed)
    base = base or Weights()
    out: list[Weights] = []
    for how in normalisers:
        start = replace(base, normalise=how, passage_terms=64)
        out.append(start)
        out += [replace(start, **{name: 0.0}) for name in LEVELS if getattr(start, name) > 0]
        for _ in range(points):
            w = {name: rng.choice(levels) for name, levels in LEVELS.items()}
            w["substance"] = rng.choice(PRIOR_LEVELS[how])
            w["substance_terms"] = rng.choice((12.0, 24.0))
            out.append(replace(start, **w))
    return out


def _matrix(q: Cached, how: str, rank_k: float, names: Sequence[str]) -> np.ndarray:
    zero = np.zeros(len(q.gold))
    cols = [zero if n not in q.signals else q.signals[n] if n in _BOOSTS
            else _normalised(q.signals[n], how, rank_k) for n in names]
    return np.stack(cols, axis=1)


def score_points(data: Sequence[Cached], points: Sequence[Weights]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per point and sample: summed recall@10 and summed budget-recall estimate; and the samples.

    Returns:
        ``(r10[P, S], b[P, S], samples)`` — sums over the questions of each sample.
    """
    samples = list(dict.fromkeys(q.sample for q in data))
    col = {s: i for i, s in enumerate(samples)}
    r10, bud = np.zeros((len(points), len(samples))), np.zeros((len(points), len(samples)))
    names = [n for n in SIGNALS]
    groups: dict[tuple[str, float], list[int]] = {}
    for p, w in enumerate(points):
        groups.setdefault((w.normalise, w.rank_k), []).append(p)
    for (how, rank_k), idx in groups.items():
        wmat = np.array([[getattr(points[p], n) for n in names] for p in idx]).T  # signals × P
        prior_w = np.array([points[p].substance for p in idx])
        scale = np.array([points[p].substance_terms for p in idx])
        for q in data:
            fused = _matrix(q, how, rank_k, names) @ wmat  # turns × P
            prior = (1.0 - np.exp(-q.terms[:, None] / scale[None, :])) * prior_w[None, :]
            fused += np.where(fused > 0, prior, 0.0)
            n_gold = q.gold.sum()
            order = np.argsort(-fused, axis=0, kind="stable")[:WALK]
            hits = q.gold[order]  # WALK × P
            r10[idx, col[q.sample]] += hits[:10].sum(axis=0) / n_gold
            used = np.zeros(len(idx))
            found = np.zeros(len(idx))
            for r in range(min(WALK, len(order))):
                cost = q.tokens[order[r]]
                fits = used + cost <= BUDGET
                used += np.where(fits, cost, 0.0)
                found += np.where(fits, hits[r], 0)
            bud[idx, col[q.sample]] += found / n_gold
    return r10, bud, samples


def choose(r10: np.ndarray, bud: np.ndarray, counts: np.ndarray, train: np.ndarray,
           allowed: np.ndarray | None = None) -> int:
    """The point with the best mean (recall@10 + budget estimate) over the ``train`` columns."""
    score = (r10[:, train].sum(axis=1) + bud[:, train].sum(axis=1)) / counts[train].sum()
    if allowed is not None:
        score = np.where(allowed, score, -np.inf)
    return int(np.argmax(score))


def cross_validate(r10: np.ndarray, bud: np.ndarray, counts: np.ndarray,
                   allowed: np.ndarray | None = None) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Chosen point per fold and the held-out per-sample means (recall@10, budget estimate)."""
    chosen, out_r, out_b = [], np.zeros(len(counts)), np.zeros(len(counts))
    for s in range(len(counts)):
        train = np.array([i for i in range(len(counts)) if i != s])
        p = choose(r10, bud, counts, train, allowed)
        chosen.append(p)
        out_r[s], out_b[s] = r10[p, s] / counts[s], bud[p, s] / counts[s]
    return chosen, out_r, out_b


def ablation(points: Sequence[Weights], r10: np.ndarray, bud: np.ndarray, counts: np.ndarray
             ) -> dict[str, tuple[float, float]]:
    """Cross-validated (recall@10, budget estimate), question-weighted, with each signal forced off.

    Key ``"all"`` is the full grid; ``"-name"`` restricts the grid to points where
    that weight is 0; ``"norm=z"`` etc. to one normalisation.
    """
    out = {}

    def run(mask: np.ndarray | None) -> tuple[float, float]:
        _, r, b = cross_validate(r10, bud, counts, mask)
        return float((r * counts).sum() / counts.sum()), float((b * counts).sum() / counts.sum())

    out["all"] = run(None)
    for name in [*LEVELS, "substance"]:
        mask = np.array([getattr(w, name) == 0 for w in points])
        if mask.any() and not mask.all():
            out[f"-{name}"] = run(mask)
    for how in dict.fromkeys(w.normalise for w in points):
        out[f"norm={how}"] = run(np.array([w.normalise == how for w in points]))
    return out
