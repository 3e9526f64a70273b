"""Scoring a ranking against LoCoMo gold turns: recall@k and budget recall.

``recall_frac`` is the share of a question's gold turns that a set of units
covers. *Strict* counts only units that show turns verbatim; *coverage* also
counts a summary for the turns it claims (its provenance). ``@k`` looks at the
top ``k`` units; ``@B`` looks at the units a budget walk kept within ``B``
tokens of the rendered context (see :func:`stratamem.retrieve.pack_turns`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .protocol import CATEGORIES, Question

__all__ = ["BUDGETS", "KS", "Scores", "Unit", "category_label", "covered", "recall_frac", "summarise"]

KS = (1, 5, 10, 25)
BUDGETS = (512, 1024, 2048, 4096)


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
            for k in KS:
                table[f"r@{k}"].append(recall_frac(q.gold, covered(ranking[:k], dia_of, strict=strict)))
            for b, units in budget_units.items():
                table[f"b@{b}"].append(recall_frac(q.gold, covered(units, dia_of, strict=strict)))


def category_label(category: int | str) -> str:
    """``"4 single-hop"`` for a LoCoMo category number; a type name as it is."""
    return category if isinstance(category, str) else f"{category} {CATEGORIES[category]}"


def summarise(scores: Scores, *, strict: bool = True, samples: set[str] | None = None) -> dict[str, dict[str, float]]:
    """Mean of every metric, overall and per category: ``{group: {metric: mean}}``.

    Args:
        scores: Per-question values.
        strict: Strict or coverage values.
        samples: Only questions of these LoCoMo samples (default: all).
    """
    table = scores.strict if strict else scores.coverage
    groups: dict[str, list[int]] = defaultdict(list)
    for i, q in enumerate(scores.questions):
        if samples is not None and q.sample not in samples:
            continue
        groups["all"].append(i)
        groups[category_label(q.category)].append(i)
    out = {}
    for g, idx in groups.items():
        out[g] = {m: sum(vals[i] for i in idx) / len(idx) for m, vals in table.items()}
        out[g]["n"] = float(len(idx))
    return out
