"""The working state's prompt projection: what of ``state.json`` the model sees, within a window.

Rules, applied in this order (seed 004: "include only fields that help with
the next decision", and the state fits in 250–750 tokens):

1. **Ageing.** Tasks that are ``done`` or ``dropped`` and were last updated
   more than ``done_tasks_max_age_days`` ago, and decisions older than
   ``decisions_max_age_days``, are left out (reason ``aged``). They stay in
   ``state.json``.
2. **Shape.** Goal and now always; then tasks (``in_progress``, ``blocked``,
   ``open``, then ``done``/``dropped``; most recently updated first within a
   status) as ``id,title,status`` rows; decisions newest first as
   ``id,title,why,date``; conventions as they are. Timestamps other than the
   decision date are left out. Empty sections are omitted.
3. **Budget.** Entries are admitted by priority — open tasks, then
   conventions, then decisions, then finished tasks, newest first in each —
   while the rendered projection stays within the budget; what does not fit is
   left out (reason ``budget``). If goal and now alone do not fit, ``now`` and
   then ``goal`` are shortened and marked with ``…`` (reason ``truncated``).
4. **Rendering.** TOON when it round-trips and is smaller than compact JSON,
   else compact JSON with the reason (:func:`stratamem.formats.toon.project`).

The result reports every entry it left out and why, for the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from ..config import StateConfig
from ..errors import BudgetError
from ..formats.toon import Projection, project
from ..tokens import Tokenizer

__all__ = ["Omission", "StateProjection", "project_state"]

_STATUS_ORDER = {"in_progress": 0, "blocked": 1, "open": 2, "done": 3, "dropped": 4}
_FINISHED = ("done", "dropped")


@dataclass(frozen=True, slots=True)
class Omission:
    """An entry of the state that the projection left out (or shortened)."""

    kind: Literal["task", "decision", "convention", "goal", "now"]
    """What sort of entry."""
    id: str
    """Task or decision id, convention key, or ``goal``/``now``."""
    reason: Literal["aged", "budget", "truncated"]
    """``aged`` by rule, did not fit the ``budget``, or ``truncated`` to fit."""


@dataclass(frozen=True, slots=True)
class StateProjection:
    """The working state as the prompt will carry it."""

    text: str
    """The rendered projection (TOON, or compact JSON — see :attr:`format`)."""
    format: Literal["toon", "json"]
    """How :attr:`text` is written."""
    tokens: int
    """Tokens of :attr:`text`; never more than :attr:`budget`."""
    budget: int
    """The window's upper bound used."""
    omitted: tuple[Omission, ...]
    """Entries left out or shortened, and why."""
    format_reason: str | None
    """Why compact JSON was used instead of TOON (``None`` for TOON)."""
    view: dict[str, Any]
    """The projected value that :attr:`text` renders."""


def _parse(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def _view(
    goal: str, now: str, tasks: list[dict[str, Any]], decisions: list[dict[str, Any]], conventions: dict[str, str]
) -> dict[str, Any]:
    view: dict[str, Any] = {"goal": goal, "now": now}
    if tasks:
        tasks = sorted(tasks, key=lambda t: (_STATUS_ORDER[t["status"]], _neg_time(t["updated_at"])))
        with_note = any(t.get("note") for t in tasks)
        # Uniform rows keep TOON's tabular form: every row gets a note column or none does.
        view["tasks"] = [
            {
                "id": t["id"],
                "title": t["title"],
                "status": t["status"],
                **({"note": t.get("note", "")} if with_note else {}),
            }
            for t in tasks
        ]
    if decisions:
        decisions = sorted(decisions, key=lambda d: _neg_time(d["ts"]))
        view["decisions"] = [
            {"id": d["id"], "title": d["title"], "why": d["why"], "date": d["ts"][:10]} for d in decisions
        ]
    if conventions:
        view["conventions"] = dict(conventions)
    return view


def _neg_time(stamp: str) -> float:
    return -_parse(stamp).timestamp()


def _shorten(text: str, fits: Any) -> str:
    """The longest prefix of ``text`` (plus ``…``) for which ``fits`` holds; ``""`` if none."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(text[:mid] + "…"):
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + "…" if lo else ""


def project_state(
    doc: dict[str, Any], tokenizer: Tokenizer, *, config: StateConfig, budget: int | None, now: datetime
) -> StateProjection:
    """Project a validated state document for the prompt.

    Args:
        doc: A valid state document (see :func:`stratamem.state.validate_state`).
        tokenizer: Counts the tokens of the rendering.
        config: Window bounds and ageing rules.
        budget: Token budget, within ``[config.min_tokens, config.max_tokens]``
            (default ``config.max_tokens``).
        now: The time ageing is measured from.

    Returns:
        The projection, with everything it left out.

    Raises:
        BudgetError: ``budget`` is outside the window, or too small even for a
            shortened goal and now.
    """
    budget = config.max_tokens if budget is None else budget
    if isinstance(budget, bool) or not isinstance(budget, int) or not config.min_tokens <= budget <= config.max_tokens:
        raise BudgetError(
            f"the working-state budget must be an integer in [{config.min_tokens}, "
            f"{config.max_tokens}] (config state.min_tokens/max_tokens), got {budget!r}"
        )
    omitted: list[Omission] = []
    task_cutoff = now - timedelta(days=config.done_tasks_max_age_days)
    decision_cutoff = now - timedelta(days=config.decisions_max_age_days)
    live_tasks, live_decisions = [], []
    for t in doc["tasks"]:
        if t["status"] in _FINISHED and _parse(t["updated_at"]) < task_cutoff:
            omitted.append(Omission("task", t["id"], "aged"))
        else:
            live_tasks.append(t)
    for d in doc["decisions"]:
        if _parse(d["ts"]) < decision_cutoff:
            omitted.append(Omission("decision", d["id"], "aged"))
        else:
            live_decisions.append(d)

    def render(goal: str, now_text: str, tasks: list, decisions: list, conventions: dict) -> Projection:
        return project(_view(goal, now_text, tasks, decisions, conventions), tokenizer)

    goal, now_text = doc["goal"], doc["now"]
    if render(goal, now_text, [], [], {}).tokens > budget:
        now_text = _shorten(now_text, lambda s: render(goal, s, [], [], {}).tokens <= budget)
        omitted.append(Omission("now", "now", "truncated"))
        if render(goal, now_text, [], [], {}).tokens > budget:
            goal = _shorten(goal, lambda s: render(s, now_text, [], [], {}).tokens <= budget)
            omitted.append(Omission("goal", "goal", "truncated"))
            if render(goal, now_text, [], [], {}).tokens > budget:
                raise BudgetError(f"a working-state budget of {budget} tokens cannot hold even an empty state")

    # Admission by priority; newest first within each class (stable for equal stamps).
    by_new = sorted(live_tasks, key=lambda t: _neg_time(t["updated_at"]))
    candidates: list[tuple[str, Any]] = [("task", t) for t in by_new if t["status"] not in _FINISHED]
    candidates += [("convention", k) for k in doc["conventions"]]
    candidates += [("decision", d) for d in sorted(live_decisions, key=lambda d: _neg_time(d["ts"]))]
    candidates += [("task", t) for t in by_new if t["status"] in _FINISHED]
    tasks: list[dict[str, Any]] = []
    decisions: list[dict[str, Any]] = []
    conventions: dict[str, str] = {}
    result = render(goal, now_text, tasks, decisions, conventions)
    for kind, entry in candidates:
        trial = (
            tasks + [entry] if kind == "task" else tasks,
            decisions + [entry] if kind == "decision" else decisions,
            {**conventions, entry: doc["conventions"][entry]} if kind == "convention" else conventions,
        )
        attempt = render(goal, now_text, *trial)
        if attempt.tokens <= budget:
            tasks, decisions, conventions = trial
            result = attempt
        else:
            omitted.append(Omission(kind, entry if kind == "convention" else entry["id"], "budget"))  # type: ignore[arg-type]
    # Conventions are admitted in document order, so the view keeps that order.
    view = _view(goal, now_text, tasks, decisions, conventions)
    return StateProjection(result.text, result.format, result.tokens, budget, tuple(omitted), result.reason, view)
