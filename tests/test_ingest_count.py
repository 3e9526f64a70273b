"""``stratamem ingest`` reports the sessions a file names, not the runs of lines it reads (issue 24, 8k)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from stratamem.cli import main


def test_ingest_counts_the_sessions_of_an_interleaved_file(tmp_path: Path) -> None:
    rows = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"interleaved {i}", "session": f"r{i % 3}"}
        for i in range(30)
    ]
    path = tmp_path / "inter.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    db = str(tmp_path / "m.db")
    result = CliRunner().invoke(
        main, ["--db", db, "ingest", str(path)], env={"STRATAMEM_EMBEDDING": "none"}, catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first == "ingested 30 turns in 3 session(s) into 1 namespace(s): default; 0 already stored (skipped)"
