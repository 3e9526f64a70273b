"""Scoring a ranking against LoCoMo gold turns: recall@k and budget recall.

``recall_frac`` is the share of a question's gold turns that a set of units
covers. *Strict* counts only units that show turns verbatim; *coverage* also
counts a summary for the turns it claims (its provenance). ``@k`` looks at the
top ``k`` units; ``@B`` looks at the units a budget walk kept within ``B``
tokens of the rendered context (see :func:`stratamem.retrieve.pack_turns`).

``all@k`` (and ``all@B`` for a budget, keyed ``allb@B``) is 1 when *every* gold
turn of the question is covered, else 0 (issue 30): an answer built from half
its evidence is wrong, so for a question with several gold turns this is the
measure that matters. For a question with one gold turn it equals ``r@k``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .protocol import CATEGORIES, Question

__all__ = [
    "ALL_KS",
    "BUDGETS",
    "KS",
    "Scores",
    "Unit",
    "all_found",
    "category_label",
    "covered",
    "recall_frac",
    "summarise",
]

KS = (1, 5, 10, 25)
BUDGETS = (512, 1024, 2048, 4096)
ALL_KS = (5, 10, 25)
"""Depths at which ``all@k`` is scored."""


@dataclass(frozen=True, slots=True)
class Unit:
    """One ranked unit as the scorer sees it."""

    turn_ids: tuple[int, ...]
    """Stored turn ids the unit covers."""
    verbatim: bool = True
    """Whether the unit shows those turns word for word (strict credit)."""


def covered(units: Iterable[Unit], dia_of: Mapping[int, str], *, strict: bool) -> set[str]:
    """``dia_id``s covered by ``units`` (only verbatim ones when ``strict``)."""
    return {dia_of[t] for u in units if u.verbatim or not strict for t in u.turn_ids if t in dia_of}


def recall_frac(gold: Sequence[str], hit: set[str]) -> float:
    """Share of ``gold`` found in ``hit``."""
    return sum(1 for g in gold if g in hit) / len(gold)


def all_found(gold: Sequence[str], hit: set[str]) -> float:
    """1.0 when every ``gold`` id is in ``hit``, else 0.0."""
    return 1.0 if all(g in hit for g in gold) else 0.0


@dataclass(slots=True)
class Scores:
    """Per-question scores of one system, keyed by metric name (``r@10``, ``b@1024`` …)."""

    strict: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    """Metric -> one value per question (strict)."""
    coverage: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    """Metric -> one value per question (coverage)."""
    questions: list[Question] = field(default_factory=list)
    """The questions, aligned with the value lists."""

    def add(
        self,
        q: Question,
        ranking: Sequence[Unit],
        budget_units: Mapping[int, Sequence[Unit]],
        dia_of: Mapping[int, str],
    ) -> None:
        """Score one question from its ranking and its budget walks."""
        self.questions.append(q)
        for strict, table in ((True, self.strict), (False, self.coverage)):
            for k in sorted({*KS, *ALL_KS}):
                hit = covered(ranking[:k], dia_of, strict=strict)
                if k in KS:
                    table[f"r@{k}"].append(recall_frac(q.gold, hit))
                if k in ALL_KS:
                    table[f"all@{k}"].append(all_found(q.gold, hit))
            for b, units in budget_units.items():
                hit = covered(units, dia_of, strict=strict)
                table[f"b@{b}"].append(recall_frac(q.gold, hit))
                table[f"allb@{b}"].append(all_found(q.gold, hit))


def category_label(category: int | str) -> str:
    """``"4 single-hop"`` for a LoCoMo category number; a type name as it is."""
    return category if isinstance(category, str) else f"{category} {CATEGORIES[category]}"


def summarise(
    scores: Scores, *, strict: bool = True, samples: set[str] | None = None, min_gold: int = 1
) -> dict[str, dict[str, float]]:
    """Mean of every metric, overall and per category: ``{group: {metric: mean}}``.

    Args:
        scores: Per-question values.
        strict: Strict or coverage values.
        samples: Only questions of these LoCoMo samples (default: all).
        min_gold: Only questions with at least this many gold turns (2: the
            multi-evidence questions, where ``all@k`` and ``r@k`` differ).
    """
    table = scores.strict if strict else scores.coverage
    groups: dict[str, list[int]] = defaultdict(list)
    for i, q in enumerate(scores.questions):
        if samples is not None and q.sample not in samples:
            continue
        if len(q.gold) < min_gold:
            continue
        groups["all"].append(i)
        groups[category_label(q.category)].append(i)
    out = {}
    for g, idx in groups.items():
        out[g] = {m: sum(vals[i] for i in idx) / len(idx) for m, vals in table.items()}
        out[g]["n"] = float(len(idx))
    return out
