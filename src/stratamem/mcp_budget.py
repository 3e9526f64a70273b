"""What MCP tools return, kept within the caller's token budget.

A tool result is text the agent's model reads, so a budget covers all of it:
the context itself, the manifest and the framing. :func:`context_result`
assembles the context, summarises its manifest in a few lines, adds the full
manifest only when asked (``explain``) and only if it still fits, and counts
the whole result exactly; when the result is over, the context is assembled
again with its own size less the overshoot (measured: one extra round at most on
a 60-turn conversation for every budget from 64 to 900, all formats; at most 8 rounds).
:func:`hits_result` keeps search hits, best first, while their JSON fits.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .errors import BudgetError, ValidationError

if TYPE_CHECKING:
    from .memory import Memory
    from .records.manifests import Context, Manifest
    from .search import SearchHit

__all__ = ["MIN_BUDGET", "context_result", "hits_result", "manifest_lines", "parse_now"]

MIN_BUDGET = 64
"""Smallest budget a tool accepts: room for a JSON envelope and at least a line of context."""

_ROUNDS = 8


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def manifest_lines(m: Manifest) -> list[str]:
    """The manifest in at most three lines: what went in by reason, what was left out, notes."""
    reasons = Counter(i.reason for i in m.items)
    lines = [
        f"[manifest] {len(m.items)} items, {m.total_tokens}/{m.budget} tokens, policy {m.policy}"
        + (": " + ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())) if reasons else "")
    ]
    if m.near_misses:
        best = m.near_misses[0]
        lines.append(
            f"[left out] {len(m.near_misses)} near-misses; best {best.id} ({best.reason}, {best.tokens} tokens)"
        )
    if m.notes:
        lines.append("[notes] " + "; ".join(m.notes))
    return lines


def _compose(ctx: Context, budget: int, explain: bool, count: Any) -> str:
    """The best result for one assembled context that fits ``budget`` (or the smallest one, if none does)."""
    lines = manifest_lines(ctx.manifest)
    if ctx.format == "text":

        def render(summary: list[str], full: str | None) -> str:
            parts = [ctx.text.rstrip("\n")] if ctx.text.strip() else []
            if summary:
                parts.append("\n".join(summary))
            if full is not None:
                parts.append("[manifest json] " + full)
            return "\n\n".join(parts)
    else:

        def render(summary: list[str], full: str | None) -> str:
            out: dict[str, Any] = {"format": ctx.format, "tokens": ctx.tokens, "messages": list(ctx.messages)}
            if ctx.system is not None:
                out["system"] = ctx.system
            if summary:
                out["manifest"] = "\n".join(summary)
            if full is not None:
                out["manifest_full"] = json.loads(full)
            return _dumps(out)

    candidates = []
    if explain:
        full = _dumps(ctx.manifest.to_dict())
        candidates.append(render(lines, full))
        lines = [*lines, "[manifest json] omitted: the full manifest does not fit the budget"]
    candidates += [render(lines, None), render(lines[:1], None), render([], None)]
    for text in candidates:
        if count(text) <= budget:
            return text
    return candidates[-1]


def parse_now(now: str | None) -> datetime | None:
    """An ISO 8601 time given as text (naive = UTC, as ``Memory.context`` takes it).

    Raises:
        ValidationError: Not an ISO 8601 date/time.
    """
    if now is None:
        return None
    try:
        return datetime.fromisoformat(now)
    except ValueError as exc:
        raise ValidationError(f"not an ISO 8601 date/time: {now!r}", path="now") from exc


def context_result(
    mem: Memory,
    *,
    query: str | None,
    budget: int,
    session: str | None,
    fmt: str,
    explain: bool,
    policy: str | None = None,
    now: datetime | None = None,
    provider: str | None = None,
    model: str | None = None,
    project_dir: str | os.PathLike[str] | None = None,
) -> str:
    """The assembled context as tool-result text of at most ``budget`` tokens, everything included.

    The context is :meth:`Memory.context` with the same arguments, so the
    prompt text and manifest are those the library, CLI and HTTP API give for
    the same inputs; the budget is counted as that context counts it
    (``provider``'s counting).

    Raises:
        BudgetError: ``budget`` below :data:`MIN_BUDGET`.
        ValidationError, NotFoundError: As :meth:`Memory.context`.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < MIN_BUDGET:
        raise BudgetError(f"budget must be an integer of at least {MIN_BUDGET} tokens, got {budget!r}", path="budget")
    counting = mem.counting(fmt, provider, model)

    def count(text: str) -> int:
        return counting.tokens(mem.tokenizer.count(text))

    inner = budget
    for _ in range(_ROUNDS):
        ctx = mem.context(
            query,
            budget=inner,
            session=session,
            format=fmt,
            policy=policy,
            now=now,
            provider=provider,
            model=model,
            project_dir=project_dir,
        )
        text = _compose(ctx, budget, explain, count)
        over = count(text) - budget
        if over <= 0:
            return text
        # The context used ctx.tokens of its room; it must shrink by the overshoot. (Shrinking
        # the room alone may change nothing until a whole turn drops out.)
        inner = max(1, min(inner, ctx.tokens) - over)
    # Each round shrinks the context by at least the overshoot; reaching here means the
    # framing alone does not fit, which MIN_BUDGET rules out. Say so rather than overrun.
    raise BudgetError(f"could not fit a {fmt} context into {budget} tokens", path="budget")


def hits_result(hits: Sequence[SearchHit], *, budget: int | None, count: Any) -> str:
    """Search hits as JSON, best first, keeping only as many as fit ``budget`` tokens (all if ``None``)."""
    dicts = [h.to_dict() for h in hits]
    if budget is None:
        return _dumps({"hits": dicts, "total": len(dicts)})
    # Token counts are nearly additive over JSON pieces: estimate with one count per
    # hit, then check the real text exactly and drop from the end while it is over.
    room = budget - count(_dumps({"hits": [], "total": len(dicts)}))
    kept: list[dict[str, Any]] = []
    for d in dicts:
        room -= count(_dumps(d)) + 1
        if room < 0:
            break
        kept.append(d)
    text = _dumps({"hits": kept, "total": len(dicts)})
    while kept and count(text) > budget:
        kept.pop()
        text = _dumps({"hits": kept, "total": len(dicts)})
    return text
