"""Claude Code logs in every shape real files have, on fixtures written for the project.

``tests/fixtures/transcripts/claude_code`` (made by ``tests/fixtures/make_transcripts.py``):
``1c1c1c1c…`` is a 2.1 log (a reply written block by block with three parallel
calls whose results sit between its lines, progress records, a stop hook, an
image, a compaction, a Task run by a sub-agent whose log and ``.meta.json`` sit
in ``<session>/subagents/``); ``7e7e7e7e…`` has a rewind, redacted thinking, an
image in a tool result and an API-error reply; ``5d5d5d5d…`` is a 1.0 log with
the sub-agent's records inside; ``9a9a9a9a…`` holds U+2028, U+2029 and U+0085
inside strings.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stratamem import DecodeError, InvalidTurnError, Memory
from stratamem.ingest import IngestSession, read_file
from stratamem.records import ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

CC = Path(__file__).parent / "fixtures" / "transcripts" / "claude_code"
PROJECT = CC / "projects" / "-home-dev-station"
STATION = "1c1c1c1c-2222-4333-8444-555566667777"
REWIND = "7e7e7e7e-1111-4222-8333-abcdefabcdef"
AGENT_LOG = PROJECT / STATION / "subagents" / "agent-a5e1b2c.jsonl"


def _roles(s: IngestSession) -> list[str]:
    return [t.role for t in s.turns]


def _pairs_valid(sessions: list[IngestSession]) -> bool:
    """Every tool result answers a call made earlier in its session."""
    for s in sessions:
        calls: set[str] = set()
        for t in s.turns:
            calls.update(t.tool_use_ids)
            if not set(t.tool_result_ids) <= calls:
                return False
    return True


def test_a_reply_split_over_lines_with_its_results_between_is_one_turn_then_its_results() -> None:
    [s] = read_file(PROJECT / f"{STATION}.jsonl")
    assert s.session == STATION and s.family == STATION
    reply = s.turns[1]
    # Five lines of msg_W1 (thinking, text, three calls) with progress and two results written between them.
    assert [b.type for b in reply.blocks] == ["thinking", "text", "tool_use", "tool_use", "tool_use"]
    assert reply.tool_use_ids == ("toolu_W1read", "toolu_W1grep", "toolu_W1bash")
    assert [t.tool_result_ids for t in s.turns[2:5]] == [("toolu_W1read",), ("toolu_W1grep",), ("toolu_W1bash",)]
    assert s.keys[1] == "id:claude-code:msg_W1"
    assert [p.key for p in s.parts[1]] == [f"id:claude-code:s-a{i}" for i in range(1, 6)]
    assert [p.blocks for p in s.parts[1]] == [1, 1, 1, 1, 1]
    assert s.turns[5].text.startswith("pulses is a uint8_t")
    assert _pairs_valid([s])


def test_progress_snapshots_and_other_records_are_skipped_and_counted() -> None:
    [s] = read_file(PROJECT / f"{STATION}.jsonl")
    assert s.skipped == {
        "file-history-snapshot": 1,
        "progress": 4,
        "system:stop_hook_summary": 1,
        "system:compact_boundary": 1,
        "system:turn_duration": 1,
        "queue-operation": 1,
        "ai-title": 1,
    }


def test_the_compaction_summary_is_kept_as_a_summary_and_the_conversation_goes_on_across_it() -> None:
    [s] = read_file(PROJECT / f"{STATION}.jsonl")
    summary = s.turns[10]
    assert (summary.role, summary.metadata["compact_summary"]) == ("assistant", True)
    assert summary.text.startswith("This session is being continued")
    # One session, one path: the summary follows the last turn before the boundary (logicalParentUuid).
    assert [t.metadata["uuid"] for t in s.turns[9:12]] == ["s-a8", "s-c1", "s-u3"]
    assert _roles(s) == [
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


def test_images_and_thinking_are_kept() -> None:
    [s] = read_file(PROJECT / f"{STATION}.jsonl")
    assert s.turns[1].blocks[0] == ThinkingBlock("Read the ISR and the tick first.", "sig-w1")
    assert s.turns[6].blocks == (
        TextBlock("Do it. This is the scope trace of a gust:"),
        ImageBlock(media_type="image/png", data="iVBORw0KGgo="),
    )
    branch, main = read_file(PROJECT / f"{REWIND}.jsonl")
    result = main.turns[4].blocks[0]
    assert isinstance(result, ToolResultBlock)
    assert result.content == (TextBlock("41  rain_total = 0;"), ImageBlock(media_type="image/png", data="iVBORw0KGgo="))
    # Redacted thinking is an encrypted blob: dropped and counted, the reply's other blocks kept.
    assert [b.type for b in main.turns[1].blocks] == ["thinking", "text"]
    assert branch.skipped["block:redacted_thinking"] == 1


def test_a_sub_agent_log_is_its_own_session_linked_to_its_parent() -> None:
    [agent] = read_file(AGENT_LOG)
    assert agent.session == f"{STATION}.agent-a5e1b2c"
    assert _roles(agent) == ["user", "assistant", "tool", "assistant"]
    for t in agent.turns:
        assert {k: t.metadata[k] for k in ("sidechain", "agent", "parent_session")} == {
            "sidechain": True,
            "agent": "a5e1b2c",
            "parent_session": STATION,
        }
    # Its .meta.json labels the session; read alone, the .meta.json holds nothing of its own.
    assert agent.labels == {"agent_type": "Explore", "description": "find ISR counters", "spawn_depth": "1"}
    [meta] = read_file(AGENT_LOG.with_name("agent-a5e1b2c.meta.json"))
    assert (meta.turns, meta.skipped) == ([], {"sub-agent metadata": 1})
    # The parent's result of the Task call names the sub-agent's session.
    [parent] = read_file(PROJECT / f"{STATION}.jsonl")
    task_result = parent.turns[13]
    assert task_result.tool_result_ids == ("toolu_W5task",)
    assert task_result.metadata["agent_session"] == agent.session


def test_a_claude_code_1_0_sub_agent_inside_the_parent_file_is_linked_by_its_prompt() -> None:
    side, main = read_file(PROJECT / "5d5d5d5d-0000-4000-8000-000000000001.jsonl")
    assert side.session == "5d5d5d5d-0000-4000-8000-000000000001.sidechain-s-1"
    assert (_roles(side), _roles(main)) == (["user", "assistant"], ["user", "assistant", "tool", "assistant"])
    assert main.turns[2].metadata["agent_session"] == side.session
    assert all(t.metadata["sidechain"] is True for t in side.turns)


def test_a_rewound_branch_is_its_own_session_never_mixed_into_the_conversation() -> None:
    branch, main = read_file(PROJECT / f"{REWIND}.jsonl")
    assert main.session == REWIND
    # The user's own title wins over the older generated one.
    assert main.labels == branch.labels == {"title": "rain reset"}
    assert [t.metadata["uuid"] for t in main.turns] == ["u-1", "a-1a", "u-c2", "a-c2", "u-c2r", "a-c3", "u-c3"]
    assert branch.session == f"{REWIND}.branch-u-b1"
    assert [t.metadata["uuid"] for t in branch.turns] == ["u-b1", "a-b1"]
    assert {t.metadata["branch_of"] for t in branch.turns} == {REWIND}
    assert branch.turns[0].metadata["forked_at"] == "id:claude-code:msg_A1"
    assert branch.family == main.family == REWIND
    # The synthetic API-error reply is not a reply of the conversation.
    assert branch.skipped["api error"] == 1
    assert all("API Error" not in t.text for t in main.turns)


def test_line_separators_inside_strings_are_not_line_breaks() -> None:
    [s] = read_file(PROJECT / "9a9a9a9a-0000-4000-8000-000000000002.jsonl")
    assert s.turns[0].text == (
        "From the datasheet:\u2028rain: 0.2 mm per tip\u2029wind: 2.4 km/h per Hz\u0085end of table. "
        "Which constant is wrong in rain.c?"
    )
    assert s.turns[1].text == "rain.c uses 0.25; the sheet says 0.2\u2028(per tip)."


def test_a_bom_and_crlf_line_ends_read_the_same(tmp_path: Path) -> None:
    src = PROJECT / f"{STATION}.jsonl"
    copy = tmp_path / src.name
    copy.write_bytes(b"\xef\xbb\xbf" + src.read_bytes().replace(b"\n", b"\r\n"))
    assert read_file(copy, settle=0) == [s.__class__(**{**_fields(s), "source": copy.name}) for s in read_file(src)]


def _fields(s: IngestSession) -> dict:
    return {f: getattr(s, f) for f in s.__dataclass_fields__}


def test_a_torn_last_line_is_a_record_still_being_written_not_an_error(tmp_path: Path) -> None:
    live = CC / "live" / f"{REWIND}.jsonl"
    assert not live.read_text().endswith("\n")
    [s] = read_file(live)
    assert s.skipped == {"summary": 1, "incomplete last line": 1}
    # Written a second ago, the reply msg_A1 (thinking only so far) may still grow: held back.
    fresh = tmp_path / live.name
    fresh.write_bytes(live.read_bytes())
    [now] = read_file(fresh)
    assert (_roles(now), now.held_back) == (["user"], 1)


def test_a_broken_line_in_the_middle_names_the_file_and_the_line(tmp_path: Path) -> None:
    lines = (PROJECT / f"{STATION}.jsonl").read_text().split("\n")
    lines[6] = lines[6][:40]
    bad = tmp_path / "broken.jsonl"
    bad.write_text("\n".join(lines))
    with pytest.raises(DecodeError, match=r"^broken\.jsonl:7: invalid JSON: ") as info:
        read_file(bad)
    assert (info.value.source, info.value.line) == ("broken.jsonl", 7)


def test_a_turn_refused_at_store_time_is_named_by_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "turns.jsonl"
    path.write_text(
        json.dumps({"role": "user", "content": "hi"})
        + "\n"
        + json.dumps({"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "nope", "content": "x"}]})
        + "\n"
    )
    with Memory(tmp_path / "m.db", embedder=None) as mem, pytest.raises(InvalidTurnError) as info:
        mem.ingest(read_file(path))
    assert str(info.value) == "turns.jsonl:2: tool result 'nope' answers no tool call in session 'default'"


def test_every_fixture_log_stores_with_valid_tool_pairs(tmp_path: Path) -> None:
    files = sorted(p for p in PROJECT.rglob("*.jsonl"))
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        for f in files:
            sessions = read_file(f)
            assert _pairs_valid(sessions)
            mem.ingest(sessions)
        stored = {st.session for st in mem.turns()}
    assert stored == {
        STATION,
        f"{STATION}.agent-a5e1b2c",
        "5d5d5d5d-0000-4000-8000-000000000001",
        "5d5d5d5d-0000-4000-8000-000000000001.sidechain-s-1",
        REWIND,
        f"{REWIND}.branch-u-b1",
        "9a9a9a9a-0000-4000-8000-000000000002",
    }


def test_a_tool_use_input_written_as_a_string_is_kept_as_an_object(tmp_path: Path) -> None:
    rec = json.loads((PROJECT / f"{STATION}.jsonl").read_text().split("\n")[4])
    rec["message"]["content"][0]["input"] = json.dumps({"file_path": "/x"})
    [s] = read_file(_one(tmp_path, rec), settle=0)
    call = s.turns[0].blocks[0]
    assert isinstance(call, ToolUseBlock) and dict(call.input) == {"file_path": "/x"}


def _one(tmp_path: Path, rec: dict) -> Path:
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(rec) + "\n")
    return path
