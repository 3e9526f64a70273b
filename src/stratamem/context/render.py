"""Context assembly: choose what fits a token budget, render it, explain it.

This first cut fills the budget with the most recent turns (the *recent
window*); recall, summaries and budget policies build on the same pieces.
Rendering and counting share one rule: a context is counted exactly as it
will be sent, and the budget is never exceeded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import BudgetError
from ..providers import to_anthropic, to_openai
from ..records import Context, ContextItem, Manifest, NearMiss, StoredTurn, Turn
from ..text import check_budget, check_format, turn_line
from ..tokens import MESSAGE_TOKENS, REPLY_TOKENS, Tokenizer, count_message, count_messages

__all__ = [
    "STEP_STUB",
    "attach_sections",
    "open_with_user",
    "recent_window",
    "render",
    "snap_end",
    "opens_window",
    "snap_start",
    "snap_step_window",
    "snap_window",
    "stub_tokens",
    "unit_cost",
]

STEP_STUB = "(Earlier turns of this conversation are not shown here; it continues with a tool step.)"
"""The user-role message an Anthropic window opening on a tool step starts with (the Messages API
wants a user message first); the same bytes every call, so it is part of the stable prefix."""


def stub_tokens(tokenizer: Tokenizer) -> int:
    """What :data:`STEP_STUB` costs as a message."""
    return MESSAGE_TOKENS + tokenizer.count(STEP_STUB)


def open_with_user(messages: tuple[dict[str, Any], ...], fmt: str) -> tuple[dict[str, Any], ...]:
    """Anthropic messages that open on a tool step get :data:`STEP_STUB` in front; others are returned as they are."""
    if fmt == "anthropic" and messages and messages[0].get("role") != "user":
        return ({"role": "user", "content": STEP_STUB},) + messages
    return messages


def render(turns: Sequence[Turn], fmt: str) -> tuple[tuple[dict[str, Any], ...], str | None, str]:
    """Render turns for ``fmt``: ``(messages, system, text)``; ``system`` is ``""`` for Anthropic when empty."""
    text = "\n".join(turn_line(t) for t in turns)
    if fmt == "openai":
        return tuple(to_openai(turns)), None, text
    if fmt == "anthropic":
        system, messages = to_anthropic(turns)
        # Always a string, so ``system=ctx.system`` can go straight to the SDK.
        return tuple(messages), system or "", text
    return (), None, text


def rendered_tokens(turns: Sequence[Turn], fmt: str, tokenizer: Tokenizer) -> int:
    """Exact tokens of ``turns`` rendered for ``fmt`` and sent alone (with the stub :func:`open_with_user` adds)."""
    messages, system, text = render(turns, fmt)
    if fmt == "text":
        return tokenizer.count(text)
    return count_messages(open_with_user(messages, fmt), tokenizer, system=system)


def unit_cost(turn: Turn, fmt: str, tokenizer: Tokenizer) -> int:
    """An upper bound of what adding ``turn`` to a request rendered for ``fmt`` costs.

    For the provider formats this is the turn rendered alone and counted as
    messages; merging with a neighbour (Anthropic joins consecutive same-role
    messages) can only make the real cost lower. For ``text`` it is the turn's
    line plus the newline that joins it.
    """
    if fmt == "text":
        return tokenizer.count(turn_line(turn)) + 1  # +1 for the joining newline
    if fmt == "anthropic" and turn.role == "system":
        return MESSAGE_TOKENS + tokenizer.count(turn.text)
    messages, _, _ = render([turn], fmt)
    return sum(count_message(m, tokenizer) for m in messages)


def snap_start(window: list[StoredTurn], fmt: str) -> list[StoredTurn]:
    """Drop leading turns that would be invalid at the start of a request.

    A window must not open with a tool result (its call is outside the window).
    Snap forward to the first user turn when there is one, so the request opens
    with the user's words. Otherwise Anthropic opens at the first tool step
    (:func:`opens_window`; its rendering then starts with :data:`STEP_STUB`,
    :func:`open_with_user`), and OpenAI only drops leading tool results. In a
    long tool loop the user's request lies far back; a window that waited for it
    would hide the newest tool results from the model.
    """
    for i, st in enumerate(window):
        if st.role == "user":
            return window[i:]
    if fmt == "anthropic":
        return window[next((i for i, st in enumerate(window) if opens_window(st.turn)), len(window)) :]
    start = 0
    while start < len(window) and window[start].role == "tool":
        start += 1
    return window[start:]


def snap_end(window: list[StoredTurn]) -> list[StoredTurn]:
    """Drop trailing assistant turns whose tool calls are not all answered in the window.

    The newest turn can be a tool call whose result does not exist yet (the
    agent is about to run the tool). Both providers reject a request that ends
    with an unanswered call, and the call belongs with its result in the *next*
    request, so the call turn leaves the window together with any partial
    results after it. Checked repeatedly, so a chain of unanswered calls at
    the end goes too.
    """
    end = len(window)
    answered: set[str] = set()
    i = end - 1
    while i >= 0:
        turn = window[i].turn
        if turn.role == "tool":
            answered.update(turn.tool_result_ids)
        elif turn.role == "assistant" and turn.tool_use_ids:
            if not set(turn.tool_use_ids) <= answered:
                end, answered = i, set()
        else:
            break
        i -= 1
    return window[:end]


def snap_window(window: list[StoredTurn], fmt: str) -> list[StoredTurn]:
    """:func:`snap_start` then :func:`snap_end`: a window that is a valid request body for ``fmt``."""
    return snap_end(snap_start(window, fmt))


def opens_window(turn: Turn) -> bool:
    """Whether a window may open with ``turn``: a user turn, or the start of a tool step.

    A tool step is an assistant turn that calls tools, followed by the turns
    carrying their results; opening there keeps every call with its results
    (a result never opens a window: its call would be missing).
    """
    return turn.role == "user" or (turn.role == "assistant" and bool(turn.tool_use_ids))


def snap_step_window(window: list[StoredTurn]) -> list[StoredTurn]:
    """The cache layout's snap: open at the first user turn or tool step (:func:`opens_window`), then :func:`snap_end`.

    Unlike :func:`snap_start` it does not look further for a user turn, in any
    format: a window of tool steps is valid as it is for OpenAI, and the
    Anthropic rendering puts a user-role stub in front of it (:data:`STEP_STUB`).
    """
    start = next((i for i, st in enumerate(window) if opens_window(st.turn)), len(window))
    return snap_end(window[start:])


def attach_sections(
    messages: Sequence[dict[str, Any]], system: str | None, sections: str, fmt: str
) -> tuple[tuple[dict[str, Any], ...], str | None]:
    """Put assembled sections (recalled history, summaries, state) in front of the messages.

    OpenAI: one leading ``system`` message. Anthropic: the system prompt, placed
    before any system turns of the window, as long as the messages open with a
    user message. When they do not (no window, e.g. a ``recall`` context, or a
    window that opens on a tool step) the sections travel as the first *user*
    message instead, because the Messages API refuses a request without one.
    Both cost the same framing (:data:`~stratamem.tokens.MESSAGE_TOKENS` + the
    text). Without sections such a window opens with :data:`STEP_STUB`.

    Returns:
        ``(messages, system)``.
    """
    messages = tuple(messages)
    if fmt == "text":
        return messages, system
    if not sections:
        return open_with_user(messages, fmt), system
    if fmt == "openai":
        return ({"role": "system", "content": sections},) + messages, system
    if messages and messages[0].get("role") == "user":
        return messages, sections if not system else f"{sections}\n\n{system}"
    return ({"role": "user", "content": sections},) + messages, system


def recent_window(
    newest_first: Iterable[StoredTurn],
    budget: int,
    tokenizer: Tokenizer,
    fmt: str = "openai",
    *,
    query: str | None = None,
) -> Context:
    """The most recent turns that fit ``budget``, rendered for ``fmt``, with a manifest.

    Walks back from the newest turn and stops at the first turn that does not
    fit, so the window is contiguous; then snaps its start to a user turn and
    drops a trailing tool call that has no result yet (:func:`snap_window`), so
    the request is structurally valid. An Anthropic window with no user turn
    opens on a tool step, after :data:`STEP_STUB`.

    Raises:
        BudgetError: ``budget`` is not a positive integer.
        ValidationError: ``fmt`` is unknown.
    """
    check_budget(budget)
    check_format(fmt)
    fixed = 0 if fmt == "text" else REPLY_TOKENS
    if fixed > budget:
        raise BudgetError(f"budget {budget} is below the fixed request overhead ({fixed} tokens)")
    used = fixed
    window: list[StoredTurn] = []
    costs: dict[int, int] = {}
    misses: list[NearMiss] = []
    for st in newest_first:
        cost = unit_cost(st.turn, fmt, tokenizer)
        if used + cost > budget:
            misses.append(NearMiss(f"turn:{st.id}", "turn", cost, "over_budget"))
            break
        used += cost
        costs[st.id] = cost
        window.append(st)
    window.reverse()
    window = snap_window(window, fmt)
    turns = [st.turn for st in window]
    total = rendered_tokens(turns, fmt, tokenizer) if turns else fixed
    # Per-turn costs are upper bounds (the stub is not one of them), so this loop is a guard, not the rule.
    while turns and total > budget:
        window = snap_window(window[1:], fmt)
        turns = [st.turn for st in window]
        total = rendered_tokens(turns, fmt, tokenizer) if turns else fixed
    messages, system, text = render(turns, fmt)
    messages = open_with_user(messages, fmt)
    items = tuple(
        ContextItem(
            id=f"turn:{st.id}", kind="turn", tokens=costs[st.id], reason="recent_window", tier="hot", turn_ids=(st.id,)
        )
        for st in window
    )
    manifest = Manifest(
        budget=budget,
        total_tokens=total,
        items=items,
        near_misses=tuple(misses),
        policy="recent",
        query=query,
        tokenizer=tokenizer.name,
    )
    return Context(format=fmt, messages=messages, system=system, text=text, manifest=manifest)
