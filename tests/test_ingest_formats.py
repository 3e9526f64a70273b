"""Importers: each real-world format read exactly, auto-detected, and its bad records named by line and path."""

from __future__ import annotations

import json
import sys
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem import DecodeError, Memory
from stratamem.ingest import IngestSession, read_file
from stratamem.ingest.chatgpt import read_chatgpt
from stratamem.records import TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock

FIXTURES = Path(__file__).parent / "fixtures"
INGEST = FIXTURES / "ingest"
sys.path.insert(0, str(FIXTURES))
from make_claude_code_log import write_log  # noqa: E402

CC_SESSION = "5f0c2a9e-1b7d-4c1e-9a53-2d8e6f4b7a10"


def _roles(s: IngestSession) -> list[str]:
    return [t.role for t in s.turns]


def test_claude_code_keeps_messages_joins_reply_blocks_and_counts_what_it_skips() -> None:
    side, main = read_file(INGEST / "claude_code.jsonl")
    # A Claude Code 1.0 sub-agent run inside the parent's file: its own session, named after its first record.
    assert (main.session, side.session) == (CC_SESSION, f"{CC_SESSION}.sidechain-s-1")
    assert main.platform == "claude-code"
    assert _roles(main) == ["user", "assistant", "tool", "assistant", "user"]
    reply = main.turns[1]
    # Three lines with one message.id are one assistant turn, blocks in order.
    assert [type(b) for b in reply.blocks] == [ThinkingBlock, TextBlock, ToolUseBlock]
    assert reply.model == "claude-sonnet-4-5"
    assert reply.metadata == {"uuid": "u-2", "parent_uuid": "u-1", "message_id": "msg_01A"}
    assert main.turns[2].tool_result_ids == ("toolu_01",)
    assert main.turns[4].text == "Good, freeze it with a fixture."
    assert main.turns[0].timestamp.isoformat() == "2025-11-02T09:00:05+00:00"
    assert main.keys == (
        "id:claude-code:u-1",
        "id:claude-code:msg_01A",
        "id:claude-code:u-5",
        "id:claude-code:msg_01B",
        "id:claude-code:u-8",
    )
    assert side.skipped == {"summary": 1, "meta": 1, "file-history-snapshot": 1, "system:local_command": 1}
    assert main.skipped == {}
    assert _roles(side) == ["user", "assistant", "tool"]
    assert all(t.metadata.get("sidechain") is True for t in side.turns)
    assert {t.metadata["parent_session"] for t in side.turns} == {CC_SESSION}


def test_codex_wrapped_rollout_keeps_instructions_calls_and_outputs() -> None:
    [s] = read_file(INGEST / "codex.jsonl")
    assert s.session == "0199a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b" and s.platform == "codex"
    assert _roles(s) == ["system", "user", "assistant", "tool", "assistant"]
    assert s.turns[0].text == "Always run the linter before committing."
    call = s.turns[2].blocks[1]
    assert isinstance(call, ToolUseBlock)
    assert (call.id, call.name, dict(call.input)) == (
        "call_A1",
        "shell",
        {"command": ["bash", "-lc", "tail -n 5 logs/api.log"]},
    )
    # Codex wraps shell output as JSON text; the output itself is what is kept.
    assert s.turns[3].text == "KeyError: 'DATABASE_URL'\n"
    assert s.turns[4].model == "gpt-5-codex"
    # The reasoning summary is the head of the reply it led to.
    assert [b.type for b in s.turns[2].blocks] == ["thinking", "tool_use"]
    assert s.turns[2].blocks[0] == ThinkingBlock("**Checking logs**")
    assert s.skipped == {"environment_context": 1, "event_msg": 2, "turn_context": 1}
    assert s.turns[1].timestamp.isoformat() == "2025-10-29T00:59:40+00:00"


def test_codex_flat_rollout_reads_bare_items_dated_by_the_session() -> None:
    [s] = read_file(INGEST / "codex_flat.jsonl")
    assert s.session == "7c1f0e9a-3b2d-4e5f-a6b7-c8d9e0f1a2b3"
    assert _roles(s) == ["user", "assistant", "tool", "assistant"]
    assert s.turns[2].text == "cli.py:12: --dry"
    assert {t.timestamp.isoformat() for t in s.turns} == {"2025-05-01T10:00:00+00:00"}
    assert s.skipped == {"state": 2}
    assert s.keys[1] == "id:codex:fc_1"


def test_chatgpt_export_follows_the_current_branch_and_pairs_tool_calls() -> None:
    edited, first, second = read_file(INGEST / "chatgpt_conversations.json")
    # The first draft of the answer (a1), abandoned by a regeneration, is a branch of its own.
    assert (edited.session, [t.text for t in edited.turns]) == (f"{first.session}.branch-a1", [edited.turns[0].text])
    assert edited.turns[0].metadata["branch_of"] == first.session
    assert first.session == "66a1b2c3-d4e5-4f60-8a9b-0c1d2e3f4a5b"
    assert first.labels == {"title": "Croissant flour"}
    assert _roles(first) == ["system", "user", "assistant", "assistant", "tool", "assistant"]
    assert first.turns[0].text == "I am a baker in Lyon.\n\nAnswer in metric units."
    # The regenerated answer (a1b) is on the current branch; the first draft (a1) is not.
    assert first.turns[2].text == "Use 500 g of T45 flour for 12 croissants."
    call = first.turns[3].blocks[0]
    assert isinstance(call, ToolUseBlock) and (call.name, dict(call.input)) == ("python", {"code": "print(500 / 12)"})
    result = first.turns[4].blocks[0]
    assert isinstance(result, ToolResultBlock) and result.tool_use_id == call.id == "a2"
    assert first.turns[4].name == "python"
    assert first.turns[1].timestamp.isoformat() == "2024-04-24T23:06:50.500000+00:00"
    assert first.turns[2].model == "gpt-4o"
    assert first.skipped == {"hidden": 1}
    assert first.keys[1] == "id:chatgpt:u1"
    assert second.session == "77b2c3d4-e5f6-4a70-9b8c-1d2e3f4a5b6c" and second.turns[0].text == "Hello there"


def test_responses_items_become_turns_with_developer_as_system() -> None:
    [s] = read_file(INGEST / "responses.json")
    assert _roles(s) == ["system", "user", "assistant", "tool", "assistant"]
    assert s.turns[0].text == "You are a release assistant."
    assert s.turns[2].tool_use_ids == ("call_9",) and s.turns[3].tool_result_ids == ("call_9",)
    assert s.turns[4].text == "Yes: CI is green on v2.3." and s.turns[4].metadata == {"message_id": "msg_77"}
    assert s.skipped == {"reasoning": 1}
    assert s.keys[2] == "id:responses:fc_9" and s.keys[4] == "id:responses:msg_77"
    assert s.keys[0].startswith("sha256:")


def test_turns_jsonl_carries_sessions_labels_and_ids() -> None:
    planning, review = read_file(INGEST / "turns.jsonl")
    assert (planning.session, planning.platform, review.session) == ("planning", "cli", "review")
    assert [t.metadata for t in planning.turns] == [{"message_id": f"t-{i}"} for i in (1, 2, 3)]
    assert planning.keys == ("id:turns:t-1", "id:turns:t-2", "id:turns:t-3")
    assert planning.turns[1].name == "ana" and planning.turns[2].model == "gpt-4o"


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("claude_code.jsonl", "claude-code"),
        ("codex.jsonl", "codex"),
        ("codex_flat.jsonl", "codex"),
        ("chatgpt_conversations.json", "chatgpt"),
        ("responses.json", "responses"),
        ("turns.jsonl", "turns"),
    ],
)
def test_auto_detects_each_format(name: str, fmt: str) -> None:
    def shape(sessions: list[IngestSession]) -> list[tuple[str | None, list[str], tuple[str, ...]]]:
        return [(s.session, [t.text for t in s.turns], s.keys) for s in sessions]

    auto, named = read_file(INGEST / name), read_file(INGEST / name, fmt)
    if fmt == "responses":  # dated when read: compare all but the clock
        assert shape(auto) == shape(named)
    else:
        assert auto == named


def _write_lines(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_bad_claude_code_block_is_named_by_file_line_and_json_path(tmp_path: Path) -> None:
    lines = (INGEST / "claude_code.jsonl").read_text().splitlines()
    rec = json.loads(lines[8])
    rec["message"]["content"].append(["not", "a", "block"])
    lines[8] = json.dumps(rec)
    bad = tmp_path / "s.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(DecodeError) as info:
        read_file(bad)
    assert str(info.value) == "s.jsonl:9: message.content[1]: a content block must be an object"
    assert (info.value.source, info.value.line) == ("s.jsonl", 9)


def test_an_unknown_claude_code_block_is_counted_not_a_refused_file(tmp_path: Path) -> None:
    lines = (INGEST / "claude_code.jsonl").read_text().splitlines()
    rec = json.loads(lines[8])
    rec["message"]["content"].append({"type": "bogus"})
    lines[8] = json.dumps(rec)
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    side, main = read_file(path, settle=0)
    assert side.skipped["block:bogus"] == 1
    assert [t.text for t in main.turns] == [t.text for t in read_file(INGEST / "claude_code.jsonl")[1].turns]


def test_a_claude_code_record_without_a_message_is_refused(tmp_path: Path) -> None:
    bad = _write_lines(
        tmp_path / "s.jsonl",
        [
            {
                "type": "user",
                "sessionId": "abc",
                "uuid": "u1",
                "timestamp": "2025-01-01T00:00:00Z",
                "message": {"role": "user", "content": "hi"},
            },
            {"type": "assistant", "sessionId": "abc", "uuid": "u2", "timestamp": "2025-01-01T00:00:01Z", "message": 7},
        ],
    )
    with pytest.raises(DecodeError, match=r"^s\.jsonl:2: message: a assistant record needs a 'message' object$"):
        read_file(bad)


def test_a_bad_codex_item_is_named_by_file_line_and_path(tmp_path: Path) -> None:
    lines = (INGEST / "codex.jsonl").read_text().splitlines()
    rec = json.loads(lines[2])
    rec["payload"]["content"][0] = "not a part"
    lines[2] = json.dumps(rec)
    bad = tmp_path / "rollout.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(DecodeError) as info:
        read_file(bad)
    assert str(info.value) == "rollout.jsonl:3: payload.content[0]: a content part must be an object"


def test_an_unknown_codex_part_is_counted_not_a_refused_file(tmp_path: Path) -> None:
    lines = (INGEST / "codex.jsonl").read_text().splitlines()
    rec = json.loads(lines[2])
    rec["payload"]["content"].append({"type": "video", "url": "x"})
    lines[2] = json.dumps(rec)
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    [s] = read_file(path, settle=0)
    assert s.skipped["part:video"] == 1
    assert s.turns[1].text == "Why does /health return 500?"


def test_a_bad_chatgpt_message_is_named_by_file_and_json_path(tmp_path: Path) -> None:
    data = json.loads((INGEST / "chatgpt_conversations.json").read_text())
    data[0]["mapping"]["u1"]["message"]["author"]["role"] = "wizard"
    bad = tmp_path / "conversations.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(DecodeError) as info:
        read_file(bad)
    assert str(info.value) == (
        "conversations.json:1: [0].mapping[\"u1\"].message.author.role: unknown author role 'wizard'"
    )


def test_a_bad_responses_item_in_json_lines_names_its_line(tmp_path: Path) -> None:
    bad = _write_lines(
        tmp_path / "items.jsonl",
        [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": 5, "output": "x"},
        ],
    )
    with pytest.raises(DecodeError, match=r"^items\.jsonl:3: call_id: expected a string, got int$"):
        read_file(bad)


def test_a_tool_result_without_its_call_is_kept_as_text_not_refused(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path / "resumed.jsonl",
        [
            {
                "type": "user",
                "sessionId": "abc",
                "uuid": "u1",
                "timestamp": "2025-01-01T00:00:00Z",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_gone", "content": "old output"}],
                },
            },
            {
                "type": "user",
                "sessionId": "abc",
                "uuid": "u2",
                "timestamp": "2025-01-01T00:00:01Z",
                "message": {"role": "user", "content": "go on"},
            },
        ],
    )
    [s] = read_file(path)
    assert _roles(s) == ["user", "user"]
    assert s.turns[0].text == "[result of tool call toolu_gone]\nold output"
    assert s.turns[0].metadata["orphan_tool_results"] == ["toolu_gone"]


def test_the_generated_claude_code_log_reads_exactly(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    lines = write_log(path)
    assert lines == len(path.read_text().splitlines()) == 3244
    # A finished log (settle=0): every reply is complete. Each Task ran its own sub-agent (Claude Code
    # 1.0 wrote them into the parent's file): one session per run, the parent's main thread last.
    *sides, main = read_file(path, settle=0)
    assert len(sides) == 40 and all(s.session.startswith(f"{main.session}.sidechain-") for s in sides)
    side = IngestSession(None, [t for s in sides for t in s.turns], skipped=sides[0].skipped)
    assert main.session == "3f6d2c1a-8b9e-4f70-a1b2-c3d4e5f60718"
    # Per episode: ask, 2 x (read call + result), 1 x (command + result), answer = 8 turns;
    # every fifth episode adds the Task call and its result; one compaction summary (the model's words).
    assert Counter(_roles(main)) == {"user": 200, "assistant": 200 * 4 + 40 + 1, "tool": 200 * 3 + 40}
    assert len(main.turns) == 200 * 8 + 40 * 2 + 1
    assert Counter(_roles(side)) == {"user": 40, "assistant": 80, "tool": 40}
    assert side.skipped == {
        "file-history-snapshot": 400,
        "system:compact_boundary": 1,
        "system:local_command": 200,
        "meta": 1,
        "summary": 1,
    }
    assert len(set(main.keys)) == len(main.keys)
    compacted = [t for t in main.turns if t.metadata.get("compact_summary")]
    assert len(compacted) == 1 and compacted[0].text.startswith("This session is being continued")


def test_the_generated_log_ingests_once_and_answers_a_question(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    write_log(path, episodes=30)
    sessions = read_file(path, settle=0)
    with Memory(tmp_path / "m.db", namespace="dev") as mem:
        first = mem.ingest(sessions)
        again = mem.ingest(read_file(path, settle=0))
        assert (first.total_stored, first.total_skipped) == (30 * 8 + 6 * 2 + 1 + 6 * 4, 0)
        assert (again.total_stored, again.total_skipped) == (0, first.total_stored)
        ctx = mem.context("why did we move the session store to Redis?", budget=1200, format="text")
        assert "move the session store to Redis (db 2, key prefix `sess:`)" in ctx.text
        assert mem.store.latest_session("dev") == "3f6d2c1a-8b9e-4f70-a1b2-c3d4e5f60718"


def test_a_named_message_format_reads_json_lines(tmp_path: Path) -> None:
    path = _write_lines(
        tmp_path / "chat.jsonl",
        [
            {"role": "user", "content": "list files"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        ],
    )
    [s] = read_file(path, "openai", session="chat")
    assert (s.session, _roles(s)) == ("chat", ["user", "assistant", "tool"])
    auto, named = read_file(path), read_file(path, "openai")
    assert [(t.role, t.content) for t in auto[0].turns] == [(t.role, t.content) for t in named[0].turns]
    assert auto[0].keys == named[0].keys


def test_codex_user_instructions_and_developer_messages_are_system_turns(tmp_path: Path) -> None:
    def item(ts: str, payload: dict) -> dict:
        return {"timestamp": ts, "type": "response_item", "payload": payload}

    path = _write_lines(
        tmp_path / "rollout.jsonl",
        [
            {"timestamp": "2025-10-01T00:00:00Z", "type": "session_meta", "payload": {"id": "s1", "cwd": "/x"}},
            item(
                "2025-10-01T00:00:01Z",
                {
                    "type": "message",
                    "role": "developer",
                    "content": [{"type": "input_text", "text": "Sandbox: workspace-write."}],
                },
            ),
            item(
                "2025-10-01T00:00:02Z",
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "<user_instructions>\nUse tabs.\n</user_instructions>"}],
                },
            ),
            item(
                "2025-10-01T00:00:03Z",
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the build."}]},
            ),
            {"timestamp": "2025-10-01T00:00:04Z", "type": "compacted", "payload": {"message": "summary"}},
        ],
    )
    [s] = read_file(path)
    # The compaction's summary is kept, marked: the model wrote it, the user did not say it.
    assert (s.session, _roles(s)) == ("s1", ["system", "system", "user", "assistant"])
    assert s.turns[1].text == "<user_instructions>\nUse tabs.\n</user_instructions>"
    assert (s.turns[3].text, s.turns[3].metadata) == ("summary", {"compact_summary": True})
    assert s.skipped == {}


@st.composite
def _trees(draw: st.DrawFn) -> tuple[dict, str]:
    """A ChatGPT mapping: a random tree of user/assistant messages, and a node to be current."""
    n = draw(st.integers(min_value=1, max_value=15))
    parents = [None] + [draw(st.integers(min_value=0, max_value=i - 1)) for i in range(1, n)]
    mapping: dict[str, dict] = {}
    for i, p in enumerate(parents):
        mapping[f"n{i}"] = {
            "id": f"n{i}",
            "parent": None if p is None else f"n{p}",
            "children": [],
            "message": {
                "id": f"n{i}",
                "author": {"role": "user" if i % 2 else "assistant"},
                "create_time": 1_700_000_000 + i,
                "content": {"content_type": "text", "parts": [f"text {i}"]},
                "recipient": "all",
            },
        }
    for i, p in enumerate(parents):
        if p is not None:
            mapping[f"n{p}"]["children"].append(f"n{i}")
    return mapping, f"n{draw(st.integers(min_value=0, max_value=n - 1))}"


@settings(max_examples=60, deadline=None)
@given(tree=_trees())
def test_chatgpt_keeps_exactly_the_path_from_the_root_to_the_current_node(tree: tuple[dict, str]) -> None:
    mapping, current = tree
    path, node = [], current
    while node is not None:
        path.append(node)
        node = mapping[node]["parent"]
    *branches, s = read_chatgpt([{"id": "c1", "mapping": mapping, "current_node": current}], None)
    assert s.session == "c1"
    assert [t.text for t in s.turns] == [f"text {n[1:]}" for n in reversed(path)]
    # Every other message is kept exactly once, in a branch session of the conversation, never in it.
    kept = [t.metadata["message_id"] for b in branches for t in b.turns]
    assert sorted(kept) == sorted(set(mapping) - set(path))
    assert all(b.session.startswith("c1.branch-") and b.family == "c1" for b in branches)
    for b in branches:
        # A branch is a path: each message's parent is the one before it (the first's is where it forked).
        ids = [t.metadata["message_id"] for t in b.turns]
        assert all(mapping[c]["parent"] == p for p, c in pairwise(ids))
        assert b.turns[0].metadata.get("forked_at") == (
            f"id:chatgpt:{mapping[ids[0]]['parent']}" if mapping[ids[0]]["parent"] else None
        )
