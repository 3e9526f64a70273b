"""Running systems over LoCoMo conversations and printing the tables.

For each conversation every system indexes the stored turns, then ranks each
question; the ranking is scored at k and packed into each budget with the
system's renderer, counted exactly in o200k_base. Query latency is the time
of ``rank`` alone (query embedding included).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from stratamem.retrieve import pack_turns
from stratamem.tokens import get_tokenizer

from .baselines import System
from .metrics import BUDGETS, KS, Scores, Unit, summarise
from .protocol import Conversation

__all__ = ["Result", "format_tables", "run"]

DEPTH = 400  # enough ranked turns to fill 4,096 tokens


@dataclass(slots=True)
class Result:
    """Scores and query latencies of one system."""

    name: str
    """System label."""
    scores: Scores = field(default_factory=Scores)
    """Per-question values."""
    latencies: list[float] = field(default_factory=list)
    """Seconds per ranked query."""
    fit_seconds: float = 0.0
    """Total indexing time."""


class _CountCache:
    """The o200k tokenizer with its ``count`` memoised: the budget walks count the same
    2,000-token answers for every question, budget and system."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self._memo = inner, inner.name, {}

    def count(self, text: str) -> int:
        n = self._memo.get(text)
        if n is None:
            n = self._memo[text] = self.inner.count(text)
        return n

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.inner, attr)


def run(
    systems: Sequence[System], conversations: Sequence[Conversation], store: object, budgets: Sequence[int] = BUDGETS
) -> list[Result]:
    """Score every system on every conversation's questions.

    A system with a ``budgets`` attribute is walked at those budgets only (the
    end-to-end ``Memory.context`` rows are slow on long turns).
    """
    tokenizer = _CountCache(get_tokenizer("o200k_base"))
    results = [Result(s.name) for s in systems]
    for conv in conversations:
        for system, result in zip(systems, results, strict=True):
            t0 = time.perf_counter()
            system.fit(conv, store)
            result.fit_seconds += time.perf_counter() - t0
            for q in conv.questions:
                t0 = time.perf_counter()
                ranked = system.rank(q.text, DEPTH, now=q.question_date)
                result.latencies.append(time.perf_counter() - t0)
                units = [Unit((st.id,)) for st in ranked]
                walks = {}
                for b in getattr(system, "budgets", budgets):
                    if hasattr(system, "budget_turns"):
                        kept = system.budget_turns(q.text, b, now=q.question_date)
                    else:
                        kept = list(pack_turns(ranked, b, tokenizer, system.renderer).turns)
                    walks[b] = [Unit((st.id,)) for st in kept]
                result.scores.add(q, units, walks, conv.dia_of)
    return results


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))] if s else 0.0


def format_tables(
    results: Sequence[Result], *, held_out: set[str] | None = None, tuned_on: set[str] | None = None
) -> str:
    """The report: overall strict table, coverage, per category, tune/held-out splits, latency."""
    metrics = [f"r@{k}" for k in KS] + [f"b@{b}" for b in BUDGETS]
    head = f"{'system':<28}" + "".join(f"{m:>8}" for m in metrics)
    out: list[str] = []

    def table(title: str, strict: bool, samples: set[str] | None) -> None:
        out.append(f"\n{title}\n{head}")
        for r in results:
            row = summarise(r.scores, strict=strict, samples=samples)["all"]
            out.append(
                f"{r.name:<28}"
                + "".join(f"{row[m]:>8.3f}" if m in row else f"{'-':>8}" for m in metrics)
                + f"   n={int(row['n'])}"
            )

    n = len({q.sample for q in results[0].scores.questions})
    table(f"all {n} conversations — strict (verbatim turns only)", True, None)
    table(f"all {n} conversations — coverage (summaries count for provenance)", False, None)
    if tuned_on:
        table(f"tuning split ({len(tuned_on)} conversations) — strict", True, tuned_on)
    if held_out:
        table(f"held-out split ({len(held_out)} conversations) — strict", True, held_out)
    out.append("\nper category — strict r@10 / b@1024")
    cats = sorted(g for g in summarise(results[0].scores) if g != "all")
    out.append(f"{'system':<28}" + "".join(f"{c:>26}" for c in cats))
    for r in results:
        s = summarise(r.scores)
        out.append(
            f"{r.name:<28}" + "".join(f"{s[c]['r@10']:>15.3f} / {s[c].get('b@1024', float('nan')):.3f}" for c in cats)
        )
    out.append("\nper category n: " + ", ".join(f"{c}={int(summarise(results[0].scores)[c]['n'])}" for c in cats))
    out.append("\nquery latency (rank only, ms)   p50      p95    index build s")
    for r in results:
        out.append(
            f"{r.name:<28}{1000 * _pct(r.latencies, 0.5):>8.2f} {1000 * _pct(r.latencies, 0.95):>8.2f}"
            f" {r.fit_seconds:>10.2f}"
        )
    return "\n".join(out)
