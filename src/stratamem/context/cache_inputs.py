"""What the cache layout reads beyond a policy's candidates, and the settings it runs with.

:func:`gather_cache` reads, for one request, the run of turns the anchored
window is cut from (the session's turns, oldest first) and the summarized
nodes the ledger may show; with the layout's settings from the configuration
and the target provider's caching rules it makes one :class:`CacheInputs`,
which :func:`stratamem.context.layout.assemble_cached` consumes (no I/O there).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..records import StoredTurn
from .ledger import LedgerEntry, ledger_entries

if TYPE_CHECKING:
    from .gather import Parts, Request
    from .policy import Policy
    from .units import Candidates

__all__ = ["KEPT_LOOKBACK", "CacheInputs", "cache_key", "gather_cache", "kept_key"]

KEPT_LOOKBACK = 24
"""Newest manifests of the namespace searched for the recall blocks a session's calls kept."""


@dataclass(frozen=True, slots=True)
class CacheInputs:
    """One request's inputs to the cache layout beyond the candidates."""

    turns: Sequence[StoredTurn]
    """The run the window is anchored in, oldest first, without system turns (the session's turns;
    ``topics``: the current topic's)."""
    ledger: Sequence[LedgerEntry]
    """Every summarized pyramid node, oldest first."""
    shares: tuple[float, float, float]
    """The policy's ``(current, history, bulk)`` shares (a question about the past uses them)."""
    recall_share: float = 0.03
    """Share of what the fixed layers leave that a conversational message's recall may take."""
    ledger_share: float = 0.4
    """Share of what the fixed layers leave for the ledger."""
    anchor_step: float = 0.75
    """The window's start moves in steps of this share of its room."""
    ledger_batch: int = 1
    """The ledger takes new summaries at every this many jumps of the window's anchor."""
    max_turns: int = 40
    """Most turns the window holds."""
    step_recall: bool = True
    """Whether a call whose newest turn is a tool result gets per-call recall (L4)."""
    cut_share: float = 0.1
    """A tool result larger than this share of the window's room is shown cut to it (head and tail)."""
    kept_recall: Mapping[int, str] = field(default_factory=dict)
    """Recall blocks earlier calls sent, by the id of the request turn they follow (``cache_recall_stays``)."""
    recall_stays: bool = False
    """Whether a request's recall stays where it was first sent (and is recorded for later calls)."""
    recall_key: str = ""
    """Which calls' kept blocks are this call's: the format and budget (:func:`kept_key`)."""
    min_tokens: int = 1024
    """The provider's shortest cacheable prefix, in its counting."""
    factor: float = 1.0
    """Provider tokens per counter token."""
    ttl: str = "5m"
    """Lifetime asked for the stable system blocks' breakpoints (Anthropic)."""
    cache_key: str | None = None
    """The key callers pass as OpenAI's ``prompt_cache_key``."""

    def provider_tokens(self, counted: int) -> int:
        """``counted`` counter tokens in the provider's counting."""
        return counted if self.factor == 1.0 else math.ceil(counted * self.factor)


def cache_key(namespace: str, session: str | None) -> str:
    """A short, stable key for a namespace's session (no names leak: it is a hash)."""
    digest = hashlib.sha256(f"{namespace}\x00{session or ''}".encode()).hexdigest()
    return f"stratamem-{digest[:16]}"


def kept_key(fmt: str, budget: int) -> str:
    """The key under which a call records its kept recall blocks: calls of another format or budget
    render other blocks."""
    return f"{fmt}/{budget}"


def _kept_recall(parts: Parts, request: Request, key: str) -> dict[int, str]:
    """The recall blocks the session's earlier calls with ``key`` kept, by request turn id.

    Read from the newest recorded manifests (``cache.kept_recall``); a block never changes once
    sent, so the newest record of each request turn is its block. Nothing when manifests are not
    recorded: the request's recall is then assembled on every call, as without the setting.
    """
    if not parts.config.context.record_manifests:
        return {}
    out: dict[int, str] = {}
    for stored in parts.store.manifests.latest(parts.namespace, KEPT_LOOKBACK):
        kept = (stored.data.get("cache") or {}).get("kept_recall") or {}
        if stored.session != request.session or kept.get("key") != key:
            continue
        for turn_id, text in (kept.get("texts") or {}).items():
            out.setdefault(int(turn_id), str(text))
    return out


def gather_cache(
    parts: Parts, request: Request, policy: Policy, cands: Candidates, *, min_tokens: int, factor: float
) -> CacheInputs:
    """The cache layout's inputs for ``request`` (the session's turns and the ledger's candidates)."""
    cfg = parts.config.context
    if not policy.window:
        turns: list[StoredTurn] = []
    elif policy.layout_window == "candidates":
        # The policy's own window run is complete from its start (topics: since the last seal).
        turns = [st for st in reversed(list(cands.recent)) if st.role != "system"]
    elif request.session:
        turns = [st for st in parts.store.turns(parts.namespace, request.session) if st.role != "system"]
    else:
        turns = []
    stays = cfg.cache_recall_stays and bool(turns) and request.fmt in ("openai", "anthropic")
    # Only a session with tool steps can show a kept block (after a plain reply it goes): a chat
    # records its blocks but never reads the manifests back.
    read = stays and any(st.role == "assistant" and st.turn.tool_use_ids for st in turns)
    key = kept_key(request.fmt, request.budget)
    return CacheInputs(
        turns=turns,
        kept_recall=_kept_recall(parts, request, key) if read else {},
        recall_stays=stays,
        recall_key=key,
        ledger=ledger_entries(parts),
        shares=(cfg.current_share, cfg.history_share, cfg.bulk_share),
        recall_share=cfg.cache_recall_share,
        ledger_share=cfg.cache_ledger_share,
        anchor_step=cfg.cache_anchor_step,
        ledger_batch=cfg.cache_ledger_batch,
        cut_share=cfg.cache_cut_share,
        step_recall=cfg.cache_step_recall,
        max_turns=2 * cfg.short_buffer_turns,
        min_tokens=min_tokens,
        factor=factor,
        ttl=cfg.cache_ttl,
        cache_key=cache_key(parts.namespace, request.session),
    )
