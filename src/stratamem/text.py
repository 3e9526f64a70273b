"""Shared checks and text helpers of the floor: budgets, output formats, query times, turn lines.

Every layer takes a token budget, an output format name or the moment a query
is asked from its caller, and renders a turn as one line of text the same way:
recall's packer (:mod:`stratamem.retrieve.render`), the pyramid's prompt view,
the context assembler and the shells. These helpers sit on the ground
floor so none of them has to import :mod:`stratamem.context`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache, wraps
from typing import Concatenate, ParamSpec, TypeVar

from .errors import BudgetError, ValidationError
from .records import Turn

__all__ = [
    "CONTEXT_FORMATS",
    "FORMATS",
    "MAX_BUDGET",
    "MAX_QUERY_CHARS",
    "SHORT_TEXT_CHARS",
    "SYSTEM_PROMPTS",
    "check_budget",
    "check_context_format",
    "check_format",
    "check_now",
    "check_system_prompts",
    "remember_short",
    "turn_line",
]

FORMATS = ("openai", "anthropic", "text")
"""Formats the assembler renders."""
CONTEXT_FORMATS = ("openai", "responses", "anthropic", "text")
"""Formats ``Memory.context`` and every shell offer: the assembler's, plus OpenAI Responses items
(assembled as Chat Completions messages, then re-shaped by :func:`stratamem.providers.to_responses`)."""
MAX_QUERY_CHARS = 20_000
"""Longest query a shell accepts (HTTP and MCP alike): ranking a longer one only costs time."""
SYSTEM_PROMPTS = ("session", "namespace")
"""Whose system prompts a context shows: the current session's only (the default), or every session's."""


SHORT_TEXT_CHARS = 2000
"""Longest text whose derived values :func:`remember_short` keeps."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


def remember_short(
    maxsize: int,
) -> Callable[[Callable[Concatenate[str, _P], _R]], Callable[Concatenate[str, _P], _R]]:
    """Decorator: remember a pure function of a text (its first argument) for texts up to
    :data:`SHORT_TEXT_CHARS` characters, the ``maxsize`` most recent calls (an LRU).

    Every context reads the same recalled turns' sentences again (registering,
    stripping, re-packing, update checks) and consecutive contexts share most of
    them; capping the text length keeps the caches a few MB whatever prompts
    hold. A longer text is computed on every call. ``cache_clear`` empties it.
    """

    def wrap(fn: Callable[Concatenate[str, _P], _R]) -> Callable[Concatenate[str, _P], _R]:
        cached = lru_cache(maxsize=maxsize)(fn)

        @wraps(fn)
        def call(text: str, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            if len(text) <= SHORT_TEXT_CHARS:
                return cached(text, *args, **kwargs)  # type: ignore[arg-type]
            return fn(text, *args, **kwargs)

        call.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        return call

    return wrap


MAX_BUDGET = 100_000_000
"""Largest token budget accepted: far above any model's context window, far below what a store column holds."""


def check_budget(budget: object) -> int:
    """Validate a token budget.

    Raises:
        BudgetError: ``budget`` is not a positive integer, or above :data:`MAX_BUDGET`.
    """
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise BudgetError(f"budget must be a positive integer, got {budget!r}")
    if budget <= 0:
        raise BudgetError(f"budget must be positive, got {budget}")
    if budget > MAX_BUDGET:
        shown = f"{budget:,}" if budget < 10**30 else f"of {budget.bit_length()} bits"
        raise BudgetError(f"budget {shown} is above the largest accepted, {MAX_BUDGET:,} tokens")
    return budget


def check_now(now: object) -> datetime | None:
    """Validate the moment a query is asked; a naive datetime is taken as UTC.

    Raises:
        ValidationError: ``now`` is neither ``None`` nor a datetime.
    """
    if now is None:
        return None
    if not isinstance(now, datetime):
        raise ValidationError(f"now must be a datetime, got {type(now).__name__}")
    return now.replace(tzinfo=UTC) if now.tzinfo is None else now


def check_format(fmt: object) -> str:
    """Validate an output format name.

    Raises:
        ValidationError: Unknown format.
    """
    if fmt not in FORMATS:
        raise ValidationError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
    return str(fmt)


def check_context_format(fmt: object) -> str:
    """Validate a format name ``Memory.context`` accepts (:data:`CONTEXT_FORMATS`).

    Raises:
        ValidationError: Unknown format.
    """
    if fmt not in CONTEXT_FORMATS:
        raise ValidationError(f"unknown format {fmt!r} (expected one of {', '.join(CONTEXT_FORMATS)})")
    return str(fmt)


def check_system_prompts(value: object) -> str:
    """Validate whose system prompts a context shows (:data:`SYSTEM_PROMPTS`).

    Raises:
        ValidationError: Neither ``session`` nor ``namespace``.
    """
    if value not in SYSTEM_PROMPTS:
        raise ValidationError(
            f"unknown system_prompts {value!r} (expected one of {', '.join(SYSTEM_PROMPTS)})", path="system_prompts"
        )
    return str(value)


def turn_line(turn: Turn, text: str | None = None) -> str:
    """One turn as a line of plain text: ``[2023-05-08 13:56] Caroline: text``.

    ``text`` replaces the turn's own text (an excerpt, a labelled line).
    """
    who = turn.name or turn.role
    ts = turn.timestamp
    # Not strftime("%Y"): it does not zero-pad years before 1000 on glibc.
    return (
        f"[{ts.year:04d}-{ts.month:02d}-{ts.day:02d} {ts.hour:02d}:{ts.minute:02d}] {who}: "
        f"{turn.text if text is None else text}"
    )
