"""Importers: conversation files and message lists as turns.

One module per format (``docs/formats.md`` has each format's schema, what is
kept and what is skipped):

* ``turns`` — canonical turn dicts, one per line (:mod:`.messages`); a line may
  add ``session``, ``platform``, ``channel`` and ``id``.
* ``openai`` / ``anthropic`` — Chat Completions or Messages lists (:mod:`.messages`).
* ``responses`` — OpenAI Responses API items (:mod:`.responses`).
* ``claude-code`` — Claude Code session logs (:mod:`.claude_code`).
* ``codex`` — Codex CLI rollouts, JSON Lines or the early JSON (:mod:`.codex`).
* ``chatgpt`` — ChatGPT ``conversations.json`` exports (:mod:`.chatgpt`).
* ``gemini`` — Gemini CLI sessions, checkpoints and prompt logs (:mod:`.gemini`).
* ``aider`` — aider chat histories, ``.aider.chat.history.md`` (:mod:`.aider`).
* ``locomo`` — LoCoMo samples, one namespace each (:mod:`.locomo`).

``auto`` picks the format from the content. Every reader validates the whole
file before anything is stored and raises :class:`~stratamem.errors.DecodeError`
naming the file, the line and the JSON path of the first bad record; records
a reader does not know are skipped and counted, never a refused file. Each
turn carries a dedupe key (:class:`IngestSession`), so ingesting a file twice
stores it once and a log that has grown stores only what is new.
:mod:`.tree` finds the files of a whole folder (``~/.claude/projects``, a
Codex ``sessions`` tree, ``~/.gemini/tmp``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from ._common import IngestReport, IngestSession, Part, content_key, fail
from .aider import looks_like_aider, read_aider
from .chatgpt import looks_like_chatgpt, read_chatgpt
from .claude_code import looks_like_claude_code, read_claude_code
from .codex import looks_like_codex, looks_like_codex_json, read_codex, read_codex_json
from .gemini import looks_like_gemini, looks_like_gemini_lines, read_gemini, read_gemini_lines
from .lines import decode, json_lines, looks_like_lines, whole_json
from .locomo import LOCOMO_DATE_FORMAT, looks_like_locomo, read_locomo
from .messages import parse_messages, read_message_file, read_message_lines
from .responses import looks_like_responses, read_responses

__all__ = [
    "INGEST_FORMATS",
    "SETTLE_SECONDS",
    "IngestReport",
    "IngestSession",
    "LOCOMO_DATE_FORMAT",
    "Part",
    "content_key",
    "detect_format",
    "parse_messages",
    "read_file",
]

log = logging.getLogger("stratamem.ingest")

INGEST_FORMATS = (
    "auto",
    "turns",
    "openai",
    "anthropic",
    "responses",
    "claude-code",
    "codex",
    "chatgpt",
    "gemini",
    "aider",
    "locomo",
)
"""Formats :func:`read_file` reads (``auto`` detects)."""

SETTLE_SECONDS = 60.0
"""How long a log must be unchanged before its last reply counts as complete (see :func:`read_file`)."""

_LINE_FORMATS = ("claude-code", "codex")
_META_SUFFIX = ".meta.json"


def detect_format(data: Any, *, lines: bool) -> str:
    """The format of parsed content: a list of ``(line, object)`` records when ``lines``, else a JSON value."""
    if lines:
        if looks_like_claude_code(data):
            return "claude-code"
        if looks_like_codex(data):
            return "codex"
        if looks_like_gemini_lines(data):
            return "gemini"
        if looks_like_responses([r for _, r in data]):
            return "responses"
        return "turns"
    if looks_like_locomo(data):
        return "locomo"
    if looks_like_chatgpt(data):
        return "chatgpt"
    if looks_like_codex_json(data):
        return "codex"
    if looks_like_gemini(data):
        return "gemini"
    items = data.get("input") if isinstance(data, dict) and isinstance(data.get("input"), list) else data
    if isinstance(items, list) and looks_like_responses(items):
        return "responses"
    return "messages"


def _settled(path: Path, settle: float) -> bool:
    """Whether the file has not changed for ``settle`` seconds (so a reply at its end is complete)."""
    if settle <= 0:
        return True
    try:
        return time.time() - path.stat().st_mtime >= settle
    except OSError:
        return True


def _mtime(path: Path) -> datetime:
    """When the file was last written (a checkpoint's only time)."""
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return _ingest_time()


def _agent_meta(path: Path) -> dict[str, Any] | None:
    """The ``agent-<id>.meta.json`` beside a Claude Code sub-agent log, if there is a readable one."""
    meta = path.with_name(path.name.removesuffix(path.suffix) + _META_SUFFIX)
    try:
        data = whole_json(decode(meta.read_bytes(), meta.name), meta.name)
    except FileNotFoundError:
        return None  # most logs have none
    except (OSError, ValueError) as exc:
        # The log itself is fine: store it, without what the sidecar would have added.
        log.warning("%s not read (the sub-agent log is stored without it): %s", meta, exc)
        return None
    if not isinstance(data, dict):
        log.warning("%s is not a JSON object (the sub-agent log is stored without it)", meta)
        return None
    return data


def read_file(
    path: str | Path,
    fmt: str = "auto",
    *,
    session: str | None = None,
    namespace: str | None = None,
    settle: float = SETTLE_SECONDS,
) -> list[IngestSession]:
    """Read a conversation file into sessions of turns, validating everything first.

    Args:
        path: The file.
        fmt: One of :data:`INGEST_FORMATS`.
        session: Session for formats that carry none (default: the caller's).
        namespace: For LoCoMo: the namespace of a one-sample file, the prefix of
            ``<namespace>-<sample_id>`` for several (default ``locomo-<sample_id>``).
        settle: Seconds a log must be unchanged before a reply at its end that
            nothing has closed yet counts as complete; until then it is held back
            (:attr:`IngestSession.held_back`) and a later read stores it whole.
            ``0`` takes every reply as complete.

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
    where = p.name
    text = decode(raw, where)
    if not text.strip():
        return []  # an empty file (a log just created): nothing yet
    settled = _settled(p, settle)
    if fmt == "aider" or (fmt == "auto" and looks_like_aider(text)):
        return read_aider(text, session, where, settled=settled)
    if (
        (fmt in _LINE_FORMATS and not (p.suffix == ".json" and not looks_like_lines(text)))
        or (fmt not in ("chatgpt", "locomo", "gemini") and p.suffix in (".jsonl", ".ndjson"))
        or (fmt not in ("chatgpt", "locomo") and looks_like_lines(text))
        or (fmt == "turns" and not text.lstrip().startswith("["))
    ):
        return _read_lines(p, text, fmt, session, settled)
    data = whole_json(text, where)
    kind = detect_format(data, lines=False) if fmt == "auto" else fmt
    if kind == "locomo":
        return read_locomo(data, namespace)
    if kind == "chatgpt":
        if not looks_like_chatgpt(data):
            raise fail("not a ChatGPT export: expected conversations with a 'mapping'", where=where)
        return read_chatgpt(data, session, where, text=text)
    if kind == "codex":
        if not looks_like_codex_json(data):
            raise fail("not a Codex rollout: expected {'session': {...}, 'items': [...]}", where=where)
        return read_codex_json(data, session, where)
    if kind == "gemini":
        return read_gemini(data, session, where, name=p.name, saved=_mtime(p))
    if p.name.endswith(_META_SUFFIX) and isinstance(data, dict) and not looks_like_chatgpt(data):
        # A Claude Code sub-agent's metadata: read with its log (the .jsonl beside it), nothing of its own.
        return [IngestSession(session, [], platform="claude-code", skipped={"sub-agent metadata": 1}, source=where)]
    if kind == "responses":
        items = data["input"] if isinstance(data, dict) and isinstance(data.get("input"), list) else data
        if not isinstance(items, list):
            raise fail("expected a list of Responses items or an object with 'input'", where=where)
        return [read_responses([(None, it) for it in items], session, _ingest_time(), where)]
    return [read_message_file(data, "auto" if kind == "messages" else kind, session, where)]


def _read_lines(p: Path, text: str, fmt: str, session: str | None, settled: bool) -> list[IngestSession]:
    """A JSON Lines file, in its format; a torn last line is counted, not an error."""
    where = p.name
    parsed = json_lines(text, where)
    records = parsed.records
    kind = detect_format(records, lines=True) if fmt == "auto" else fmt
    out: list[IngestSession]
    if kind == "claude-code":
        out = read_claude_code(records, session, where, settled=settled, agent_meta=_agent_meta(p))
    elif kind == "codex":
        out = read_codex(records, session, where, settled=settled)
    elif kind == "gemini":
        out = read_gemini_lines(records, session, where, settled=settled, path=p)
    elif kind == "responses":
        out = [read_responses(list(records), session, _ingest_time(), where)]
    else:
        out = read_message_lines(records, fmt if fmt != "auto" else "auto", session, where)
    if parsed.torn:
        if not out:
            out = [IngestSession(session, [], source=where)]
        first = out[0]
        out[0] = replace(first, skipped={**first.skipped, "incomplete last line": 1})
    return out


def _ingest_time() -> datetime:
    # Formats without times: every turn is dated when it was read.
    return datetime.now(UTC)
