"""Request bodies of the JSON API (pydantic models: they validate and document the OpenAPI schema).

Field limits here are the shell's first line; the library validates again
at its own boundary and its errors map to 400 as well.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Header
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from ..context.policies import PolicyName
from ..text import MAX_QUERY_CHARS

__all__ = [
    "AddItem",
    "AddTurns",
    "ContextQuery",
    "ContextRequest",
    "ErrorBody",
    "ErrorDetail",
    "Forget",
    "IdempotencyKey",
    "ItemType",
    "RecallItems",
    "StateChange",
    "Supersede",
    "Tier",
]

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        max_length=255,
        description="Send a write again with the same key and body (within 24 h) and get the first answer; "
        "nothing is stored twice. The same key with another body: 409.",
    ),
]
"""The ``Idempotency-Key`` header of the write routes (see :mod:`stratamem.web.idempotent`)."""

ItemType = Literal["fact", "decision", "entity", "preference", "event", "context", "message"]
Tier = Literal["hot", "warm", "cold"]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorDetail(BaseModel):
    """What went wrong."""

    type: str = Field(description="Error class, e.g. ValidationError, NotFoundError.")
    message: str = Field(description="What was wrong, for a person.")
    path: str | None = Field(default=None, description="Where in the input, when known.")


class ErrorBody(BaseModel):
    """The body of every error response."""

    error: ErrorDetail


class AddTurns(_Body):
    """Messages to store as turns of one session, in one transaction."""

    messages: list[dict[str, Any]] = Field(
        min_length=1, max_length=1000, description="Canonical turns, OpenAI or Anthropic messages."
    )
    session: str = Field(default="default", description="Session (created on first use).")
    format: Literal["auto", "turns", "openai", "anthropic"] = "auto"
    platform: str | None = Field(default=None, max_length=200, description="Platform label for a new session.")
    channel: str | None = Field(default=None, max_length=200, description="Channel label for a new session.")


class ContextRequest(_Body):
    """What to assemble a context for."""

    query: str | None = Field(default=None, max_length=MAX_QUERY_CHARS, description="What the next call is about.")
    # Strict: a JSON body says 2000, not "2000" or 2000.0 (those are refused, not coerced).
    budget: int | None = Field(default=None, strict=True, description="Token budget (default: config).")
    session: str | None = Field(default=None, description="Current session (default: latest).")
    format: Literal["openai", "responses", "anthropic", "text"] = "openai"
    policy: PolicyName | None = None
    now: datetime | None = Field(
        default=None,
        description="When the query is asked (ISO 8601; naive = UTC), for "
        "relative times (default: the newest turn's time).",
    )
    provider: Literal["openai", "anthropic"] | None = Field(
        default=None, description="Whose token counting the budget is in (default: the format's provider)."
    )
    model: str | None = Field(default=None, max_length=200, description="Target model (recorded in the manifest).")
    system_prompts: Literal["session", "namespace"] = Field(
        default="session", description="Whose system prompts go in: the session's own, or every session's."
    )
    record: bool | None = Field(
        default=None,
        description="Store the manifest (POST default: the server's setting, on unless configured off; "
        "GET default: off, a GET writes nothing).",
    )


class ContextQuery(ContextRequest):
    """:class:`ContextRequest` as query parameters, whose values arrive as text (``budget=2000``)."""

    budget: int | None = Field(default=None, description="Token budget (default: config).")


class AddItem(_Body):
    """A memory item to add (to hot by default)."""

    content: str = Field(min_length=1, max_length=100_000)
    type: ItemType = "fact"
    session: str | None = None
    key: str | None = Field(default=None, description="Subject key: replaces live items with the same key.")
    supersedes: list[StrictInt] = Field(default_factory=list, description="Ids of older items this one replaces.")
    metadata: dict[str, Any] | None = None
    tier: Tier = "hot"
    scope: Literal["namespace", "session"] = Field(
        default="namespace", description="namespace: every session sees it; session: only `session` does."
    )


class RecallItems(_Body):
    """A recall over warm and cold items (tracks access; may promote)."""

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    limit: int = Field(default=3, ge=1, le=100, strict=True)
    auto_promote: bool | None = Field(default=None, strict=True)
    types: list[ItemType] | None = None
    include_superseded: bool = False
    session: str | None = Field(
        default=None,
        description="The session reading: namespace-wide items and its own (default: namespace-wide items only).",
    )


class Supersede(_Body):
    """The newer item that replaces this one."""

    by: int = Field(strict=True, description="Id of the newer item.")


class StateChange(_Body):
    """One atomic change to the working state."""

    op: Literal["set_goal", "set_now", "decide", "add_task", "update_task", "complete_task", "set_convention"]
    text: str | None = None
    why: str | None = None
    id: str | None = None
    status: str | None = None
    key: str | None = None
    value: str | None = None


class Forget(_Body):
    """What to forget, with everything derived from it: exactly one of `turns`, `session`, `all_namespace`."""

    turns: list[int | str] | None = Field(
        default=None,
        min_length=1,
        max_length=10_000,
        description="Ids as search and contexts show them: turn:N (or N), node:N (the turns a summary covers), "
        "system:HASH (every copy of a system prompt).",
    )
    session: str | None = Field(default=None, description="Forget this whole session.")
    all_namespace: bool = Field(default=False, description="Forget the whole namespace (needs confirm).")
    confirm: str | None = Field(default=None, description="The namespace's name, required with all_namespace.")
    vacuum: bool = Field(default=False, description="Rebuild the storage afterwards.")
