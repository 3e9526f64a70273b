"""Turns, sessions and stored turns: the canonical record.

A :class:`Turn` is one message as stratamem keeps it. It is a pure, frozen value;
ids, sequence numbers and token counts are assigned by the store and travel in
:class:`StoredTurn`. Every turn has a canonical wire form (:meth:`Turn.to_dict`,
:meth:`Turn.from_dict`) used for export/import; the provider shapes (OpenAI Chat
Completions, Anthropic Messages) live in :mod:`stratamem.providers`.

Content is either a plain string or a tuple of blocks
(:mod:`stratamem.records.blocks`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal, TypeAlias

from ..errors import InvalidTurnError
from .blocks import Block, ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, block_from_dict
from .checks import _now, _to_utc, check_json, check_text, format_timestamp, parse_timestamp

__all__ = ["ROLES", "Role", "Session", "StoredTurn", "Turn"]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")


@dataclass(frozen=True, slots=True)
class Turn:
    """One message, immutable once stored.

    Build turns directly, from provider messages (:mod:`stratamem.providers`), or
    from the canonical dict form (:meth:`from_dict`). Construction validates the
    role and content; size limits are checked by the store's caller (``Memory.add``).
    """

    role: Role
    """``system``, ``user``, ``assistant`` or ``tool`` (tool results)."""
    content: str | tuple[Block, ...]
    """Plain text, or a tuple of content blocks."""
    timestamp: datetime = field(default_factory=_now)
    """When the message was sent (timezone-aware, UTC)."""
    name: str | None = None
    """Speaker or participant name (OpenAI ``name``; a LoCoMo speaker)."""
    model: str | None = None
    """Model that produced an assistant turn, if known."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Free-form JSON metadata. Treat as read-only."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InvalidTurnError(f"unknown role {self.role!r} (expected one of {list(ROLES)})", path="role")
        if isinstance(self.content, str):
            check_text(self.content, "content")
            if self.role == "tool":
                raise InvalidTurnError("a tool turn must hold at least one tool_result block", path="content")
        elif isinstance(self.content, tuple):
            for i, block in enumerate(self.content):
                if not isinstance(block, TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock):
                    raise InvalidTurnError(f"not a content block: {type(block).__name__}", path=f"content[{i}]")
                if isinstance(block, ToolUseBlock):
                    # Blocks built directly (providers, callers) skip block_from_dict's check.
                    if not isinstance(block.input, Mapping):
                        raise InvalidTurnError("tool_use input must be a JSON object", path=f"content[{i}].input")
                    check_json(dict(block.input), f"content[{i}].input")
            self._check_roles_blocks()
        else:
            raise InvalidTurnError(
                f"content must be a string or a tuple of blocks, got {type(self.content).__name__}",
                path="content",
            )
        if not isinstance(self.timestamp, datetime) or self.timestamp.tzinfo is None:
            raise InvalidTurnError("timestamp must be a timezone-aware datetime", path="timestamp")
        _to_utc(self.timestamp, "timestamp")  # stored in UTC: it must exist there
        if self.name is not None:
            check_text(self.name, "name")
        if self.model is not None:
            check_text(self.model, "model")
        if not isinstance(self.metadata, Mapping):
            raise InvalidTurnError("metadata must be a JSON object", path="metadata")
        check_json(self.metadata, "metadata")

    def _check_roles_blocks(self) -> None:
        assert isinstance(self.content, tuple)
        kinds = {b.type for b in self.content}
        if self.role == "tool" and "tool_result" not in kinds:
            raise InvalidTurnError("a tool turn must hold at least one tool_result block", path="content")
        if "tool_result" in kinds and self.role != "tool":
            raise InvalidTurnError(f"tool_result blocks belong in a 'tool' turn, not {self.role!r}", path="content")
        if kinds & {"tool_use", "thinking"} and self.role != "assistant":
            raise InvalidTurnError(
                f"tool_use and thinking blocks belong in an 'assistant' turn, not {self.role!r}",
                path="content",
            )

    @property
    def blocks(self) -> tuple[Block, ...]:
        """Content as blocks (a plain string becomes one text block)."""
        if isinstance(self.content, str):
            return (TextBlock(self.content),) if self.content else ()
        return self.content

    @property
    def text(self) -> str:
        """A plain-text projection for search and summaries.

        Text blocks as they are, tool calls as ``name(json-args)``, tool results
        as their text, images as ``[image]``. Thinking is left out: it is the
        model's scratch work, not part of the conversation.
        """
        if isinstance(self.content, str):
            return self.content
        parts: list[str] = []
        for b in self.content:
            if isinstance(b, TextBlock):
                parts.append(b.text)
            elif isinstance(b, ToolUseBlock):
                parts.append(
                    f"{b.name}({json.dumps(dict(b.input), ensure_ascii=False, sort_keys=True, allow_nan=False)})"
                )
            elif isinstance(b, ToolResultBlock):
                parts.append(b.text + (" [image]" if b.has_image else ""))
            elif isinstance(b, ImageBlock):
                parts.append("[image]")
        return "\n".join(p for p in parts if p)

    @property
    def tool_use_ids(self) -> tuple[str, ...]:
        """Ids of the tool calls this turn makes."""
        return tuple(b.id for b in self.blocks if isinstance(b, ToolUseBlock))

    @property
    def tool_result_ids(self) -> tuple[str, ...]:
        """Ids of the tool calls this turn answers."""
        return tuple(b.tool_use_id for b in self.blocks if isinstance(b, ToolResultBlock))

    def to_dict(self) -> dict[str, Any]:
        """Canonical wire form (JSON-serializable); inverse of :meth:`from_dict`."""
        out: dict[str, Any] = {
            "role": self.role,
            "content": self.content if isinstance(self.content, str) else [b.to_dict() for b in self.content],
            "timestamp": format_timestamp(self.timestamp),
        }
        if self.name is not None:
            out["name"] = self.name
        if self.model is not None:
            out["model"] = self.model
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out

    _KEYS: ClassVar[frozenset[str]] = frozenset({"role", "content", "timestamp", "name", "model", "metadata"})

    @classmethod
    def from_dict(cls, d: Any, *, path: str = "turn", default_timestamp: datetime | None = None) -> Turn:
        """Build a turn from its canonical dict form.

        Args:
            d: A mapping with ``role`` and ``content`` and optionally ``timestamp``,
                ``name``, ``model``, ``metadata``.
            path: Where ``d`` sits in the caller's input, for error messages.
            default_timestamp: Used when ``d`` has no timestamp (default: now).

        Raises:
            InvalidTurnError: Missing or unknown keys, wrong types, bad blocks.
        """
        if not isinstance(d, Mapping):
            raise InvalidTurnError(f"a turn must be an object, got {type(d).__name__}", path=path)
        extra = set(d) - cls._KEYS
        if extra:
            raise InvalidTurnError(f"unexpected keys: {sorted(extra)}", path=path)
        if "role" not in d:
            raise InvalidTurnError("missing 'role'", path=path)
        if "content" not in d:
            raise InvalidTurnError("missing 'content'", path=path)
        raw = d["content"]
        content: str | tuple[Block, ...]
        if isinstance(raw, str):
            content = raw
        elif isinstance(raw, list | tuple):
            content = tuple(block_from_dict(b, f"{path}.content[{i}]") for i, b in enumerate(raw))
        else:
            raise InvalidTurnError(
                f"content must be a string or a list of blocks, got {type(raw).__name__}", path=f"{path}.content"
            )
        meta = d.get("metadata") or {}
        if not isinstance(meta, Mapping):
            raise InvalidTurnError("metadata must be a JSON object", path=f"{path}.metadata")
        ts = d.get("timestamp")
        timestamp = parse_timestamp(ts, f"{path}.timestamp") if ts is not None else (default_timestamp or _now())
        try:
            return cls(
                role=d["role"],
                content=content,
                timestamp=timestamp,
                name=d.get("name"),
                model=d.get("model"),
                metadata=dict(meta),
            )
        except InvalidTurnError as exc:
            raise exc.under(path) from None


@dataclass(frozen=True, slots=True)
class Session:
    """A conversation thread in a namespace."""

    namespace: str
    """Owning namespace."""
    name: str
    """Session name, unique within the namespace."""
    platform: str | None = None
    """Where the conversation happens (``slack``, ``cli``, ``telegram`` …)."""
    channel: str | None = None
    """Channel or thread within the platform."""
    created_at: datetime = field(default_factory=_now)
    """When the session was first seen."""


@dataclass(frozen=True, slots=True)
class StoredTurn:
    """A turn as the store holds it: the value plus its store-assigned identity."""

    id: int
    """Store-wide turn id (stable; used for provenance)."""
    namespace: str
    """Owning namespace."""
    session: str
    """Session name."""
    seq: int
    """1-based, gap-free position within the session."""
    tokens: int
    """Exact token count of the turn as a message, with the store's tokenizer."""
    turn: Turn
    """The turn itself."""

    @property
    def role(self) -> Role:
        """Shortcut for ``turn.role``."""
        return self.turn.role

    @property
    def text(self) -> str:
        """Shortcut for ``turn.text``."""
        return self.turn.text

    @property
    def timestamp(self) -> datetime:
        """Shortcut for ``turn.timestamp``."""
        return self.turn.timestamp
