"""Turn recall on LoCoMo or the synthetic assistant-chat set: our engine beside the baselines, in one run.

Usage::

    .venv/bin/python benchmarks/locomo_recall.py                      # LoCoMo, all ten conversations
    .venv/bin/python benchmarks/locomo_recall.py --samples 0 1 --no-dense
    .venv/bin/python benchmarks/locomo_recall.py --dataset synth      # benchmarks/data/make_recall_chats.py
    .venv/bin/python benchmarks/locomo_recall.py --dataset synth --cv # leave-one-conversation-out weights
    .venv/bin/python benchmarks/locomo_recall.py --dataset synth --chats-v1   # the set before interval questions

LoCoMo is read from ``../shared/data/locomo/locomo10.json`` at run time (never
copied); the synthetic set is generated into a /tmp cache. With ``--cv`` the
engine's weights are chosen on all conversations but one and scored on that
one, for each in turn (``benchmarks/locomo/cv.py``); the table then shows the
mean and worst fold of every system.

After the recall tables come the ``all@k`` tables (issue 30): the share of
questions whose *every* gold turn is in the top 5/10/25 or in the context
packed at each budget, overall and per category/type, for all questions and
for those with at least two gold turns; then how many gold turns
``Memory.context`` left out as repeats of something already shown. ``--dump``
writes each question's gold ranks for every system (diagnosis:
``benchmarks/locomo/multievidence.py``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.locomo import cv
from benchmarks.locomo.baselines import (
    BM25Turns,
    DenseTurns,
    Hybrid,
    MemoryContext,
    RecentWindow,
    RRFTurns,
)
from benchmarks.locomo.embedcache import CACHE, SYNTH_CACHE, cached_embedder
from benchmarks.locomo.metrics import category_label
from benchmarks.locomo.protocol import LOCOMO_PATH, load_conversations
from benchmarks.locomo.runner import Result, format_all_tables, format_dedup, format_tables, run
from stratamem.retrieve import CompactRenderer, Weights
from stratamem.store import SQLiteStore

TUNE = range(5)


def _load(args: argparse.Namespace, store: SQLiteStore) -> list:
    if args.dataset == "locomo":
        return load_conversations(store, args.data, args.samples)
    from benchmarks.data.make_recall_chats import load_or_generate
    from benchmarks.locomo.synth import load_synth

    return load_synth(store, load_or_generate(args.seed, intervals=not args.chats_v1), args.samples)


def _cv_weights(convs: list, embedder: object | None, points: int) -> tuple[dict[str, Weights], list[str]]:
    """Per held-out sample, the weights chosen on the others; and report lines."""
    t0 = time.perf_counter()
    data = cv.collect(convs, embedder)
    grid = cv.grid(points)
    r10, bud, samples = cv.score_points(data, grid)
    counts = np.array([sum(q.sample == s for q in data) for s in samples], dtype=np.float64)
    chosen, out_r, out_b = cv.cross_validate(r10, bud, counts)
    lines = [
        f"\nleave-one-conversation-out: {len(grid)} weight settings, {time.perf_counter() - t0:.0f} s",
        "held-out sample   r@10   b@1024~   chosen weights (non-zero)",
    ]
    for s, p, r, b in zip(samples, chosen, out_r, out_b, strict=True):
        w = grid[p]
        nz = ", ".join(
            f"{n}={getattr(w, n):g}" for n in [*cv.LEVELS, "substance", "substance_terms"] if getattr(w, n) > 0
        )
        lines.append(f"{s:<16}{r:>7.3f}{b:>9.3f}   norm={w.normalise} {nz}")
    lines.append("\nablation (CV r@10 / b@1024 estimate, question-weighted; '-x' = best grid point without x)")
    for key, (r, b) in cv.ablation(grid, r10, bud, counts).items():
        lines.append(f"  {key:<20}{r:.3f} / {b:.3f}")
    return {s: grid[p] for s, p in zip(samples, chosen, strict=True)}, lines


def _folds_table(results: list[Result]) -> str:
    """Mean over questions and the worst conversation, r@10 and b@1024, and per type."""
    out = ["\nper conversation (fold): mean / worst fold", f"{'system':<30}{'r@10':>14}{'b@1024':>16}{'b@2048':>16}"]
    for r in results:
        qs = r.scores.questions
        row = []
        for m in ("r@10", "b@1024", "b@2048"):
            if m not in r.scores.strict:
                row.append("-")
                continue
            vals = np.array(r.scores.strict[m])
            per = [
                vals[[i for i, q in enumerate(qs) if q.sample == s]].mean() for s in dict.fromkeys(q.sample for q in qs)
            ]
            row.append(f"{vals.mean():>7.3f} / {min(per):.3f}")
        out.append(f"{r.name:<30}" + "".join(f"{x:>16}" for x in row))
    return "\n".join(out)


def _dump(path: Path, dataset: str, results: list[Result]) -> None:
    """Per system and question: the question, its gold ids and ``Result.records`` (for diagnosis)."""
    import json

    out = {"dataset": dataset, "systems": {}}
    for r in results:
        out["systems"][r.name] = [
            {
                "sample": q.sample,
                "index": q.index,
                "category": q.category,
                "question": q.text,
                "gold": list(q.gold),
                **{
                    k: ({str(b): v for b, v in rec[k].items()} if k in ("kept", "repeats", "stripped") else rec[k])
                    for k in rec
                },
            }
            for q, rec in zip(r.scores.questions, r.records, strict=True)
        ]
    path.write_text(json.dumps(out), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", choices=("locomo", "synth"), default="locomo")
    ap.add_argument("--samples", type=int, nargs="*", help="conversation positions (default: all)")
    ap.add_argument("--no-dense", action="store_true", help="skip every embedding-based system")
    ap.add_argument("--ours", action="store_true", help="only our engine and Memory.context (no baselines)")
    ap.add_argument("--cv", action="store_true", help="leave-one-conversation-out weights for our engine")
    ap.add_argument("--points", type=int, default=120, help="random weight settings per normalisation (--cv)")
    ap.add_argument("--seed", type=int, default=11, help="synthetic set seed")
    ap.add_argument(
        "--chats-v1", action="store_true", help="the chat set of version 1 (no interval questions, byte-identical)"
    )
    ap.add_argument("--data", type=Path, default=LOCOMO_PATH)
    ap.add_argument("--dump", type=Path, help="write per-question gold ranks and budget hits of every system (JSON)")
    ap.add_argument(
        "--cache", action="store_true", help="also the hybrid policy with the prompt-cache layout (b@2048, same run)"
    )
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    cv_lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "recall.db")
        convs = _load(args, store)
        embedder = None if args.no_dense else cached_embedder(CACHE if args.dataset == "locomo" else SYNTH_CACHE)
        bm25 = BM25Turns()
        systems: list = [RecentWindow(), bm25, BM25Turns(CompactRenderer())]
        systems[-1].name = "BM25 turns (compact render)"
        if args.ours:
            systems = []
        elif embedder is not None:
            # The engine's `Speaker: text` strings, so every turn is embedded once, not twice.
            dense = DenseTurns(embedder.embed_batch, speaker_prefix=True)
            systems += [dense, RRFTurns(bm25, dense), RRFTurns(bm25, dense, CompactRenderer())]
            systems[-1].name = "BM25+dense RRF (compact)"
        systems.append(Hybrid(embedder))
        if args.cv:
            per_fold, cv_lines = _cv_weights(convs, embedder, args.points)
            systems.append(Hybrid(embedder, fold_weights=per_fold))
            systems[-1].name = "stratamem hybrid (CV weights)"
        systems += [MemoryContext(embedder, "recall"), MemoryContext(embedder, "hybrid")]
        systems[-1].budgets = (2048,)  # the default policy, end to end, beside recall
        if args.cache:
            systems.append(MemoryContext(embedder, "hybrid", cache=True))
            systems[-1].budgets = (2048,)
        results = run(systems, convs, store)
        store.close()
        if embedder is not None:
            embedder.save()
    samples = [c.sample for c in convs]
    name = "LoCoMo" if args.dataset == "locomo" else "synthetic assistant chats"
    print(
        f"{name}: {len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, "
        f"{sum(len(c.questions) for c in convs)} questions scored "
        f"({sum(c.skipped for c in convs)} skipped: no existing evidence id)"
    )
    print("\n".join(cv_lines))
    tuned = None
    if args.dataset == "locomo" and not args.cv:
        tuned = {s for i, s in enumerate(samples) if (args.samples or range(10))[i] in TUNE} or None
    print(format_tables(results, tuned_on=tuned, held_out=(set(samples) - tuned) if tuned else None))
    print(_folds_table(results))
    print("\ncategories:", ", ".join(sorted({category_label(q.category) for c in convs for q in c.questions})))
    print("\nMemory.context marks per context (budget: knowledge-update labels / their tokens / excerpts)")
    for system in systems:
        if isinstance(system, MemoryContext):
            print(
                f"{system.name:<28}"
                + "  ".join(
                    f"{b}: {n / c:.2f} / {t / c:.1f} / {e / c:.2f}" for b, (c, n, t, e) in sorted(system.marks.items())
                )
            )
    print(format_all_tables(results))
    print(format_dedup(results))
    if args.dump:
        _dump(args.dump, args.dataset, results)
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
