"""``stratamem ingest DIR`` and ``stratamem watch``: a whole tree of logs, and a store kept current as logs grow.

``watch`` runs as a real subprocess against a log written a few lines at a time,
and is stopped with a real SIGTERM or SIGINT.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from stratamem import Config, Memory
from stratamem.cli import main
from stratamem.ingest import read_file
from stratamem.ingest.tree import Watcher, find_files

T = Path(__file__).parent / "fixtures" / "transcripts"
PROJECTS = T / "claude_code" / "projects"
STATION = PROJECTS / "-home-dev-station" / "1c1c1c1c-2222-4333-8444-555566667777.jsonl"
CONFIG = Config().replace(pyramid={"enabled": False})


def _cli(db: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--db", str(db), "--embedding", "none", *args], catch_exceptions=False)
    return result.exit_code, result.output


def _store(db: Path) -> list[tuple[str, int, dict]]:
    with Memory(db, config=CONFIG, embedder=None) as mem:
        return [(st.session, st.seq, st.turn.to_dict()) for st in sorted(mem.turns(), key=lambda s: (s.session, s.seq))]


def test_find_files_lists_conversations_by_their_tools_naming_oldest_first(tmp_path: Path) -> None:
    tree = tmp_path / "home"
    shutil.copytree(T, tree / "logs")
    (tree / "logs" / "settings.json").write_text("{}")
    (tree / "logs" / ".git").mkdir()
    (tree / "logs" / ".git" / "x.jsonl").write_text("{}\n")
    names = {p.relative_to(tree / "logs").as_posix() for p in find_files(tree)}
    assert "settings.json" not in names and ".git/x.jsonl" not in names
    # A sub-agent's .meta.json is read with its log; Gemini's prompt log only without its session logs.
    assert not any(n.endswith(".meta.json") for n in names)
    assert not any(n.endswith("logs.json") for n in names)
    assert "aider/.aider.chat.history.md" in names and "chatgpt/pretty/conversations.json" in names
    # A JSON file named like no tool's is not read in a folder (read_file takes it given by name).
    assert "chatgpt/one-conversation.json" not in names
    assert len(names) == 24
    stamps = [p.stat().st_mtime_ns for p in find_files(tree)]
    assert stamps == sorted(stamps)


def test_ingest_a_folder_stores_every_log_once(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    code, out = _cli(db, "ingest", str(PROJECTS))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "ingested 36 turns in 7 session(s) into 1 namespace(s): default; 0 already stored (skipped)"
    assert lines[-1] == f"  5 file(s) read, 0 refused, of 5 under {PROJECTS}"
    code, out = _cli(db, "ingest", str(PROJECTS))
    assert out.splitlines()[0] == (
        "ingested 0 turns in 7 session(s) into 1 namespace(s): default; 36 already stored (skipped)"
    )


def test_ingest_a_folder_with_a_broken_log_stores_the_others_and_names_the_line(tmp_path: Path) -> None:
    tree = tmp_path / "projects"
    shutil.copytree(PROJECTS, tree)
    bad = tree / "-home-dev-station" / "5d5d5d5d-0000-4000-8000-000000000001.jsonl"
    lines = bad.read_text().split("\n")
    lines[2] = lines[2][:30]
    bad.write_text("\n".join(lines))
    result = CliRunner().invoke(
        main, ["--db", str(tmp_path / "m.db"), "--embedding", "none", "ingest", "--settle", "0", str(tree)]
    )
    assert result.exit_code == 1
    assert "refused -home-dev-station/5d5d5d5d-0000-4000-8000-000000000001.jsonl: DecodeError: " in result.output
    assert "5d5d5d5d-0000-4000-8000-000000000001.jsonl:3: invalid JSON" in result.output
    assert "  4 file(s) read, 1 refused, of 5 under" in result.output
    assert {s for s, _, _ in _store(tmp_path / "m.db")} == {
        "1c1c1c1c-2222-4333-8444-555566667777",
        "1c1c1c1c-2222-4333-8444-555566667777.agent-a5e1b2c",
        "7e7e7e7e-1111-4222-8333-abcdefabcdef",
        "7e7e7e7e-1111-4222-8333-abcdefabcdef.branch-u-b1",
        "9a9a9a9a-0000-4000-8000-000000000002",
    }


def _too_deep(folder: Path) -> Path:
    """Folders nested past PATH_MAX (made through directory descriptors): reading the deepest fails.

    Permissions cannot make a folder unreadable to root (the CI user); a path the kernel refuses can.
    """
    name, fd = "d" * 200, os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    path = folder
    try:
        while len(str(path)) <= 4200:
            os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd, path = inner, path / name
    finally:
        os.close(fd)
    return path


def test_ingest_a_folder_names_what_it_cannot_read_and_fails(tmp_path: Path) -> None:
    tree = tmp_path / "projects"
    shutil.copytree(PROJECTS, tree)
    deep = _too_deep(tree)
    unreadable: list[tuple[Path, str]] = []
    assert len(find_files(tree, unreadable)) == 5
    [(where, why)] = unreadable
    assert len(str(where)) > 4096 and str(deep).startswith(str(where)) and why == "OSError: File name too long"
    result = CliRunner().invoke(
        main, ["--db", str(tmp_path / "m.db"), "--embedding", "none", "ingest", "--settle", "0", str(tree)]
    )
    assert result.exit_code == 1  # a folder it could not read is not a clean ingest
    assert f"refused {where.relative_to(tree)}: cannot read: OSError: File name too long" in result.output
    assert "  5 file(s) read, 1 refused, of 5 under" in result.output
    watcher = Watcher(tree, settle=0)
    assert len(watcher.due()) == 5 and watcher.unreadable == {where: "OSError: File name too long"}


def test_a_watcher_reports_new_and_changed_files_and_quiet_ones_holding_a_reply(tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    log.write_text("{}\n")
    w = Watcher(tmp_path, settle=30)
    assert w.due() == [log]
    st = log.stat()
    w.done(log, st, held_back=True)
    assert w.due() == []
    # Quiet for the settle time: read again to store the reply it held back.
    assert w.due(now=st.st_mtime + 31) == [log]
    w.done(log, st, held_back=False)
    assert w.due(now=st.st_mtime + 31) == []
    with log.open("a") as f:
        f.write("{}\n")
    assert w.due() == [log]


def _watch(db: Path, folder: Path) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "stratamem", "--db", str(db), "--embedding", "none", "watch", str(folder)]
    cmd += ["--interval", "0.2", "--settle", "1.5"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())


def _wait_for(db: Path, turns: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if db.exists() and len(_store(db)) == turns:
            return
        time.sleep(0.2)
    raise AssertionError(f"the store did not reach {turns} turns: {len(_store(db)) if db.exists() else 0}")


def test_watch_follows_a_growing_log_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    folder = tmp_path / "projects" / "-home-dev-station"
    folder.mkdir(parents=True)
    live = folder / STATION.name
    data = STATION.read_bytes().split(b"\n")
    db = tmp_path / "w.db"
    proc = _watch(db, tmp_path / "projects")
    try:
        # The log is written in three bursts, the first one cut inside the reply msg_W1.
        for chunk in (data[:5], data[5:16], data[16:]):
            with live.open("ab") as f:
                f.write(b"\n".join(chunk) + (b"\n" if chunk is not data[16:] else b""))
            time.sleep(0.6)
        once = tmp_path / "once.db"
        with Memory(once, config=CONFIG, embedder=None) as mem:
            mem.ingest(read_file(STATION))
        _wait_for(db, len(_store(once)))
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert _store(db) == _store(once)
    assert out.splitlines()[0] == f"watching {tmp_path / 'projects'} every 0.2s (Ctrl-C to stop)"
    assert out.splitlines()[-1].startswith("stopped after ")
    assert ", 15 turns stored, " in out.splitlines()[-1] and out.splitlines()[-1].endswith(" 0 refused")
    assert "[watch] poll 1: " in err
    assert "log(s) with a reply still being written" in err


def test_watch_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    shutil.copy(STATION, tmp_path / "logs" / STATION.name)
    db = tmp_path / "w.db"
    proc = _watch(db, tmp_path / "logs")
    try:
        _wait_for(db, 15)  # the last reply once the copy has been quiet for the settle time
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert out.splitlines()[-1].startswith("stopped after ") and ", 15 turns stored, " in out
