"""Provider message shapes: OpenAI Chat Completions and Anthropic Messages.

Converts provider message lists to :class:`~stratamem.records.Turn` and back,
and checks that a message list is structurally valid for a provider
(role alternation, every tool result paired with its tool call).

What does not survive a trip through a provider that cannot hold it:
thinking blocks are dropped when rendering for OpenAI (it has no such block),
and the ``name`` field is dropped for Anthropic (it has none). Everything else
round-trips. Anthropic request hints on blocks (``cache_control``,
``citations``) are not content and are ignored on input.

Anthropic blocks are read by the one block reader,
:func:`~stratamem.records.blocks.block_from_dict`, in Anthropic's dialect
(:data:`ANTHROPIC_BLOCKS`: images by ``source``, keys that are not content
ignored); this module holds only what differs (the image source) and the
message-level shapes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .errors import InvalidTurnError
from .records import (
    Block,
    ImageBlock,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
    check_text,
    parse_timestamp,
)
from .records.blocks import BlockDialect, block_from_dict

__all__ = [
    "ANTHROPIC_BLOCKS",
    "anthropic_block",
    "from_anthropic",
    "from_openai",
    "structural_problems",
    "to_anthropic",
    "to_openai",
    "to_responses",
]


def _require_mapping(m: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(m, Mapping):
        raise InvalidTurnError(f"a message must be an object, got {type(m).__name__}", path=path)
    return m


def _turn(
    role: str, content: str | tuple[Block, ...], m: Mapping[str, Any], path: str, timestamp: datetime | None
) -> Turn:
    ts = m.get("timestamp")
    kwargs: dict[str, Any] = {}
    if ts is not None:
        kwargs["timestamp"] = parse_timestamp(ts, f"{path}.timestamp")
    elif timestamp is not None:
        kwargs["timestamp"] = timestamp
    try:
        return Turn(role=role, content=content, name=m.get("name"), model=m.get("model"), **kwargs)  # type: ignore[arg-type]
    except InvalidTurnError as exc:
        raise exc.under(path) from None


# --- OpenAI ------------------------------------------------------------------------------


def _openai_image(part: Mapping[str, Any], path: str) -> ImageBlock:
    spec = part.get("image_url")
    if isinstance(spec, str):
        spec = {"url": spec}
    if not isinstance(spec, Mapping) or not isinstance(spec.get("url"), str):
        raise InvalidTurnError("image_url part needs image_url.url", path=path)
    url = check_text(spec["url"], f"{path}.image_url.url")
    detail = spec.get("detail")
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return ImageBlock(media_type=media_type or None, data=data, detail=detail)
    return ImageBlock(url=url, detail=detail)


def _openai_parts(content: Any, path: str, *, allow_images: bool) -> str | tuple[Block, ...]:
    if isinstance(content, str):
        return check_text(content, path)
    if not isinstance(content, list):
        raise InvalidTurnError(f"content must be a string or a list of parts, got {type(content).__name__}", path=path)
    blocks: list[Block] = []
    for i, part in enumerate(content):
        ppath = f"{path}[{i}]"
        if not isinstance(part, Mapping):
            raise InvalidTurnError("a content part must be an object", path=ppath)
        kind = part.get("type")
        if kind == "text":
            blocks.append(TextBlock(check_text(part.get("text"), f"{ppath}.text")))
        elif kind == "refusal":
            blocks.append(TextBlock(check_text(part.get("refusal"), f"{ppath}.refusal")))
        elif kind == "image_url" and allow_images:
            blocks.append(_openai_image(part, ppath))
        else:
            raise InvalidTurnError(f"unsupported content part type {kind!r}", path=ppath)
    return tuple(blocks)


def from_openai(messages: Any, *, timestamp: datetime | None = None) -> list[Turn]:
    """Convert OpenAI Chat Completions messages to turns.

    Args:
        messages: A list of message objects (``role``, ``content``, ``tool_calls``,
            ``tool_call_id``, ``name``). An optional ``timestamp`` key per message is honoured.
        timestamp: Default timestamp for messages without one (default: now).

    Returns:
        One turn per message, in order.

    Raises:
        InvalidTurnError: A message is malformed; the error names its index.
    """
    if not isinstance(messages, list):
        raise InvalidTurnError(f"expected a list of messages, got {type(messages).__name__}", path="messages")
    turns: list[Turn] = []
    for i, raw in enumerate(messages):
        path = f"messages[{i}]"
        m = _require_mapping(raw, path)
        role = m.get("role")
        if role == "developer":
            role = "system"
        if role in ("system", "user"):
            if "content" not in m:
                raise InvalidTurnError("missing 'content'", path=path)
            content = _openai_parts(m["content"], f"{path}.content", allow_images=role == "user")
            turns.append(_turn(role, content, m, path, timestamp))
        elif role == "assistant":
            raw_content = m.get("content")
            blocks: list[Block] = []
            if raw_content is not None:
                parts = _openai_parts(raw_content, f"{path}.content", allow_images=False)
                blocks.extend((TextBlock(parts),) if isinstance(parts, str) else parts)
            calls = m.get("tool_calls") or []
            if not isinstance(calls, list):
                raise InvalidTurnError("tool_calls must be a list", path=f"{path}.tool_calls")
            for j, call in enumerate(calls):
                cpath = f"{path}.tool_calls[{j}]"
                if not isinstance(call, Mapping) or not isinstance(call.get("function"), Mapping):
                    raise InvalidTurnError("a tool call needs a 'function' object", path=cpath)
                fn = call["function"]
                args = fn.get("arguments", "{}")
                if not isinstance(args, str):
                    # OpenAI's schema: the arguments are a JSON *string*. An object is another
                    # client's shape (or a bug), refused rather than guessed at.
                    raise InvalidTurnError(
                        f"tool call arguments must be a string of JSON, got {type(args).__name__}",
                        path=f"{cpath}.function.arguments",
                    )
                try:
                    parsed = json.loads(args)
                except (json.JSONDecodeError, RecursionError):
                    raise InvalidTurnError(
                        "tool call arguments are not valid JSON", path=f"{cpath}.function.arguments"
                    ) from None
                if not isinstance(parsed, Mapping):
                    raise InvalidTurnError(
                        "tool call arguments must be a JSON object", path=f"{cpath}.function.arguments"
                    )
                blocks.append(
                    ToolUseBlock(
                        id=check_text(call.get("id"), f"{cpath}.id"),
                        name=check_text(fn.get("name"), f"{cpath}.function.name"),
                        input=dict(parsed),
                    )
                )
            if raw_content is None and not calls:
                raise InvalidTurnError("an assistant message needs content or tool_calls", path=path)
            content_out: str | tuple[Block, ...] = (
                raw_content if isinstance(raw_content, str) and not calls else tuple(blocks)
            )
            turns.append(_turn("assistant", content_out, m, path, timestamp))
        elif role == "tool":
            parts = _openai_parts(m.get("content"), f"{path}.content", allow_images=False)
            text = parts if isinstance(parts, str) else "\n".join(b.text for b in parts if isinstance(b, TextBlock))
            call_id = check_text(m.get("tool_call_id"), f"{path}.tool_call_id")
            turns.append(_turn("tool", (ToolResultBlock(call_id, (TextBlock(text),)),), m, path, timestamp))
        else:
            raise InvalidTurnError(
                f"unknown role {role!r} (expected system, developer, user, assistant or tool)", path=f"{path}.role"
            )
    return turns


def _image_url(b: ImageBlock) -> dict[str, Any]:
    url = b.url if b.url is not None else f"data:{b.media_type or ''};base64,{b.data}"
    spec: dict[str, Any] = {"url": url}
    if b.detail is not None:
        spec["detail"] = b.detail
    return {"type": "image_url", "image_url": spec}


def to_openai(turns: Iterable[Turn]) -> list[dict[str, Any]]:
    """Render turns as OpenAI Chat Completions messages.

    A tool turn becomes one ``tool`` message per result (OpenAI's shape); text
    or images beside the results follow as a ``user`` message. Thinking blocks
    are dropped.
    """
    out: list[dict[str, Any]] = []
    for t in turns:
        base: dict[str, Any] = {"role": t.role}
        if t.name is not None and t.role in ("system", "user", "assistant"):
            base["name"] = t.name
        if t.role in ("system", "user"):
            if isinstance(t.content, str):
                base["content"] = t.content
            elif t.role == "system":
                base["content"] = "\n".join(b.text for b in t.content if isinstance(b, TextBlock))
            else:
                base["content"] = [
                    {"type": "text", "text": b.text} if isinstance(b, TextBlock) else _image_url(b)
                    for b in t.content
                    if isinstance(b, TextBlock | ImageBlock)
                ]
            out.append(base)
        elif t.role == "assistant":
            if isinstance(t.content, str):
                base["content"] = t.content
            else:
                texts = [b.text for b in t.content if isinstance(b, TextBlock)]
                calls = [b for b in t.content if isinstance(b, ToolUseBlock)]
                base["content"] = "".join(texts) if texts else None
                if calls:
                    base["tool_calls"] = [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {
                                "name": c.name,
                                "arguments": json.dumps(dict(c.input), ensure_ascii=False, allow_nan=False),
                            },
                        }
                        for c in calls
                    ]
                if base["content"] is None and not calls:
                    base["content"] = ""
            out.append(base)
        else:  # tool
            extra: list[dict[str, Any]] = []
            for b in t.blocks:
                if isinstance(b, ToolResultBlock):
                    out.append({"role": "tool", "tool_call_id": b.tool_use_id, "content": b.text})
                    extra.extend(_image_url(p) for p in b.content if isinstance(p, ImageBlock))
                elif isinstance(b, TextBlock):
                    extra.append({"type": "text", "text": b.text})
                elif isinstance(b, ImageBlock):
                    extra.append(_image_url(b))
            if extra:
                out.append({"role": "user", "content": extra})
    return out


# --- Anthropic ---------------------------------------------------------------------------


def _anthropic_image(d: Mapping[str, Any], path: str) -> ImageBlock:
    """An Anthropic image block (its ``source``: ``base64`` with ``media_type``, or ``url``)."""
    src = d.get("source")
    if not isinstance(src, Mapping):
        raise InvalidTurnError("image block needs a source object", path=f"{path}.source")
    if src.get("type") == "base64":
        return ImageBlock(
            media_type=check_text(src.get("media_type"), f"{path}.source.media_type"),
            data=check_text(src.get("data"), f"{path}.source.data"),
        )
    if src.get("type") == "url":
        return ImageBlock(url=check_text(src.get("url"), f"{path}.source.url"))
    raise InvalidTurnError(f"unsupported image source type {src.get('type')!r}", path=f"{path}.source")


ANTHROPIC_BLOCKS = BlockDialect(_anthropic_image, closed=False)
"""Anthropic Messages blocks: images by ``source``; keys that are not content are ignored."""


def anthropic_block(d: Any, path: str) -> Block:
    """One Anthropic Messages content block as a block (:func:`~stratamem.records.blocks.block_from_dict`).

    Raises:
        InvalidTurnError: A type stratamem does not hold (``unsupported``), missing keys, wrong types.
    """
    return block_from_dict(d, path, ANTHROPIC_BLOCKS)


def from_anthropic(
    messages: Any, *, system: str | Sequence[Any] | None = None, timestamp: datetime | None = None
) -> list[Turn]:
    """Convert Anthropic Messages (plus an optional ``system`` prompt) to turns.

    A user message whose blocks include ``tool_result`` becomes a ``tool`` turn.

    Raises:
        InvalidTurnError: A message or block is malformed; the error names its place.
    """
    if not isinstance(messages, list):
        raise InvalidTurnError(f"expected a list of messages, got {type(messages).__name__}", path="messages")
    turns: list[Turn] = []
    if system is not None:
        if isinstance(system, str):
            sys_content: str | tuple[Block, ...] = check_text(system, "system")
        elif isinstance(system, list):
            sys_content = tuple(anthropic_block(b, f"system[{i}]") for i, b in enumerate(system))
        else:
            raise InvalidTurnError("system must be a string or a list of text blocks", path="system")
        turns.append(_turn("system", sys_content, {}, "system", timestamp))
    for i, raw in enumerate(messages):
        path = f"messages[{i}]"
        m = _require_mapping(raw, path)
        role = m.get("role")
        if role not in ("user", "assistant"):
            raise InvalidTurnError(f"unknown role {role!r} (expected user or assistant)", path=f"{path}.role")
        if "content" not in m:
            raise InvalidTurnError("missing 'content'", path=path)
        raw_content = m["content"]
        if isinstance(raw_content, str):
            turns.append(_turn(role, check_text(raw_content, f"{path}.content"), m, path, timestamp))
            continue
        if not isinstance(raw_content, list):
            raise InvalidTurnError(
                f"content must be a string or a list of blocks, got {type(raw_content).__name__}",
                path=f"{path}.content",
            )
        blocks = tuple(anthropic_block(b, f"{path}.content[{j}]") for j, b in enumerate(raw_content))
        if role == "user" and any(isinstance(b, ToolResultBlock) for b in blocks):
            role = "tool"
        turns.append(_turn(role, blocks, m, path, timestamp))
    return turns


def _anthropic_dict(b: Block) -> dict[str, Any]:
    if isinstance(b, ImageBlock):
        if b.url is not None:
            return {"type": "image", "source": {"type": "url", "url": b.url}}
        return {"type": "image", "source": {"type": "base64", "media_type": b.media_type, "data": b.data}}
    if isinstance(b, ToolResultBlock):
        out: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": b.tool_use_id,
            "content": [_anthropic_dict(p) for p in b.content],
        }
        if b.is_error:
            out["is_error"] = True
        return out
    return b.to_dict()


def to_anthropic(turns: Iterable[Turn]) -> tuple[str | None, list[dict[str, Any]]]:
    """Render turns as Anthropic Messages.

    Returns:
        ``(system, messages)``: system turns joined into the system prompt (or
        ``None``), and the messages with consecutive same-role messages merged so
        that user and assistant alternate, as the API requires.
    """
    system_parts: list[str] = []
    messages: list[dict[str, Any]] = []
    for t in turns:
        if t.role == "system":
            system_parts.append(t.text)
            continue
        role = "assistant" if t.role == "assistant" else "user"
        blocks = [_anthropic_dict(b) for b in t.blocks]
        if messages and messages[-1]["role"] == role:
            prev = messages[-1]
            if isinstance(prev["content"], str):
                prev["content"] = [{"type": "text", "text": prev["content"]}]
            # Anthropic requires tool_result blocks first in a user message.
            merged = prev["content"] + blocks
            results = [b for b in merged if b.get("type") == "tool_result"]
            prev["content"] = results + [b for b in merged if b.get("type") != "tool_result"]
        else:
            messages.append({"role": role, "content": t.content if isinstance(t.content, str) else blocks})
    return ("\n\n".join(system_parts) if system_parts else None), messages


# --- OpenAI Responses ----------------------------------------------------------------------


def _responses_parts(content: Any, role: str) -> list[dict[str, Any]]:
    """Chat Completions content as Responses content parts (``input_*`` in, ``output_text`` out)."""
    kind = "output_text" if role == "assistant" else "input_text"
    if isinstance(content, str):
        return [{"type": kind, "text": content}]
    parts: list[dict[str, Any]] = []
    for p in content or ():
        if p.get("type") == "text":
            parts.append({"type": kind, "text": p["text"]})
        elif p.get("type") == "image_url":
            spec = p["image_url"]
            image: dict[str, Any] = {"type": "input_image", "image_url": spec["url"]}
            # The Responses API requires a detail level; "auto" is what Chat Completions assumes.
            image["detail"] = spec.get("detail") or "auto"
            parts.append(image)
    return parts


def to_responses(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages (as :func:`to_openai` renders them) as OpenAI Responses input items.

    A message becomes a ``message`` item whose parts are ``input_text`` /
    ``input_image`` (system, user) or ``output_text`` (assistant); an assistant
    message's tool calls follow it as ``function_call`` items, and a ``tool``
    message becomes a ``function_call_output`` item. The Responses API has no
    speaker ``name`` field, so names are not carried. Reading the items back
    (``format="responses"`` on ingest) gives the same turns.
    """
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m["role"]
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": m["tool_call_id"], "output": m["content"]})
            continue
        content = m.get("content")
        calls = m.get("tool_calls") or ()
        # An assistant turn that only calls tools has no text to show as a message.
        if content is not None and not (calls and content == ""):
            items.append({"type": "message", "role": role, "content": _responses_parts(content, role)})
        for c in calls:
            items.append(
                {
                    "type": "function_call",
                    "call_id": c["id"],
                    "name": c["function"]["name"],
                    "arguments": c["function"]["arguments"],
                }
            )
    return items


# --- Structural validity -----------------------------------------------------------------


def structural_problems(messages: Sequence[Mapping[str, Any]], provider: str) -> list[str]:
    """List what makes ``messages`` invalid for ``provider`` (empty list = valid).

    Checks, for ``"anthropic"``: there is at least one message, roles are
    user/assistant, alternate, start with user, and every ``tool_result`` answers a ``tool_use`` of the immediately
    preceding assistant message, which has all its calls answered. For
    ``"openai"``: every ``tool`` message answers a call of the nearest preceding
    assistant message, and every call is answered before the next non-tool message.

    Raises:
        ValueError: ``provider`` is not ``"openai"`` or ``"anthropic"``.
    """
    if provider == "anthropic":
        return _anthropic_problems(messages)
    if provider == "openai":
        return _openai_problems(messages)
    raise ValueError(f"unknown provider {provider!r}")


def _anthropic_problems(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    if not messages:
        return ["messages: empty; the Messages API needs at least one user message"]
    problems: list[str] = []
    if messages and messages[0].get("role") != "user":
        problems.append("messages[0]: first message must be from the user")
    pending: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("user", "assistant"):
            problems.append(f"messages[{i}]: invalid role {role!r}")
        if i and messages[i - 1].get("role") == role:
            problems.append(f"messages[{i}]: two {role} messages in a row")
        content = m.get("content")
        blocks = content if isinstance(content, list) else []
        if role == "user":
            answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            for tid in answered - pending:
                problems.append(f"messages[{i}]: tool_result {tid!r} has no tool_use in the previous message")
            for tid in pending - answered:
                problems.append(f"messages[{i}]: tool_use {tid!r} is not answered")
            pending = set()
        elif role == "assistant":
            if pending:
                problems.append(
                    f"messages[{i}]: tool_use {sorted(pending)} not answered before the next assistant turn"
                )
            pending = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
    if pending:
        problems.append(f"end of messages: tool_use {sorted(pending)} not answered")
    return problems


def _openai_problems(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    problems: list[str] = []
    pending: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            problems.append(f"messages[{i}]: invalid role {role!r}")
        if role == "tool":
            tid = m.get("tool_call_id")
            if tid not in pending:
                problems.append(f"messages[{i}]: tool message {tid!r} answers no pending tool call")
            pending.discard(tid)
            continue
        if pending:
            problems.append(f"messages[{i}]: tool calls {sorted(pending)} not answered")
            pending = set()
        if role == "assistant":
            pending = {c.get("id") for c in (m.get("tool_calls") or [])}
    if pending:
        problems.append(f"end of messages: tool calls {sorted(pending)} not answered")
    return problems
