"""Prompt caching at the facade: the layout's switch, the context in the caller's terms, reported usage.

:meth:`stratamem.Memory.context` asks :func:`with_cache` whether to lay the
prompt out for the provider's cache (``cache=``, else ``context.cache_layout``)
and with which rules (the target model's shortest cacheable prefix, the
provider's counting); :func:`as_requested` puts the assembled context in the
caller's terms. :func:`report_usage` records what the provider then reported
(:meth:`stratamem.Memory.report_usage`) on the session's newest manifest.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ..config import ContextConfig
from ..context.gather import Request
from ..errors import NotFoundError, ValidationError
from ..providers import to_responses
from ..records.manifests import Context
from ..records.usage import PromptUsage, cache_rules
from ..tokens import Counting

__all__ = ["as_requested", "report_usage", "with_cache"]


def with_cache(request: Request, config: ContextConfig, counting: Counting, cache: bool | None) -> Request:
    """``request`` with the cache layout's switch (``cache``, else the configuration's) and the target's rules.

    Raises:
        ValidationError: ``cache`` is not a boolean.
    """
    if cache is not None and not isinstance(cache, bool):
        raise ValidationError(f"cache must be true or false, got {cache!r}", path="cache")
    on = config.cache_layout if cache is None else cache
    if not on:
        return request
    rules = cache_rules(counting.provider, counting.model, min_tokens=config.cache_min_tokens)
    return dataclasses.replace(request, cache=True, cache_min_tokens=rules.min_tokens, cache_factor=counting.factor)


def as_requested(ctx: Context, format: str, budget: int, counting: Counting) -> Context:
    """The assembled context in the caller's terms: the budget and total in the provider's counting,
    ``responses`` items re-shaped from the Chat Completions messages they were assembled as."""
    manifest = dataclasses.replace(
        ctx.manifest, budget=budget, total_tokens=counting.tokens(ctx.tokens), counting=counting.to_dict()
    )
    messages = tuple(to_responses(ctx.messages)) if format == "responses" else ctx.messages
    return dataclasses.replace(ctx, format=format, messages=messages, manifest=manifest)


def report_usage(store: Any, namespace: str, session: str | None, usage: Any) -> PromptUsage:
    """Record ``usage`` (a provider's, see :meth:`PromptUsage.from_provider`) on the session's newest manifest.

    Raises:
        ValidationError: Not a provider usage.
        NotFoundError: The session has no recorded manifest (``context.record_manifests`` off, or none assembled).
    """
    reported = PromptUsage.from_provider(usage)
    if session is None:
        session = store.latest_session(namespace)
    if store.manifests.set_reported(namespace, session, reported.to_dict()) is None:
        raise NotFoundError(f"no manifest recorded for session {session!r} of namespace {namespace!r}")
    return reported
