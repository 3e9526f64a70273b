"""The canonical records: turns and their content blocks, sessions, stored turns.

A :class:`Turn` is one message as stratamem keeps it. It is a pure, frozen value;
ids, sequence numbers and token counts are assigned by the store and travel in
:class:`StoredTurn`. Every turn has a canonical wire form (:meth:`Turn.to_dict`,
:meth:`Turn.from_dict`) used for export/import; the provider shapes (OpenAI Chat
Completions, Anthropic Messages) live in :mod:`stratamem.providers`.

Content is either a plain string or a tuple of blocks. The block vocabulary is
Anthropic's (text, image, tool_use, tool_result, thinking) because it is the
richer of the two; OpenAI messages map onto it without loss.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, ClassVar, Literal, TypeAlias

from .errors import InvalidTurnError, ValidationError

__all__ = [
    "ROLES",
    "Block",
    "ImageBlock",
    "Role",
    "Session",
    "StoredTurn",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "Turn",
    "block_from_dict",
    "check_name",
    "check_text",
    "format_timestamp",
    "parse_timestamp",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")

# Namespace and session names go into file names, URLs and CLI arguments.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@+=-]{0,127}$")


def check_name(value: object, what: str) -> str:
    """Validate a namespace or session name and return it.

    Raises:
        ValidationError: The name is not a 1–128 character string of letters,
            digits and ``_.:@+=-`` starting with a letter or digit.
    """
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ValidationError(
            f"invalid {what} name {value!r}: use 1-128 characters from "
            "letters, digits and _.:@+=-, starting with a letter or digit"
        )
    return value


def check_text(value: object, path: str) -> str:
    """Return ``value`` if it is a string that can be stored, else raise.

    Stored text must be valid Unicode (no lone surrogates, which cannot be
    encoded as UTF-8) and contain no NUL characters (which C-level text
    search and many terminals truncate at).

    Raises:
        InvalidTurnError: ``value`` is not a ``str``, holds a lone surrogate or a NUL.
    """
    if not isinstance(value, str):
        raise InvalidTurnError(f"expected a string, got {type(value).__name__}", path=path)
    if "\x00" in value:
        raise InvalidTurnError("text contains a NUL character", path=path)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidTurnError(
            f"text is not valid Unicode (lone surrogate at index {exc.start})", path=path
        ) from None
    return value


def format_timestamp(ts: datetime) -> str:
    """Render an aware datetime as the canonical UTC string ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.

    The year is always four digits: ``strftime("%Y")`` gives ``999`` for the
    year 999 on glibc, which :func:`parse_timestamp` (ISO 8601) cannot read back.

    Raises:
        InvalidTurnError: ``ts`` falls outside years 1–9999 once converted to UTC.
    """
    u = _to_utc(ts, "timestamp")
    return (f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}"
            f".{u.microsecond:06d}Z")


def _to_utc(ts: datetime, path: str) -> datetime:
    """``ts`` in UTC; an instant outside datetime's range is a caller error, not an ``OverflowError``."""
    try:
        return ts.astimezone(timezone.utc)
    except OverflowError:
        raise InvalidTurnError(f"timestamp {ts.isoformat()} is outside years 1-9999 in UTC", path=path) from None


def parse_timestamp(value: str | datetime, path: str = "timestamp") -> datetime:
    """Parse an ISO 8601 timestamp; naive values are taken as UTC.

    Raises:
        InvalidTurnError: The value is not an ISO 8601 date-time, or it lies
            outside years 1–9999 once converted to UTC.
    """
    if isinstance(value, datetime):
        ts = value
    elif isinstance(value, str):
        try:
            ts = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidTurnError(f"not an ISO 8601 timestamp: {value!r}", path=path) from None
    else:
        raise InvalidTurnError(f"expected a timestamp, got {type(value).__name__}", path=path)
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=timezone.utc)
    return _to_utc(ts, path)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _check_json(value: Any, path: str) -> None:
    """Reject values that JSON cannot carry (so the store round-trips them).

    NaN and infinities are refused: Python's ``json`` writes them as bare
    ``NaN``/``Infinity``, which is not JSON, so a stored turn holding one could
    not be read back by strict readers (the store's own included).
    """
    try:
        json.dumps(value, allow_nan=False, ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as exc:
        raise InvalidTurnError(f"not JSON-serializable: {exc}", path=path) from None


@dataclass(frozen=True, slots=True)
class TextBlock:
    """A run of plain text."""

    text: str
    """The text."""

    type: ClassVar[str] = "text"

    def to_dict(self) -> dict[str, Any]:
        """Canonical wire form."""
        return {"type": "text", "text": self.text}


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """An image, either inline (base64 ``data`` + ``media_type``) or by ``url``."""

    media_type: str | None = None
    """MIME type of inline data, e.g. ``image/png``."""
    data: str | None = None
    """Base64-encoded image bytes (inline images)."""
    url: str | None = None
    """Address of the image (URL images)."""
    detail: str | None = None
    """OpenAI's ``detail`` hint (``low``/``high``/``auto``), kept for round trips."""

    type: ClassVar[str] = "image"

    def to_dict(self) -> dict[str, Any]:
        """Canonical wire form (unset fields omitted)."""
        out: dict[str, Any] = {"type": "image"}
        for key in ("media_type", "data", "url", "detail"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True, slots=True)
class ToolUseBlock:
    """A tool call made by the assistant."""

    id: str
    """Provider-assigned call id; tool results refer to it."""
    name: str
    """Name of the tool."""
    input: Mapping[str, Any] = field(default_factory=dict)
    """Arguments as a JSON object. Treat as read-only."""

    type: ClassVar[str] = "tool_use"

    def to_dict(self) -> dict[str, Any]:
        """Canonical wire form."""
        return {"type": "tool_use", "id": self.id, "name": self.name, "input": dict(self.input)}


@dataclass(frozen=True, slots=True)
class ToolResultBlock:
    """The result of one tool call, answering the :class:`ToolUseBlock` with ``tool_use_id``."""

    tool_use_id: str
    """Id of the tool call this answers."""
    content: tuple[TextBlock | ImageBlock, ...] = ()
    """Result content: text and images."""
    is_error: bool = False
    """Whether the tool reported an error."""

    type: ClassVar[str] = "tool_result"

    @property
    def text(self) -> str:
        """The text parts of the result joined by newlines."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def has_image(self) -> bool:
        """Whether any part of the result is an image."""
        return any(isinstance(b, ImageBlock) for b in self.content)

    def to_dict(self) -> dict[str, Any]:
        """Canonical wire form."""
        out: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": self.tool_use_id,
            "content": [b.to_dict() for b in self.content],
        }
        if self.is_error:
            out["is_error"] = True
        return out


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """Model reasoning returned by the provider; never summarized or searched."""

    thinking: str
    """The reasoning text."""
    signature: str | None = None
    """Provider signature that must be sent back unchanged."""

    type: ClassVar[str] = "thinking"

    def to_dict(self) -> dict[str, Any]:
        """Canonical wire form."""
        out: dict[str, Any] = {"type": "thinking", "thinking": self.thinking}
        if self.signature is not None:
            out["signature"] = self.signature
        return out


Block: TypeAlias = TextBlock | ImageBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock

_BLOCK_KEYS: dict[str, set[str]] = {
    "text": {"type", "text"},
    "image": {"type", "media_type", "data", "url", "detail"},
    "tool_use": {"type", "id", "name", "input"},
    "tool_result": {"type", "tool_use_id", "content", "is_error"},
    "thinking": {"type", "thinking", "signature"},
}


def _opt_text(d: Mapping[str, Any], key: str, path: str) -> str | None:
    value = d.get(key)
    return None if value is None else check_text(value, f"{path}.{key}")


def block_from_dict(d: Any, path: str = "block") -> Block:
    """Build a block from its canonical dict form.

    Raises:
        InvalidTurnError: Unknown block type, unknown or missing keys, wrong types.
    """
    if not isinstance(d, Mapping):
        raise InvalidTurnError(f"a content block must be an object, got {type(d).__name__}", path=path)
    kind = d.get("type")
    if not isinstance(kind, str) or kind not in _BLOCK_KEYS:
        raise InvalidTurnError(
            f"unknown content block type {kind!r} (expected one of {sorted(_BLOCK_KEYS)})", path=path
        )
    extra = set(d) - _BLOCK_KEYS[kind]
    if extra:
        raise InvalidTurnError(f"unexpected keys in {kind} block: {sorted(extra)}", path=path)
    if kind == "text":
        return TextBlock(check_text(d.get("text"), f"{path}.text"))
    if kind == "image":
        img = ImageBlock(
            media_type=_opt_text(d, "media_type", path),
            data=_opt_text(d, "data", path),
            url=_opt_text(d, "url", path),
            detail=_opt_text(d, "detail", path),
        )
        if (img.data is None) == (img.url is None):
            raise InvalidTurnError("an image block needs exactly one of data or url", path=path)
        return img
    if kind == "tool_use":
        tool_input = d.get("input", {})
        if not isinstance(tool_input, Mapping):
            raise InvalidTurnError("tool_use input must be a JSON object", path=f"{path}.input")
        _check_json(tool_input, f"{path}.input")
        return ToolUseBlock(
            id=check_text(d.get("id"), f"{path}.id"),
            name=check_text(d.get("name"), f"{path}.name"),
            input=dict(tool_input),
        )
    if kind == "tool_result":
        raw = d.get("content", [])
        if isinstance(raw, str):
            parts: tuple[TextBlock | ImageBlock, ...] = (TextBlock(check_text(raw, f"{path}.content")),)
        elif isinstance(raw, Sequence):
            built = [block_from_dict(b, f"{path}.content[{i}]") for i, b in enumerate(raw)]
            for i, b in enumerate(built):
                if not isinstance(b, TextBlock | ImageBlock):
                    raise InvalidTurnError(
                        "tool_result content may hold only text and image blocks",
                        path=f"{path}.content[{i}]",
                    )
            parts = tuple(built)  # type: ignore[arg-type]
        else:
            raise InvalidTurnError("tool_result content must be a string or a list", path=f"{path}.content")
        is_error = d.get("is_error", False)
        if not isinstance(is_error, bool):
            raise InvalidTurnError("is_error must be a boolean", path=f"{path}.is_error")
        return ToolResultBlock(check_text(d.get("tool_use_id"), f"{path}.tool_use_id"), parts, is_error)
    return ThinkingBlock(check_text(d.get("thinking"), f"{path}.thinking"), _opt_text(d, "signature", path))


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
                    raise InvalidTurnError(
                        f"not a content block: {type(block).__name__}", path=f"content[{i}]"
                    )
                if isinstance(block, ToolUseBlock):
                    # Blocks built directly (providers, callers) skip block_from_dict's check.
                    if not isinstance(block.input, Mapping):
                        raise InvalidTurnError("tool_use input must be a JSON object", path=f"content[{i}].input")
                    _check_json(dict(block.input), f"content[{i}].input")
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
        _check_json(self.metadata, "metadata")

    def _check_roles_blocks(self) -> None:
        assert isinstance(self.content, tuple)
        kinds = {b.type for b in self.content}
        if self.role == "tool" and "tool_result" not in kinds:
            raise InvalidTurnError("a tool turn must hold at least one tool_result block", path="content")
        if "tool_result" in kinds and self.role != "tool":
            raise InvalidTurnError(
                f"tool_result blocks belong in a 'tool' turn, not {self.role!r}", path="content"
            )
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
                parts.append(f"{b.name}({json.dumps(dict(b.input), ensure_ascii=False, sort_keys=True, allow_nan=False)})")
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
