"""What a local summarizer may quote from a segment: people's prose and short tool-action mentions.

Agent conversations mix what people say (requests, decisions, reasons, names,
numbers) with what tools return (file contents, grep hits, test logs) and
what the agent writes as tool arguments (whole files, patches). Only the
first is worth quoting. This module turns turns into:

* **prose** — the text blocks of user and assistant turns, with fenced code,
  headings, tables and code- or log-like lines removed, hard-wrapped lines
  joined back into sentences, list markers and Markdown emphasis dropped;
* **actions** — one short mention per assistant turn that calls tools
  (``read docs/api.md; ran pytest -q (2 failed, 9 passed)``), built from the
  tool name, its main argument and, when the result says so, the outcome.

Tool results and tool arguments are never quoted. System turns are
instructions, not conversation, and are skipped. Sentence scoring and
selection live in :mod:`stratamem.summarize.extractive`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..records import StoredTurn, TextBlock, ToolResultBlock, ToolUseBlock
from ._text import split_sentences

__all__ = ["Unit", "actions", "prose_lines", "prose_sentences", "turn_text", "units"]

_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST_MARKER = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_EMPHASIS = re.compile(r"(\*\*|__)(.+?)\1")
_SENTENCE_END = (".", "!", "?")
# A line is code or log output when few of its visible characters are letters,
# or when it ends like code does.
_MIN_LINE_LETTER_SHARE = 0.55
_CODE_ENDINGS = ("{", "}", ";", "(", "[", ",\\", "=>", "->")
_CODE_START = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |return |if .*:$|for .*:$|@\w|>>> |\$ |#!|//|"
    r"[\w./-]+:\d+:)"
)

_MENTION_ARG_CHARS = 60
_MAX_CALLS = 4
_OUTCOME_CHARS = 60
# Argument names that say what a tool call was about, most telling first.
_ARG_KEYS = (
    "path",
    "file_path",
    "file",
    "filename",
    "command",
    "cmd",
    "query",
    "pattern",
    "q",
    "url",
    "name",
    "target",
    "dir",
    "directory",
)
# Tool-name words → the verb of the mention; unknown tools are "called <name>".
_VERBS = (
    (("read", "open", "view", "cat", "show", "get"), "read"),
    (("write", "create", "save", "new"), "wrote"),
    (("edit", "replace", "patch", "update", "modify", "apply"), "edited"),
    (("run", "exec", "execute", "shell", "bash", "terminal", "command", "sh"), "ran"),
    (("search", "grep", "find", "lookup", "rg"), "searched"),
    (("list", "ls", "glob", "tree"), "listed"),
    (("fetch", "http", "browse", "web", "curl", "download"), "fetched"),
    (("delete", "remove", "rm"), "deleted"),
)
_TEST_COUNTS = re.compile(r"\b(\d+) (failed|passed|errors?|skipped|xfailed|xpassed)\b")
_ERROR_START = re.compile(
    r"^\s*(?:error|fatal|traceback|exception|failed|failure|permission denied|"
    r"no such file|command not found|[\w.]*(?:error|exception)\b)",
    re.IGNORECASE,
)
_NOT_FOUND = re.compile(r"\bnot found\b|\bno such\b|\bdoes not exist\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Unit:
    """A quotable sentence of a segment."""

    speaker: str
    """Who said it (the turn's name, else its role)."""
    body: str
    """The sentence."""
    turn_id: int
    """The turn it comes from."""
    action: bool = False
    """Whether it is a tool-action mention rather than prose."""


def _letter_share(line: str) -> float:
    visible = [ch for ch in line if not ch.isspace()]
    return sum(ch.isalpha() for ch in visible) / len(visible) if visible else 0.0


def _code_like(line: str) -> bool:
    s = line.strip()
    return (
        _letter_share(s) < _MIN_LINE_LETTER_SHARE
        or s.endswith(_CODE_ENDINGS)
        or bool(_CODE_START.match(s))
        or s.startswith(("|", "#", ">", "+", "<"))
    )


def prose_lines(text: str) -> list[str]:
    """Paragraphs of ``text`` as single lines, without code, headings, tables or log lines.

    Hard-wrapped lines are joined (a line continues the previous one unless
    that one ended a sentence); each list item is a paragraph of its own,
    without its marker; ``**bold**`` and backticks are dropped.
    """
    out: list[str] = []
    buf: list[str] = []
    in_list = in_fence = False

    def flush() -> None:
        nonlocal in_list
        if buf:
            out.append(" ".join(buf))
            buf.clear()
        in_list = False

    for raw in text.splitlines():
        if _FENCE.match(raw):
            in_fence = not in_fence
            flush()
            continue
        line = raw.strip()
        if in_fence or not line:
            flush()
            continue
        marker = _LIST_MARKER.match(raw)
        body = raw[marker.end() :].strip() if marker else line
        if _code_like(body):
            flush()
            continue
        if marker:
            flush()
            in_list = True
        elif buf and (buf[-1].endswith((*_SENTENCE_END, ":")) or (in_list and not raw[:1].isspace())):
            # A finished sentence, or an unindented line after a list item, starts anew.
            flush()
        buf.append(body)
    flush()
    return [_end(_capital(_EMPHASIS.sub(r"\2", p).replace("`", ""))) for p in out]


def _capital(paragraph: str) -> str:
    """A list item that starts with a plain lower-case word starts a sentence: capitalize it.

    Identifiers (``busy_timeout``, ``orders/db.py``) stay as written.
    """
    first = paragraph.split(" ", 1)[0]
    return paragraph[0].upper() + paragraph[1:] if first.isalpha() and first.islower() else paragraph


def _end(paragraph: str) -> str:
    """A list item or an unpunctuated line ends with a period, so joined sentences stay apart."""
    return paragraph + "." if paragraph[-1:].isalnum() or paragraph[-1:] in ")]\"'" else paragraph


def prose_sentences(text: str) -> list[str]:
    """Whole sentences of the prose in ``text`` (see :func:`prose_lines`)."""
    return [s for p in prose_lines(text) for s in split_sentences(p)]


def _short(value: str, limit: int) -> str:
    first = value.strip().splitlines()[0] if value.strip() else ""
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def _verb(tool: str) -> str:
    parts = set(re.split(r"[_\-.\s]+|(?<=[a-z])(?=[A-Z])", tool.lower()))
    for names, verb in _VERBS:
        if parts & set(names):
            return verb
    return f"called {tool}"


def _argument(inputs: Mapping[str, object], verb: str) -> str:
    # A search is told by what it looked for more than by where it looked.
    keys = ("query", "pattern", "q", *_ARG_KEYS) if verb == "searched" else _ARG_KEYS
    for key in keys:
        value = inputs.get(key)
        if isinstance(value, str) and value.strip():
            return _short(value, _MENTION_ARG_CHARS)
    return ""


def _outcome(result: ToolResultBlock, verb: str) -> str:
    """What the result says about how the call went, in a few words ('' when nothing notable)."""
    text = result.text.strip()
    # Test runners end with their tally ("2 failed, 9 passed in 0.3s"): the last line that has one.
    tally = next((line for line in reversed(text.splitlines()) if _TEST_COUNTS.search(line)), "")
    if tally and verb == "ran":  # a file that merely contains "3 failed" is not a test run
        return ", ".join(f"{n} {w}" for n, w in _TEST_COUNTS.findall(tally))
    first = _short(text, _OUTCOME_CHARS)
    if result.is_error or _ERROR_START.match(text) or _NOT_FOUND.search(first):
        return f"failed: {first}" if first else "failed"
    if verb == "searched":
        hits = sum(1 for line in text.splitlines() if line.strip())
        return f"{hits} hit{'s' if hits != 1 else ''}" if hits else "no hits"
    return ""


def actions(turns: Sequence[StoredTurn]) -> dict[int, str]:
    """One mention of the tool calls of each assistant turn, by turn id.

    A call whose result is in ``turns`` gets its outcome when the result
    reports one (test counts, an error, the number of search hits).
    """
    results = {
        b.tool_use_id: b
        for t in turns
        if not isinstance(t.turn.content, str)
        for b in t.turn.content
        if isinstance(b, ToolResultBlock)
    }
    out: dict[int, str] = {}
    for t in turns:
        if t.role != "assistant" or isinstance(t.turn.content, str):
            continue
        parts = []
        for b in t.turn.content:
            if not isinstance(b, ToolUseBlock):
                continue
            verb = _verb(b.name)
            arg = _argument(b.input, verb)
            mention = f"{verb} {arg}" if arg else verb
            result = results.get(b.id)
            outcome = _outcome(result, verb) if result is not None else ""
            parts.append(f"{mention} ({outcome})" if outcome else mention)
        if parts:
            parts = list(dict.fromkeys(parts))
            if len(parts) > _MAX_CALLS:  # a mention stays short however busy the turn was
                more = len(parts) - _MAX_CALLS + 1
                parts = [*parts[: _MAX_CALLS - 1], f"{more} more calls"]
            text = "; ".join(parts)
            out[t.id] = text[0].upper() + text[1:] + ("" if text.endswith("…") else ".")
    return out


def turn_text(turn: StoredTurn) -> str:
    """The turn's own text blocks (no tool calls, tool results or thinking)."""
    if isinstance(turn.turn.content, str):
        return turn.turn.content
    return "\n\n".join(b.text for b in turn.turn.content if isinstance(b, TextBlock))


def units(turns: Sequence[StoredTurn]) -> list[Unit]:
    """The quotable sentences of ``turns`` in order: each turn's prose, then its action mention."""
    mentions = actions(turns)
    out: list[Unit] = []
    for t in turns:
        if t.role in ("system", "tool"):
            continue
        speaker = t.turn.name or t.role
        out.extend(Unit(speaker, s, t.id) for s in prose_sentences(turn_text(t)))
        if t.id in mentions:
            out.append(Unit(speaker, mentions[t.id], t.id, action=True))
    return out
