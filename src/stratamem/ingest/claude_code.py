"""Claude Code session logs (``~/.claude/projects/<project>/<session-uuid>.jsonl``).

Each line is one record; ``user`` and ``assistant`` records carry a
``message`` in Anthropic Messages shape plus ``uuid``/``parentUuid``,
``timestamp``, ``sessionId`` and flags. How lines become turns is in
:mod:`.claude_units` (replies, their results, prompts, compaction summaries)
and :mod:`.branches` (the conversation and its abandoned branches); this module
makes sessions of them:

* **Threads.** A file's main thread is the session ``sessionId``. A sub-agent
  is its own session ``<sessionId>.agent-<agentId>``: its log
  (``<session>/subagents/agent-<agentId>.jsonl``, with the parent's
  ``sessionId``, ``isSidechain`` and ``agentId`` on every line; a
  ``.meta.json`` beside it gives its type and description), or, in Claude Code
  1.0, its records inside the parent's file (``isSidechain`` without
  ``agentId``: one session ``<sessionId>.sidechain-<root uuid>`` per run, linked
  to the ``Task`` call whose prompt started it). Every sub-agent turn carries
  ``metadata.sidechain``, ``agent`` and ``parent_session``; the parent's result
  of the call carries ``metadata.agent_session``.
* **Rewinds.** The conversation is the path to the newest leaf unit (or the
  one a ``last-prompt`` record names); each abandoned branch is its own session
  ``<session>.branch-<its first record>`` whose turns carry ``branch_of`` and
  ``forked_at`` (the key of the turn it left the conversation after).
* **Live logs.** A reply is written block by block; a reply that nothing has
  followed yet (no later prompt or reply, no end-of-turn record, no
  ``stop_reason``) in a file that changed recently may still grow: it is held
  back (:attr:`IngestSession.held_back`) with its results until a later read.
* **Keys.** A reply is keyed by its ``message.id`` and lists each line's uuid as
  a :class:`~stratamem.ingest._common.Part`; results, prompts and summaries by
  their line's uuid.

What is kept and how it maps is in ``docs/formats.md``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..errors import StratamemError
from ..records import Block, TextBlock, ToolResultBlock, ToolUseBlock, Turn, parse_timestamp
from ._common import IngestSession, Part, branch_session, fail, id_key, record_error, safe_session
from .branches import split_tree
from .claude_units import Line, Thread, Unit, build_thread

__all__ = ["looks_like_claude_code", "read_claude_code"]

_SOURCE = "claude-code"
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.:@+=-]")
_TASK_TOOLS = ("Task", "Agent")
# Record types only Claude Code writes (with its sessionId, or a snapshot's messageId).
_OWN_TYPES = frozenset(
    {"file-history-snapshot", "queue-operation", "progress", "system", "last-prompt", "custom-title", "ai-title"}
)


def looks_like_claude_code(records: list[tuple[int, dict[str, Any]]]) -> bool:
    """Whether the records are a Claude Code log: typed records with its threading fields."""
    for _, rec in records[:200]:
        kind = rec.get("type")
        if (
            kind in ("user", "assistant")
            and isinstance(rec.get("message"), Mapping)
            and ("sessionId" in rec or "parentUuid" in rec or "uuid" in rec)
        ):
            return True
        if kind == "summary" and "leafUuid" in rec:
            return True
        # A log whose first records are not messages yet (snapshots, progress, hooks).
        if kind in _OWN_TYPES and ("sessionId" in rec or "messageId" in rec):
            return True
    return False


def _name_part(value: str) -> str:
    return _NAME_CHARS.sub("-", value).strip("-.")[:60] or "x"


class _Reader:
    """One file's records into sessions."""

    def __init__(self, where: str, default: str | None, settled: bool, agent_meta: Mapping[str, Any] | None) -> None:
        self.where = where
        self.default = default
        self.settled = settled
        self.agent_meta = agent_meta or {}
        self.skipped: Counter[str] = Counter()
        self.out: list[IngestSession] = []
        self.task_links: dict[str, str] = {}  # Task call id -> sidechain session (Claude Code 1.0)
        self.agent_sessions: dict[str, str] = {}  # agentId -> session
        self.main_starts: dict[str | None, int] = {}  # session -> first line of its main thread's last unit

    def threads(self, records: list[tuple[int, dict[str, Any]]]) -> dict[tuple[str | None, str], list]:
        """Records grouped by thread: ``(session, "main" | "agent:<id>" | "side:<root>")``, in first-seen order."""
        side_parent: dict[str, Any] = {}
        for _, rec in records:
            if rec.get("isSidechain") is True and not isinstance(rec.get("agentId"), str):
                if isinstance(rec.get("uuid"), str):
                    side_parent[rec["uuid"]] = rec.get("parentUuid")
        out: dict[tuple[str | None, str], list] = {}
        roots: dict[str, str] = {}
        last_main: tuple[str | None, str] | None = None
        floating: list[tuple[int, dict[str, Any]]] = []
        for n, rec in records:
            sid = safe_session(rec.get("sessionId"), self.default) if "sessionId" in rec else None
            if rec.get("isSidechain") is True:
                agent = rec.get("agentId")
                if isinstance(agent, str) and agent:
                    key: tuple[str | None, str] = (sid or self.default, f"agent:{agent}")
                else:
                    uuid = rec["uuid"] if isinstance(rec.get("uuid"), str) else f"line-{n}"
                    key = (sid or self.default, f"side:{_root(uuid, side_parent, roots)}")
            elif "sessionId" in rec:
                key = last_main = (sid, "main")
            else:
                # Titles, snapshots and other records without a session: the thread they sit in.
                if last_main is None:
                    floating.append((n, rec))
                    continue
                key = last_main
            out.setdefault(key, []).append((n, rec))
        if floating:
            first = next(iter(out), (self.default, "main"))
            out.setdefault(first, [])[:0] = floating
        return out

    def run(self, records: list[tuple[int, dict[str, Any]]]) -> list[IngestSession]:
        groups = self.threads(records)
        built = {key: build_thread(recs, self.where, self.skipped) for key, recs in groups.items()}
        # A 1.0 sub-agent ran while its parent waited for the Task's result: a parent unit that starts
        # after the sub-agent's last line means the sub-agent had finished.
        self.main_starts = {
            sid: max((u.first for u in t.units), default=0) for (sid, k), t in built.items() if k == "main"
        }
        # Sub-agents first (their links are needed by the parent's results), the main thread last:
        # it is then the namespace's most recent session, the one a context continues by default.
        for (sid, kind), thread in built.items():
            if kind == "main":
                continue
            base = sid or "default"
            name = f"{base}.agent-{_name_part(kind[6:])}" if kind.startswith("agent:") else ""
            if kind.startswith("side:"):
                name = f"{base}.sidechain-{_name_part(kind[5:])}"
                prompt = _first_prompt(thread)
                if prompt is not None:
                    self.task_links[prompt] = name
            else:
                self.agent_sessions[kind[6:]] = name
            extra = {"sidechain": True, "parent_session": base}
            if kind.startswith("agent:"):
                # (Its .meta.json labels the session only: a log read before the file exists must store
                # the same turns as one read after.)
                extra["agent"] = kind[6:]
            done = self.main_starts.get(sid, 0) if kind.startswith("side:") else 0
            self.session(thread, name, extra, groups[(sid, kind)], closed_after=done)
        calls = self.task_calls(built)
        title = _title(records)
        for (sid, kind), thread in built.items():
            if kind == "main":
                start = len(self.out)
                self.session(thread, sid, {}, groups[(sid, kind)], calls)
                if title:
                    self.out[start:] = [replace(s, labels={**s.labels, "title": title}) for s in self.out[start:]]
        if not self.out:
            self.out.append(IngestSession(self.default, [], platform=_SOURCE))
        # The file's skip counts ride on its first session, so they are reported once.
        self.out[0] = replace(self.out[0], skipped=dict(self.skipped), source=self.where or None)
        return self.out

    def task_calls(self, built: Mapping[tuple[str | None, str], Thread]) -> dict[str, str]:
        """Task call id -> 1.0 sidechain session, matched by the prompt that started the sidechain."""
        links: dict[str, str] = {}
        if not self.task_links:
            return links
        for (_, kind), thread in built.items():
            if kind != "main":
                continue
            for u in thread.units:
                for line in u.lines:
                    for b in line.blocks:
                        if isinstance(b, ToolUseBlock) and b.name in _TASK_TOOLS:
                            prompt = b.input.get("prompt")
                            if isinstance(prompt, str) and prompt.strip() in self.task_links:
                                links[b.id] = self.task_links[prompt.strip()]
        return links

    def session(
        self,
        thread: Thread,
        name: str | None,
        extra: Mapping[str, Any],
        recs: list[tuple[int, dict[str, Any]]],
        calls: Mapping[str, str] | None = None,
        closed_after: int = 0,
    ) -> None:
        """Emit the thread's conversation (and each abandoned branch) as sessions.

        ``closed_after``: a line of the file after which anything of this thread has ended.
        """
        if not thread.units:
            return
        by_id = {u.ident: u for u in thread.units}
        held = self._held(thread) if thread.units[-1].last >= closed_after else None
        leaf = self._leaf(thread)
        main, branches = split_tree([u.ident for u in thread.units], thread.parent, leaf)
        family = name
        times = _Times(recs, self.where)
        base = name or "default"
        for br in branches:
            bname = branch_session(base, br.nodes[0])
            fork = id_key(_SOURCE, br.fork) if br.fork is not None else None
            meta = {**extra, "branch_of": base, **({"forked_at": fork} if fork else {})}
            self.emit(bname, [by_id[i] for i in br.nodes], meta, times, held, family, calls)
        self.emit(name, [by_id[i] for i in main], dict(extra), times, held, family, calls)
        # An agent's type and description (from its .meta.json) label its session.
        if extra.get("agent") and self.agent_meta and self.out and self.out[-1].session == name:
            labels = {
                _snake(k): str(v)
                for k, v in self.agent_meta.items()
                if isinstance(v, str | int) and not isinstance(v, bool) and v != ""
            }
            self.out[-1] = replace(self.out[-1], labels={**self.out[-1].labels, **labels})

    def _held(self, thread: Thread) -> str | None:
        """The reply that may still be growing: the thread's last unit, unless something says it ended."""
        if self.settled:
            return None
        last = thread.units[-1]
        if last.kind != "reply":
            return None
        end = last.lines[-1].n
        if any(c > end for c in thread.closing):
            return None
        for line in last.lines:
            msg = line.rec.get("message")
            if isinstance(msg, Mapping) and msg.get("stop_reason") is not None:
                return None
        return last.ident

    def _leaf(self, thread: Thread) -> str | None:
        """The conversation's end: the newest leaf below the unit a ``last-prompt`` names, else the newest leaf."""
        if thread.leaf_hint is None:
            return None
        kids: dict[str, list[str]] = {}
        for u in thread.units:
            p = thread.parent.get(u.ident)
            if p is not None:
                kids.setdefault(p, []).append(u.ident)
        rank = {u.ident: i for i, u in enumerate(thread.units)}
        stack, leaves, seen = [thread.leaf_hint], [], set()
        while stack:
            k = stack.pop()
            if k in seen:
                continue
            seen.add(k)
            if kids.get(k):
                stack.extend(kids[k])
            else:
                leaves.append(k)
        return max(leaves, key=rank.__getitem__) if leaves else None

    def emit(
        self,
        name: str | None,
        units: list[Unit],
        extra: Mapping[str, Any],
        times: _Times,
        held: str | None,
        family: str | None,
        calls: Mapping[str, str] | None,
    ) -> None:
        turns: list[Turn] = []
        keys: list[str] = []
        parts: list[tuple[Part, ...]] = []
        lines: list[int | None] = []
        held_back = 0
        for u in units:
            made = self.unit_turns(u, extra, times, calls or {})
            if u.ident == held:
                held_back += len(made)
                continue
            for turn, key, part, n in made:
                turns.append(turn)
                keys.append(key)
                parts.append(part)
                lines.append(n)
        if not turns and not held_back:
            return
        self.out.append(
            IngestSession(
                name,
                turns,
                platform=_SOURCE,
                keys=tuple(keys),
                parts=tuple(parts) if any(parts) else (),
                held_back=held_back,
                family=family,
                source=self.where or None,
                lines=tuple(lines),
            )
        )

    def unit_turns(
        self, u: Unit, extra: Mapping[str, Any], times: _Times, calls: Mapping[str, str]
    ) -> list[tuple[Turn, str, tuple[Part, ...], int]]:
        """The turns of one unit, each with its key, parts and source line."""
        head = u.lines[0]
        try:
            if u.kind == "reply":
                return self._reply(u, extra, times, calls)
            meta = _meta(head, extra)
            ts = times.at(head)
            if u.kind == "orphan":
                text, ids = _orphan_text(head.blocks)
                meta["orphan_tool_results"] = ids
                turn = Turn(role="user", content=text, timestamp=ts, metadata=meta)
            elif u.kind == "summary":
                meta["compact_summary"] = True
                turn = Turn(role="assistant", content=_content(head.blocks), timestamp=ts, metadata=meta)
            else:
                turn = Turn(role="user", content=_content(head.blocks), timestamp=ts, metadata=meta)
        except StratamemError as exc:
            raise record_error(exc, line=head.n, path="message", where=self.where) from None
        return [(turn, id_key(_SOURCE, head.uuid), (), head.n)]

    def _reply(
        self, u: Unit, extra: Mapping[str, Any], times: _Times, calls: Mapping[str, str]
    ) -> list[tuple[Turn, str, tuple[Part, ...], int]]:
        head = u.lines[0]
        blocks: list[Block] = [b for line in u.lines for b in line.blocks]
        out: list[tuple[Turn, str, tuple[Part, ...], int]] = []
        if blocks:
            meta = _meta(head, extra)
            msg = head.rec.get("message")
            if isinstance(msg, Mapping) and isinstance(msg.get("id"), str) and msg["id"]:
                meta["message_id"] = msg["id"]
            model = next((m for m in (_model(x) for x in u.lines) if m), None)
            turn = Turn(role="assistant", content=tuple(blocks), timestamp=times.at(head), model=model, metadata=meta)
            parts = tuple(Part(id_key(_SOURCE, x.uuid), len(x.blocks)) for x in u.lines)
            out.append((turn, id_key(_SOURCE, u.ident), parts if len(u.lines) > 1 else (), head.n))
        else:
            self.skipped["empty message"] += 1
        for line in u.results:
            meta = _meta(line, extra)
            link = self._agent_link(line, calls)
            if link:
                meta["agent_session"] = link
            turn = Turn(role="tool", content=tuple(line.blocks), timestamp=times.at(line), metadata=meta)
            out.append((turn, id_key(_SOURCE, line.uuid), (), line.n))
        return out

    def _agent_link(self, line: Line, calls: Mapping[str, str]) -> str | None:
        """The sub-agent session a Task result reports (``toolUseResult.agentId``, or a 1.0 sidechain)."""
        result = line.rec.get("toolUseResult")
        agent = result.get("agentId") if isinstance(result, Mapping) else None
        if isinstance(agent, str) and agent:
            sid = safe_session(line.rec.get("sessionId"), self.default) or "default"
            return self.agent_sessions.get(agent, f"{sid}.agent-{_name_part(agent)}")
        for b in line.blocks:
            if isinstance(b, ToolResultBlock) and b.tool_use_id in calls:
                return calls[b.tool_use_id]
        return None


class _Times:
    """Each conversation line's time: its own ``timestamp``, else the previous one's (the first known for none)."""

    def __init__(self, recs: list[tuple[int, dict[str, Any]]], where: str) -> None:
        self.where = where
        self.first: datetime | None = None
        self.by_line: dict[int, datetime] = {}
        last: datetime | None = None
        for n, rec in recs:
            raw = rec.get("timestamp")
            if raw is None:
                if last is not None:
                    self.by_line[n] = last
                continue
            try:
                last = parse_timestamp(raw, "timestamp")
            except StratamemError as exc:
                if rec.get("type") in ("user", "assistant"):
                    raise record_error(exc, line=n, path="", where=where) from None
                continue
            self.by_line[n] = last
            self.first = self.first or last

    def at(self, line: Line) -> datetime:
        ts = self.by_line.get(line.n, self.first)
        if ts is None:
            raise fail("no record of the thread has a timestamp", line=line.n, path="timestamp", where=self.where)
        return ts


def _meta(line: Line, extra: Mapping[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"uuid": line.uuid}
    parent = line.rec.get("parentUuid") or line.rec.get("logicalParentUuid")
    if isinstance(parent, str) and parent:
        meta["parent_uuid"] = parent
    meta.update(extra)
    return meta


def _model(line: Line) -> str | None:
    msg = line.rec.get("message")
    model = msg.get("model") if isinstance(msg, Mapping) else None
    return model if isinstance(model, str) and model and model != "<synthetic>" else None


def _content(blocks: list[Block]) -> str | tuple[Block, ...]:
    """A single text block as plain text (how a typed prompt reads), else the blocks."""
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text
    return tuple(blocks)


def _orphan_text(blocks: list[Block]) -> tuple[str, list[str]]:
    """Results whose call is not in the thread, as text saying what they were."""
    texts, ids = [], []
    for b in blocks:
        if isinstance(b, ToolResultBlock):
            ids.append(b.tool_use_id)
            texts.append(f"[result of tool call {b.tool_use_id}]\n{b.text}")
        elif isinstance(b, TextBlock):
            texts.append(b.text)
    return "\n".join(texts), ids


def _root(uuid: str, parent: Mapping[str, Any], roots: dict[str, str]) -> str:
    """The first record of the 1.0 sidechain run ``uuid`` belongs to (memoized in ``roots``)."""
    path: list[str] = []
    node = uuid
    while node not in roots and node not in path:
        path.append(node)
        up = parent.get(node)
        if not isinstance(up, str) or up not in parent:
            break
        node = up
    root = roots.get(node, node)
    roots.update(dict.fromkeys(path, root))
    return root


def _snake(name: str) -> str:
    """``agentType`` -> ``agent_type``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _title(records: list[tuple[int, dict[str, Any]]]) -> str | None:
    """The session's title: the user's (``custom-title``), else Claude Code's (``ai-title``, then ``summary``)."""
    found: dict[str, str] = {}
    for _, rec in records:
        for kind, key in (("custom-title", "customTitle"), ("ai-title", "aiTitle"), ("summary", "summary")):
            if rec.get("type") == kind and isinstance(rec.get(key), str) and rec[key].strip():
                found[kind] = rec[key]
    return found.get("custom-title") or found.get("ai-title") or found.get("summary")


def _first_prompt(thread: Thread) -> str | None:
    for u in thread.units:
        if u.kind == "prompt":
            return " ".join(b.text for b in u.lines[0].blocks if isinstance(b, TextBlock)).strip() or None
    return None


def read_claude_code(
    records: list[tuple[int, dict[str, Any]]],
    default_session: str | None,
    where: str = "",
    *,
    settled: bool = True,
    agent_meta: Mapping[str, Any] | None = None,
) -> list[IngestSession]:
    """Claude Code records (``(line, object)`` pairs) as sessions of turns.

    Args:
        records: The file's records.
        default_session: Session for records without a ``sessionId``.
        where: The file's name, for errors.
        settled: The file has not changed for a while: its last reply is complete.
        agent_meta: A sub-agent log's ``.meta.json`` (type, description), if any.

    Raises:
        DecodeError: A user/assistant record is malformed; the error names the
            file, its line and the JSON path inside it.
    """
    return _Reader(where, default_session, settled, agent_meta).run(records)
