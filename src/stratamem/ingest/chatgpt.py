"""ChatGPT data exports (``conversations.json``).

The file is a list of conversations (or one conversation). Each has ``id``
(or ``conversation_id``), ``title``, ``create_time`` and a ``mapping`` of nodes
(``id``, ``message``, ``parent``, ``children``): a tree, because every edit or
regeneration starts a branch. ``current_node`` is the leaf the user last saw;
the conversation is the path from the root to it (to the newest leaf when it
is missing), and each other branch is kept as its own session (see
:mod:`.branches`), never mixed in.

A message has ``author.role`` (system, user, assistant, tool) and
``author.name`` for tools, ``create_time`` (Unix seconds, may be null),
``content`` with a ``content_type``, ``recipient`` (``all``, or the tool an
assistant message calls), ``weight`` (0: hidden) and ``metadata``
(``model_slug``, ``is_visually_hidden_from_conversation``).

Kept: user and assistant text and images, the user's custom instructions
(``user_editable_context``) as a system turn, the model's ``thoughts`` as
thinking at the head of its next turn, assistant messages to a tool as tool
calls and the tool's replies as their result (several replies to one call —
browsing's quote and page — are one result; a reply with no call before it is
an assistant turn named after the tool). Skipped and counted: hidden and empty
messages, reasoning recaps, model-managed context, and content types this
reader does not know (``content:<type>``) — one new type never refuses an export.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..errors import DecodeError, StratamemError
from ..records import Block, ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Turn
from ._common import (
    IngestSession,
    bad,
    branch_session,
    clean_text,
    epoch_timestamp,
    fail,
    id_key,
    record_error,
    repair_orphans,
    safe_session,
)
from .branches import split_tree

__all__ = ["looks_like_chatgpt", "read_chatgpt"]

_SKIPPED_CONTENT = frozenset({"reasoning_recap", "model_editable_context"})


def looks_like_chatgpt(data: Any) -> bool:
    """Whether parsed JSON is a ChatGPT export (a conversation or a list of them)."""
    first = data[0] if isinstance(data, list) and data else data
    return isinstance(first, Mapping) and isinstance(first.get("mapping"), Mapping)


def _order(mapping: Mapping[str, Any]) -> list[str]:
    """Node ids oldest first: by message time, then by their place in the export."""
    place = {k: i for i, k in enumerate(mapping)}

    def created(k: str) -> tuple[float, int]:
        node = mapping[k]
        msg = node.get("message") if isinstance(node, Mapping) else None
        t = msg.get("create_time") if isinstance(msg, Mapping) else None
        return (t if isinstance(t, int | float) and not isinstance(t, bool) else float("-inf"), place[k])

    return sorted(mapping, key=created)


def _paths(conv: Mapping[str, Any]) -> tuple[list[str], list[tuple[list[str], str | None]]]:
    """The conversation's node path and each abandoned branch ``(nodes, fork)``."""
    mapping = conv["mapping"]
    nodes = [k for k, v in mapping.items() if isinstance(v, Mapping)]
    parent = {k: mapping[k].get("parent") for k in nodes}
    order = [k for k in _order(mapping) if k in parent]
    current = conv.get("current_node")
    leaf = current if isinstance(current, str) and current in parent else None
    main, branches = split_tree(order, parent, leaf)
    return main, [(b.nodes, b.fork) for b in branches]


def _text(content: Mapping[str, Any], path: str, skipped: Counter[str]) -> str | tuple[Block, ...] | None:
    """The message content as text or blocks; ``None`` for a content type that is skipped."""
    kind = content.get("content_type")
    if kind in _SKIPPED_CONTENT:
        return None
    if kind == "user_editable_context":
        parts = [content.get(k) for k in ("user_profile", "user_instructions")]
        return "\n\n".join(clean_text(p, path) for p in parts if isinstance(p, str) and p.strip())
    if isinstance(content.get("parts"), list):
        blocks: list[Block] = []
        for i, p in enumerate(content["parts"]):
            ppath = f"{path}.parts[{i}]"
            if isinstance(p, str):
                if p:
                    blocks.append(TextBlock(clean_text(p, ppath)))
            elif (
                isinstance(p, Mapping)
                and p.get("content_type") == "image_asset_pointer"
                and isinstance(p.get("asset_pointer"), str)
            ):
                blocks.append(ImageBlock(url=clean_text(p["asset_pointer"], f"{ppath}.asset_pointer")))
            elif isinstance(p, Mapping):
                blocks.append(TextBlock(f"[{p.get('content_type', 'attachment')}]"))
            else:
                skipped["part:null" if p is None else f"part:{type(p).__name__}"] += 1
        if all(isinstance(b, TextBlock) for b in blocks):
            return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
        return tuple(blocks)
    for key in ("text", "result"):
        if isinstance(content.get(key), str):
            return clean_text(content[key], f"{path}.{key}")
    return None


def _thoughts(content: Mapping[str, Any]) -> list[ThinkingBlock]:
    out = []
    for t in content.get("thoughts") or []:
        if isinstance(t, Mapping):
            text = "\n".join(x for x in (t.get("summary"), t.get("content")) if isinstance(x, str) and x.strip())
            if text:
                out.append(ThinkingBlock(clean_text(text, "thoughts")))
    return out


class _Path:
    """Messages of one path into turns: calls paired with their replies, thoughts kept for the next turn."""

    def __init__(self, skipped: Counter[str], last: datetime | None, extra: Mapping[str, Any]) -> None:
        self.skipped = skipped
        self.last = last
        self.extra = extra
        self.turns: list[Turn] = []
        self.keys: list[str] = []
        self.pending: list[tuple[str, str]] = []  # (call id, tool name) of calls not answered yet
        self.answered: tuple[int, str] | None = None  # (turn index, tool) of the result just made
        self.thinking: list[ThinkingBlock] = []

    def add(self, node_id: str, msg: Mapping[str, Any], path: str) -> None:
        author = msg.get("author")
        if not isinstance(author, Mapping):
            raise bad("a message needs an 'author' object", f"{path}.author")
        role, name = author.get("role"), author.get("name")
        raw_meta = msg.get("metadata")
        meta: Mapping[str, Any] = raw_meta if isinstance(raw_meta, Mapping) else {}
        content = msg.get("content")
        if not isinstance(content, Mapping):
            raise bad("a message needs a 'content' object", f"{path}.content")
        kind = content.get("content_type")
        instructions = kind == "user_editable_context"
        if role not in ("system", "user", "assistant", "tool"):
            raise bad(f"unknown author role {role!r}", f"{path}.author.role")
        hidden = meta.get("is_visually_hidden_from_conversation") is True or msg.get("weight") == 0
        answers = role == "tool" and any(p[1] == name for p in self.pending)
        if hidden and not instructions and not answers:
            self.skipped["hidden"] += 1
            return
        if kind == "thoughts":
            self.thinking.extend(_thoughts(content))
            return
        body = _text(content, f"{path}.content", self.skipped)
        if body is None:
            self.skipped[f"content:{kind}"] += 1
            return
        if not body or (isinstance(body, str) and not body.strip() and not instructions):
            self.skipped["empty"] += 1
            return
        ts = epoch_timestamp(msg.get("create_time")) or self.last
        if ts is None:
            raise bad("no create_time on the message or the conversation", f"{path}.create_time")
        self.last = ts
        model = meta.get("model_slug") if isinstance(meta.get("model_slug"), str) else None
        info = {**({"message_id": msg["id"]} if isinstance(msg.get("id"), str) else {}), **self.extra}
        key = id_key("chatgpt", str(msg.get("id") or node_id))
        tool = name if isinstance(name, str) else "tool"
        if instructions:
            self._push(Turn(role="system", content=body, timestamp=ts, metadata=info), key)
        elif role == "assistant" and isinstance(msg.get("recipient"), str) and msg["recipient"] != "all":
            call_id = clean_text(msg.get("id") or node_id, f"{path}.id")
            target = clean_text(msg["recipient"], f"{path}.recipient")
            self.pending.append((call_id, target))
            text = body if isinstance(body, str) else "\n".join(b.text for b in body if isinstance(b, TextBlock))
            call = ToolUseBlock(call_id, target, {"code" if kind == "code" else "text": text})
            self._push(self._assistant((call,), ts, model, info), key)
        elif role == "tool":
            self._tool(body, ts, tool, info, key, error=kind == "system_error")
        elif role == "assistant":
            self._push(self._assistant(body, ts, model, info), key)
        else:
            self._push(Turn(role=role, content=body, timestamp=ts, metadata=info), key)

    def _assistant(self, body: str | tuple[Block, ...], ts: datetime, model: str | None, info: dict[str, Any]) -> Turn:
        if self.thinking:
            blocks = (TextBlock(body),) if isinstance(body, str) else body
            body, self.thinking = (*self.thinking, *blocks), []
        return Turn(role="assistant", content=body, timestamp=ts, model=model, metadata=info)

    def _tool(
        self, body: str | tuple[Block, ...], ts: datetime, tool: str, info: dict[str, Any], key: str, *, error: bool
    ) -> None:
        parts = (
            (TextBlock(body),)
            if isinstance(body, str)
            else tuple(b for b in body if isinstance(b, TextBlock | ImageBlock))
        )
        match = next((p for p in self.pending if p[1] == tool), None)
        if match is not None:
            self.pending.remove(match)
            result = ToolResultBlock(match[0], parts, error)
            self._push(Turn(role="tool", content=(result,), timestamp=ts, name=tool, metadata=info), key)
            self.answered = (len(self.turns) - 1, tool)
            return
        if self.answered is not None and self.answered[1] == tool and self.answered[0] == len(self.turns) - 1:
            # Another reply to the call just answered (browsing: the quote, then the page): one result.
            prev = self.turns[-1]
            old = prev.blocks[0]
            if isinstance(old, ToolResultBlock):
                merged = ToolResultBlock(old.tool_use_id, old.content + parts, old.is_error or error)
                self.turns[-1] = Turn(
                    role="tool", content=(merged,), timestamp=prev.timestamp, name=prev.name, metadata=prev.metadata
                )
                return
        meta = {**info, "tool_output": True, **({"error": True} if error else {})}
        self._push(Turn(role="assistant", content=body, timestamp=ts, name=tool, metadata=meta), key)

    def _push(self, turn: Turn, key: str) -> None:
        self.turns.append(turn)
        self.keys.append(key)
        if turn.role != "tool":
            self.answered = None


def _line_of(text: str | None, node_id: str) -> int | None:
    """The line of a node in the export's text (a pretty-printed export has many), if it can be found."""
    if not text:
        return None
    at = text.find(f'"{node_id}":')
    return text.count("\n", 0, at) + 1 if at >= 0 else None


def _conversation(
    conv: Any, index: int, where: str, default_session: str | None, text: str | None
) -> list[IngestSession]:
    path = f"[{index}]"
    if not isinstance(conv, Mapping) or not isinstance(conv.get("mapping"), Mapping):
        raise fail("a conversation needs a 'mapping' object", path=f"{path}.mapping", where=where)
    conv_id = conv.get("conversation_id") or conv.get("id")
    session = safe_session(conv_id, None) or (
        f"chatgpt-{index + 1}" if default_session is None else f"{default_session}-{index + 1}"
    )
    mapping = conv["mapping"]
    skipped: Counter[str] = Counter()
    main, branches = _paths(conv)
    title = conv.get("title")
    out: list[IngestSession] = []
    for nodes, fork, name, extra in [
        *(
            (nodes, fork, branch_session(session, nodes[0]), {"branch_of": session})
            for nodes, fork in branches
            if any(isinstance(mapping[k].get("message"), Mapping) for k in nodes)
        ),
        (main, None, session, {}),
    ]:
        if fork is not None:
            extra = {**extra, "forked_at": id_key("chatgpt", fork)}
        walk = _Path(skipped, epoch_timestamp(conv.get("create_time")), extra)
        for node_id in nodes:
            msg = mapping[node_id].get("message")
            if not isinstance(msg, Mapping):
                continue
            mpath = f'{path}.mapping["{node_id}"].message'
            try:
                walk.add(node_id, msg, mpath)
            except StratamemError as exc:
                raise _located(exc, where, text, node_id) from None
        repair_orphans(walk.turns)
        if not walk.turns and name != session:
            continue
        out.append(
            IngestSession(
                name,
                walk.turns,
                platform="chatgpt",
                keys=tuple(walk.keys),
                labels={"title": title} if isinstance(title, str) else {},
                family=session,
                source=where or None,
            )
        )
    # The conversation's skip counts ride on its main session (last), so they are reported once.
    out[-1] = replace(out[-1], skipped=dict(skipped))
    return out


def _located(exc: StratamemError, where: str, text: str | None, node_id: str) -> DecodeError:
    err = record_error(exc, line=None, path="", where=where)
    line = _line_of(text, node_id)
    return DecodeError(err.reason, line=line, source=where or None) if line else err


def read_chatgpt(
    data: Any, default_session: str | None, where: str = "", *, text: str | None = None
) -> list[IngestSession]:
    """A parsed ``conversations.json`` (or one conversation) as sessions: each conversation and its branches.

    Args:
        data: The parsed export.
        default_session: Prefix of session names for conversations without an id.
        where: The file's name, for errors.
        text: The export's text, so that an error in a pretty-printed export names its line.

    Raises:
        DecodeError: A conversation or message is malformed; names the file, the JSON path and
            (pretty-printed exports) the line.
    """
    convs = data if isinstance(data, list) else [data]
    return [s for i, c in enumerate(convs) for s in _conversation(c, i, where, default_session, text)]
