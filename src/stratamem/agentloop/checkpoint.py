"""The structured checkpoint: prompts, message serialization, tracked files.

A checkpoint is the running summary of everything compaction removed from a
live conversation. It has fixed sections (:data:`SECTIONS`) so that the
facts an agent needs to continue — the goal, constraints, what is done, the
decisions and exact names — survive repeated compaction. The first
compaction asks the model to write one (:data:`CHECKPOINT_PROMPT`); later
ones ask it to fold new messages into the previous one
(:data:`UPDATE_PROMPT`) instead of summarizing a summary.

The files the agent read and changed are tracked from its tool calls, not
left to the model, and appended as a ``## Files`` section. This module is
pure text work; when and how the model is called is decided in
:mod:`stratamem.agentloop.compaction`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..tokens import Tokenizer, truncate_to_tokens

__all__ = [
    "ACK_TEXT",
    "CHECKPOINT_HEADER",
    "CHECKPOINT_PROMPT",
    "OMITTED_HEADER",
    "SECTIONS",
    "UPDATE_PROMPT",
    "checkpoint_facts",
    "files_section",
    "missing_sections",
    "serialize_messages",
    "split_for_model",
    "strip_files_section",
    "track_files",
]

SECTIONS = ("Goal", "Constraints & Preferences", "Progress", "Key Decisions", "Next Steps", "Critical Context")
"""The ``##`` sections every checkpoint has, in order (Progress has ``### Done`` and ``### In Progress``)."""

CHECKPOINT_HEADER = "[Checkpoint: summary of the earlier part of this conversation]"
"""First line of the synthetic user message that carries the checkpoint into the prompt."""
OMITTED_HEADER = "[Earlier messages of this conversation are not shown]"
"""First line of the synthetic user message used when no checkpoint could be written."""
ACK_TEXT = "Understood. I will continue from this summary."
"""The synthetic assistant reply that keeps user/assistant alternation after the checkpoint."""

_FORMAT = """## Goal
One or two sentences: what the user wants to achieve overall.

## Constraints & Preferences
- Requirements, limits and preferences the user stated (tools, style, versions, things to avoid).

## Progress
### Done
- [x] Finished work, with the detail needed to rely on it.
### In Progress
- [ ] Work started but not finished.

## Key Decisions
- **Decision**: what was chosen and why.

## Next Steps
1. What should happen next, in order.

## Critical Context
- Exact file paths, commands, error messages, identifiers, URLs and numbers needed to continue."""

CHECKPOINT_PROMPT = f"""You write checkpoints for a coding or research agent whose conversation is too long \
to keep. You receive the older part of the conversation as a transcript. Write a checkpoint that lets the \
agent carry on without it.

Use exactly these headings, in this order, and nothing before or after them:

{_FORMAT}

Rules: keep names, paths, numbers and error messages exactly as written; prefer short bullets over prose; \
write "- none" under a heading with nothing to report; do not answer or continue the conversation; do not \
invent facts that are not in the transcript."""

UPDATE_PROMPT = f"""You maintain the checkpoint of a long-running agent conversation. You receive the current \
checkpoint and the messages that came after it. Return the checkpoint updated with those messages.

Rules:
- Keep every fact of the current checkpoint unless a newer message replaces it.
- Add new progress, decisions, constraints and context.
- Move items from "In Progress" to "Done" once the messages show them finished.
- Rewrite "Next Steps" to match where the work now stands.
- Keep names, paths, numbers and error messages exactly as written.
- Do not answer or continue the conversation.

Use the same headings, in the same order, and nothing before or after them:

{_FORMAT}"""

_READ_WORDS = ("read", "view", "cat", "open", "grep", "search", "find", "list", "ls", "glob", "show", "get")
_WRITE_WORDS = (
    "write",
    "edit",
    "create",
    "patch",
    "replace",
    "insert",
    "delete",
    "remove",
    "move",
    "rename",
    "apply",
    "save",
    "update",
    "append",
    "str_replace",
)
_PATH_KEYS = (
    "path",
    "file_path",
    "filepath",
    "filename",
    "file",
    "paths",
    "files",
    "target",
    "source",
    "destination",
    "old_path",
    "new_path",
)


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if not isinstance(p, Mapping):
                continue
            kind = p.get("type")
            if kind == "text":
                parts.append(str(p.get("text", "")))
            elif kind in ("image", "image_url"):
                parts.append("[image]")
            elif kind == "tool_result":
                parts.append(_text_of(p.get("content")))
        return "\n".join(parts)
    return str(content)


def _clip(text: str, limit: int) -> str:
    """Head and tail of ``text`` within ``limit`` characters, saying how much was left out."""
    if limit <= 0 or len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters left out ...]\n{text[-half:]}"


def serialize_messages(messages: Iterable[Mapping[str, Any]], *, tool_result_chars: int = 2000) -> str:
    """Render provider messages (either shape) as a plain transcript for the summarizer.

    Each message becomes ``[role]: text``; tool calls show their name and JSON
    arguments, tool results their text clipped to ``tool_result_chars``
    (head + tail). Thinking blocks are left out: they are the model's scratch
    work, and the decisions they led to show in what it said and did.
    """
    lines: list[str] = []
    for m in messages:
        role = m.get("role")
        content = m.get("content")
        if role == "tool":
            lines.append(f"[tool result {m.get('tool_call_id', '')}]: {_clip(_text_of(content), tool_result_chars)}")
            continue
        blocks = content if isinstance(content, list) else None
        if blocks is None:
            text = _text_of(content)
            if text:
                lines.append(f"[{role}]: {text}")
        else:
            for b in blocks:
                if not isinstance(b, Mapping):
                    continue
                kind = b.get("type")
                if kind == "text" and b.get("text"):
                    lines.append(f"[{role}]: {b['text']}")
                elif kind in ("image", "image_url"):
                    lines.append(f"[{role}]: [image]")
                elif kind == "tool_use":
                    args = json.dumps(b.get("input") or {}, ensure_ascii=False)
                    lines.append(f"[tool call {b.get('id', '')}] {b.get('name')}({_clip(args, tool_result_chars)})")
                elif kind == "tool_result":
                    flag = " (error)" if b.get("is_error") else ""
                    lines.append(
                        f"[tool result {b.get('tool_use_id', '')}{flag}]: "
                        f"{_clip(_text_of(b.get('content')), tool_result_chars)}"
                    )
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            lines.append(
                f"[tool call {call.get('id', '')}] {fn.get('name')}"
                f"({_clip(str(fn.get('arguments') or '{}'), tool_result_chars)})"
            )
    return "\n\n".join(lines)


def _paths_in(args: Any) -> list[str]:
    if not isinstance(args, Mapping):
        return []
    out: list[str] = []
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            out.append(value.strip())
        elif isinstance(value, list):
            out.extend(v.strip() for v in value if isinstance(v, str) and v.strip())
    return out


def _tool_calls(messages: Iterable[Mapping[str, Any]]) -> Iterable[tuple[str, Any]]:
    for m in messages:
        if m.get("role") != "assistant":
            continue
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if isinstance(b, Mapping) and b.get("type") == "tool_use":
                    yield str(b.get("name") or ""), b.get("input")
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except (TypeError, json.JSONDecodeError):
                args = {}  # unparsable arguments name no file we could track
            yield str(fn.get("name") or ""), args


def _kind(tool: str) -> str | None:
    words = tool.lower().replace("-", "_").replace(".", "_").split("_")
    if any(w in _WRITE_WORDS for w in words) or "str_replace" in tool.lower():
        return "modified"
    if any(w in _READ_WORDS for w in words):
        return "read"
    return None


def track_files(
    messages: Iterable[Mapping[str, Any]], read: Sequence[str] = (), modified: Sequence[str] = ()
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Add the paths named by tool calls in ``messages`` to ``read`` and ``modified``.

    A call counts as a write when its tool name has a word such as ``write``,
    ``edit``, ``create``, ``patch`` or ``delete``, and as a read for ``read``,
    ``view``, ``cat``, ``grep``, ``open``, ``list`` …; the paths come from
    arguments such as ``path``, ``file_path`` or ``paths``. A modified file is
    no longer listed as read. Order is first appearance.

    Returns:
        ``(read, modified)``.
    """
    r = list(read)
    w = list(modified)
    for name, args in _tool_calls(messages):
        kind = _kind(name)
        for p in _paths_in(args):
            if kind == "modified" and p not in w:
                w.append(p)
            elif kind == "read" and p not in r:
                r.append(p)
    return tuple(p for p in r if p not in w), tuple(w)


def files_section(read: Sequence[str], modified: Sequence[str], *, limit: int = 50) -> str:
    """The ``## Files`` section appended to a checkpoint (the newest ``limit`` paths of each)."""
    if not read and not modified:
        return ""
    lines = ["## Files", "### Read", *(f"- {p}" for p in read[-limit:])] if read else ["## Files"]
    if modified:
        lines += ["### Modified", *(f"- {p}" for p in modified[-limit:])]
    return "\n".join(lines)


def strip_files_section(text: str) -> str:
    """``text`` without a trailing ``## Files`` section (it is rebuilt from tracked calls)."""
    at = text.find("\n## Files\n")
    if at < 0:
        return text[len("## Files\n") :] if text.startswith("## Files\n") else text
    return text[:at].rstrip()


def missing_sections(text: str) -> list[str]:
    """The :data:`SECTIONS` whose ``## `` heading does not appear in ``text``."""
    heads = {line[3:].strip() for line in text.splitlines() if line.startswith("## ")}
    return [s for s in SECTIONS if s not in heads]


def split_for_model(transcript: str, max_tokens: int, tokenizer: Tokenizer) -> list[str]:
    """Split a transcript into parts of at most ``max_tokens`` tokens, at message boundaries.

    A single message larger than the limit is cut by tokens.
    """
    parts: list[str] = []
    current: list[str] = []
    size = 0
    for piece in transcript.split("\n\n"):
        n = tokenizer.count(piece) + 1
        while n > max_tokens:  # one oversized message: cut it, keeping order
            if current:
                parts.append("\n\n".join(current))
                current, size = [], 0
            head = truncate_to_tokens(piece, max_tokens, tokenizer)
            parts.append(head)
            piece = piece[len(head) :]
            n = tokenizer.count(piece) + 1
        if size + n > max_tokens and current:
            parts.append("\n\n".join(current))
            current, size = [], 0
        current.append(piece)
        size += n
    if current and any(current):
        parts.append("\n\n".join(current))
    return parts


_FACT_SECTIONS = {"Constraints & Preferences": "preference", "Key Decisions": "decision", "Critical Context": "fact"}
_EMPTY = ("none", "- none", "nothing", "n/a")


def checkpoint_facts(text: str, *, limit: int = 30) -> list[tuple[str, str]]:
    """Durable knowledge in a checkpoint, as ``(text, item type)`` pairs for memory items.

    Bullets of ``## Constraints & Preferences`` become ``preference`` items, of
    ``## Key Decisions`` ``decision`` items and of ``## Critical Context``
    ``fact`` items (seed 001 phase 3: keep decisions and facts before context
    is compressed). Goal, progress and next steps describe the moment, not
    lasting knowledge, and are left out; so are "none" placeholders. Markdown
    emphasis is removed; at most ``limit`` facts, in checkpoint order.
    """
    out: list[tuple[str, str]] = []
    kind: str | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            kind = _FACT_SECTIONS.get(line[3:].strip())
            continue
        if kind is None or line.startswith("#"):
            continue
        item = line.strip()
        if not item.startswith(("- ", "* ")):
            continue
        item = item[2:].strip().replace("**", "").strip()
        if not item or item.lower().rstrip(".").startswith(_EMPTY) or item.lower().startswith("none "):
            continue
        if (item, kind) not in out:
            out.append((item, kind))
        if len(out) >= limit:
            break
    return out


def checkpoint_progress(text: str, *, limit: int = 30) -> tuple[list[str], list[tuple[str, str]]]:
    """Completed work and decisions in a checkpoint, for the working state's ``promote``.

    Returns the bullets of ``### Done`` (checkbox and emphasis removed) and the
    ``## Key Decisions`` bullets as ``(title, why)`` (a bold title and what
    follows it, else the whole bullet and no reason); "none"/"nothing yet" placeholders are left
    out; at most ``limit`` of each, in checkpoint order.
    """
    done: list[str] = []
    decisions: list[tuple[str, str]] = []
    where: str | None = None
    for line in text.splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
            where = "done" if heading == "Done" else "decision" if heading == "Key Decisions" else None
            continue
        item = line.strip()
        if where is None or not item.startswith(("- ", "* ")):
            continue
        item = item[2:].strip()
        for box in ("[x] ", "[X] ", "[ ] "):
            item = item.removeprefix(box)
        title, why = item, ""
        if item.startswith("**") and "**" in item[2:]:
            # "**Decision**: why" (the seed's format): the bold part is the title.
            title, _, why = item[2:].partition("**")
            why = why.lstrip(" :-–—").strip()
        title = title.replace("**", "").strip()
        low = title.lower().rstrip(".")
        if not title or low.startswith(_EMPTY) or low.startswith(("none ", "nothing ")):
            continue
        if where == "done" and title not in done and len(done) < limit:
            done.append(title)
        elif where == "decision" and title not in [d[0] for d in decisions] and len(decisions) < limit:
            decisions.append((title, why))
    return done, decisions
