"""Content blocks of a turn: text, image, tool call, tool result, thinking.

The block vocabulary is Anthropic's (text, image, tool_use, tool_result,
thinking) because it is the richer of the two; OpenAI messages map onto it
without loss. Each block has a canonical wire form (``to_dict``) read back by
:func:`block_from_dict`.

:func:`block_from_dict` is the one reader of block dicts: the canonical form
(:data:`CANONICAL_BLOCKS`) and Anthropic's Messages form
(``stratamem.providers.ANTHROPIC_BLOCKS``) spell every kind alike but images,
so a :class:`BlockDialect` supplies only the image reader and whether the
format is stratamem's own (closed: an unknown key or type is an error) or a
provider's (open: keys that are not content are ignored).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeAlias

from ..errors import InvalidTurnError
from .checks import check_json, check_text

__all__ = [
    "CANONICAL_BLOCKS",
    "Block",
    "BlockDialect",
    "ImageBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "block_from_dict",
]


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


@dataclass(frozen=True, slots=True)
class BlockDialect:
    """How one wire format spells content blocks (every kind but images is spelled alike)."""

    read_image: Callable[[Mapping[str, Any], str], ImageBlock]
    """Builds an image block from its dict and path (the one kind whose keys differ)."""
    closed: bool = True
    """stratamem's own format: a key or a type it does not know is a mistake (``unknown``). A
    provider's format is open: keys that are not content (request hints such as ``cache_control``,
    newer fields) are ignored, and a type stratamem does not hold is ``unsupported``."""


def _canonical_image(d: Mapping[str, Any], path: str) -> ImageBlock:
    img = ImageBlock(
        media_type=_opt_text(d, "media_type", path),
        data=_opt_text(d, "data", path),
        url=_opt_text(d, "url", path),
        detail=_opt_text(d, "detail", path),
    )
    if (img.data is None) == (img.url is None):
        raise InvalidTurnError("an image block needs exactly one of data or url", path=path)
    return img


CANONICAL_BLOCKS = BlockDialect(_canonical_image)
"""The canonical form (``to_dict``): flat image fields, every key checked."""


def block_from_dict(d: Any, path: str = "block", dialect: BlockDialect = CANONICAL_BLOCKS) -> Block:
    """Build a block from its dict form: the canonical one, or a provider's ``dialect``.

    Raises:
        InvalidTurnError: Unknown block type, unknown (closed dialect) or missing keys, wrong types.
    """
    if not isinstance(d, Mapping):
        raise InvalidTurnError(f"a content block must be an object, got {type(d).__name__}", path=path)
    kind = d.get("type")
    if not isinstance(kind, str) or kind not in _BLOCK_KEYS:
        if not dialect.closed:
            raise InvalidTurnError(f"unsupported content block type {kind!r}", path=path)
        raise InvalidTurnError(
            f"unknown content block type {kind!r} (expected one of {sorted(_BLOCK_KEYS)})", path=path
        )
    extra = set(d) - _BLOCK_KEYS[kind] if dialect.closed else set()
    if extra:
        raise InvalidTurnError(f"unexpected keys in {kind} block: {sorted(extra)}", path=path)
    if kind == "text":
        return TextBlock(check_text(d.get("text"), f"{path}.text"))
    if kind == "image":
        return dialect.read_image(d, path)
    if kind == "tool_use":
        tool_input = d.get("input", {})
        if not isinstance(tool_input, Mapping):
            raise InvalidTurnError("tool_use input must be a JSON object", path=f"{path}.input")
        check_json(tool_input, f"{path}.input")
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
            built = [block_from_dict(b, f"{path}.content[{i}]", dialect) for i, b in enumerate(raw)]
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
