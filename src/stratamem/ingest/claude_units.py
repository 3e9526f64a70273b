"""One Claude Code thread (a session's main thread or one sub-agent's) as units on a tree.

Claude Code writes an assistant reply one content block per line, every line
with the reply's ``message.id``, and runs each tool as soon as its call is
complete: with parallel calls a call's result is written *between* lines of the
reply that made it. So lines are grouped into **units** over the whole thread,
never by adjacency:

* a **reply**: every assistant line with one ``message.id``, wherever it sits
  (a line without one is a reply of its own), plus the user lines holding the
  results of its calls, paired by tool-use id in any order;
* a **prompt**: a user line with text or images;
* a **summary**: a compaction summary (``isCompactSummary``);
* an **orphan**: results whose call is in no reply of the thread (a resumed or
  compacted log): kept as user text saying what they were.

Every other line with a ``uuid`` (``progress``, ``system`` records, ``isMeta``
caveats, synthetic API-error replies, attachments) is **transparent**: a parent
link to it leads on to its own parent, or across a compaction boundary
(``parentUuid`` null) to its ``logicalParentUuid``. A unit's parent is the unit
its first line's parent link leads to. The ``parentUuid`` graph of lines
forks at every parallel call and every progress record; the unit graph forks
only where the conversation did (a rewind), which is what
:func:`stratamem.ingest.branches.split_tree` then cuts into paths.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import StratamemError
from ..records import Block, ToolResultBlock, ToolUseBlock
from ._common import fail, record_error
from .claude_blocks import message_blocks

__all__ = ["CLOSING_SYSTEM", "Thread", "Unit", "build_thread"]

CLOSING_SYSTEM = frozenset({"stop_hook_summary", "turn_duration", "compact_boundary"})
"""``system`` subtypes Claude Code writes only after a reply has ended."""


@dataclass(slots=True)
class Line:
    """A conversation line: its file line, record and converted blocks."""

    n: int
    rec: Mapping[str, Any]
    blocks: list[Block]

    @property
    def uuid(self) -> str:
        """The line's uuid, or a stand-in from its line number."""
        u = self.rec.get("uuid")
        return u if isinstance(u, str) and u else f"line-{self.n}"


@dataclass(slots=True)
class Unit:
    """A reply with its results, a prompt, a summary or orphan results."""

    kind: str
    """``reply``, ``prompt``, ``summary`` or ``orphan``."""
    ident: str
    """The reply's ``message.id``, else the first line's uuid."""
    lines: list[Line] = field(default_factory=list)
    """The unit's own lines (a reply's assistant lines), in file order."""
    results: list[Line] = field(default_factory=list)
    """A reply's tool-result lines, in file order."""

    @property
    def first(self) -> int:
        """File line of the unit's first line."""
        return self.lines[0].n

    @property
    def last(self) -> int:
        """File line of the unit's last line, results included."""
        return max(x.n for x in (*self.lines, *self.results))


@dataclass(slots=True)
class Thread:
    """The units of one thread and how they hang together."""

    units: list[Unit]
    """Units in the order their first line appears."""
    parent: dict[str, str | None]
    """Each unit's parent unit (by ident)."""
    closing: list[int] = field(default_factory=list)
    """File lines of records written only once a reply has ended (``CLOSING_SYSTEM``)."""
    leaf_hint: str | None = None
    """The unit a ``last-prompt`` record names as the conversation's end, if any."""


def _transparent_kind(rec: Mapping[str, Any]) -> str:
    kind = rec.get("type")
    if kind == "system":
        return f"system:{rec.get('subtype')}" if isinstance(rec.get("subtype"), str) else "system"
    return str(kind) if isinstance(kind, str) else "untyped"


def build_thread(records: list[tuple[int, Mapping[str, Any]]], where: str, skipped: Counter[str]) -> Thread:
    """Group a thread's records (file order) into units and link them.

    Raises:
        DecodeError: A user/assistant record is malformed; names the file, line and JSON path.
    """
    units: dict[str, Unit] = {}
    order: list[Unit] = []
    owner_of_line: dict[str, str] = {}  # conversation line uuid -> unit ident
    links: dict[str, Mapping[str, Any]] = {}  # transparent record uuid -> record
    call_owner: dict[str, str] = {}  # tool_use id -> reply ident
    result_lines: list[Line] = []
    closing: list[int] = []
    leaf_ref: str | None = None
    seen: set[str] = set()
    for n, rec in records:
        uuid = rec.get("uuid") if isinstance(rec.get("uuid"), str) else None
        if uuid is not None:
            if uuid in seen:
                skipped["repeated record"] += 1
                continue
            seen.add(uuid)
        kind = rec.get("type")
        msg = rec.get("message")
        if kind == "last-prompt" and isinstance(rec.get("leafUuid"), str):
            leaf_ref = rec["leafUuid"]
        if kind not in ("user", "assistant") or rec.get("isMeta") is True or rec.get("isApiErrorMessage") is True:
            label = (
                "meta"
                if rec.get("isMeta") is True and kind == "user"
                else "api error"
                if rec.get("isApiErrorMessage") is True
                else _transparent_kind(rec)
            )
            skipped[label] += 1
            if uuid is not None:
                links[uuid] = rec
            if kind == "system" and rec.get("subtype") in CLOSING_SYSTEM:
                closing.append(n)
            continue
        if not isinstance(msg, Mapping):
            raise fail(f"a {kind} record needs a 'message' object", line=n, path="message", where=where)
        try:
            blocks = message_blocks(msg.get("content"), "content", skipped, assistant=kind == "assistant")
        except StratamemError as exc:
            raise record_error(exc, line=n, path="message", where=where) from None
        line = Line(n, rec, blocks)
        if kind == "assistant":
            mid = msg.get("id")
            ident = mid if isinstance(mid, str) and mid else line.uuid
            unit = units.get(ident)
            if unit is None:
                unit = units[ident] = Unit("reply", ident)
                order.append(unit)
            unit.lines.append(line)
            owner_of_line[line.uuid] = ident
            for b in blocks:
                if isinstance(b, ToolUseBlock):
                    call_owner.setdefault(b.id, ident)
            continue
        if any(isinstance(b, ToolResultBlock) for b in blocks):
            result_lines.append(line)  # owners may be written later (resolve against the whole thread)
            continue
        if not blocks:
            skipped["empty message"] += 1
            if uuid is not None:
                links[uuid] = rec
            continue
        unit = Unit("summary" if rec.get("isCompactSummary") is True else "prompt", line.uuid, [line])
        units[unit.ident] = unit
        order.append(unit)
        owner_of_line[line.uuid] = unit.ident
    for line in result_lines:
        ids = [b.tool_use_id for b in line.blocks if isinstance(b, ToolResultBlock)]
        owner = next((call_owner[i] for i in ids if i in call_owner), None)
        if owner is None:
            orphan = Unit("orphan", line.uuid, [line])
            units[orphan.ident] = orphan
            order.append(orphan)
            owner = orphan.ident
        else:
            units[owner].results.append(line)
        owner_of_line[line.uuid] = owner
    order.sort(key=lambda u: u.first)
    for u in order:
        u.results.sort(key=lambda x: x.n)

    def resolve(ref: Any) -> str | None:
        hops = 0
        while isinstance(ref, str) and hops <= len(links):
            if ref in owner_of_line:
                return owner_of_line[ref]
            rec = links.get(ref)
            if rec is None:
                return None
            ref = rec.get("parentUuid") or rec.get("logicalParentUuid")
            hops += 1
        return None

    parent: dict[str, str | None] = {}
    previous: str | None = None
    for u in order:
        head = u.lines[0].rec
        if "parentUuid" not in head and "logicalParentUuid" not in head:
            # A log without threading fields: its records follow one another.
            p = previous
        else:
            p = resolve(head.get("parentUuid") or head.get("logicalParentUuid"))
        parent[u.ident] = p if p != u.ident else None
        previous = u.ident
    hint = resolve(leaf_ref) if leaf_ref else None
    return Thread(order, parent, closing, hint)
