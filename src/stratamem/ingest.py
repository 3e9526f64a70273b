"""Reading conversations from files and message lists into turns.

Formats:

* ``turns`` — canonical turn dicts (see :meth:`Turn.from_dict`); as JSON Lines a
  line may add ``session``, ``platform`` and ``channel`` keys.
* ``openai`` — Chat Completions messages (a list, or ``{"messages": [...]}``).
* ``anthropic`` — Messages (``{"system": ..., "messages": [...]}`` or a list).
* ``locomo`` — LoCoMo conversations: each sample becomes its own namespace
  (``locomo-<sample_id>`` unless one is given) with one session per LoCoMo
  session, dated with the session's date; speaker A is ``user`` and speaker B
  ``assistant``, each turn named after its speaker, with the LoCoMo ``dia_id``
  and any shared-photo caption in its metadata. Turns are spaced 30 seconds apart
  from the session start, since LoCoMo dates sessions, not turns.

``auto`` picks the format from the content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ._jsonio import loads, parse_object_line
from .errors import DecodeError, InvalidTurnError, StratamemError, ValidationError
from .providers import from_anthropic, from_openai
from .records import Turn, check_name, check_text

__all__ = ["INGEST_FORMATS", "IngestSession", "LOCOMO_DATE_FORMAT", "parse_messages", "read_file"]

INGEST_FORMATS = ("auto", "turns", "openai", "anthropic", "locomo")
LOCOMO_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_TURN_SPACING = timedelta(seconds=30)


@dataclass(frozen=True, slots=True)
class IngestSession:
    """Turns read for one session."""

    session: str | None
    """Session name, or ``None`` for the caller's default."""
    turns: list[Turn]
    """Turns in order."""
    namespace: str | None = None
    """Namespace the source asks for (LoCoMo samples), or ``None`` for the caller's."""
    platform: str | None = None
    """Platform label for a new session."""
    channel: str | None = None
    """Channel label for a new session."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Source labels (e.g. LoCoMo session date text)."""


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
        raise InvalidTurnError(f"expected a message or a list of messages, got {type(messages).__name__}",
                               path="messages")
    messages = list(messages)
    if all(isinstance(m, Turn) for m in messages):
        return list(messages)
    if any(isinstance(m, Turn) for m in messages):
        raise InvalidTurnError("mix of Turn objects and dicts; pass one kind", path="messages")
    if fmt == "auto":
        fmt = "openai" if _is_openai(messages) else "anthropic" if _is_anthropic(messages) else "turns"
    if fmt == "openai":
        return from_openai(messages, timestamp=timestamp)
    if fmt == "anthropic":
        return from_anthropic(messages, timestamp=timestamp)
    if fmt == "turns":
        return [Turn.from_dict(m, path=f"messages[{i}]", default_timestamp=timestamp) for i, m in enumerate(messages)]
    raise ValidationError(f"unknown message format {fmt!r} (expected auto, turns, openai or anthropic)")


def _locomo_sessions(sample: Mapping[str, Any], namespace: str | None) -> list[IngestSession]:
    conv = sample.get("conversation")
    if not isinstance(conv, Mapping):
        raise DecodeError("a LoCoMo sample needs a 'conversation' object")
    sample_id = str(sample.get("sample_id", "sample"))
    ns = namespace or check_name(f"locomo-{sample_id}", "namespace")
    speaker_a = conv.get("speaker_a")
    numbers = sorted(int(k.split("_")[1]) for k in conv
                     if k.startswith("session_") and k.count("_") == 1 and isinstance(conv[k], list))
    out: list[IngestSession] = []
    for n in numbers:
        date_text = conv.get(f"session_{n}_date_time")
        try:
            start = datetime.strptime(str(date_text), LOCOMO_DATE_FORMAT).replace(tzinfo=timezone.utc)
        except ValueError:
            raise DecodeError(f"LoCoMo {sample_id} session_{n}: unreadable date {date_text!r}") from None
        turns: list[Turn] = []
        for i, t in enumerate(conv[f"session_{n}"]):
            if not isinstance(t, Mapping) or not isinstance(t.get("text"), str):
                raise DecodeError(f"LoCoMo {sample_id} session_{n}[{i}]: a turn needs 'text'")
            text = t["text"]
            meta: dict[str, Any] = {"dia_id": t.get("dia_id")}
            caption = t.get("blip_caption")
            if caption:
                # The shared photo is part of what was said; its caption is how a
                # text-only reader sees it.
                meta["image_caption"] = caption
                text = f"{text} [shares {caption}]"
            speaker = t.get("speaker")
            turns.append(Turn(role="user" if speaker == speaker_a else "assistant", content=text,
                              timestamp=start + i * _TURN_SPACING, name=speaker, metadata=meta))
        out.append(IngestSession(f"session_{n}", turns, namespace=ns, platform="locomo",
                                 labels={"date": str(date_text)}))
    return out


def read_file(path: str | Path, fmt: str = "auto", *, session: str | None = None,
              namespace: str | None = None) -> list[IngestSession]:
    """Read a conversation file into sessions of turns, validating everything first.

    Args:
        path: The file.
        fmt: One of :data:`INGEST_FORMATS`.
        session: Session for formats that carry none (default: the caller's).
        namespace: For LoCoMo, put every sample in this namespace instead of one each.

    Raises:
        DecodeError: The file is not valid JSON / JSON Lines or not in the format.
        InvalidTurnError: A message is malformed.
        ValidationError: Unknown format or unreadable file.
    """
    if fmt not in INGEST_FORMATS:
        raise ValidationError(f"unknown ingest format {fmt!r} (expected one of {', '.join(INGEST_FORMATS)})")
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ValidationError(f"cannot read {p}: {exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{p} is not valid UTF-8 (byte {exc.start})") from None
    if p.suffix == ".jsonl" or (fmt == "turns" and not text.lstrip().startswith("[")):
        return _read_jsonl(text, fmt, session)
    data = loads(text, where=str(p))
    is_locomo = (isinstance(data, list) and data and isinstance(data[0], Mapping) and "conversation" in data[0]) or (
        isinstance(data, Mapping) and "conversation" in data)
    if fmt == "locomo" or (fmt == "auto" and is_locomo):
        samples = data if isinstance(data, list) else [data]
        return [s for sample in samples for s in _locomo_sessions(sample, namespace)]
    system = None
    if isinstance(data, Mapping):
        if "messages" not in data:
            raise DecodeError(f"{p}: expected a list of messages or an object with 'messages'")
        system = data.get("system")
        data = data["messages"]
        if fmt == "auto" and system is not None:
            fmt = "anthropic"
    if fmt == "anthropic" or (fmt == "auto" and system is not None):
        turns = from_anthropic(data, system=system)
    else:
        turns = parse_messages(data, fmt)
    return [IngestSession(session, turns)]


def _read_jsonl(text: str, fmt: str, default_session: str | None) -> list[IngestSession]:
    records: list[tuple[str | None, str | None, str | None, dict[str, Any]]] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        obj = parse_object_line(line, n)
        try:
            sess = obj.pop("session", default_session)
            if sess is not None:
                check_name(sess, "session")
            labels = [None if v is None else check_text(v, key)
                      for key, v in (("platform", obj.pop("platform", None)), ("channel", obj.pop("channel", None)))]
        except StratamemError as exc:
            raise DecodeError(str(exc), line=n) from None
        records.append((sess, labels[0], labels[1], obj))
    messages = [r[3] for r in records]
    mode = fmt if fmt != "auto" else ("openai" if _is_openai(messages) else
                                      "anthropic" if _is_anthropic(messages) else "turns")
    out: list[IngestSession] = []
    # Consecutive lines of one session form one batch, so provider conversions
    # (which pair tool calls and results) see each session's messages together.
    start = 0
    for i in range(1, len(records) + 1):
        if i == len(records) or records[i][0] != records[start][0]:
            chunk = records[start:i]
            turns = parse_messages([r[3] for r in chunk], mode)
            out.append(IngestSession(chunk[0][0], turns, platform=chunk[0][1], channel=chunk[0][2]))
            start = i
    return out
