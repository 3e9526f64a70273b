"""Idempotent ingest and import: a message already stored is skipped and counted, on both backends."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem import InvalidTurnError, Memory
from stratamem.cli import main
from stratamem.ingest import IngestSession, read_file
from stratamem.records import ToolResultBlock, Turn
from stratamem.store import open_store

INGEST = Path(__file__).parent / "fixtures" / "ingest"
BACKENDS = ["sqlite", "postgres"]


@pytest.fixture(params=BACKENDS)
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A Memory on a fresh SQLite file or a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        m = Memory(tmp_path / "m.db", namespace="dev")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        m = Memory(open_store(schema_url(dsn, fresh_schema(dsn, "ing"))), namespace="dev")
    yield m
    m.close()


def _keys(m: Memory) -> int:
    return len(
        m.store.ingest_keys.known(
            "dev", "5f0c2a9e-1b7d-4c1e-9a53-2d8e6f4b7a10", read_file(INGEST / "claude_code.jsonl")[1].keys
        )
    )


def test_ingesting_a_file_twice_stores_it_once(mem: Memory) -> None:
    first = mem.ingest(read_file(INGEST / "claude_code.jsonl"))
    assert first.stored == {
        "5f0c2a9e-1b7d-4c1e-9a53-2d8e6f4b7a10.sidechain-s-1": 3,
        "5f0c2a9e-1b7d-4c1e-9a53-2d8e6f4b7a10": 5,
    }
    again = mem.ingest(read_file(INGEST / "claude_code.jsonl"))
    assert (again.total_stored, again.total_skipped) == (0, 8)
    assert again.turn_ids == ()
    assert mem.status().turns == 8
    assert _keys(mem) == 5


def test_a_grown_log_adds_only_its_new_messages(mem: Memory, tmp_path: Path) -> None:
    lines = (INGEST / "claude_code.jsonl").read_text().splitlines()
    part = tmp_path / "part.jsonl"
    part.write_text("\n".join(lines[:6]) + "\n")  # up to the tool call
    assert mem.ingest(read_file(part)).total_stored == 2
    report = mem.ingest(read_file(INGEST / "claude_code.jsonl"))
    assert (report.total_stored, report.total_skipped) == (6, 2)
    assert [t.role for t in mem.turns("5f0c2a9e-1b7d-4c1e-9a53-2d8e6f4b7a10")] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]


def test_dedupe_off_stores_again_and_keeps_one_key_per_record(mem: Memory) -> None:
    mem.ingest(read_file(INGEST / "codex.jsonl"))
    forced = mem.ingest(read_file(INGEST / "codex.jsonl"), dedupe=False)
    assert (forced.total_stored, forced.total_skipped) == (5, 0)
    assert mem.status().turns == 10
    # Keys were recorded once; a deduped ingest still skips everything.
    assert mem.ingest(read_file(INGEST / "codex.jsonl")).total_skipped == 5


def test_a_record_repeated_within_one_file_is_stored_once(mem: Memory, tmp_path: Path) -> None:
    lines = (INGEST / "turns.jsonl").read_text().splitlines()
    path = tmp_path / "dup.jsonl"
    path.write_text("\n".join(lines[:3] + [lines[1]]) + "\n")  # t-2 twice
    report = mem.ingest(read_file(path))
    assert (report.stored, report.skipped) == ({"planning": 3}, {"planning": 1})


def test_a_refused_ingest_stores_no_turns_and_no_keys(mem: Memory) -> None:
    good = read_file(INGEST / "turns.jsonl")
    unpaired = IngestSession("planning", [Turn(role="tool", content=(ToolResultBlock("nope"),))], keys=("id:x:1",))
    with pytest.raises(InvalidTurnError, match="tool result 'nope' answers no tool call"):
        mem.ingest([*good, unpaired])
    assert mem.status().turns == 0
    assert mem.store.ingest_keys.known("dev", "planning", ["id:turns:t-1", "id:x:1"]) == set()
    assert mem.ingest(good).total_stored == 4


def test_importing_an_export_twice_adds_nothing(mem: Memory) -> None:
    mem.ingest(read_file(INGEST / "turns.jsonl"))
    out = io.StringIO()
    mem.export(out)
    copy = mem.for_namespace("copy")
    assert copy.import_(io.StringIO(out.getvalue())) == (2, 4, 0)
    assert copy.import_(io.StringIO(out.getvalue())) == (2, 0, 4)
    assert copy.status().turns == 4


_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=12)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_text, min_size=1, max_size=12), cut=st.integers(min_value=0, max_value=12))
def test_ingesting_a_prefix_then_the_whole_equals_ingesting_the_whole(
    tmp_path_factory: Any, texts: list[str], cut: int
) -> None:
    d = tmp_path_factory.mktemp("prop")
    records = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": t, "timestamp": f"2025-01-01T00:00:{i:02d}Z"}
        for i, t in enumerate(texts)
    ]
    whole = d / "whole.jsonl"
    prefix = d / "prefix.jsonl"
    whole.write_text("".join(json.dumps(r) + "\n" for r in records))
    prefix.write_text("".join(json.dumps(r) + "\n" for r in records[:cut]) or "\n")
    with Memory(d / "a.db", namespace="p") as a, Memory(d / "b.db", namespace="p") as b:
        if cut:
            a.ingest(read_file(prefix))
        a.ingest(read_file(whole))
        a.ingest(read_file(whole))
        b.ingest(read_file(whole))
        assert [t.turn for t in a.turns()] == [t.turn for t in b.turns()]
        assert len(a.turns()) == len(records)


def _run(db: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--db", str(db), *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_cli_ingest_twice_reports_stored_then_skipped(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    code, out = _run(db, "ingest", str(INGEST / "claude_code.jsonl"))
    assert code == 0
    assert out.splitlines() == [
        "ingested 8 turns in 2 session(s) into 1 namespace(s): default; 0 already stored (skipped)",
        # The conversation before its sub-agent run.
        "  default: session(s) 5f0c2a9e-1b7d-4c1e-9a53-2d8e6f4b7a10, "
        "5f0c2a9e-1b7d-4c1e-9a53-2d8e6f4b7a10.sidechain-s-1: 8 stored",
        "  records that are not messages, skipped: file-history-snapshot 1, meta 1, summary 1, system:local_command 1",
    ]
    code, out = _run(db, "ingest", str(INGEST / "claude_code.jsonl"))
    assert out.splitlines()[0] == (
        "ingested 0 turns in 2 session(s) into 1 namespace(s): default; 8 already stored (skipped)"
    )
    code, out = _run(db, "ingest", "--dedupe", "off", str(INGEST / "claude_code.jsonl"))
    assert out.splitlines()[0].startswith("ingested 8 turns in 2 session(s)")
    code, out = _run(db, "status", "--json")
    assert json.loads(out)["turns"] == 16


def _locomo(tmp_path: Path, samples: int) -> Path:
    data = [
        {
            "sample_id": f"conv-{i}",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bo",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": f"I adopted a cat named Pixel {i}."},
                    {"speaker": "Bo", "dia_id": "D1:2", "text": "Congratulations!"},
                ],
            },
        }
        for i in range(samples)
    ]
    path = tmp_path / f"locomo{samples}.json"
    path.write_text(json.dumps(data))
    return path


def test_cli_locomo_honours_the_namespace_option(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    code, out = _run(db, "-n", "bench", "ingest", "--format", "locomo", str(_locomo(tmp_path, 1)))
    assert code == 0 and out.splitlines()[0] == (
        "ingested 2 turns in 1 session(s) into 1 namespace(s): bench; 0 already stored (skipped)"
    )
    code, out = _run(db, "-n", "bench", "context", "what is the cat called?")
    assert code == 0 and "Pixel 0" in out
    code, out = _run(db, "-n", "multi", "ingest", str(_locomo(tmp_path, 2)))
    assert out.splitlines()[0] == (
        "ingested 4 turns in 2 session(s) into 2 namespace(s): multi-conv-0, multi-conv-1; 0 already stored (skipped)"
    )
    assert out.splitlines()[-1] == "  read it with: stratamem -n multi-conv-0 context --explain"
    code, out = _run(db, "ingest", str(_locomo(tmp_path, 1)))
    assert "into 1 namespace(s): locomo-conv-0;" in out.splitlines()[0]
    code, out = _run(db, "ingest", str(_locomo(tmp_path, 1)))
    assert out.splitlines()[0].endswith("2 already stored (skipped)")


def test_cli_import_twice_skips_what_is_there(tmp_path: Path) -> None:
    db = tmp_path / "i.db"
    _run(db, "ingest", str(INGEST / "turns.jsonl"))
    export = tmp_path / "export.jsonl"
    _run(db, "export", str(export))
    code, out = _run(db, "-n", "copy", "import", str(export))
    assert out.strip() == "imported 4 turns in 2 session(s) into 'copy'; 0 already stored (skipped)"
    code, out = _run(db, "-n", "copy", "import", str(export))
    assert out.strip() == "imported 0 turns in 2 session(s) into 'copy'; 4 already stored (skipped)"


def test_imported_system_prompts_are_instructions_on_both_backends(mem: Memory) -> None:
    mem.ingest(read_file(INGEST / "codex.jsonl"))
    mem.ingest(read_file(INGEST / "turns.jsonl"))
    ctx = mem.context(session="planning", budget=3000, format="openai")
    head = ctx.messages[0]["content"]
    # The session's own prompt only: the Codex session's instructions belong to that session.
    assert head == "## System prompt\nYou are the project's planning assistant."
    assert "Always run the linter before committing." not in json.dumps(ctx.messages)
    assert all(m["role"] != "system" for m in ctx.messages[1:])
    assert [it.reason for it in ctx.manifest.items if it.kind == "instructions"] == ["system_prompt"]
    wide = mem.context(session="planning", budget=3000, format="openai", system_prompts="namespace")
    assert wide.messages[0]["content"].startswith(
        "## System prompt\nYou are the project's planning assistant.\n\n"
        "## System prompt\nAlways run the linter before committing."
    )


def test_a_forgotten_message_can_be_ingested_again(mem: Memory) -> None:
    sessions = read_file(INGEST / "claude_code.jsonl")
    mem.ingest(sessions)
    main_session = "5f0c2a9e-1b7d-4c1e-9a53-2d8e6f4b7a10"
    newest = mem.turns(main_session, limit=1, newest_first=True)[0]
    mem.forget(turns=[newest.id])
    assert mem.status().turns == 7
    assert _keys(mem) == 4  # the forgotten turn's key went with it
    again = mem.ingest(read_file(INGEST / "claude_code.jsonl"))
    assert (again.total_stored, again.total_skipped) == (1, 7)
    assert mem.turns(main_session, limit=1, newest_first=True)[0].text == newest.text
    mem.forget(all_namespace=True)
    assert (mem.ingest(read_file(INGEST / "claude_code.jsonl")).total_stored) == 8
