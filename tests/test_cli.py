"""The stratamem command: thin over the library, one clear line on error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from stratamem.cli import main

OPENAI_FILE = [
    {"role": "user", "content": "What is in src?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "src"}'}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "app.py"},
    {"role": "assistant", "content": "Just app.py."},
]


def run(db: Path, *args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--db", str(db), *args], input=input, catch_exceptions=False)
    return result.exit_code, result.output


def test_ingest_context_status_export_import(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    src = tmp_path / "chat.json"
    src.write_text(json.dumps(OPENAI_FILE))
    code, out = run(db, "ingest", str(src), "--session", "work")
    assert code == 0 and "ingested 4 turns in 1 session(s)" in out
    code, out = run(db, "add", "--content", "Thanks!", "--session", "work")
    assert code == 0 and "(session 'work' #5," in out
    code, out = run(db, "context", "--budget", "200", "--format", "openai", "--explain")
    assert code == 0
    assert '"tool_call_id": "c1"' in out and "# manifest:" in out and "recent_window" in out
    code, out = run(db, "status", "--json")
    assert json.loads(out)["turns"] == 5
    exported = tmp_path / "ns.jsonl"
    code, _ = run(db, "export", str(exported))
    assert code == 0
    code, out = run(db, "--namespace", "copy", "import", str(exported))
    assert code == 0 and "imported 5 turns in 1 session(s) into 'copy'" in out


def test_ingest_reads_locomo_with_session_dates(tmp_path: Path) -> None:
    sample = {
        "sample_id": "t1",
        "conversation": {
            "speaker_a": "Ana",
            "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ana", "dia_id": "D1:1", "text": "Hi Ben!"},
                {"speaker": "Ben", "dia_id": "D1:2", "text": "Look", "blip_caption": "a photo of a cat"},
            ],
            "session_2_date_time": "9:00 am on 9 May, 2023",
            "session_2": [{"speaker": "Ben", "dia_id": "D2:1", "text": "Morning."}],
        },
    }
    src = tmp_path / "locomo.json"
    src.write_text(json.dumps([sample]))
    db = tmp_path / "l.db"
    code, out = run(db, "ingest", str(src))
    assert code == 0 and "into 1 namespace(s): locomo-t1" in out
    code, out = run(db, "-n", "locomo-t1", "context", "--session", "session_1", "--budget", "100")
    assert out.splitlines() == [
        "[2023-05-08 13:56] Ana: Hi Ben!",
        "[2023-05-08 13:56] Ben: Look [shares a photo of a cat]",
    ]


def test_errors_are_one_line_and_exit_non_zero(tmp_path: Path) -> None:
    db = tmp_path / "e.db"
    proc = subprocess.run(
        [sys.executable, "-m", "stratamem", "--db", str(db), "context", "--budget", "-3"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == "Error: BudgetError: budget must be positive, got -3"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "wizard", "content": "x"}\n')
    proc = subprocess.run(
        [sys.executable, "-m", "stratamem", "--db", str(db), "ingest", str(bad)], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "Error: DecodeError: bad.jsonl:1: role: unknown role 'wizard' "
        "(expected one of ['system', 'user', 'assistant', 'tool'])"
    )


def test_every_command_has_help() -> None:
    runner = CliRunner()
    for name, cmd in main.commands.items():
        assert cmd.help, f"command {name} has no help text"
        result = runner.invoke(main, [name, "--help"])
        assert result.exit_code == 0, name


def test_environment_variables_select_db_and_namespace(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    result = CliRunner().invoke(
        main, ["add", "-c", "hello"], env={"STRATAMEM_DB": str(db), "STRATAMEM_NAMESPACE": "envns"}
    )
    assert result.exit_code == 0
    code, out = run(db, "-n", "envns", "status", "--json")
    assert json.loads(out)["turns"] == 1


def _open_files(path: Path) -> list[str]:
    """Files this process holds open under ``path``'s folder (Linux /proc)."""
    fd_dir = Path("/proc/self/fd")
    out = []
    for fd in fd_dir.iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith(str(path.parent)):
            out.append(target)
    return sorted(out)


def test_an_unwritable_export_path_is_one_line_and_the_store_is_closed(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    assert run(db, "add", "--content", "hello")[0] == 0
    result = CliRunner().invoke(main, ["--db", str(db), "export", str(tmp_path / "missing" / "x.jsonl")])
    assert result.exit_code == 1
    assert result.output == f"Error: cannot write {tmp_path / 'missing' / 'x.jsonl'}: No such file or directory\n"
    assert result.exc_info is not None and result.exc_info[0] is SystemExit  # no traceback, a clean exit
    assert _open_files(db) == []


def test_an_unreadable_import_path_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    folder = tmp_path / "a-folder.jsonl"
    folder.mkdir()
    result = CliRunner().invoke(main, ["--db", str(db), "import", str(folder)])
    assert result.exit_code == 2 and "is a directory" in result.output  # click's own check
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\xff\xfe not utf-8\n")
    result = CliRunner().invoke(main, ["--db", str(db), "import", str(bad)])
    assert result.exit_code == 1
    assert result.output.startswith("Error: DecodeError: not valid UTF-8")
    assert _open_files(db) == []


def test_a_failing_command_closes_its_store(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    assert run(db, "add", "--content", "hello")[0] == 0
    result = CliRunner().invoke(main, ["--db", str(db), "context", "--budget", "0"])
    assert result.exit_code == 1 and result.output == "Error: BudgetError: budget must be positive, got 0\n"
    assert _open_files(db) == []


def test_every_context_is_recorded_with_its_manifest(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    for text in ("We chose SQLite.", "Then PostgreSQL for many writers."):
        assert run(db, "--embedding", "none", "add", "-c", text)[0] == 0
    code, _ = run(db, "--embedding", "none", "context", "database choice", "--budget", "300")
    assert code == 0
    code, _ = run(db, "--embedding", "none", "context", "--budget", "50")
    code, out = run(db, "--embedding", "none", "manifests")
    lines = out.splitlines()
    assert [line.split()[0] for line in lines] == ["#2", "#1"]
    assert "/50 " in lines[0] and "/300 " in lines[1]
    code, out = run(db, "--embedding", "none", "manifests", "--id", "1")
    shown = json.loads(out)
    assert shown["query"] == "database choice" and shown["budget_tokens"] == 300 and shown["session"] == "default"
    code, out = run(db, "--embedding", "none", "manifests", "--id", "99")
    assert code == 1 and "no manifest 99" in out
