"""ChatGPT data exports (``conversations.json``).

The file is a list of conversations. Each has ``id`` (or ``conversation_id``),
``title``, ``create_time`` and a ``mapping`` of nodes (``id``, ``message``,
``parent``, ``children``): a tree, because every edit or regeneration starts a
branch. ``current_node`` is the leaf the user last saw; the conversation as
shown is the path from the root to it, and only that branch is kept (the others
are counted as skipped).

A message has ``author.role`` (system, user, assistant, tool) and
``author.name`` for tools, ``create_time`` (Unix seconds, may be null),
``content`` with a ``content_type`` (``text`` and ``multimodal_text`` hold
``parts``; ``code``, ``execution_output``, ``tether_quote`` hold ``text``),
``recipient`` (``all``, or the tool an assistant message calls) and
``metadata`` (``model_slug``, ``is_visually_hidden_from_conversation``).

Kept: user and assistant text, the user's custom instructions
(``user_editable_context``) as a system turn, assistant messages to a tool as
tool calls and the tool's reply as their result (a tool reply with no call
before it becomes an assistant turn named after the tool). Skipped and
counted: hidden messages, empty ones, model thoughts and reasoning recaps,
model-managed memory, and messages of other branches.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..errors import StratamemError
from ..records import Block, ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock, Turn, check_text
from ._common import IngestSession, bad, epoch_timestamp, fail, id_key, record_error, repair_orphans, safe_session

__all__ = ["looks_like_chatgpt", "read_chatgpt"]

_SKIPPED_CONTENT = frozenset({"thoughts", "reasoning_recap", "model_editable_context", "system_error"})


def looks_like_chatgpt(data: Any) -> bool:
    """Whether parsed JSON is a ChatGPT export (a conversation or a list of them)."""
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, Mapping) and isinstance(first.get("mapping"), Mapping)


def _branch(conv: Mapping[str, Any], path: str) -> list[tuple[str, Mapping[str, Any]]]:
    """The nodes from the root to ``current_node`` (or to the newest leaf), in order."""
    mapping = conv["mapping"]
    leaf = conv.get("current_node")
    if not isinstance(leaf, str) or leaf not in mapping:
        leaves = [k for k, v in mapping.items() if isinstance(v, Mapping) and not v.get("children")]
        if not leaves:
            return []

        def created(k: str) -> float:
            msg = mapping[k].get("message")
            t = msg.get("create_time") if isinstance(msg, Mapping) else None
            return t if isinstance(t, int | float) and not isinstance(t, bool) else float("-inf")

        leaf = max(leaves, key=created)
    out: list[tuple[str, Mapping[str, Any]]] = []
    seen: set[str] = set()
    node_id: Any = leaf
    while isinstance(node_id, str):
        if node_id in seen:
            raise bad("the parent links form a cycle", f'{path}.mapping["{node_id}"]')
        seen.add(node_id)
        node = mapping.get(node_id)
        if not isinstance(node, Mapping):
            raise bad(f"parent {node_id!r} is not in the mapping", f"{path}.mapping")
        out.append((node_id, node))
        node_id = node.get("parent")
    out.reverse()
    return out


def _text(content: Mapping[str, Any], path: str) -> str | tuple[Block, ...] | None:
    """The message content as text or blocks; ``None`` for a content type that is skipped."""
    kind = content.get("content_type")
    if kind in _SKIPPED_CONTENT:
        return None
    if kind == "user_editable_context":
        parts = [content.get(k) for k in ("user_profile", "user_instructions")]
        return "\n\n".join(check_text(p, path) for p in parts if isinstance(p, str) and p.strip())
    if isinstance(content.get("parts"), list):
        blocks: list[Block] = []
        for i, p in enumerate(content["parts"]):
            if isinstance(p, str):
                if p:
                    blocks.append(TextBlock(check_text(p, f"{path}.parts[{i}]")))
            elif (
                isinstance(p, Mapping)
                and p.get("content_type") == "image_asset_pointer"
                and isinstance(p.get("asset_pointer"), str)
            ):
                blocks.append(ImageBlock(url=check_text(p["asset_pointer"], f"{path}.parts[{i}].asset_pointer")))
            elif isinstance(p, Mapping):
                blocks.append(TextBlock(f"[{p.get('content_type', 'attachment')}]"))
            else:
                raise bad("a part must be a string or an object", f"{path}.parts[{i}]")
        if all(isinstance(b, TextBlock) for b in blocks):
            return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
        return tuple(blocks)
    for key in ("text", "result"):
        if isinstance(content.get(key), str):
            return check_text(content[key], f"{path}.{key}")
    raise bad(f"unsupported content type {kind!r} (no parts or text)", path)


def _conversation(conv: Any, index: int, where: str, default_session: str | None) -> IngestSession:
    path = f"[{index}]"
    if not isinstance(conv, Mapping) or not isinstance(conv.get("mapping"), Mapping):
        raise fail("a conversation needs a 'mapping' object", path=f"{path}.mapping", where=where)
    conv_id = conv.get("conversation_id") or conv.get("id")
    session = safe_session(conv_id, None) or (
        f"chatgpt-{index + 1}" if default_session is None else f"{default_session}-{index + 1}"
    )
    skipped: Counter[str] = Counter()
    try:
        branch = _branch(conv, path)
    except StratamemError as exc:
        raise record_error(exc, line=None, path="", where=where) from None
    off_branch = sum(
        1 for v in conv["mapping"].values() if isinstance(v, Mapping) and isinstance(v.get("message"), Mapping)
    ) - sum(1 for _, node in branch if isinstance(node.get("message"), Mapping))
    if off_branch:
        skipped["other branch"] += off_branch
    last = epoch_timestamp(conv.get("create_time"))
    turns: list[Turn] = []
    keys: list[str] = []
    pending: list[tuple[str, str]] = []  # (call id, tool name) of calls not answered yet
    for node_id, node in branch:
        msg = node.get("message")
        if not isinstance(msg, Mapping):
            continue
        mpath = f'{path}.mapping["{node_id}"].message'
        try:
            turn = _turn(msg, mpath, last, pending, skipped)
        except StratamemError as exc:
            raise record_error(exc, line=None, path="", where=where) from None
        if turn is None:
            continue
        last = turn.timestamp
        turns.append(turn)
        keys.append(id_key("chatgpt", str(msg.get("id") or node_id)))
    repair_orphans(turns)
    title = conv.get("title")
    return IngestSession(
        session,
        turns,
        platform="chatgpt",
        keys=tuple(keys),
        skipped=dict(skipped),
        labels={"title": title} if isinstance(title, str) else {},
    )


def _turn(
    msg: Mapping[str, Any], path: str, last: datetime | None, pending: list[tuple[str, str]], skipped: Counter[str]
) -> Turn | None:
    author = msg.get("author")
    if not isinstance(author, Mapping):
        raise bad("a message needs an 'author' object", f"{path}.author")
    role, name = author.get("role"), author.get("name")
    raw_meta = msg.get("metadata")
    meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
    content = msg.get("content")
    if not isinstance(content, Mapping):
        raise bad("a message needs a 'content' object", f"{path}.content")
    instructions = content.get("content_type") == "user_editable_context"
    if instructions:
        # The user's custom instructions: hidden in the UI, standing instructions to the model.
        role = "system"
    elif meta.get("is_visually_hidden_from_conversation") is True:
        skipped["hidden"] += 1
        return None
    body = _text(content, f"{path}.content")
    if body is None:
        skipped[f"content:{content.get('content_type')}"] += 1
        return None
    if not body:
        skipped["empty"] += 1
        return None
    ts = epoch_timestamp(msg.get("create_time")) or last
    if ts is None:
        raise bad("no create_time on the message or the conversation", f"{path}.create_time")
    model = meta.get("model_slug") if isinstance(meta.get("model_slug"), str) else None
    info = {"message_id": msg["id"]} if isinstance(msg.get("id"), str) else {}
    text = body if isinstance(body, str) else "\n".join(b.text for b in body if isinstance(b, TextBlock))
    if role == "assistant" and isinstance(msg.get("recipient"), str) and msg["recipient"] != "all":
        call_id = check_text(msg.get("id"), f"{path}.id")
        tool = check_text(msg["recipient"], f"{path}.recipient")
        pending.append((call_id, tool))
        arg = "code" if content.get("content_type") == "code" else "text"
        return Turn(
            role="assistant",
            content=(ToolUseBlock(call_id, tool, {arg: text}),),
            timestamp=ts,
            model=model,
            metadata=info,
        )
    if role == "tool":
        match = next((p for p in pending if p[1] == name), pending[0] if pending else None)
        if match is not None:
            pending.remove(match)
            return Turn(
                role="tool",
                content=(ToolResultBlock(match[0], (TextBlock(text),)),),
                timestamp=ts,
                name=name if isinstance(name, str) else None,
                metadata=info,
            )
        return Turn(
            role="assistant",
            content=text,
            timestamp=ts,
            name=name if isinstance(name, str) else "tool",
            metadata={**info, "tool_output": True},
        )
    if role not in ("system", "user", "assistant"):
        raise bad(f"unknown author role {role!r}", f"{path}.author.role")
    if role == "system" and not instructions and not text.strip():
        skipped["empty"] += 1
        return None
    return Turn(role=role, content=body, timestamp=ts, model=model if role == "assistant" else None, metadata=info)


def read_chatgpt(data: Any, default_session: str | None, where: str = "") -> list[IngestSession]:
    """A parsed ``conversations.json`` (or one conversation) as one session per conversation.

    Raises:
        DecodeError: A conversation or message is malformed; names its JSON path.
    """
    convs = data if isinstance(data, list) else [data]
    return [_conversation(c, i, where, default_session) for i, c in enumerate(convs)]
