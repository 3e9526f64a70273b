"""Bad input gets a specific error from the tree, and a rejected batch stores nothing.

Each row: what the caller does, the error class, and a fragment of its message.
After every row the store holds exactly the turns it held before.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from stratamem import (
    BudgetError,
    DecodeError,
    InvalidTurnError,
    Memory,
    MigrationError,
    NotFoundError,
    StratamemError,
    ValidationError,
)
from stratamem.ingest import read_file

GOOD = {"role": "user", "content": "fine"}


def _export_text(tmp_path: Path) -> str:
    src = Memory(tmp_path / "src.db", namespace="src")
    src.add([GOOD, {"role": "assistant", "content": "ok"}], session="s")
    buf = io.StringIO()
    src.export(buf)
    src.close()
    return buf.getvalue()


def _tool_call(call_id: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "ls", "arguments": "{}"}}]}


CASES: list[tuple[str, Callable[[Memory, Path], object], type[StratamemError], str]] = [
    ("unknown role", lambda m, p: m.add([GOOD, {"role": "wizard", "content": "x"}]),
     InvalidTurnError, "unknown role 'wizard'"),
    ("missing content", lambda m, p: m.add([GOOD, {"role": "user"}]), InvalidTurnError, "missing 'content'"),
    ("non-string content", lambda m, p: m.add([GOOD, {"role": "user", "content": 3.5}]),
     InvalidTurnError, "content must be a string or a list"),
    ("malformed block", lambda m, p: m.add([GOOD, {"role": "user", "content": [{"type": "text", "txt": "x"}]}]),
     InvalidTurnError, "unexpected keys in text block"),
    ("block that is not an object", lambda m, p: m.add([GOOD, {"role": "user", "content": ["x"]}]),
     InvalidTurnError, "a content block must be an object"),
    ("openai tool call with broken JSON", lambda m, p: m.add([GOOD, {"role": "assistant", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{oops"}}]}]),
     InvalidTurnError, "tool call arguments are not valid JSON"),
    ("tool result without its tool call (openai)", lambda m, p: m.add(
        [GOOD, {"role": "tool", "tool_call_id": "nope", "content": "r"}]),
     InvalidTurnError, "tool result 'nope' answers no tool call"),
    ("tool result without its tool call (anthropic)", lambda m, p: m.add([GOOD, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "ghost", "content": "r"}]}]),
     InvalidTurnError, "tool result 'ghost' answers no tool call"),
    ("lone surrogate", lambda m, p: m.add([GOOD, {"role": "user", "content": "bad \ud83d text"}]),
     InvalidTurnError, "lone surrogate"),
    ("NUL byte", lambda m, p: m.add([GOOD, {"role": "user", "content": "a\x00b"}]), InvalidTurnError, "NUL"),
    ("10 MB message", lambda m, p: m.add([GOOD, {"role": "user", "content": "x" * 10_000_000}]),
     InvalidTurnError, "the limit is 4,000,000"),
    ("zero budget", lambda m, p: m.context(budget=0), BudgetError, "budget must be positive"),
    ("negative budget", lambda m, p: m.context(budget=-5), BudgetError, "budget must be positive"),
    ("non-integer budget", lambda m, p: m.context(budget=10.5), BudgetError, "positive integer"),
    ("unknown namespace", lambda m, p: m.for_namespace("nobody").context(budget=100),
     NotFoundError, "unknown namespace 'nobody'"),
    ("unknown session", lambda m, p: m.context(budget=100, session="nope"),
     NotFoundError, "unknown session 'nope'"),
    ("bad session name", lambda m, p: m.add(GOOD, session="../etc"), ValidationError, "invalid session name"),
    ("bad namespace name", lambda m, p: m.for_namespace(""), ValidationError, "invalid namespace name"),
    ("unknown output format", lambda m, p: m.context(budget=100, format="xml"), ValidationError, "unknown format"),
    ("truncated import file", lambda m, p: m.for_namespace("imp").import_(
        io.StringIO("".join(_export_text(p).splitlines(keepends=True)[:-1]))),
     DecodeError, "no end record: the file is truncated"),
    ("corrupt import file", lambda m, p: m.for_namespace("imp").import_(
        io.StringIO(_export_text(p).replace('"ok"', '"OK"'))),
     DecodeError, "checksum mismatch"),
    ("import line that is not JSON", lambda m, p: m.for_namespace("imp").import_(
        io.StringIO(_export_text(p).replace('{"type":"turn"', '{"type:"turn"', 1))),
     DecodeError, "line 3: invalid JSON"),
    ("not an export at all", lambda m, p: m.for_namespace("imp").import_(io.StringIO('{"role":"user"}\n')),
     DecodeError, "not a stratamem export"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_a_specific_error_and_stores_nothing(case, memory: Memory, tmp_path: Path) -> None:
    _, action, error, fragment = case
    memory.add([GOOD], session="s")
    conn = sqlite3.connect(memory.store.path)  # type: ignore[attr-defined]
    before = conn.execute("SELECT COUNT(*) FROM turns").fetchone()[0]
    with pytest.raises(error) as info:
        action(memory, tmp_path)
    assert fragment in str(info.value)
    assert conn.execute("SELECT COUNT(*) FROM turns").fetchone()[0] == before
    conn.close()


def test_invalid_utf8_in_an_ingest_file_is_a_decode_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"role": "user", "content": "caf\xe9"}\n')
    with pytest.raises(DecodeError, match="not valid UTF-8"):
        read_file(path)


def test_a_truncated_json_file_is_a_decode_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([GOOD, GOOD], indent=1)[:-10])
    with pytest.raises(DecodeError, match=r"line \d+: .*invalid JSON"):
        read_file(path)


def test_a_database_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    Memory(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO _stratamem_migrations VALUES ('m900_future', 'x')")
    conn.commit()
    conn.close()
    with pytest.raises(MigrationError, match="newer than this stratamem"):
        Memory(path)


def test_a_file_that_is_not_a_database_is_a_backend_error(tmp_path: Path) -> None:
    from stratamem import BackendError

    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(BackendError, match="file is not a database"):
        Memory(path)


def test_an_import_into_existing_sessions_is_refused(memory: Memory, tmp_path: Path) -> None:
    text = _export_text(tmp_path)
    target = memory.for_namespace("copy")
    assert target.import_(io.StringIO(text)) == (1, 2)
    with pytest.raises(ValidationError, match="sessions already exist"):
        target.import_(io.StringIO(text))
    assert target.status().turns == 2
