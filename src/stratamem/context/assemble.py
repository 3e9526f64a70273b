"""Budgeted context assembly: allocate, select, de-duplicate, order, render, explain.

:func:`assemble` is a pure function of its candidates: fixed blocks
(instructions, working state, checkpoint), the current session's recent turns,
recalled turns ranked by the retrieval engine, memory items and summaries of
older history go in; a :class:`~stratamem.records.manifests.Context` comes out,
rendered for one provider and counted exactly, with every item's reason and
score and the near-misses. It runs the same steps for every policy, each in
its own module, over one :class:`~stratamem.context.assembly.Assembly`:

1. fixed blocks, whole when they fit; the working state shrinks to fit
   (:func:`take_fixed`);
2. the allocation: the policy's shares of what is left (:meth:`Policy.allocate`);
3. the recent window (:func:`~stratamem.context.window.take_window`);
4. recalled history: memory items and recalled verbatim turns, packed and
   de-duplicated (:func:`~stratamem.context.history.take_history`);
5. summaries, expanded to their turns when they fit
   (:func:`~stratamem.context.summaries.take_summaries`);
6. render, guard the budget, write the manifest (:func:`~stratamem.context.finish.finish`).

The policy (:mod:`stratamem.context.policies`) supplies the shares and the
rules that differ. :func:`build_context` is the facade's one entry point: the
policy gathers the candidates from a memory's parts, then :func:`assemble`.
"""

from __future__ import annotations

from ..records.manifests import Context
from ..tokens import Tokenizer
from .assembly import Assembly
from .cache_inputs import gather_cache
from .finish import finish
from .fixed import place_fixed
from .gather import Parts, Request
from .history import take_history
from .layout import assemble_cached, newest_step
from .policies import get_policy
from .policy import Policy
from .summaries import take_summaries
from .units import Candidates
from .window import take_window

__all__ = ["assemble", "build_context", "take_fixed"]


def build_context(parts: Parts, request: Request) -> Context:
    """The context for a checked request: the policy gathers from ``parts``, then :func:`assemble`
    (with ``request.cache``, the cache layout's :func:`~stratamem.context.layout.assemble_cached`).

    ``request.budget`` is in the memory's tokenizer; the facade converts a
    provider's counting and re-shapes ``responses`` items.

    Raises:
        ValidationError: Unknown policy.
        ConfigError: The policy needs a part the configuration turns off (``topics``: the pyramid).
    """
    policy = get_policy(request.policy)
    cands = policy.gather(parts, request)
    cfg = parts.config.context
    if request.cache:
        inputs = gather_cache(
            parts, request, policy, cands, min_tokens=request.cache_min_tokens, factor=request.cache_factor
        )
        ctx = assemble_cached(
            cands,
            inputs,
            budget=request.budget,
            tokenizer=parts.tokenizer,
            fmt=request.fmt,
            policy=policy,
            query=request.query,
            dedup=cfg.dedup,
        )
        return policy.annotate(ctx, cands, parts)
    ctx = assemble(
        cands,
        budget=request.budget,
        tokenizer=parts.tokenizer,
        fmt=request.fmt,
        policy=policy,
        shares=(cfg.current_share, cfg.history_share, cfg.bulk_share),
        query=request.query,
        dedup=cfg.dedup,
    )
    return policy.annotate(ctx, cands, parts)


def assemble(
    cands: Candidates,
    *,
    budget: int,
    tokenizer: Tokenizer,
    fmt: str = "openai",
    policy: str | Policy = "hybrid",
    shares: tuple[float, float, float] = (0.5, 0.3, 0.2),
    query: str | None = None,
    dedup: bool = True,
) -> Context:
    """Fill ``budget`` from the candidates in the policy's order and render the result.

    Args:
        cands: What competes for a place (:class:`~stratamem.context.units.Candidates`).
        budget: Token budget for the whole rendered context.
        tokenizer: Exact tokenizer the budget is counted in.
        fmt: ``openai``, ``anthropic`` or ``text``.
        policy: A registered policy or its name (:data:`~stratamem.context.policies.POLICIES`).
        shares: ``(current, history, bulk)`` shares of what the fixed blocks leave.
        query: Recorded in the manifest (and sizes the ``hybrid`` window).
        dedup: Show one copy of each fact (:mod:`stratamem.context.dedup`): a recalled
            turn, item or summary sentence already shown is left out, and its
            manifest entry says ``duplicate_of`` the kept copy.

    Raises:
        BudgetError: ``budget`` is not a positive integer or below the request overhead.
        ValidationError: Unknown ``fmt`` or policy.
    """
    pol = get_policy(policy) if isinstance(policy, str) else policy
    asm = Assembly.start(budget, tokenizer, fmt, query, dedup)
    take_fixed(asm, cands)
    alloc = pol.allocate(asm, shares, cands)
    window = take_window(asm, cands.recent, alloc, pol, cands.recalled, cut_step=newest_step)
    history = take_history(asm, cands, alloc, window, pol)
    take_summaries(asm, cands, alloc, window.ids | history.kept_ids, pol)
    return finish(asm, window, history, pol.name, cands.notes)


def take_fixed(asm: Assembly, cands: Candidates) -> None:
    """Place each fixed block in order: whole, shrunk to fit, or a near-miss (:func:`place_fixed`)."""
    for blk in cands.fixed:
        place_fixed(asm, blk)
