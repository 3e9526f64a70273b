"""Real Claude Code logs (``../shared/data/transcripts``, MIT, see its README): every file stored, every tool
call paired, and a log read half-written then whole equals one read, turn for turn.

These files have what the project's generated logs never had: replies whose
parallel tool calls have their results written between the reply's own lines,
thousands of progress records, compaction, sub-agent logs. Before issue 23 four
of the five session logs were refused (``tool result … answers no tool call``)
and none survived being read half-written first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED

from stratamem import Config, Memory
from stratamem.ingest import read_file
from stratamem.ingest.tree import find_files

DATA = SHARED / "data" / "transcripts"
CONFIG = Config().replace(pyramid={"enabled": False})
S258 = "258c7280-ae70-4798-800f-63464d01a85d"
S846 = "8463c716-a2ea-4c14-9efa-87158ebd9f20"
# turns, tool pairs and the sessions each file makes (sub-agents are their own sessions)
EXPECTED = {
    f"claude_code/{S258}.jsonl": (344, 186, {S258}),
    f"claude_code/{S258}/subagents/agent-a881341.jsonl": (6, 2, {f"{S258}.agent-a881341"}),
    f"claude_code/{S258}/subagents/agent-acompact-fffbd0.jsonl": (2, 0, {f"{S258}.agent-acompact-fffbd0"}),
    f"claude_code/{S846}.jsonl": (323, 177, {S846}),
    f"claude_code/{S846}/subagents/agent-a7be2f0.jsonl": (33, 19, {f"{S846}.agent-a7be2f0"}),
    f"claude_code/{S846}/subagents/agent-acompact-f46190.jsonl": (2, 0, {f"{S846}.agent-acompact-f46190"}),
    "claude_code/short.jsonl": (5, 2, {"55604662-cf2a-4331-851a-ec234028f8ca"}),
    "claude_code/subagent.jsonl": (31, 16, {"491e126e-1e71-469c-ade2-fcc8af567c74"}),
    "claude_code/tool_heavy.jsonl": (16, 6, {"d6e0bada-1959-4eec-a9d2-0bfade768d8f"}),
}


def _memory(path: Path) -> Memory:
    return Memory(path, config=CONFIG, embedder=None)


def _snapshot(mem: Memory) -> list[dict[str, Any]]:
    out, at = [], {}
    for stored in sorted(mem.turns(), key=lambda s: (s.session, s.seq)):
        at[stored.session] = at.get(stored.session, 0) + 1
        out.append({"session": stored.session, "position": at[stored.session], **stored.turn.to_dict()})
    return out


def _pairs(mem: Memory) -> int:
    calls: dict[str, set[str]] = {}
    pairs = 0
    for st in sorted(mem.turns(), key=lambda s: (s.session, s.seq)):
        seen = calls.setdefault(st.session, set())
        seen.update(st.turn.tool_use_ids)
        for tid in st.turn.tool_result_ids:
            assert tid in seen, f"{st.session}: result {tid} before its call"
            pairs += 1
    return pairs


def test_the_shared_folder_holds_the_files_these_tests_describe() -> None:
    found = {str(p.relative_to(DATA)) for p in find_files(DATA)}
    assert found == set(EXPECTED)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_a_real_log_is_stored_whole_with_every_tool_call_paired(tmp_path: Path, rel: str) -> None:
    turns, pairs, sessions = EXPECTED[rel]
    with _memory(tmp_path / "m.db") as mem:
        report = mem.ingest(read_file(DATA / rel))
        assert report.total_stored == turns
        assert {st.session for st in mem.turns()} == sessions
        assert _pairs(mem) == pairs
        assert not any(st.turn.metadata.get("orphan_tool_results") for st in mem.turns())


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_a_real_log_read_half_written_then_whole_equals_one_read(tmp_path: Path, rel: str) -> None:
    src = DATA / rel
    data = src.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    # The benchmark's cut (half of the lines) and four more spread over the file.
    cuts = sorted({ends[len(ends) // 2 - 1], *(ends[len(ends) * k // 5 - 1] for k in range(1, 5))})
    with _memory(tmp_path / "once.db") as once:
        once.ingest(read_file(src))
        whole = _snapshot(once)
    for n, cut in enumerate(cuts):
        live = tmp_path / f"c{n}" / rel
        live.parent.mkdir(parents=True)
        live.write_bytes(data[:cut])  # just written: a reply at its end may still be streaming
        with _memory(tmp_path / f"grown{n}.db") as grown:
            first = grown.ingest(read_file(live))
            second = grown.ingest(read_file(src))
            assert first.total_stored + second.total_stored == len(whole)
            assert (second.continued, second.branched) == (0, {})
            assert _snapshot(grown) == whole, f"cut at byte {cut}"


def test_the_whole_folder_ingests_with_no_error_and_again_stores_nothing(tmp_path: Path) -> None:
    files = find_files(DATA)
    with _memory(tmp_path / "m.db") as mem:
        stored = sum(mem.ingest(read_file(f)).total_stored for f in files)
        assert stored == sum(t for t, _, _ in EXPECTED.values())
        again = sum(mem.ingest(read_file(f)).total_stored for f in files)
    assert again == 0
    assert all(os.access(f, os.R_OK) for f in files)
