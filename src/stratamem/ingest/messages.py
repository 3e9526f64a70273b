"""Message lists (canonical turns, OpenAI Chat Completions, Anthropic Messages) as turns.

:func:`parse_messages` is what :meth:`stratamem.Memory.add` uses; the file
readers here handle a JSON file of messages (a list, ``{"messages": [...]}``,
or Anthropic's ``{"system": ..., "messages": [...]}``) and a JSON Lines file
of messages or canonical turns, where a line may add ``session``,
``platform``, ``channel`` and ``id`` keys (``docs/formats.md``, "turns").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..errors import DecodeError, InvalidTurnError, StratamemError, ValidationError
from ..providers import from_anthropic, from_openai
from ..records import Turn, check_name, check_text
from ._common import IngestSession, content_key, fail, id_key

__all__ = ["detect_messages", "parse_messages", "read_message_file", "read_message_lines"]


def _is_openai(messages: Sequence[Any]) -> bool:
    for m in messages:
        if not isinstance(m, Mapping):
            continue
        if "tool_calls" in m or "tool_call_id" in m or m.get("role") == "developer":
            return True
        content = m.get("content")
        if isinstance(content, list) and any(isinstance(p, Mapping) and p.get("type") == "image_url" for p in content):
            return True
    return False


def _is_anthropic(messages: Sequence[Any]) -> bool:
    for m in messages:
        if not isinstance(m, Mapping):
            continue
        content = m.get("content")
        if not isinstance(content, list):
            continue
        for b in content:
            if not isinstance(b, Mapping):
                continue
            if m.get("role") == "user" and b.get("type") == "tool_result":
                return True
            if b.get("type") == "image" and "source" in b:
                return True
            if "cache_control" in b:
                return True
    return False


def detect_messages(messages: Sequence[Any]) -> str:
    """``openai``, ``anthropic`` or ``turns``: which message shape a list is in."""
    return "openai" if _is_openai(messages) else "anthropic" if _is_anthropic(messages) else "turns"


def parse_messages(messages: Any, fmt: str = "auto", *, timestamp: datetime | None = None) -> list[Turn]:
    """Turn a list of messages (canonical, OpenAI or Anthropic) into turns.

    ``auto`` recognizes OpenAI by ``tool_calls``/``tool_call_id``/``image_url``
    and Anthropic by tool results in user messages or ``source`` images;
    anything else is read as canonical turns (plain text messages look the same
    in all three).

    Raises:
        InvalidTurnError: A message is malformed (the error names its index).
        ValidationError: Unknown format.
    """
    if isinstance(messages, Turn):
        return [messages]
    if isinstance(messages, Mapping):
        messages = [messages]
    if not isinstance(messages, list | tuple):
        raise InvalidTurnError(
            f"expected a message or a list of messages, got {type(messages).__name__}", path="messages"
        )
    messages = list(messages)
    if all(isinstance(m, Turn) for m in messages):
        return list(messages)
    if any(isinstance(m, Turn) for m in messages):
        raise InvalidTurnError("mix of Turn objects and dicts; pass one kind", path="messages")
    if fmt == "auto":
        fmt = detect_messages(messages)
    if fmt == "openai":
        return from_openai(messages, timestamp=timestamp)
    if fmt == "anthropic":
        return from_anthropic(messages, timestamp=timestamp)
    if fmt == "turns":
        return [Turn.from_dict(m, path=f"messages[{i}]", default_timestamp=timestamp) for i, m in enumerate(messages)]
    raise ValidationError(f"unknown message format {fmt!r} (expected auto, turns, openai or anthropic)")


def _positional_keys(raw: Sequence[Any], turns: Sequence[Turn]) -> tuple[str, ...]:
    """Keys for turns converted one-to-one from ``raw`` (a system prompt may add one turn in front)."""
    offset = len(turns) - len(raw)
    return tuple(
        content_key(i - offset, raw[i - offset] if i >= offset else {"system": turns[i].text})
        for i in range(len(turns))
    )


def read_message_file(data: Any, fmt: str, session: str | None, where: str) -> IngestSession:
    """A parsed JSON file of messages as one session.

    Raises:
        DecodeError: Not a list of messages or an object with ``messages``.
        InvalidTurnError: A message is malformed (the error names its index).
    """
    system = None
    if isinstance(data, Mapping):
        if "messages" not in data:
            raise fail("expected a list of messages or an object with 'messages'", where=where)
        system = data.get("system")
        data = data["messages"]
    if not isinstance(data, list):
        raise fail("'messages' must be a list", path="messages", where=where)
    if fmt == "anthropic" or (fmt == "auto" and system is not None):
        turns = from_anthropic(data, system=system)
    else:
        turns = parse_messages(data, fmt)
    return IngestSession(session, turns, keys=_positional_keys(data, turns))


def read_message_lines(
    records: list[tuple[int, dict[str, Any]]], fmt: str, default_session: str | None, where: str = ""
) -> list[IngestSession]:
    """JSON Lines of messages or turns (``session``/``platform``/``channel``/``id`` keys per line).

    Raises:
        DecodeError: A line's extra keys are invalid, or a message is malformed (names the line).
    """
    rows: list[tuple[int, str | None, str | None, str | None, str | None, dict[str, Any]]] = []
    for n, obj in records:
        obj = dict(obj)
        try:
            sess = obj.pop("session", default_session)
            if sess is not None:
                check_name(sess, "session")
            labels = [
                None if v is None else check_text(v, key)
                for key, v in (
                    ("platform", obj.pop("platform", None)),
                    ("channel", obj.pop("channel", None)),
                    ("id", obj.pop("id", None)),
                )
            ]
        except StratamemError as exc:
            raise DecodeError(str(exc), line=n, source=where or None) from None
        rows.append((n, sess, labels[0], labels[1], labels[2], obj))
    messages = [r[5] for r in rows]
    mode = fmt if fmt != "auto" else detect_messages(messages)
    out: list[IngestSession] = []
    # Consecutive lines of one session form one batch, so provider conversions
    # (which pair tool calls and results) see each session's messages together.
    start = 0
    positions: dict[str | None, int] = {}
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i][1] != rows[start][1]:
            chunk = rows[start:i]
            try:
                turns = parse_messages([r[5] for r in chunk], mode)
            except ValidationError as exc:
                raise _at_line(exc, chunk, where) from None
            keys = []
            for j, r in enumerate(chunk):
                if r[4]:
                    # The source's id is kept with the turn, as for the other importers.
                    turns[j] = replace(turns[j], metadata={**turns[j].metadata, "message_id": r[4]})
                pos = positions.get(r[1], 0)
                positions[r[1]] = pos + 1
                keys.append(id_key("turns", r[4]) if r[4] else content_key(pos, r[5]))
            out.append(
                IngestSession(
                    chunk[0][1],
                    turns,
                    platform=chunk[0][2],
                    channel=chunk[0][3],
                    keys=tuple(keys),
                    source=where or None,
                    lines=tuple(r[0] for r in chunk),
                )
            )
            start = i
    return out


def _at_line(exc: ValidationError, chunk: Sequence[tuple[Any, ...]], where: str = "") -> DecodeError:
    """Map ``messages[i].x`` in a chunk's error to the file line of message ``i``."""
    path = exc.path or ""
    if path.startswith("messages[") and "]" in path:
        idx = int(path[len("messages[") : path.index("]")])
        rest = path[path.index("]") + 1 :].lstrip(".")
        return fail(exc.reason, line=chunk[idx][0], path=rest or None, where=where)
    return DecodeError(str(exc), line=chunk[0][0], source=where or None)
