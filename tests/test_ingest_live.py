"""Following a live log: a log read again as it grows stores only its new turns, and the same as one read.

The property: for any cut point of a fixture log (a byte offset, so a line or a
character may be cut mid-way), ingesting the prefix while it is live and then
the whole, finished file stores exactly what ingesting the whole file once
does, turn for turn. A rewind is the one shape where that cannot hold (the
store is append-only: turns stored before the rewind stay where they were); for
it the property is that nothing is lost, nothing is stored twice and the two
paths are never mixed in one session.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stratamem import Config, Memory
from stratamem.ingest import read_file

T = Path(__file__).parent / "fixtures" / "transcripts"
GEMINI = T / "gemini" / "tmp" / ("9f2c" * 16) / "chats"
LOGS = [
    T / "claude_code/projects/-home-dev-station/1c1c1c1c-2222-4333-8444-555566667777.jsonl",
    T / "claude_code/projects/-home-dev-station/1c1c1c1c-2222-4333-8444-555566667777/subagents/agent-a5e1b2c.jsonl",
    T / "claude_code/projects/-home-dev-station/5d5d5d5d-0000-4000-8000-000000000001.jsonl",
    T / "claude_code/projects/-home-dev-station/9a9a9a9a-0000-4000-8000-000000000002.jsonl",
    T / "codex/sessions/2025/10/29/rollout-2025-10-29T09-14-00-0199a3c1-7b2e-7d40-9c11-5e6f7a8b9c0d.jsonl",
    T / "codex/sessions/2025/10/29/rollout-2025-10-29T09-14-00-0199a3c1-7b2e-7d40-9c11-5e6f7a8b9c0d.bom-crlf.jsonl",
    T / "codex/sessions/2025/06/12/rollout-2025-06-12T18-02-11-5f0c2a9e-3d41-4b6a-8e0f-1a2b3c4d5e6f.jsonl",
    GEMINI / "session-2026-03-03T08-00-7a7a7a7a.jsonl",
    GEMINI / "3f9a1c2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b" / "c0ffee00-1111-4222-8333-444455556666.jsonl",
    T / "aider/.aider.chat.history.md",
    T / "aider/crlf/.aider.chat.history.md",
]
REWIND = T / "claude_code/projects/-home-dev-station/7e7e7e7e-1111-4222-8333-abcdefabcdef.jsonl"
GEMINI_REWIND = GEMINI / "session-2026-03-02T10-15-3f9a1c2e.jsonl"
CONFIG = Config().replace(pyramid={"enabled": False})
OLD = 1_735_689_600  # a finished file's time


def _memory(path: Path) -> Memory:
    return Memory(path, config=CONFIG, embedder=None)


def _snapshot(mem: Memory) -> list[dict[str, Any]]:
    """Every stored turn, by session and position in it (not the store's ids or sequence numbers)."""
    out, at = [], {}
    for stored in sorted(mem.turns(), key=lambda s: (s.session, s.seq)):
        at[stored.session] = at.get(stored.session, 0) + 1
        out.append({"session": stored.session, "position": at[stored.session], **stored.turn.to_dict()})
    return out


def _copy(src: Path, into: Path, data: bytes, *, finished: bool) -> Path:
    """``data`` written at ``src``'s path under ``into`` (readers name sessions from folders); live or finished."""
    rel = src.relative_to(T)
    path = into / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if finished:
        os.utime(path, (OLD, OLD))
    return path


def _half_then_whole(tmp: Path, log: Path, cut: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    data = log.read_bytes()
    with _memory(tmp / "grown.db") as grown, _memory(tmp / "once.db") as once:
        grown.ingest(read_file(_copy(log, tmp / "a", data[:cut], finished=False)))
        whole = _copy(log, tmp / "b", data, finished=True)
        grown.ingest(read_file(whole))
        once.ingest(read_file(whole))
        return _snapshot(grown), _snapshot(once)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name[:40])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_prefix_then_the_whole_stores_the_same_as_the_whole(tmp_path_factory: Any, log: Path, data: Any) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(log.read_bytes())), label="cut")
    grown, once = _half_then_whole(tmp_path_factory.mktemp("cut"), log, cut)
    assert grown == once


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name[:40])
def test_every_line_cut_of_a_fixture_log_grows_into_the_whole(tmp_path: Path, log: Path) -> None:
    data = log.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    for n, cut in enumerate(ends):
        grown, once = _half_then_whole(tmp_path / f"c{n}", log, cut)
        assert grown == once, f"cut after line {n + 1}"


def _identity(turn: dict[str, Any]) -> tuple[str, str]:
    meta = turn.get("metadata") or {}
    return (str(meta.get("message_id") or meta.get("uuid")), turn["role"])


@pytest.mark.parametrize(
    ("log", "abandoned", "continued"),
    [
        (REWIND, {"u-b1", "msg_B1"}, {"u-c2", "msg_C2", "u-c2r", "msg_C3", "u-c3"}),
        (GEMINI_REWIND, {"m-u2", "m-g3"}, {"m-u3", "m-g4"}),
    ],
    ids=["claude-code", "gemini"],
)
def test_a_rewind_after_a_read_keeps_every_turn_once_and_never_mixes_the_paths(
    tmp_path: Path, log: Path, abandoned: set[str], continued: set[str]
) -> None:
    data = log.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    for n, cut in enumerate([0, *ends]):
        grown, once = _half_then_whole(tmp_path / f"c{n}", log, cut)
        ids = [(_identity(t), t["session"]) for t in grown]
        # Nothing lost, nothing twice: the same turns as one read (tool turns counted by role).
        assert sorted(i for i, _ in ids) == sorted(_identity(t) for t in once), f"cut after line {n}"
        for session in {s for _, s in ids}:
            here = {i[0] for i, s in ids if s == session}
            assert not (here & abandoned and here & continued), f"cut after line {n}: {session} mixes the paths"
        if grown != once:
            # Only a read that stored the abandoned branch as the conversation can differ from one read.
            main = {i[0] for i, s in ids if s == log.stem or s.startswith("3f9a1c2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b")}
            assert main & abandoned, f"cut after line {n}"


def test_a_reply_still_streaming_is_held_back_then_stored_whole(tmp_path: Path) -> None:
    live = T / "claude_code/live/7e7e7e7e-1111-4222-8333-abcdefabcdef.jsonl"
    with _memory(tmp_path / "m.db") as mem:
        first = mem.ingest(read_file(_copy(live, tmp_path / "a", live.read_bytes(), finished=False)))
        assert (first.total_stored, first.held_back) == (1, {"7e7e7e7e-1111-4222-8333-abcdefabcdef": 1})
        whole = mem.ingest(read_file(REWIND))
        assert (whole.continued, whole.branched) == (0, {})
        reply = mem.turns("7e7e7e7e-1111-4222-8333-abcdefabcdef")[1].turn
        assert [b.type for b in reply.blocks] == ["thinking", "text"]


def test_a_reply_taken_as_complete_that_grows_is_continued_with_valid_tool_pairs(tmp_path: Path) -> None:
    log = LOGS[0]
    lines = log.read_bytes().split(b"\n")
    # Up to the first result inside msg_W1 (line 7), read as if the file had settled: msg_W1 looks complete.
    head = b"\n".join(lines[:7]) + b"\n"
    with _memory(tmp_path / "m.db") as mem:
        mem.ingest(read_file(_copy(log, tmp_path / "a", head, finished=True)))
        report = mem.ingest(read_file(log))
        assert report.continued == 1
        turns = [s.turn for s in mem.turns("1c1c1c1c-2222-4333-8444-555566667777")]
    assert [b.type for b in turns[1].blocks] == ["thinking", "text", "tool_use"]
    assert turns[2].tool_result_ids == ("toolu_W1read",)
    cont = turns[3]
    assert (cont.role, cont.tool_use_ids, cont.metadata["continues"]) == (
        "assistant",
        ("toolu_W1grep", "toolu_W1bash"),
        "id:claude-code:msg_W1",
    )
    assert [t.tool_result_ids for t in turns[4:6]] == [("toolu_W1grep",), ("toolu_W1bash",)]


def test_a_log_read_again_unchanged_stores_nothing(tmp_path: Path) -> None:
    with _memory(tmp_path / "m.db") as mem:
        for log in LOGS:
            mem.ingest(read_file(log))
        before = _snapshot(mem)
        again = [mem.ingest(read_file(log)) for log in LOGS]
        assert sum(r.total_stored for r in again) == 0
        assert _snapshot(mem) == before
