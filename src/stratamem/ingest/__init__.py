"""Importers: conversation files and message lists as turns.

One module per format (``docs/formats.md`` has each format's schema, what is
kept and what is skipped):

* ``turns`` — canonical turn dicts, one per line (:mod:`.messages`); a line may
  add ``session``, ``platform``, ``channel`` and ``id``.
* ``openai`` / ``anthropic`` — Chat Completions or Messages lists (:mod:`.messages`).
* ``responses`` — OpenAI Responses API items (:mod:`.responses`).
* ``claude-code`` — Claude Code session logs (:mod:`.claude_code`).
* ``codex`` — Codex CLI rollout logs (:mod:`.codex`).
* ``chatgpt`` — ChatGPT ``conversations.json`` exports (:mod:`.chatgpt`).
* ``locomo`` — LoCoMo samples, one namespace each (:mod:`.locomo`).

``auto`` picks the format from the content. Every reader validates the whole
file before anything is stored and raises :class:`~stratamem.errors.DecodeError`
naming the line (JSON Lines) and the JSON path of the first bad record. Each
turn carries a dedupe key (:class:`IngestSession`), so ingesting a file twice
stores it once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._jsonio import decode_text, loads, parse_object_line
from ..errors import DecodeError, ValidationError
from ._common import IngestReport, IngestSession, content_key, fail
from .chatgpt import looks_like_chatgpt, read_chatgpt
from .claude_code import looks_like_claude_code, read_claude_code
from .codex import looks_like_codex, read_codex
from .locomo import LOCOMO_DATE_FORMAT, looks_like_locomo, read_locomo
from .messages import parse_messages, read_message_file, read_message_lines
from .responses import looks_like_responses, read_responses

__all__ = [
    "INGEST_FORMATS",
    "IngestReport",
    "IngestSession",
    "content_key",
    "LOCOMO_DATE_FORMAT",
    "detect_format",
    "parse_messages",
    "read_file",
]

INGEST_FORMATS = ("auto", "turns", "openai", "anthropic", "responses", "claude-code", "codex", "chatgpt", "locomo")
"""Formats :func:`read_file` reads (``auto`` detects)."""

_LINE_FORMATS = ("claude-code", "codex")


def _is_lines(path: Path, text: str) -> bool:
    """JSON Lines: by suffix, or when the first line is a whole JSON object and more lines follow."""
    if path.suffix in (".jsonl", ".ndjson"):
        return True
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return False
    first, _, rest = stripped.partition("\n")
    if not rest.strip():
        return False
    try:
        loads(first)
    except DecodeError:
        return False
    return True


def _records(text: str) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            out.append((n, parse_object_line(line, n)))
    return out


def detect_format(data: Any, *, lines: bool) -> str:
    """The format of parsed content: a list of ``(line, object)`` records when ``lines``, else a JSON value."""
    if lines:
        if looks_like_claude_code(data):
            return "claude-code"
        if looks_like_codex(data):
            return "codex"
        if looks_like_responses([r for _, r in data]):
            return "responses"
        return "turns"
    if looks_like_locomo(data):
        return "locomo"
    if looks_like_chatgpt(data):
        return "chatgpt"
    items = data.get("input") if isinstance(data, dict) and isinstance(data.get("input"), list) else data
    if isinstance(items, list) and looks_like_responses(items):
        return "responses"
    return "messages"


def read_file(
    path: str | Path, fmt: str = "auto", *, session: str | None = None, namespace: str | None = None
) -> list[IngestSession]:
    """Read a conversation file into sessions of turns, validating everything first.

    Args:
        path: The file.
        fmt: One of :data:`INGEST_FORMATS`.
        session: Session for formats that carry none (default: the caller's).
        namespace: For LoCoMo: the namespace of a one-sample file, the prefix of
            ``<namespace>-<sample_id>`` for several (default ``locomo-<sample_id>``).

    Returns:
        Sessions in file order, each with its turns' dedupe keys and the counts
        of records skipped on purpose.

    Raises:
        DecodeError: The file is not valid JSON / JSON Lines or not in the format;
            the error names the file, the line and the JSON path.
        InvalidTurnError: A message of a JSON message list is malformed.
        ValidationError: Unknown format or unreadable file.
    """
    if fmt not in INGEST_FORMATS:
        raise ValidationError(f"unknown ingest format {fmt!r} (expected one of {', '.join(INGEST_FORMATS)})")
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ValidationError(f"cannot read {p}: {exc}") from exc
    text = decode_text(raw, str(p))
    where = p.name
    if (
        fmt in _LINE_FORMATS
        or (fmt not in ("chatgpt", "locomo") and _is_lines(p, text))
        or (fmt == "turns" and not text.lstrip().startswith("["))
    ):
        records = _records(text)
        kind = detect_format(records, lines=True) if fmt == "auto" else fmt
        if kind == "claude-code":
            return read_claude_code(records, session, where)
        if kind == "codex":
            return read_codex(records, session, where)
        if kind == "responses":
            return [read_responses(list(records), session, _ingest_time(), where)]
        return read_message_lines(records, fmt if fmt != "auto" else "auto", session)
    data = loads(text, where=where)
    kind = detect_format(data, lines=False) if fmt == "auto" else fmt
    if kind == "locomo":
        return read_locomo(data, namespace)
    if kind == "chatgpt":
        if not looks_like_chatgpt(data):
            raise fail("not a ChatGPT export: expected conversations with a 'mapping'", where=where)
        return read_chatgpt(data, session, where)
    if kind == "responses":
        items = data["input"] if isinstance(data, dict) and isinstance(data.get("input"), list) else data
        if not isinstance(items, list):
            raise fail("expected a list of Responses items or an object with 'input'", where=where)
        return [read_responses([(None, it) for it in items], session, _ingest_time(), where)]
    return [read_message_file(data, "auto" if kind == "messages" else kind, session, where)]


def _ingest_time() -> datetime:
    # Formats without times: every turn is dated when it was read.
    return datetime.now(UTC)
