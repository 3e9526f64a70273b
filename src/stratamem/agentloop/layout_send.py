"""What a wrapped call sends when its memory lays contexts out for the provider's cache.

With ``wrap(client, memory=m)`` and ``m.config.context.cache_layout`` on, a
wrapped call does not send the wrapper's live list: it sends the caller's
system prompt (unchanged, first) and the messages of
``m.context(query, budget=..., session=..., format=provider, cache=True)``
(docs/context.md, "Prompt caching: the cache layout"), whose stable prefix is
byte-identical from call to call and, for Anthropic, marked with
``cache_control``. The query is the conversation's newest user text (during a
tool loop: the request's words). The provider's usage is then reported back on
that context's manifest (``Memory.report_usage``).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import StratamemError
from ..records.usage import PromptUsage

__all__ = ["LayoutRequest", "layout_on", "layout_request", "newest_user_text", "report_layout_usage"]

log = logging.getLogger("stratamem.agentloop.wrap")

MAX_BREAKPOINTS = 4
"""Anthropic's limit on ``cache_control`` marks per request."""


@dataclass(frozen=True)
class LayoutRequest:
    """One wrapped call's request from the cache layout."""

    messages: list[dict[str, Any]]
    """The messages to send (OpenAI: the caller's system messages first)."""
    system: list[dict[str, Any]] | None
    """Anthropic: the ``system`` blocks to send (the caller's first), or ``None`` to keep the caller's."""
    system_text: str | None
    """The whole system prompt as text, for counting."""


def layout_on(memory: Any) -> bool:
    """Whether ``memory`` (a :class:`~stratamem.Memory` or ``None``) lays contexts out for the cache."""
    config = getattr(memory, "config", None)
    return bool(memory is not None and config is not None and config.context.cache_layout)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, Mapping) and b.get("type") in {"text", "input_text"}
        )
    return ""


def _quoted(text: str, shown: str) -> bool:
    """Whether ``text`` (a caller's system message) appears whole in ``shown``."""
    return bool(text.strip()) and text in shown


def newest_user_text(messages: Sequence[Mapping[str, Any]]) -> str | None:
    """The newest user message's words (tool results carry none: a tool loop keeps its request's)."""
    for m in reversed(messages):
        if m.get("role") == "user":
            text = _text_of(m.get("content")).strip()
            if text:
                return text
    return None


def layout_request(
    memory: Any,
    *,
    provider: str,
    session: str,
    budget: int,
    live: Sequence[Mapping[str, Any]],
    system: Any,
) -> LayoutRequest:
    """The request of one wrapped call from ``memory.context(..., cache=True)``.

    ``live`` is the wrapper's live list (its newest user words are the query);
    ``system`` the caller's Anthropic ``system`` argument (a string or blocks).
    """
    ctx = memory.context(newest_user_text(live), budget=budget, session=session, format=provider, cache=True)
    body = [copy.deepcopy(dict(m)) for m in ctx.messages]
    if provider == "openai":
        # The caller's system messages stay first and unchanged, except one the context's own
        # leading system message already quotes whole (the wrapper stores it as a turn, so the
        # instructions layer shows it): sending both would pay for the same words twice.
        shown = "\n".join(_text_of(m.get("content")) for m in body[:1] if m.get("role") in {"system", "developer"})
        head = [
            copy.deepcopy(dict(m))
            for m in live
            if m.get("role") in {"system", "developer"} and not _quoted(_text_of(m.get("content")), shown)
        ]
        return LayoutRequest(head + body, None, None)
    blocks = list(ctx.system_blocks or ())
    if not blocks and ctx.system:
        blocks = [{"type": "text", "text": ctx.system}]
    if not blocks:  # nothing stable to add: the caller's system goes as it came
        return LayoutRequest(body, None, None)
    if system is None or system == "":
        caller: list[dict[str, Any]] = []
    elif isinstance(system, str):
        caller = [{"type": "text", "text": system}]
    else:
        caller = [dict(b.model_dump() if hasattr(b, "model_dump") else b) for b in system]
    ours = sum(1 for b in blocks if "cache_control" in b) + sum(
        1 for m in body if isinstance(m.get("content"), list) for b in m["content"] if "cache_control" in b
    )
    if ours + sum(1 for b in caller if "cache_control" in b) > MAX_BREAKPOINTS:
        # Over the provider's limit: the caller's marks go (the context's later ones cover their prefix).
        log.info("wrapped conversation %s: the caller's system cache_control marks dropped (over 4)", session)
        caller = [{k: v for k, v in b.items() if k != "cache_control"} for b in caller]
    sent = caller + [copy.deepcopy(dict(b)) for b in blocks]
    text = "\n".join(str(b.get("text", "")) for b in sent) or None
    return LayoutRequest(body, sent or None, text)


def report_layout_usage(memory: Any, session: str, usage: PromptUsage | None) -> None:
    """Record the provider's usage on the session's newest manifest (the context just sent)."""
    if usage is None:
        return
    try:
        memory.report_usage(usage, session=session)
    except StratamemError as exc:  # e.g. record_manifests off: nothing to attach the usage to
        log.warning("wrapped conversation %s: usage not recorded on a manifest: %s", session, exc)
