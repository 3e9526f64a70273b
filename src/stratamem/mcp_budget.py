"""What MCP tools return, kept within the caller's token budget.

A tool result is text the agent's model reads, so a budget covers all of it:
the context itself, the manifest and the framing. :func:`context_result`
assembles the context, summarises its manifest in a few lines when they fit,
and counts the whole result exactly; when the result is over, the context is
assembled again with its own size less the overshoot (measured: one extra round
at most on a 60-turn conversation for every budget from 64 to 900, all formats;
at most 8 rounds). Asked to ``explain``, it makes room for the explanation the
same way: the full manifest if it fits, else the summary and one line per item
(:func:`item_lines`), and the context is assembled smaller to leave them room.
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
    from .records import StoredTurn
    from .records.manifests import Context, Manifest
    from .search import SearchHit

__all__ = ["MIN_BUDGET", "context_result", "hits_result", "item_lines", "manifest_lines", "parse_now", "turns_result"]

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


def item_lines(m: Manifest) -> list[str]:
    """The manifest's items one line each, with the id ``forget`` and ``expand`` take back:
    ``[item] turn:85 turn 42 tokens recalled``."""
    return [f"[item] {i.id} {i.kind} {i.tokens} tokens {i.reason}" for i in m.items]


def _candidates(ctx: Context, explain: bool) -> list[str]:
    """Results for one assembled context, best first.

    Without ``explain``: the context with the manifest summary, with its first
    line, or alone. With ``explain`` every result explains the context: the
    full manifest JSON, or the summary and one line per item (:func:`item_lines`),
    or the first summary line and the item lines.
    """
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

    if not explain:
        return [render(lines, None), render(lines[:1], None), render([], None)]
    items = item_lines(ctx.manifest)
    omitted = "[manifest json] omitted: the full manifest does not fit the budget"
    return [
        render(lines, _dumps(ctx.manifest.to_dict())),
        render([*lines, *items, omitted], None),
        render([*lines[:1], *items], None),
    ]


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
    system_prompts: str = "session",
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

    args: dict[str, Any] = {
        "session": session,
        "policy": policy,
        "now": now,
        "provider": provider,
        "model": model,
        "project_dir": project_dir,
        "system_prompts": system_prompts,
    }
    inner = budget
    for _ in range(_ROUNDS):
        try:
            ctx = mem.context(query, budget=inner, format=fmt, **args)
        except BudgetError:
            if not explain or inner == budget:
                raise
            break  # shrunk below what this counting can hold
        wanted = _candidates(ctx, explain)
        for text in wanted:
            if count(text) <= budget:
                return text
        # The context used ctx.tokens of its room; it must shrink by the overshoot of the result
        # aimed at (shrinking the room alone may change nothing until a whole turn drops out).
        # Without explain that is the bare context. With explain it reserves the explanation's
        # room: the summary and item lines when they take at most half the budget, else the
        # first summary line and the item lines (long notes give way to the context).
        target = wanted[-1]
        if explain and count(wanted[1]) - count(wanted[-1]) <= budget // 2:
            target = wanted[1]
        if inner <= 1:
            break
        inner = max(1, min(inner, ctx.tokens) - (count(target) - budget))
    if explain:
        # No explanation fits beside any context (a budget near MIN_BUDGET): the context as without it.
        return context_result(mem, query=query, budget=budget, fmt=fmt, explain=False, **args)
    # Each round shrinks the context by at least the overshoot; reaching here means the
    # framing alone does not fit, which MIN_BUDGET rules out. Say so rather than overrun.
    raise BudgetError(f"could not fit a {fmt} context into {budget} tokens", path="budget")


def _fitted(key: str, dicts: list[dict[str, Any]], head: dict[str, Any], budget: int | None, count: Any) -> str:
    """``{**head, key: dicts, "total": n}`` as JSON, keeping only the leading ``dicts`` that fit ``budget``."""

    def dump(kept: list[dict[str, Any]]) -> str:
        return _dumps({**head, key: kept, "total": len(dicts)})

    if budget is None:
        return dump(dicts)
    # Token counts are nearly additive over JSON pieces: estimate with one count per
    # entry, then check the real text exactly and drop from the end while it is over.
    room = budget - count(dump([]))
    kept: list[dict[str, Any]] = []
    for d in dicts:
        room -= count(_dumps(d)) + 1
        if room < 0:
            break
        kept.append(d)
    text = dump(kept)
    while kept and count(text) > budget:
        kept.pop()
        text = dump(kept)
    return text


def hits_result(hits: Sequence[SearchHit], *, budget: int | None, count: Any) -> str:
    """Search hits as JSON, best first, keeping only as many as fit ``budget`` tokens (all if ``None``)."""
    return _fitted("hits", [h.to_dict() for h in hits], {}, budget, count)


def turns_result(id: str, turns: Sequence[StoredTurn], *, budget: int | None, count: Any) -> str:
    """The turns an id expands to as JSON (``{id, turns, total}``), in order, as many as fit ``budget``
    (all if ``None``)."""
    dicts = [{"id": st.id, "session": st.session, "seq": st.seq, **st.turn.to_dict()} for st in turns]
    return _fitted("turns", dicts, {"id": id}, budget, count)
