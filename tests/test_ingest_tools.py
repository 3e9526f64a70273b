"""Codex rollouts, ChatGPT exports, Gemini CLI sessions and aider histories, on fixtures written for the project.

Each test names the shape it covers; the files are made by
``tests/fixtures/make_transcripts.py`` and described in ``docs/formats.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stratamem import DecodeError, Memory
from stratamem.ingest import IngestSession, read_file
from stratamem.records import ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock

T = Path(__file__).parent / "fixtures" / "transcripts"
CODEX = T / "codex" / "sessions"
WRAPPED = CODEX / "2025/10/29/rollout-2025-10-29T09-14-00-0199a3c1-7b2e-7d40-9c11-5e6f7a8b9c0d.jsonl"
GEMINI = T / "gemini" / "tmp" / ("9f2c" * 16)
GEM_SID = "3f9a1c2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b"


def _roles(s: IngestSession) -> list[str]:
    return [t.role for t in s.turns]


# --- Codex -----------------------------------------------------------------------------------


def test_codex_splits_the_first_user_message_into_instructions_and_the_users_words() -> None:
    [s] = read_file(WRAPPED)
    assert s.session == "0199a3c1-7b2e-7d40-9c11-5e6f7a8b9c0d" and s.platform == "codex"
    assert _roles(s)[:3] == ["system", "system", "user"]
    assert s.turns[1].text.startswith("# AGENTS.md instructions for /home/dev/station\n\n<INSTRUCTIONS>")
    assert s.turns[2].text == "The rain gauge reports 0 mm every night after midnight. Find out why."
    assert s.skipped["environment_context"] == 1


def test_codex_keeps_reasoning_tool_images_and_the_compaction_summary() -> None:
    [s] = read_file(WRAPPED)
    assert _roles(s) == [
        *("system", "system", "user"),
        *("assistant", "tool") * 5,
        *("assistant", "user", "assistant", "user", "assistant"),
    ]
    assert s.turns[3].blocks[0] == ThinkingBlock("**Looking for the daily reset**")
    # A tool output given as content items: its text and its image.
    result = s.turns[12].blocks[0]
    assert isinstance(result, ToolResultBlock)
    assert result.content == (
        TextBlock("Rain on 2025-10-28: 4.6 mm"),
        ImageBlock(media_type="image/png", data="iVBORw0KGgo="),
    )
    assert s.turns[14].blocks[1] == ImageBlock(media_type="image/jpeg", data="/9j/4AAQSkZJRg==")
    summary = s.turns[15]
    assert (summary.role, summary.metadata) == ("assistant", {"compact_summary": True})
    assert summary.text.startswith("Summary so far: the rain gauge reset")
    assert s.skipped["replacement_history"] == 1
    assert s.turns[16].text == "Yes, GPIO 4.\u2029Continue." or s.turns[16].text == "Yes, GPIO 4. Continue."
    assert s.turns[17].model == "gpt-5.1-codex" and s.turns[3].model == "gpt-5-codex"


def test_a_codex_rollout_with_a_bom_and_crlf_reads_the_same() -> None:
    [plain] = read_file(WRAPPED)
    [crlf] = read_file(WRAPPED.with_name(WRAPPED.name.replace(".jsonl", ".bom-crlf.jsonl")))
    assert (crlf.turns, crlf.keys, crlf.skipped) == (plain.turns, plain.keys, plain.skipped)


def test_the_early_typescript_codex_json_rollout_is_read() -> None:
    [s] = read_file(CODEX / "rollout-2025-04-20-b3c4d5e6-f7a8-4b9c-8d0e-1f2a3b4c5d6e.json")
    assert (s.session, _roles(s)) == (
        "b3c4d5e6-f7a8-4b9c-8d0e-1f2a3b4c5d6e",
        ["system", "user", "assistant", "tool", "assistant"],
    )
    assert s.turns[3].text == "14:flash: build/station.hex\n15:\tavrdude -p m328p -U flash:w:$<\n"
    assert s.keys[1:3] == ("id:codex:msg_ts1", "id:codex:fc_ts3")
    assert {t.timestamp.isoformat() for t in s.turns} == {"2025-04-20T07:45:03.118000+00:00"}


def test_a_codex_review_sub_agent_rollout_is_marked_as_one() -> None:
    [s] = read_file(CODEX / "2025/11/02/rollout-2025-11-02T12-00-00-0199b000-aaaa-7bbb-8ccc-000000000001.jsonl")
    assert s.labels == {"subagent": "review"}
    assert all(t.metadata == {"sidechain": True, "agent": "review"} for t in s.turns)


def test_a_torn_codex_line_is_read_next_time(tmp_path: Path) -> None:
    torn = T / "codex/live/rollout-2025-10-29T09-14-00-0199a3c1-7b2e-7d40-9c11-5e6f7a8b9c0d.torn.jsonl"
    [s] = read_file(torn)
    assert s.skipped["incomplete last line"] == 1
    assert _roles(s) == ["system", "system", "user", "assistant", "tool", "assistant", "tool"]


def test_a_codex_error_in_the_json_rollout_names_the_item(tmp_path: Path) -> None:
    data = json.loads((CODEX / "rollout-2025-04-20-b3c4d5e6-f7a8-4b9c-8d0e-1f2a3b4c5d6e.json").read_text())
    data["items"][2]["call_id"] = 7
    bad = tmp_path / "rollout-x.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(DecodeError, match=r"^rollout-x\.json: items\[2\]\.call_id: expected a string, got int$"):
        read_file(bad)


# --- ChatGPT ---------------------------------------------------------------------------------


def test_chatgpt_keeps_the_conversation_and_each_branch_and_counts_what_it_skips() -> None:
    sessions = read_file(T / "chatgpt" / "conversations.json")
    names = [s.session for s in sessions]
    c1, c2, c3 = (f"6710a0f1-aaaa-4bbb-8ccc-00000000000{i}" for i in (1, 2, 3))
    assert names == [f"{c1}.branch-u2a", c1, f"{c2}.branch-x2", c2, c3]
    branch, main = sessions[0], sessions[1]
    assert [t.text for t in branch.turns] == ["How big should the shield be?", "About 12 cm across."]
    assert branch.turns[0].metadata["forked_at"] == "id:chatgpt:a1"
    # One unknown content type is counted, never a refused export.
    assert main.skipped == {"hidden": 1, "content:reasoning_recap": 1, "empty": 1, "content:app_pairing_content": 1}
    assert _roles(main) == [
        *("system", "user", "assistant", "user", "assistant", "tool", "assistant"),
        *("assistant", "tool", "user", "assistant", "tool", "assistant", "assistant"),
    ]
    assert main.turns[1].blocks[0] == ImageBlock(url="file-service://file-Ab12Cd34")
    # o-series thoughts: thinking at the head of the turn they led to.
    assert main.turns[4].blocks[0] == ThinkingBlock("Magnus formula\nUse a=17.62, b=243.12.")
    # The hidden reply of the memory tool answers a kept call: kept.
    assert (main.turns[8].name, main.turns[8].text) == ("bio", "Model set context updated.")
    # Browsing: the quote and the page answer one call, as one result.
    assert main.turns[11].tool_result_ids == ("srch",)
    assert main.turns[11].text.startswith(
        "The rim of the gauge should be 0.5 to 1.5 m above the ground.\nPrecipitation"
    )
    assert main.turns[13].metadata["error"] is True and main.turns[13].text == "Tool failed: timeout"


def test_a_chatgpt_export_in_every_wrapping_reads_the_same() -> None:
    one = read_file(T / "chatgpt" / "conversations.json")
    for other in ("pretty/conversations.json", "bom/conversations.json"):
        assert [(s.session, s.turns, s.keys) for s in read_file(T / "chatgpt" / other)] == [
            (s.session, s.turns, s.keys) for s in one
        ]
    single = read_file(T / "chatgpt" / "one-conversation.json")
    assert [(s.session, s.turns) for s in single] == [(s.session, s.turns) for s in one[2:4]]


def test_a_bad_message_in_a_pretty_printed_export_is_named_by_its_line(tmp_path: Path) -> None:
    data = json.loads((T / "chatgpt" / "conversations.json").read_text())
    data[0]["mapping"]["a1"]["message"]["author"]["role"] = "wizard"
    text = json.dumps(data, indent=2)
    bad = tmp_path / "conversations.json"
    bad.write_text(text)
    line = text[: text.index('"a1": {')].count("\n") + 1
    with pytest.raises(DecodeError) as info:
        read_file(bad)
    assert (
        str(info.value)
        == f"conversations.json:{line}: [0].mapping[\"a1\"].message.author.role: unknown author role 'wizard'"
    )


# --- Gemini CLI ------------------------------------------------------------------------------


def test_a_gemini_session_log_keeps_the_last_version_of_a_message_and_rewinds_into_a_branch() -> None:
    branch, main = read_file(GEMINI / "chats" / "session-2026-03-02T10-15-3f9a1c2e.jsonl")
    assert (main.session, main.platform, main.labels) == (
        GEM_SID,
        "gemini-cli",
        {"title": "Sensor buses of the station"},
    )
    assert [t.metadata.get("message_id") for t in main.turns] == ["m-u1", "m-g1", None, "m-g2", "m-u3", "m-g4", None]
    assert main.turns[1].blocks[0] == ThinkingBlock("Planning: List the folder, then read each driver.")
    assert main.turns[2].tool_result_ids == ("call-ls-1",) and main.keys[2] == "id:gemini:call-ls-1"
    assert main.turns[4].blocks[1] == ImageBlock(media_type="image/png", data="iVBORw0KGgo=")
    error = main.turns[6].blocks[0]
    assert isinstance(error, ToolResultBlock) and error.is_error and error.text == "File too large, read with offset"
    assert main.skipped == {"$set": 2, "info": 1, "error": 1, "$rewindTo": 1}
    # The rewound messages: their own session, forked after m-g2; the cancelled call has its status as result.
    assert branch.session == f"{GEM_SID}.branch-m-u2"
    assert [t.text for t in branch.turns][0] == "Delete wind.c."
    assert branch.turns[2].text == "[cancelled]" and branch.turns[0].metadata["forked_at"] == "id:gemini:m-g2"


def test_gemini_history_rewritten_by_a_compression_adds_its_snapshot_as_a_summary() -> None:
    [s] = read_file(GEMINI / "chats" / "session-2026-03-03T08-00-7a7a7a7a.jsonl")
    assert _roles(s) == ["user", "assistant", "tool", "assistant", "assistant"]
    assert s.turns[4].metadata == {"message_id": "m-sum", "compact_summary": True}


def test_a_gemini_sub_agent_log_is_linked_to_its_parent_by_its_folder() -> None:
    [s] = read_file(GEMINI / "chats" / GEM_SID / "c0ffee00-1111-4222-8333-444455556666.jsonl")
    assert s.session == f"{GEM_SID}.agent-c0ffee00-1111-4222-8333-444455556666"
    assert s.turns[0].metadata["parent_session"] == GEM_SID and s.turns[0].metadata["sidechain"] is True


def test_gemini_documents_checkpoints_and_the_prompt_log() -> None:
    [legacy] = read_file(GEMINI / "chats" / "session-2025-09-14T08-30-1b2c3d4e.json")
    assert (_roles(legacy), legacy.skipped) == (["user", "assistant"], {"warning": 1})
    assert [b.type for b in legacy.turns[1].blocks] == ["thinking", "text"]
    flush, old = (read_file(GEMINI / f"checkpoint-{t}.json") for t in ("flush", "old"))
    assert flush[0].session == "gemini-checkpoint-flush"
    assert _roles(flush[0]) == _roles(old[0]) == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert flush[0].turns[4].tool_result_ids == flush[0].turns[3].tool_use_ids == ("fc-1",)
    [prompts] = read_file(GEMINI / "logs.json")
    assert prompts.session == f"{GEM_SID}.prompts"
    assert [t.text for t in prompts.turns] == [
        "List the sensors in src/sensors and what bus each uses.",
        "Delete wind.c.",
    ]


# --- aider -----------------------------------------------------------------------------------


def test_an_aider_history_is_one_session_per_start_line() -> None:
    first, second = read_file(T / "aider" / ".aider.chat.history.md")
    assert (first.session, first.platform) == ("aider-2025-11-05T21:04:17", "aider")
    assert _roles(first) == ["user", "user", "assistant", "user", "user", "assistant"]
    assert [t.metadata.get("command") for t in first.turns] == ["/add", None, None, "/run", None, None]
    # A three-line input is one turn; a heading inside the answer is the answer's.
    assert first.turns[4].text == "it passes. also:\n- rename rain_total to rain_mm\n- keep the comment"
    answer = first.turns[2].text
    assert answer.startswith("I'll report the total first, then reset.\n\nsrc/rain.c\n```c\n<<<<<<< SEARCH")
    assert answer.endswith(
        "#### Explanation of the fix\n\nThe report now happens while the total still holds the whole day."
    )
    assert first.turns[2].model == "anthropic/claude-sonnet-4-20250514"
    assert first.skipped == {"aider output": 16, "blank input": 1}
    assert first.turns[0].timestamp.isoformat() == "2025-11-05T21:04:17+00:00"
    # A quote inside an answer has no trailing spaces: it is the answer's, not aider's output.
    assert second.turns[1].text == (
        "It writes one CSV line to the SD card:\n\n> date, rain_mm\n\n"
        "(The line above is a Markdown quote in the answer, not aider output.)"
    )


def test_an_aider_history_with_crlf_line_ends_reads_the_same() -> None:
    plain = read_file(T / "aider" / ".aider.chat.history.md")
    crlf = read_file(T / "aider" / "crlf" / ".aider.chat.history.md")
    assert [(s.session, s.turns, s.keys) for s in crlf] == [(s.session, s.turns, s.keys) for s in plain]


def test_a_live_aider_history_holds_its_last_block_until_it_settles(tmp_path: Path) -> None:
    live = tmp_path / ".aider.chat.history.md"
    live.write_bytes((T / "aider" / "live" / ".aider.chat.history.md").read_bytes())
    first, second = read_file(live)
    assert (second.turns, second.held_back) == ([], 1)
    [_, settled] = read_file(live, settle=0)
    assert [t.text for t in settled.turns] == ["What does `report_daily` send, and to where?"]


@pytest.mark.parametrize(
    "rel",
    [
        "codex/sessions/2025/10/29/rollout-2025-10-29T09-14-00-0199a3c1-7b2e-7d40-9c11-5e6f7a8b9c0d.jsonl",
        "codex/sessions/2025/06/12/rollout-2025-06-12T18-02-11-5f0c2a9e-3d41-4b6a-8e0f-1a2b3c4d5e6f.jsonl",
        "codex/sessions/rollout-2025-04-20-b3c4d5e6-f7a8-4b9c-8d0e-1f2a3b4c5d6e.json",
        "chatgpt/conversations.json",
        f"gemini/tmp/{'9f2c' * 16}/chats/session-2026-03-02T10-15-3f9a1c2e.jsonl",
        f"gemini/tmp/{'9f2c' * 16}/chats/session-2025-09-14T08-30-1b2c3d4e.json",
        f"gemini/tmp/{'9f2c' * 16}/checkpoint-flush.json",
        "aider/.aider.chat.history.md",
    ],
)
def test_each_tool_format_is_detected_and_stored_twice_as_once(tmp_path: Path, rel: str) -> None:
    fmt = rel.split("/")[0].replace("_", "-")
    auto = read_file(T / rel)
    named = read_file(T / rel, fmt)
    assert [(s.session, s.turns, s.keys) for s in auto] == [(s.session, s.turns, s.keys) for s in named]
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        first = mem.ingest(auto)
        again = mem.ingest(read_file(T / rel))
    assert first.total_stored == sum(len(s.turns) for s in auto) and again.total_stored == 0
