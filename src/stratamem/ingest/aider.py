"""aider chat histories (``.aider.chat.history.md``, in a project's git root).

aider appends to one Markdown file per project, and writes every kind of
line its own way:

* ``# aider chat started at <YYYY-MM-DD HH:MM:SS>`` opens a session (local
  time, no zone: stored as UTC, and said so in ``metadata.naive_time``);
* each line the user typed is ``#### <line>`` followed by **two spaces**
  (a Markdown line break); an empty input is ``#### <blank>``;
* aider's own output (the start-up banner, token counts, "Applied edit",
  commits, questions) is ``> <text>`` followed by two spaces;
* everything else is the model's answer — including a ``#### `` heading or a
  ``> `` quote *inside* an answer, which lack the two trailing spaces.

So a user turn is a run of ``#### `` lines ending in two spaces (joined with
newlines; one starting with ``/`` is an aider command, ``metadata.command``);
an answer is the text between inputs and aider output; aider's output is
skipped and counted (its ``Main model:`` line names the session's model). The
file holds no ids: a turn's key is its session's start, its position there and
its text. Turns after the session start are dated with it (the file records no
other time). A live history's last block is held back until the file settles.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from ..records import Role, Turn
from ._common import IngestSession, content_key, fail
from .lines import numbered_lines

__all__ = ["looks_like_aider", "read_aider"]

_START = re.compile(r"^# aider chat started at (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\s*$")
_MODEL = re.compile(r"^Main model: (\S+)")


_MARK = "# aider chat started at "


def looks_like_aider(text: str) -> bool:
    """Whether text is an aider chat history: its first non-blank line opens a session (or, unfinished, begins to)."""
    for _, line, ended in numbered_lines(text):
        if line.strip():
            return bool(_START.match(line)) or (not ended and (line.startswith(_MARK) or _MARK.startswith(line)))
    return False


@dataclass(slots=True)
class _Block:
    kind: str  # user | assistant | output
    lines: list[str] = field(default_factory=list)
    first: int = 0


@dataclass(slots=True)
class _Session:
    start: datetime
    label: str
    line: int
    blocks: list[_Block] = field(default_factory=list)
    model: str | None = None


def _kind(line: str) -> str:
    if line.startswith("#### ") and line.endswith("  "):
        return "user"
    if line.startswith("> ") and line.endswith("  ") or line == ">":
        return "output"
    return "assistant"


def _parse(text: str, where: str, settled: bool) -> list[_Session]:
    sessions: list[_Session] = []
    for n, line, ended in numbered_lines(text):
        if not ended and not settled:
            break  # a line still being written: what it is shows when it is whole
        m = _START.match(line)
        if m:
            try:
                start = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
            except ValueError:
                raise fail(f"not a time: {m.group(1)!r}", line=n, where=where) from None
            sessions.append(_Session(start, m.group(1), n))
            continue
        if not sessions:
            if line.strip():
                raise fail("text before the first '# aider chat started at' line", line=n, where=where)
            continue
        s = sessions[-1]
        kind = _kind(line) if line.strip() else None
        if kind is None:
            # A blank line separates blocks but belongs to an answer's text.
            if s.blocks and s.blocks[-1].kind == "assistant":
                s.blocks[-1].lines.append("")
            continue
        if kind == "user":
            body = line[5:-2]
        elif kind == "output":
            body = line[2:].rstrip()
            model = _MODEL.match(body)
            if model and s.model is None:
                s.model = model.group(1)
        else:
            body = line
        if not s.blocks or s.blocks[-1].kind != kind:
            s.blocks.append(_Block(kind, first=n))
        s.blocks[-1].lines.append(body)
    return sessions


def read_aider(text: str, default_session: str | None, where: str = "", *, settled: bool = True) -> list[IngestSession]:
    """An aider chat history as one session per ``# aider chat started at`` block.

    Raises:
        DecodeError: Text before the first session line, or a start line whose time is not a date.
    """
    parsed = _parse(text, where, settled)
    skipped: Counter[str] = Counter()
    out: list[IngestSession] = []
    for si, s in enumerate(parsed):
        turns: list[Turn] = []
        keys: list[str] = []
        lines: list[int | None] = []
        held = 0
        name = f"aider-{s.start.strftime('%Y-%m-%dT%H:%M:%S')}"
        last_live = not settled and si == len(parsed) - 1
        for bi, b in enumerate(s.blocks):
            body = "\n".join(b.lines).strip("\n")
            if b.kind == "output":
                skipped["aider output"] += len(b.lines)
                continue
            if last_live and bi == len(s.blocks) - 1:
                held = 1  # still being written (an answer streams into the file)
                continue
            meta: dict[str, Any] = {"naive_time": True}
            if b.kind == "user":
                inputs = [x for x in b.lines if x != "<blank>"]
                skipped["blank input"] += len(b.lines) - len(inputs)
                body = "\n".join(inputs).strip()
                if not body:
                    continue
                if body.startswith("/"):
                    meta["command"] = body.split()[0]
            if not body.strip():
                continue
            role: Role = "user" if b.kind == "user" else "assistant"
            turn = Turn(
                role=role,
                content=body,
                timestamp=s.start,
                model=s.model if role == "assistant" else None,
                metadata=meta,
            )
            keys.append(content_key(len(turns), {"session": s.label, "role": role, "text": body}))
            turns.append(turn)
            lines.append(b.first)
        out.append(
            IngestSession(
                name,
                turns,
                platform="aider",
                keys=tuple(keys),
                held_back=held,
                family=name,
                source=where or None,
                lines=tuple(lines),
            )
        )
    if not out:
        out.append(IngestSession(default_session, [], platform="aider", source=where or None))
    out[0] = replace(out[0], skipped=dict(skipped))
    return out
