"""Running systems over LoCoMo conversations and printing the tables.

For each conversation every system indexes the stored turns, then ranks each
question; the ranking is scored at k and packed into each budget with the
system's renderer, counted exactly in o200k_base. Query latency is the time
of ``rank`` alone (query embedding included).

Each result also keeps, per question, where every gold turn ranked and
which gold turns each budget kept (:attr:`Result.records`; written by
``locomo_recall.py --dump``), and for ``Memory.context`` the gold turns the
assembly left out as repeats (:func:`format_dedup`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from stratamem.retrieve import pack_turns
from stratamem.tokens import get_tokenizer

from .baselines import System
from .metrics import ALL_KS, BUDGETS, KS, Scores, Unit, category_label, summarise
from .protocol import Conversation

__all__ = ["Result", "format_all_tables", "format_dedup", "format_tables", "run"]

DEPTH = 400  # enough ranked turns to fill 4,096 tokens
TOP_KEPT = 25  # ranked dia ids kept per question in Result.records


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
    records: list[dict[str, Any]] = field(default_factory=list)
    """Per question (aligned with ``scores.questions``): ``gold_rank`` (gold dia id -> 0-based
    rank within :data:`DEPTH`, ``None`` beyond), ``top`` (the first :data:`TOP_KEPT` dia
    ids), ``kept`` (budget -> gold ids packed) and ``repeats`` (budget -> ``[gold id,
    reason, duplicate_of, shown]`` of gold turns ``Memory.context`` left out as repeats;
    ``shown``: the turn is in the context all the same, e.g. in the window) and ``stripped``
    (budget -> gold id -> the fact sentences it was shown without, each cut as a near-repeat of
    something shown above it)."""
    tracks_repeats: bool = False
    """Whether the system reports what its assembly left out as repeats (``last_left_out``)."""


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
    results = [Result(s.name, tracks_repeats=hasattr(s, "last_left_out")) for s in systems]
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
                gold = set(q.gold)
                record: dict[str, Any] = {"kept": {}, "repeats": {}}
                for b in getattr(system, "budgets", budgets):
                    if hasattr(system, "budget_turns"):
                        kept = system.budget_turns(q.text, b, now=q.question_date)
                    else:
                        kept = list(pack_turns(ranked, b, tokenizer, system.renderer).turns)
                    walks[b] = [Unit((st.id,)) for st in kept]
                    record["kept"][b] = sorted(gold & {conv.dia_of.get(st.id) for st in kept})
                    # A gold turn left out as a repeat is lost only when no copy of it is shown
                    # (a window twin is the same turn, shown in the window).
                    repeats = [
                        [conv.dia_of.get(tid), reason, dup, conv.dia_of.get(tid) in record["kept"][b]]
                        for tid, reason, dup in getattr(system, "last_left_out", ())
                        if conv.dia_of.get(tid) in gold
                    ]
                    if repeats:
                        record["repeats"][b] = repeats
                    stripped = {
                        conv.dia_of[t]: gone
                        for t, gone in getattr(system, "last_stripped", {}).items()
                        if conv.dia_of.get(t) in gold
                    }
                    if stripped:
                        record.setdefault("stripped", {})[b] = stripped
                order = [conv.dia_of.get(st.id) for st in ranked]
                at = {d: i for i, d in reversed(list(enumerate(order)))}
                record["gold_rank"] = {g: at.get(g) for g in q.gold}
                record["top"] = order[:TOP_KEPT]
                result.records.append(record)
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


def format_all_tables(results: Sequence[Result]) -> str:
    """``all@k`` beside ``r@10``, overall and per category/type, all questions and multi-evidence ones.

    ``all@k`` is the share of questions whose every gold turn is in the top ``k``;
    ``all@B`` the share whose every gold turn is in the context packed at ``B``
    tokens. Strict scoring. Issue 30.
    """
    metrics = ["r@10"] + [f"all@{k}" for k in ALL_KS] + [f"allb@{b}" for b in BUDGETS]
    head = f"{'system':<30}" + "".join(f"{m.replace('allb@', 'all@'):>9}" for m in metrics)

    def row(name: str, vals: dict[str, float]) -> str:
        return f"{name:<30}" + "".join(f"{vals[m]:>9.3f}" if m in vals else f"{'-':>9}" for m in metrics)

    out = ["\nevery gold turn found — all@k (top k) and all@B (context packed at B tokens), strict"]
    base = summarise(results[0].scores)
    multi = summarise(results[0].scores, min_gold=2)
    groups = ["all"] + sorted(g for g in base if g != "all")
    for g in groups:
        n, nm = int(base[g]["n"]), int(multi.get(g, {}).get("n", 0))
        out.append(f"\n{g}: n={n}, {nm} with >= 2 gold turns\n{head}")
        for r in results:
            out.append(row(r.name, summarise(r.scores)[g]))
    out.append("\nmulti-evidence questions only (>= 2 gold turns): all@10 per category (r@10 in brackets)")
    cats = [g for g in groups if g in multi]
    out.append(f"{'system':<30}" + "".join(f"{c[:20]:>22}" for c in cats))
    for r in results:
        s = summarise(r.scores, min_gold=2)
        out.append(f"{r.name:<30}" + "".join(f"{s[c]['all@10']:>14.3f} ({s[c]['r@10']:.3f})" for c in cats))
    out.append("n: " + ", ".join(f"{c}={int(multi[c]['n'])}" for c in cats))
    return "\n".join(out)


def format_dedup(results: Sequence[Result]) -> str:
    """Gold turns that ``Memory.context`` ranked but left out as repeats of something shown.

    Per system that reports them (``last_left_out``) and budget: gold turns left
    out as repeats by reason, and those of them absent from the context (lost;
    a ``duplicate_of_window`` turn is shown in the window, so it is not lost),
    with the questions and categories they belong to; and gold turns shown (not as
    excerpts) that lost a fact sentence to de-duplication (``stripped``).
    """
    out = []
    for r in results:
        if not r.tracks_repeats:
            continue
        for b in sorted({b for rec in r.records for b in rec["kept"]}):
            reasons: dict[str, int] = {}
            lost: dict[str, int] = {}
            cats: dict[str, int] = {}
            questions = 0
            for q, rec in zip(r.scores.questions, r.records, strict=True):
                rows = rec["repeats"].get(b, [])
                for _, reason, _, shown in rows:
                    reasons[reason] = reasons.get(reason, 0) + 1
                    if not shown:
                        lost[reason] = lost.get(reason, 0) + 1
                if any(not shown for *_, shown in rows):
                    questions += 1
                    c = category_label(q.category)
                    cats[c] = cats.get(c, 0) + 1
            stripped = sum(len(rec.get("stripped", {}).get(b, [])) for rec in r.records)
            out.append(
                f"{r.name:<28} b@{b:<5} left out {sum(reasons.values()):>4} {reasons or ''}; "
                f"lost {sum(lost.values())} {lost or ''} in {questions} of {len(r.records)} questions "
                f"{cats or ''}; shown but missing a sentence {stripped}"
            )
    if not out:
        return "\ngold turns left out of Memory.context as repeats: no system reports them"
    return "\n".join(["\ngold turns left out of Memory.context as repeats (lost = no copy of the turn shown)", *out])
