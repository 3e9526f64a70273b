"""``stratamem forget``, ``search`` and ``namespaces``: confirmation, --yes, JSON output, one-line errors."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from stratamem import Memory
from stratamem.cli import main

STRATAMEM = str(Path(sys.executable).with_name("stratamem"))


def run(db: Path, *args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--db", str(db), "--embedding", "none", *args], input=input)
    return result.exit_code, result.output


def _fill(db: Path) -> list[int]:
    with Memory(db, namespace="alice") as mem:
        ids = [
            t.id
            for t in mem.add(
                [
                    {"role": "user", "content": "The ferry leaves at 7:40 from pier 3."},
                    {"role": "assistant", "content": "Noted, pier 3."},
                ],
                session="trip",
            )
        ]
        mem.add({"role": "user", "content": "Dinner at the river restaurant."}, session="food")
        mem.for_namespace("bob").add({"role": "user", "content": "hello"})
    return ids


def test_forget_without_a_terminal_needs_yes_and_then_forgets(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    ids = _fill(db)
    code, out = run(db, "-n", "alice", "forget", "--turn", str(ids[0]))
    assert code == 2 and "stdin is not a terminal, so forget cannot ask for confirmation: pass --yes" in out
    code, out = run(db, "-n", "alice", "forget", "--turn", str(ids[0]), "--yes", "--json")
    assert code == 0
    report = json.loads(out)
    assert (report["turns"], report["namespace"], report["wal_truncated"]) == (1, "alice", True)
    code, out = run(db, "-n", "alice", "forget", "--session", "food", "-y")
    assert code == 0 and out.startswith("forgot 1 turn(s) of namespace 'alice'")
    with Memory(db, namespace="alice") as mem:
        assert [t.text for t in mem.turns()] == ["Noted, pier 3."]


def test_forget_refuses_no_target_several_targets_and_unknown_ones_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _fill(db)
    code, out = run(db, "-n", "alice", "forget", "-y")
    assert code == 2 and "give exactly one of --turn, --session, --all (got none)" in out
    code, out = run(db, "-n", "alice", "forget", "--all", "--session", "trip", "-y")
    assert code == 2 and "(got --session, --all)" in out
    code, out = run(db, "-n", "alice", "forget", "--turn", "999", "-y")
    assert code == 1 and out == ("Error: NotFoundError: no turn 999 in namespace 'alice'; nothing was forgotten\n")


def test_forget_asks_on_a_terminal_and_only_a_yes_forgets(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _fill(db)
    env = {**os.environ, "STRATAMEM_EMBEDDING": "none"}
    for answer, remaining in (("n", 3), ("y", 0)):
        master, slave = pty.openpty()
        proc = subprocess.Popen(
            [STRATAMEM, "--db", str(db), "-n", "alice", "forget", "--all"],
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        os.close(slave)
        os.write(master, f"{answer}\n".encode())
        out, err = proc.communicate(timeout=60)
        os.close(master)
        assert "Forget every session of namespace 'alice' and everything derived from it?" in out
        assert proc.returncode == (1 if answer == "n" else 0), err
        with Memory(db, namespace="alice") as mem:
            assert mem.status().turns == remaining


def test_search_and_namespaces_print_tables_and_json(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    ids = _fill(db)
    code, out = run(db, "-n", "alice", "search", "when does the ferry leave", "-k", "2", "--json")
    assert code == 0
    hits = json.loads(out)
    assert [h["id"] for h in hits][0] == f"turn:{ids[0]}" and hits[0]["score"] == 1.0
    code, out = run(db, "-n", "alice", "search", "ferry", "--session", "food")
    assert code == 0 and out == ""
    code, out = run(db, "-n", "alice", "search", "ferry", "--session", "nope")
    assert code == 1 and out == "Error: NotFoundError: unknown session 'nope' in namespace 'alice'\n"
    code, out = run(db, "namespaces", "--json")
    assert code == 0
    assert [(n["namespace"], n["sessions"], n["turns"]) for n in json.loads(out)] == [("alice", 2, 3), ("bob", 1, 1)]
    code, out = run(db, "namespaces")
    assert code == 0 and out.splitlines()[0].split()[:5] == ["alice", "2", "sessions", "3", "turns"]
