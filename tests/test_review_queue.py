"""The review queue cannot grow without bound: past ``items.max_pending_review`` the least salient pending
items are dropped (kept, out of recall and contexts, never extracted again), and every status says how many
wait: the library, the CLI, the MCP server and the web dashboard."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

from click.testing import CliRunner

from stratamem import Config, Memory
from stratamem.cli import main as cli
from stratamem.records.candidates import Candidate

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def _memory(path: Path, cap: int) -> Memory:
    return Memory(path, namespace="q", config=Config().replace(items={"max_pending_review": cap}), embedder=None)


def test_past_the_cap_the_least_salient_pending_items_are_dropped_and_stay_dropped(tmp_path: Path) -> None:
    mem = _memory(tmp_path / "q.db", cap=3)
    t = [x.id for x in mem.add([{"role": "user", "content": f"turn {i}"} for i in range(6)], session="s")]
    first = mem.items.extract(
        [Candidate(f"Ana: fact number {n}.", "fact", (t[n],), s) for n, s in enumerate((0.9, 0.5, 0.7, 0.95))]
    )
    assert [(i.content, i.review) for i in first] == [
        ("Ana: fact number 0.", "pending"),
        ("Ana: fact number 1.", "dropped"),  # the least salient of four, past a cap of three
        ("Ana: fact number 2.", "pending"),
        ("Ana: fact number 3.", "pending"),
    ]
    confirmed = mem.items.confirm(first[2].id)  # reviewed: no longer waiting, so there is room again
    assert confirmed.review == "confirmed"
    mem.items.extract([Candidate("Ana: fact number 4.", "fact", (t[4],), 0.6)])
    assert mem.items.status().flags["pending_review"] == 3
    # A fifth one, more salient than the least salient pending one (0.6): that one goes.
    mem.items.extract([Candidate("Ana: fact number 5.", "fact", (t[5],), 0.8)])
    reviews = {i.content[-2]: i.review for i in mem.items.list()}
    assert reviews == {"0": "pending", "1": "dropped", "2": "confirmed", "3": "pending", "4": "dropped", "5": "pending"}
    # Dropped items are out of recall, and the same fact is not extracted again.
    found = [i.content for i in mem.items.search("fact number 1 4").items]
    assert "Ana: fact number 1." not in found and "Ana: fact number 4." not in found and found
    assert mem.items.extract([Candidate("Ana: fact number 1!", "fact", (t[0],), 1.0)]) == []
    assert mem.items.get(first[1].id).review == "dropped"
    status = mem.items.status()
    assert (status.flags["dropped"], status.review_cap, status.waiting) == (2, 3, "3 items waiting for review (cap 3)")
    assert status.to_dict()["review"] == {"pending": 3, "cap": 3, "dropped": 2}
    whole = mem.status()
    assert (whole.items_pending_review, whole.items_review_cap) == (3, 3)
    mem.close()


def test_the_cli_and_the_mcp_status_say_how_many_wait(tmp_path: Path) -> None:
    mem = _memory(tmp_path / "c.db", cap=500)
    t = mem.add({"role": "user", "content": "hello"}, session="s")[0]
    mem.items.extract([Candidate("Ana: I keep bees.", "fact", (t.id,), 0.9)])
    mem.close()
    runner = CliRunner()
    base = ["--db", str(tmp_path / "c.db"), "--namespace", "q", "--embedding", "none"]
    out = runner.invoke(cli, [*base, "status"])
    assert out.exit_code == 0, out.output
    # One line per field, the values aligned after the longest name.
    assert re.search(r"^items_pending_review +1$", out.output, re.M) and re.search(
        r"^items_review_cap +500$", out.output, re.M
    )
    out = runner.invoke(cli, [*base, "items", "status"])
    assert json.loads(out.output)["review"] == {"pending": 1, "cap": 500, "dropped": 0}
