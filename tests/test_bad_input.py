"""Bad input gets a specific error from the tree, and a rejected batch stores nothing.

Each row: what the caller does, the error class, and a fragment of its message.
After every row the store holds exactly the turns it held before.
"""

from __future__ import annotations

import hashlib
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
    src = Memory(tmp_path / "src.db", namespace="src", embedder=None)
    src.add([GOOD, {"role": "assistant", "content": "ok"}], session="s")
    buf = io.StringIO()
    src.export(buf)
    src.close()
    return buf.getvalue()


def _import(m: Memory, *records: str) -> object:
    """Import a hand-made export: a valid header, then ``records`` (one JSON text each)."""
    header = json.dumps({"format": "stratamem-export", "version": 1, "namespace": "x", "tokenizer": "o200k_base"})
    return m.for_namespace("imp").import_(io.StringIO("\n".join((header, *records)) + "\n"))


_SESSION = '{"type":"session","name":"s","created_at":"2020-01-01T00:00:00Z"}'
_EMPTY_END = '{"type":"end","sessions":1,"turns":0,"sha256":"' + hashlib.sha256().hexdigest() + '"}'


def _ingest(p: Path, text: str, suffix: str = ".jsonl") -> object:
    path = p / f"in{suffix}"
    path.write_text(text)
    return read_file(path)


def _tool_call(call_id: str) -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
    }


CASES: list[tuple[str, Callable[[Memory, Path], object], type[StratamemError], str]] = [
    (
        "unknown role",
        lambda m, p: m.add([GOOD, {"role": "wizard", "content": "x"}]),
        InvalidTurnError,
        "unknown role 'wizard'",
    ),
    ("missing content", lambda m, p: m.add([GOOD, {"role": "user"}]), InvalidTurnError, "missing 'content'"),
    (
        "non-string content",
        lambda m, p: m.add([GOOD, {"role": "user", "content": 3.5}]),
        InvalidTurnError,
        "content must be a string or a list",
    ),
    (
        "malformed block",
        lambda m, p: m.add([GOOD, {"role": "user", "content": [{"type": "text", "txt": "x"}]}]),
        InvalidTurnError,
        "unexpected keys in text block",
    ),
    (
        "block that is not an object",
        lambda m, p: m.add([GOOD, {"role": "user", "content": ["x"]}]),
        InvalidTurnError,
        "a content block must be an object",
    ),
    (
        "openai tool call with broken JSON",
        lambda m, p: m.add(
            [
                GOOD,
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{oops"}}],
                },
            ]
        ),
        InvalidTurnError,
        "tool call arguments are not valid JSON",
    ),
    (
        "tool result without its tool call (openai)",
        lambda m, p: m.add([GOOD, {"role": "tool", "tool_call_id": "nope", "content": "r"}]),
        InvalidTurnError,
        "tool result 'nope' answers no tool call",
    ),
    (
        "tool result without its tool call (anthropic)",
        lambda m, p: m.add(
            [GOOD, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "ghost", "content": "r"}]}]
        ),
        InvalidTurnError,
        "tool result 'ghost' answers no tool call",
    ),
    (
        "lone surrogate",
        lambda m, p: m.add([GOOD, {"role": "user", "content": "bad \ud83d text"}]),
        InvalidTurnError,
        "lone surrogate",
    ),
    ("NUL byte", lambda m, p: m.add([GOOD, {"role": "user", "content": "a\x00b"}]), InvalidTurnError, "NUL"),
    (
        "10 MB message",
        lambda m, p: m.add([GOOD, {"role": "user", "content": "x" * 10_000_000}]),
        InvalidTurnError,
        "the limit is 4,000,000",
    ),
    ("zero budget", lambda m, p: m.context(budget=0), BudgetError, "budget must be positive"),
    ("negative budget", lambda m, p: m.context(budget=-5), BudgetError, "budget must be positive"),
    ("non-integer budget", lambda m, p: m.context(budget=10.5), BudgetError, "positive integer"),
    (
        "unknown namespace",
        lambda m, p: m.for_namespace("nobody").context(budget=100),
        NotFoundError,
        "unknown namespace 'nobody'",
    ),
    ("unknown session", lambda m, p: m.context(budget=100, session="nope"), NotFoundError, "unknown session 'nope'"),
    ("bad session name", lambda m, p: m.add(GOOD, session="../etc"), ValidationError, "invalid session name"),
    ("bad namespace name", lambda m, p: m.for_namespace(""), ValidationError, "invalid namespace name"),
    ("unknown output format", lambda m, p: m.context(budget=100, format="xml"), ValidationError, "unknown format"),
    (
        "truncated import file",
        lambda m, p: m.for_namespace("imp").import_(
            io.StringIO("".join(_export_text(p).splitlines(keepends=True)[:-1]))
        ),
        DecodeError,
        "no end record: the file is truncated",
    ),
    (
        "corrupt import file",
        lambda m, p: m.for_namespace("imp").import_(io.StringIO(_export_text(p).replace('"ok"', '"OK"'))),
        DecodeError,
        "checksum mismatch",
    ),
    (
        "import line that is not JSON",
        lambda m, p: m.for_namespace("imp").import_(
            io.StringIO(_export_text(p).replace('{"type":"turn"', '{"type:"turn"', 1))
        ),
        DecodeError,
        "line 3: invalid JSON",
    ),
    (
        "not an export at all",
        lambda m, p: m.for_namespace("imp").import_(io.StringIO('{"role":"user"}\n')),
        DecodeError,
        "not a stratamem export",
    ),
    # Every field of an import record is type-checked (review #18).
    (
        "import turn naming an unhashable session",
        lambda m, p: _import(m, _SESSION, '{"type":"turn","session":[1]}'),
        DecodeError,
        "line 3: turn for unknown session [1]",
    ),
    (
        "import line nested too deeply",
        lambda m, p: _import(m, "[" * 100_000 + "]" * 100_000),
        DecodeError,
        "line 2: invalid JSON: nested more than 80 levels deep",
    ),
    (
        "import session with an object platform",
        lambda m, p: _import(m, _SESSION[:-1] + ',"platform":{"a":1}}', _EMPTY_END),
        DecodeError,
        "line 2: platform: expected a string",
    ),
    (
        "import session with a numeric name",
        lambda m, p: _import(m, '{"type":"session","name":7,"created_at":"2020-01-01T00:00:00Z"}'),
        DecodeError,
        "invalid session name 7",
    ),
    (
        "import turn with a boolean seq",
        lambda m, p: _import(
            m, _SESSION, '{"type":"turn","session":"s","seq":true,"turn":{"role":"user","content":"x"}}'
        ),
        DecodeError,
        "expected seq 1, got True",
    ),
    (
        "import turn holding NaN",
        lambda m, p: _import(
            m,
            _SESSION,
            '{"type":"turn","session":"s","seq":1,"turn":{"role":"user","content":"x","metadata":{"a":NaN}}}',
        ),
        DecodeError,
        "line 3: invalid JSON: NaN is not valid JSON",
    ),
    (
        "import end record with string counts",
        lambda m, p: _import(m, _SESSION, _EMPTY_END.replace('"turns":0', '"turns":"0"')),
        DecodeError,
        "end record needs integer",
    ),
    (
        "import header with a boolean version",
        lambda m, p: m.import_(
            io.StringIO('{"format":"stratamem-export","version":true,"namespace":"x","tokenizer":"o200k_base"}\n')
        ),
        DecodeError,
        "unsupported export version True",
    ),
    (
        "ingest JSON nested too deeply",
        lambda m, p: _ingest(p, "[" * 100_000 + "]" * 100_000, ".json"),
        DecodeError,
        "invalid JSON: nested more than 80 levels deep",
    ),
    (
        "ingest line nested too deeply",
        # Ended by a newline: a last line without one is a record still being written, not an error.
        lambda m, p: _ingest(p, '{"role":"user","content":"a"}\n' + "[" * 50_000 + "\n"),
        DecodeError,
        "in.jsonl:2: invalid JSON: nested more than 80 levels deep",
    ),
    (
        "ingest line with an object platform",
        lambda m, p: _ingest(p, '{"role":"user","content":"a","platform":{"x":1}}\n'),
        DecodeError,
        "in.jsonl:1: platform: expected a string",
    ),
    (
        "ingest line with a list session",
        lambda m, p: _ingest(p, '{"role":"user","content":"a","session":["s"]}\n'),
        DecodeError,
        "in.jsonl:1: invalid session name ['s']",
    ),
    (
        "NaN in a tool input",
        lambda m, p: m.add(
            [
                GOOD,
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {"x": float("nan")}}],
                },
            ],
            format="anthropic",
        ),
        InvalidTurnError,
        "messages[1].content[0].input: not JSON-serializable",
    ),
    (
        "timestamp past year 9999 in UTC",
        lambda m, p: m.add([GOOD, {"role": "user", "content": "x", "timestamp": "9999-12-31T23:59:59-05:00"}]),
        InvalidTurnError,
        "outside years 1-9999 in UTC",
    ),
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
    with pytest.raises(DecodeError, match=r"^bad\.json:\d+: invalid JSON"):
        read_file(path)


def test_a_database_from_a_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    Memory(path, embedder=None).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO _stratamem_migrations VALUES ('m900_future', 'x')")
    conn.commit()
    conn.close()
    with pytest.raises(MigrationError, match="newer than this stratamem"):
        Memory(path, embedder=None)


def test_a_file_that_is_not_a_database_is_a_backend_error(tmp_path: Path) -> None:
    from stratamem import BackendError

    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(BackendError, match="file is not a database"):
        Memory(path, embedder=None)


def test_an_import_twice_adds_nothing_the_second_time(memory: Memory, tmp_path: Path) -> None:
    text = _export_text(tmp_path)
    target = memory.for_namespace("copy")
    assert target.import_(io.StringIO(text)) == (1, 2, 0)
    assert target.import_(io.StringIO(text)) == (1, 0, 2)
    assert target.status().turns == 2
    with pytest.raises(ValidationError, match="sessions already exist"):
        target.import_(io.StringIO(text), dedupe=False)
    assert target.status().turns == 2


def test_an_import_into_a_session_holding_other_turns_is_refused(memory: Memory, tmp_path: Path) -> None:
    text = _export_text(tmp_path)
    target = memory.for_namespace("copy")
    session = json.loads(text.splitlines()[1])["name"]
    target.add({"role": "user", "content": "something else entirely"}, session=session)
    with pytest.raises(
        ValidationError, match=f"session '{session}' of namespace 'copy' differs from the export at seq 1"
    ):
        target.import_(io.StringIO(text))
    assert target.status().turns == 1


def test_a_store_object_counted_with_another_tokenizer_is_refused(tmp_path: Path) -> None:
    from stratamem import Config, ConfigError
    from stratamem.store import SQLiteStore

    store = SQLiteStore(tmp_path / "tk.db")  # records o200k_base
    assert store.tokenizer == "o200k_base"
    with pytest.raises(ConfigError, match="made with 'o200k_base', but this Memory counts with 'cl100k_base'"):
        Memory(store, config=Config(tokenizer="cl100k_base"), embedder=None)
    assert Memory(store, embedder=None).tokenizer.name == "o200k_base"
    store.close()


def test_a_postgres_store_counted_with_another_tokenizer_is_refused(pg_dsn: str) -> None:
    from pg import fresh_schema

    from stratamem import Config, ConfigError
    from stratamem.store.postgres.store import PostgresStore

    store = PostgresStore(pg_dsn, schema=fresh_schema(pg_dsn, "tk"), tokenizer="cl100k_base")
    try:
        assert store.tokenizer == "cl100k_base"
        with pytest.raises(ConfigError, match="made with 'cl100k_base', but this Memory counts with 'o200k_base'"):
            Memory(store, config=Config().replace(pyramid={"enabled": False}), embedder=None)
    finally:
        store.close()
