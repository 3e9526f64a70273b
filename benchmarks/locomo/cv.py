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
from stratamem.retrieve.weights import _BOOSTS, _normalised

from .protocol import Conversation

__all__ = ["LEVELS", "Cached", "ablation", "choose", "collect", "folds", "grid", "score_points"]

SIGNALS = (
    "lexical",
    "lexical_passage",
    "lexical_window",
    "lexical_session",
    "lexical_prev",
    "lexical_next",
    "vector",
    "vector_passage",
    "vector_window",
    "vector_session",
    "vector_prev",
    "vector_next",
    "speaker",
    "date",
    "role",
    "recency",
    "date_window",
    "event_date",
)
"""Every signal the engine can compute; ``recency``, ``date_window`` and ``event_date`` are scored
at the point's weight (their defaults: none is in :data:`LEVELS`) so an estimate ranks as the
engine does (query plans, which reorder the fused ranking, are cross-validated by ``plan_cv``)."""

LEVELS: dict[str, tuple[float, ...]] = {
    "lexical": (0.0, 0.5, 1.0),
    "lexical_passage": (0.0, 0.5, 1.0),
    "lexical_window": (0.0, 0.4, 0.8),
    "lexical_session": (0.0, 0.25, 0.5),
    "lexical_prev": (0.0, 0.25, 0.5),
    "lexical_next": (0.0, 0.1),
    "vector": (0.0, 0.5, 1.0, 1.5),
    "vector_passage": (0.0, 0.5, 1.0, 1.5),
    "vector_window": (0.0, 0.5, 1.0),
    "vector_session": (0.0,),
    "vector_prev": (0.0,),
    "vector_next": (0.0,),
    "speaker": (0.0, 0.5),
    "date": (0.0, 0.5),
    "role": (0.0, 0.3, 0.6),
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
    base = replace(Weights(), passage_terms=passage_terms, vector_passage=1.0)
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


CANDIDATES = (
    {},  # the defaults
    {"vector": 1.5},
    {"vector": 1.5, "lexical_window": 0.4, "lexical_session": 0.25},
    {"vector": 1.5, "lexical_passage": 0.5, "lexical": 0.5},
    {"vector": 1.5, "lexical_passage": 0.5, "lexical": 0.5, "lexical_window": 0.4, "lexical_session": 0.25},
    {"vector": 1.5, "vector_window": 0.5, "lexical_window": 0.4, "substance_terms": 12.0},
    {
        "normalise": "rank",
        "vector": 1.5,
        "lexical": 0.5,
        "lexical_passage": 0.5,
        "lexical_window": 0.0,
        "lexical_session": 0.25,
        "lexical_prev": 0.25,
        "lexical_next": 0.0,
        "vector_window": 0.0,
        "substance_terms": 12.0,
    },
    {"normalise": "rank", "vector": 1.5},
)
"""Hand-written settings scored beside the random grid (edits of the defaults toward what each set preferred)."""


def grid(
    points: int, seed: int = 0, normalisers: Sequence[str] = ("max", "z", "rank"), base: Weights | None = None
) -> list[Weights]:
    """A seeded random grid: the :data:`CANDIDATES`; per normaliser, ``base`` itself, ``base`` minus each
    signal, and random points."""
    rng = random.Random(seed)
    base = base or Weights()
    out: list[Weights] = [replace(base, passage_terms=64, **c) for c in CANDIDATES]
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
    cols = [
        zero if n not in q.signals else q.signals[n] if n in _BOOSTS else _normalised(q.signals[n], how, rank_k)
        for n in names
    ]
    return np.stack(cols, axis=1)


def score_points(data: Sequence[Cached], points: Sequence[Weights]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per point and sample: summed recall@10 and summed budget-recall estimate; and the samples.

    Returns:
        ``(r10[P, S], b[P, S], samples)`` — sums over the questions of each sample.
    """
    samples = list(dict.fromkeys(q.sample for q in data))
    col = {s: i for i, s in enumerate(samples)}
    r10, bud = np.zeros((len(points), len(samples))), np.zeros((len(points), len(samples)))
    names = list(SIGNALS)
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


def choose(
    r10: np.ndarray, bud: np.ndarray, counts: np.ndarray, train: np.ndarray, allowed: np.ndarray | None = None
) -> int:
    """The point with the best mean (recall@10 + budget estimate) over the ``train`` columns."""
    score = (r10[:, train].sum(axis=1) + bud[:, train].sum(axis=1)) / counts[train].sum()
    if allowed is not None:
        score = np.where(allowed, score, -np.inf)
    return int(np.argmax(score))


def cross_validate(
    r10: np.ndarray, bud: np.ndarray, counts: np.ndarray, allowed: np.ndarray | None = None
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Chosen point per fold and the held-out per-sample means (recall@10, budget estimate)."""
    chosen, out_r, out_b = [], np.zeros(len(counts)), np.zeros(len(counts))
    for s in range(len(counts)):
        train = np.array([i for i in range(len(counts)) if i != s])
        p = choose(r10, bud, counts, train, allowed)
        chosen.append(p)
        out_r[s], out_b[s] = r10[p, s] / counts[s], bud[p, s] / counts[s]
    return chosen, out_r, out_b


def ablation(
    points: Sequence[Weights], r10: np.ndarray, bud: np.ndarray, counts: np.ndarray
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


def drop_one(
    data: Sequence[Cached], points: Sequence[Weights], chosen: Sequence[int], samples: Sequence[str]
) -> dict[str, tuple[float, float, int]]:
    """Each fold's chosen setting with one signal switched off, scored on that fold's held-out conversation.

    Returns per signal ``(change in r@10, change in budget estimate, folds where it helped)``
    (question-weighted means over the folds; positive = the signal helps).
    """
    names = sorted({n for p in chosen for n in [*LEVELS, "substance"] if getattr(points[p], n) > 0})
    out = {}
    counts = np.array([sum(q.sample == s for q in data) for s in samples], dtype=np.float64)
    base_r = np.zeros(len(samples))
    base_b = np.zeros(len(samples))
    variants: dict[str, list[Weights]] = {n: [] for n in names}
    for p in chosen:
        for n in names:
            variants[n].append(replace(points[p], **{n: 0.0}))
    r0, b0, _ = score_points(data, [points[p] for p in chosen])
    for f in range(len(samples)):
        base_r[f], base_b[f] = r0[f, f] / counts[f], b0[f, f] / counts[f]
    for n in names:
        r1, b1, _ = score_points(data, variants[n])
        dr = np.array([base_r[f] - r1[f, f] / counts[f] for f in range(len(samples))])
        db = np.array([base_b[f] - b1[f, f] / counts[f] for f in range(len(samples))])
        out[n] = (
            float((dr * counts).sum() / counts.sum()),
            float((db * counts).sum() / counts.sum()),
            int(((dr + db) > 0).sum()),
        )
    return out


def joint_choose(
    per: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], held: int | None, allowed: np.ndarray | None = None
) -> int:
    """The point with the best summed objective over datasets (each its mean over its training questions).

    ``per`` holds each dataset's ``(r10, bud, counts)``; column ``held`` of every dataset is left out
    (``None``: all columns), so one setting is chosen on both sets together.
    """
    total = 0.0
    for r10, bud, counts in per:
        train = np.array([i for i in range(len(counts)) if i != held])
        total = total + (r10[:, train].sum(axis=1) + bud[:, train].sum(axis=1)) / counts[train].sum()
    if allowed is not None:
        total = np.where(allowed, total, -np.inf)
    return int(np.argmax(total))


def joint_cross_validate(
    per: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], allowed: np.ndarray | None = None
) -> tuple[list[int], list[tuple[np.ndarray, np.ndarray]]]:
    """Fold ``f`` holds out conversation ``f`` of *every* dataset and chooses on the rest of all of them.

    Returns the chosen point per fold and, per dataset, the held-out per-conversation
    ``(r@10, budget estimate)`` means. Datasets with fewer conversations than folds
    are scored on the folds they have.
    """
    folds_n = max(len(c) for _, _, c in per)
    chosen = [joint_choose(per, f, allowed) for f in range(folds_n)]
    out = []
    for r10, bud, counts in per:
        r = np.array([r10[chosen[f], f] / counts[f] for f in range(len(counts))])
        b = np.array([bud[chosen[f], f] / counts[f] for f in range(len(counts))])
        out.append((r, b))
    return chosen, out


def joint_ablation(
    points: Sequence[Weights], per: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]]
) -> dict[str, list[tuple[float, float]]]:
    """Joint CV (question-weighted r@10, budget estimate per dataset) with each signal forced off."""

    def run(mask: np.ndarray | None) -> list[tuple[float, float]]:
        _, res = joint_cross_validate(per, mask)
        return [
            (float((r * c).sum() / c.sum()), float((b * c).sum() / c.sum()))
            for (r, b), (_, _, c) in zip(res, per, strict=True)
        ]

    out = {"all": run(None)}
    for name in [*LEVELS, "substance"]:
        mask = np.array([getattr(w, name) == 0 for w in points])
        if mask.any() and not mask.all():
            out[f"-{name}"] = run(mask)
    for how in dict.fromkeys(w.normalise for w in points):
        out[f"norm={how}"] = run(np.array([w.normalise == how for w in points]))
    return out


def _dataset(name: str, store: object, embedder_on: bool) -> tuple[list[Conversation], object | None]:
    from .embedcache import CACHE, SYNTH_CACHE, cached_embedder
    from .protocol import load_conversations
    from .synth import load_synth

    if name == "locomo":
        convs = load_conversations(store)
    else:
        from benchmarks.data.make_recall_chats import load_or_generate

        convs = load_synth(store, load_or_generate())
    return convs, cached_embedder(CACHE if name == "locomo" else SYNTH_CACHE) if embedder_on else None


def collect_cached(name: str, store: object, embedder_on: bool) -> list[Cached]:
    """:func:`collect` of one dataset, kept in a /tmp pickle so reruns of the search skip the engine."""
    import pickle
    from pathlib import Path

    path = Path(f"/tmp/stratamem-cv-signals-{name}-{'dense' if embedder_on else 'lex'}-v2.pkl")
    if path.exists():
        data = pickle.loads(path.read_bytes())
        convs, _ = _dataset(name, store, False)
    else:
        convs, emb = _dataset(name, store, embedder_on)
        data = collect(convs, emb)
        if emb is not None:
            emb.save()  # type: ignore[attr-defined]
        path.write_bytes(pickle.dumps(data))
    return _with_roles(data, convs)


def _with_roles(data: list[Cached], convs: Sequence[Conversation]) -> list[Cached]:
    """Add the role-routing boost to cached signals (cheap: no model; signals cached before it existed)."""
    from stratamem.retrieve.corpus import TurnCorpus
    from stratamem.retrieve.lexical import analyze
    from stratamem.retrieve.roles import ROLE_CODES, role_code, role_cue

    at = 0
    for conv in convs:
        roles = np.array([role_code(analyze(TurnCorpus.text(st))) for st in conv.turns])
        for q in conv.questions:
            cue = role_cue(q.text)
            if cue is not None and (roles == ROLE_CODES[cue]).any():
                data[at].signals["role"] = (roles == ROLE_CODES[cue]).astype(np.float64)
            at += 1
    assert at == len(data)
    return data


def _nonzero(w: Weights) -> str:
    return f"norm={w.normalise} " + ", ".join(
        f"{n}={getattr(w, n):g}" for n in [*LEVELS, "substance", "substance_terms"] if getattr(w, n) > 0
    )


def main(argv: list[str] | None = None) -> None:
    """Per dataset: CV ablation; then joint CV over both sets (one setting per fold, chosen on 9+9
    conversations) with its ablation; then the one setting best on both sets together (the shipped default)."""
    import argparse
    import tempfile
    from pathlib import Path

    from stratamem.store import SQLiteStore

    ap = argparse.ArgumentParser(description="leave-one-conversation-out weight search")
    ap.add_argument("--datasets", nargs="*", default=["locomo", "synth"])
    ap.add_argument("--no-dense", action="store_true")
    ap.add_argument("--points", type=int, default=120)
    ap.add_argument("--per-set", action="store_true", help="also each dataset's own CV ablation")
    args = ap.parse_args(argv)
    points = grid(args.points)
    per: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "cv.db")
        for name in args.datasets:
            data = collect_cached(name, store, not args.no_dense)
            r10, bud, samples = score_points(data, points)
            counts = np.array([sum(q.sample == s for q in data) for s in samples], dtype=np.float64)
            per[name] = (r10, bud, counts)
            if not args.per_set:
                continue
            print(f"\n{name}: {len(data)} questions, {len(points)} settings; CV r@10 / b@1024 estimate")
            for key, (r, b) in ablation(points, r10, bud, counts).items():
                print(f"  {key:<20}{r:.3f} / {b:.3f}")
        store.close()
    names = list(per)
    sets = [per[n] for n in names]
    chosen, res = joint_cross_validate(sets)
    print(f"\njoint leave-one-conversation-out over {', '.join(names)} ({len(points)} settings): held out per fold")
    print("fold  " + "".join(f"{n + ' r@10':>14}{n + ' b~':>14}" for n in names) + "   chosen")
    for f, p in enumerate(chosen):
        cells = "".join(f"{r[f]:>14.3f}{b[f]:>14.3f}" if f < len(r) else f"{'-':>28}" for r, b in res)
        print(f"{f:<6}{cells}   {_nonzero(points[p])}")
    print("\njoint CV ablation (question-weighted r@10 / b~ per dataset; '-x' = grid without x)")
    for key, vals in joint_ablation(points, sets).items():
        print(f"  {key:<20}" + "   ".join(f"{n}: {r:.3f} / {b:.3f}" for n, (r, b) in zip(names, vals, strict=True)))
    total = sum((r10.sum(axis=1) + bud.sum(axis=1)) / counts.sum() for r10, bud, counts in sets)
    best = np.argsort(-total)[:5]
    for rank, p in enumerate(best):
        parts = "  ".join(
            f"{n}: r@10 {per[n][0][p].sum() / per[n][2].sum():.3f} b~ {per[n][1][p].sum() / per[n][2].sum():.3f}"
            for n in names
        )
        print(f"\n#{rank + 1} joint {total[p]:.3f}  {parts}\n   {_nonzero(points[p])}")
    shipped = Weights()
    for p, w in enumerate(points):
        if w == replace(shipped, passage_terms=64):
            print(
                f"\nshipped default (grid point {p}): "
                + "  ".join(
                    f"{n}: r@10 {per[n][0][p].sum() / per[n][2].sum():.3f} b~ {per[n][1][p].sum() / per[n][2].sum():.3f}"
                    for n in names
                )
            )
            break


if __name__ == "__main__":
    main()
