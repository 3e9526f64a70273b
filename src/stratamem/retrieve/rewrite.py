"""Who plans a query: the rules (the default), or an optional chat model (off by default).

:class:`QueryRewriter` is what :class:`~stratamem.retrieve.engine.HybridIndex`
asks for a question's :class:`~stratamem.retrieve.plan.QueryPlan`.
:class:`RuleRewriter` is the default: :func:`~stratamem.retrieve.plan.plan_query`,
no model. :class:`ModelRewriter` asks a :class:`~stratamem.llm.ChatModel` for
the plan instead — only when you pass one (``Memory(query_rewriter=...)``;
the library never builds a model from configuration). It sends the question
and the known speaker names, never a stored turn; it checks the answer
strictly, and any failure (the call raising, a timeout, an answer that is not
the JSON asked for) falls back to the rule plan with a note saying why, and
tells ``on_failure`` (the memory reports it as a ``recall.rewrite_failed``
event and status warning). A recall never fails because of the rewriter.
"""

from __future__ import annotations

import json
import re
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from ..errors import ValidationError
from ..llm import ChatModel
from .plan import MAX_SUBQUERIES, SHAPES, QueryPlan, plan_query

__all__ = ["ModelRewriter", "QueryRewriter", "RuleRewriter"]


class QueryRewriter(Protocol):
    """Makes the plan of a question (never raises: a failed plan falls back to the rules)."""

    def plan(self, query: str, *, now: datetime | None = None, speakers: Sequence[str] = ()) -> QueryPlan:
        """The plan of ``query`` asked at ``now`` in a history whose speakers are ``speakers``."""
        ...


class RuleRewriter:
    """The rule plan (:func:`~stratamem.retrieve.plan.plan_query`); no model."""

    def plan(self, query: str, *, now: datetime | None = None, speakers: Sequence[str] = ()) -> QueryPlan:
        """:func:`~stratamem.retrieve.plan.plan_query` of ``query``."""
        return plan_query(query)


_SYSTEM = (
    "You plan searches over a person's saved conversation history. Given one question, decide whether "
    "answering it needs one piece of the history or several, and how to search for them. Reply with a "
    'single JSON object and nothing else: {"shape": S, "subqueries": [..]}. S is one of: "single" (one '
    'fact answers it), "aggregate" (a count, sum or list gathered over many conversations), "between" '
    '(the time between two events), "choice" (which of two options), "pair" (something about two people '
    'or things), "list" (several named things), "anchor" (an event before or after another). For every '
    f'shape except "single" and "aggregate", give 2 to {MAX_SUBQUERIES} short search phrases, one per thing to find, '
    "each at most 12 words, in the words the history would use; otherwise an empty list."
)

_MAX_WORDS = 12


def _checked(answer: str) -> QueryPlan:
    """The plan a model answered, or :class:`ValueError` saying why it is not one."""
    text = answer.strip()
    fence = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
    if fence:
        text = fence.group(1)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from exc
    if not isinstance(data, dict) or set(data) - {"shape", "subqueries"}:
        raise ValueError("not an object with shape and subqueries only")
    shape, subs = data.get("shape"), data.get("subqueries", [])
    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}")
    if not isinstance(subs, list) or not all(isinstance(s, str) and s.strip() for s in subs):
        raise ValueError("subqueries is not a list of strings")
    if len(subs) > MAX_SUBQUERIES or any(len(s.split()) > _MAX_WORDS for s in subs):
        raise ValueError(f"more than {MAX_SUBQUERIES} subqueries, or one over {_MAX_WORDS} words")
    try:
        return QueryPlan(shape, tuple(s.strip() for s in subs), source="model")
    except ValidationError as exc:
        raise ValueError(str(exc)) from exc


class ModelRewriter:
    """Plans with a chat model; the rule plan whenever the model fails. Off unless you pass one.

    Args:
        model: The chat model (e.g. :class:`~stratamem.llm.OpenAIChat`).
        fallback: The plan used when the model fails (default: the rules).
        max_tokens: Bound for the model's answer.
        cache: Plans remembered per (question, speakers), newest kept: a repeated question costs one call.
        on_failure: Told of each failure (the error); the memory emits an event.
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        fallback: QueryRewriter | None = None,
        max_tokens: int = 200,
        cache: int = 256,
        on_failure: Callable[[Exception], None] | None = None,
    ) -> None:
        if not callable(getattr(model, "complete", None)):
            raise ValidationError("ModelRewriter needs a chat model with a complete() method")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
            raise ValidationError(f"max_tokens must be a positive integer, got {max_tokens!r}")
        if isinstance(cache, bool) or not isinstance(cache, int) or cache < 0:
            raise ValidationError(f"cache must be a non-negative integer, got {cache!r}")
        self.model, self.fallback = model, fallback or RuleRewriter()
        self.max_tokens, self.cache_size, self.on_failure = max_tokens, cache, on_failure
        self._cache: OrderedDict[tuple[str, tuple[str, ...]], QueryPlan] = OrderedDict()

    def plan(self, query: str, *, now: datetime | None = None, speakers: Sequence[str] = ()) -> QueryPlan:
        """The model's plan of ``query``; on any failure the fallback's, with a note saying why."""
        key = (query, tuple(sorted(speakers)))
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        names = ", ".join(key[1])
        content = f"Question: {query}" + (f"\nPeople in the history: {names}" if names else "")
        try:
            done = self.model.complete(_SYSTEM, [{"role": "user", "content": content}], max_tokens=self.max_tokens)
            plan = _checked(done.text)
        except Exception as exc:  # noqa: BLE001 - ModelError, a bad answer, or anything a pluggable model raises
            return self._failed(query, now, speakers, exc)
        if self.cache_size:
            self._cache[key] = plan
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return plan

    def _failed(self, query: str, now: datetime | None, speakers: Sequence[str], exc: Exception) -> QueryPlan:
        if self.on_failure is not None:
            self.on_failure(exc)
        plan = self.fallback.plan(query, now=now, speakers=speakers)
        reason = f"{type(exc).__name__}: {exc}"[:200]
        return QueryPlan(plan.shape, plan.subqueries, plan.source, f"query rewriter failed ({reason}); rule plan used")

    def describe(self) -> dict[str, Any]:
        """Model name and cache fill, for status output."""
        return {"model": getattr(self.model, "model", None), "cached": len(self._cache)}
