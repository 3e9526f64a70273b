"""A store that fails or is damaged answers in one clear line (issue 24, findings 8c, 8d, 8e).

Real faults, real processes: a file-size limit (``RLIMIT_FSIZE``) stands in
for a full disk during an ingest; bytes of a row or of a schema page are
overwritten; a store lies in a directory the reader may not write (root
drops the capabilities that ignore file modes, as the attack drill did).
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import resource
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stratamem import Memory
from stratamem.errors import BackendError
from stratamem.ingest import read_file

ENV = {**os.environ, "STRATAMEM_EMBEDDING": "none"}


def cli(db: Path, *args: str, preexec: object = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "stratamem", "--db", str(db), *args],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
        preexec_fn=preexec,  # type: ignore[arg-type]
    )


def conversation(path: Path, n: int = 80, chars: int = 40, session: str = "s1") -> Path:
    rows = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "lake house " * (chars // 11)}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps({**r, "session": session}) + "\n" for r in rows))
    return path


@pytest.fixture
def store80(tmp_path: Path) -> Path:
    """A closed SQLite store holding 80 turns (its WAL checkpointed into the file)."""
    db = tmp_path / "store" / "s.db"
    assert cli(db, "ingest", str(conversation(tmp_path / "c.jsonl"))).returncode == 0
    return db


def one_line(out: subprocess.CompletedProcess[str]) -> str:
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 1 and len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    return lines[0]


# --- 8c: disk full during an ingest ----------------------------------------------------------


def _ingest_under_limit(db: str, path: str, cap: int, result: str) -> None:
    """Child: ingest ``path`` (one transaction, nested savepoints) with files capped at ``cap`` bytes."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit, writes fail with EFBIG instead
    with Memory(db, embedder=None) as mem:
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap, resource.RLIM_INFINITY))
        try:
            mem.ingest(read_file(path))
            out = "stored"
        except Exception as exc:  # noqa: BLE001 - the child reports whatever it got
            out = f"{type(exc).__name__}: {exc}"
    Path(result).write_text(out)


def test_disk_full_during_an_ingest_is_reported_and_stores_nothing(store80: Path, tmp_path: Path) -> None:
    import multiprocessing

    big = conversation(tmp_path / "big.jsonl", 2000, 900, "full")
    # Room for 64 KiB more than the file holds: the ingest's first pages spill past it mid-transaction.
    cap = store80.stat().st_size + 65536
    result = tmp_path / "result.txt"
    p = multiprocessing.get_context("spawn").Process(
        target=_ingest_under_limit, args=(str(store80), str(big), cap, str(result))
    )
    p.start()
    p.join(300)
    error = result.read_text()
    # The error that matters, not the cleanup's ("no such savepoint: sp1").
    assert error.startswith("BackendError: SQLite error on ") and "savepoint" not in error, error
    assert error.endswith(("disk I/O error", "database or disk is full")), error
    with Memory(store80, embedder=None) as mem:
        assert (mem.status().turns, [s.name for s in mem.store.sessions("default")]) == (80, ["s1"])
        mem.ingest(read_file(big))  # the limit lifted, the same ingest goes through
        assert mem.status().turns == 2080


def test_a_failed_nested_write_reports_its_own_error(tmp_path: Path) -> None:
    with Memory(tmp_path / "n.db", embedder=None) as mem:
        store = mem.store
        with pytest.raises(BackendError, match="no such table: nowhere"), store.transaction():
            with store.transaction():
                store.sql.rows("SELECT * FROM nowhere")  # type: ignore[attr-defined]
        mem.add({"role": "user", "content": "still writes"})
        assert mem.status().turns == 1


# --- 8d: damaged files and rows ----------------------------------------------------------------


def _damage(db: Path, mode: str) -> None:
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    schema = [i for i in range(len(data) // page) if data.find(b"CREATE TABLE", i * page, (i + 1) * page) >= 0]
    if mode == "schema page":  # a sqlite_schema page overwritten with noise
        rnd = random.Random(24)
        p = schema[0]
        data[p * page + 8 : (p + 1) * page] = bytes(rnd.randrange(256) for _ in range(page - 8))
    elif mode == "page 1":  # the schema's root page, after the file header
        data[100:108] = bytes(8)
    elif mode == "header":
        data[0:16] = b"X" * 16
    elif mode == "truncated":
        data = data[: len(data) // 2]
    db.write_bytes(bytes(data))
    if mode == "row json":  # a turn's block content and another's metadata no longer parse
        with sqlite3.connect(db) as conn:
            conn.execute('UPDATE turns SET content = \'[{"type":"text","te\' WHERE id = 3')
            conn.execute("UPDATE turns SET metadata = '{bad' WHERE id = 4")


@pytest.mark.parametrize("mode", ["row json", "schema page", "page 1", "header", "truncated"])
def test_a_damaged_store_is_one_line_for_every_command(store80: Path, mode: str) -> None:
    _damage(store80, mode)
    if mode == "row json":  # counts still read; what reads the rows names the first damaged one
        assert cli(store80, "status").returncode == 0
        for cmd in (["context", "lake"], ["export"], ["search", "lake"]):
            line = one_line(cli(store80, *cmd))
            assert line.startswith("Error: BackendError: stored turn "), line
            assert "of namespace 'default' is unreadable (corrupt row): JSONDecodeError: " in line
        return
    for cmd in (["status"], ["context", "lake"], ["export"], ["search", "lake"]):
        line = one_line(cli(store80, *cmd))
        assert line.startswith(f"Error: BackendError: SQLite error on {store80}: "), (cmd, line)


# --- 8e: a store the reader may not write -----------------------------------------------------


def _drop_file_override() -> None:
    """In the child: root loses the capabilities that ignore file modes (gone after exec)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2, 3):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER
        libc.prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP


@pytest.fixture
def read_only(store80: Path) -> Iterator[Path]:
    """The 80-turn store, file 0444 in a directory 0555: its WAL index (-shm) cannot be made."""
    folder = store80.parent
    for p in folder.iterdir():
        p.chmod(0o444)
    folder.chmod(0o555)
    yield store80
    folder.chmod(0o755)
    for p in folder.iterdir():
        p.chmod(0o644)


def test_a_read_only_store_can_be_read_and_refuses_writes_in_one_line(read_only: Path, tmp_path: Path) -> None:
    reads = {
        "status": ["status", "--json"],
        "export": ["export"],
        "context": ["context", "lake house", "--format", "text"],
        "search": ["search", "lake"],
        "namespaces": ["namespaces"],
    }
    out = {name: cli(read_only, *cmd, preexec=_drop_file_override) for name, cmd in reads.items()}
    assert {name: o.returncode for name, o in out.items()} == dict.fromkeys(reads, 0), {
        n: o.stderr for n, o in out.items()
    }
    assert json.loads(out["status"].stdout)["turns"] == 80
    assert out["export"].stdout.count('"type":"turn"') == 80
    assert "lake house" in out["context"].stdout
    assert out["context"].stderr == ""  # no manifest recorded, no warning about it
    line = one_line(cli(read_only, "add", "-c", "a new turn", preexec=_drop_file_override))
    assert line == f"Error: BackendError: SQLite error on {read_only}: attempt to write a readonly database"
    assert [p.name for p in read_only.parent.iterdir()] == ["s.db"]  # nothing created


def test_a_store_opened_read_only_writes_again_once_writable(store80: Path) -> None:
    # Opened read-only, the same process gains write access when the directory does (the existing
    # read-only drill's promise, kept for stores that had to be opened read-only).
    code = (
        "import sys\n"
        "from stratamem import Memory\n"
        f"m = Memory({str(store80)!r}, embedder=None)\n"
        "assert m.store.read_only\n"
        "print('opened', flush=True); sys.stdin.readline()\n"
        "try:\n    m.add({'role': 'user', 'content': 'first try'})\nexcept Exception as e: print(type(e).__name__)\n"
        "m.add({'role': 'user', 'content': 'second try'})\n"
        "print(m.status().turns, m.store.read_only)\n"
    )
    folder = store80.parent
    for p in folder.iterdir():
        p.chmod(0o444)
    folder.chmod(0o555)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        preexec_fn=_drop_file_override,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "opened"
        folder.chmod(0o755)
        store80.chmod(0o644)
        out, err = proc.communicate("go\n", timeout=120)
    finally:
        folder.chmod(0o755)
    assert out.split() == ["BackendError", "81", "False"], err


def test_a_read_only_store_of_an_older_version_is_read_without_migrating(tmp_path: Path) -> None:
    db = tmp_path / "store" / "old.db"
    assert cli(db, "ingest", str(conversation(tmp_path / "c.jsonl"))).returncode == 0
    conn = sqlite3.connect(db)  # as the version before m016_data_versions left it
    with conn:
        conn.execute("DROP TABLE data_versions")
        conn.execute("DELETE FROM _stratamem_migrations WHERE name = 'm016_data_versions'")
    conn.close()
    for p in db.parent.iterdir():
        p.chmod(0o444)
    db.parent.chmod(0o555)
    try:
        out = cli(db, "context", "lake house", "--format", "text", preexec=_drop_file_override)
        assert (out.returncode, out.stderr) == (0, "")
        assert "lake house" in out.stdout
    finally:
        db.parent.chmod(0o755)
        db.chmod(0o644)
    assert cli(db, "status").returncode == 0  # writable again: migrated on this open
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM data_versions").fetchone()[0] == 0
    conn.close()
