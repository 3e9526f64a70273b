"""The summary ledger in batches (``context.cache_ledger_batch``): in a long tool loop it takes newly
settled summaries only at every n-th jump of the window's start, and holds still in between."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stratamem import Memory
from stratamem.config import Config
from stratamem.errors import ConfigError

WORDS = "apple harbour otter lighthouse quarry falcon violin garden rocket tunnel meadow lantern".split()


def _loop(db: Path, batch: int) -> list[dict[str, Any]]:
    """A request, then 40 tool steps; the cache account of the context before each model call."""
    cfg = Config.from_dict(
        {
            "pyramid": {"defer_summarization": False, "micro_chunk_size": 4},
            "context": {"cache_min_tokens": 64, "cache_ledger_batch": batch},
        }
    )
    mem = Memory(db, namespace="loop", config=cfg, embedder=None)
    mem.add({"role": "user", "content": "Check every module near the harbour and fix what fails."}, session="s")
    out = []
    for n in range(40):
        ctx = mem.context("fix the harbour modules", budget=1500, session="s", format="openai", cache=True)
        out.append(ctx.manifest.cache)
        words = " ".join(WORDS[(n * 5 + k) % len(WORDS)] for k in range(60 + 7 * (n % 5)))
        call = {"type": "tool_use", "id": f"toolu_{n:03d}", "name": "read", "input": {"path": f"m{n}.py"}}
        mem.add({"role": "assistant", "content": [{"type": "text", "text": f"Step {n}."}, call]}, session="s")
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n:03d}", "content": f"{words}."}
        mem.add({"role": "user", "content": [result]}, session="s", format="anthropic")
    mem.close()
    return out


def _changes(accounts: list[dict[str, Any]], key: Any) -> list[int]:
    """Indices of the calls at which ``key(account)`` differs from the call before."""
    return [i for i in range(1, len(accounts)) if key(accounts[i]) != key(accounts[i - 1])]


def test_the_ledger_moves_at_every_third_jump_of_the_window_and_holds_still_in_between(tmp_path: Path) -> None:
    one = _loop(tmp_path / "one.db", 1)
    three = _loop(tmp_path / "three.db", 3)

    def anchor(c: dict[str, Any]) -> Any:
        return c["anchor"] and c["anchor"]["turn"]

    def ledger(c: dict[str, Any]) -> Any:
        return c["layer_hashes"].get("ledger")

    # The window is the same in both: the batch moves only the ledger.
    assert [anchor(c) for c in one] == [anchor(c) for c in three]
    jumps = _changes(one, anchor)
    # The default anchor step (0.75 of the window's room; 0.5 jumped at 9 of these 40 calls).
    assert jumps == [8, 14, 20, 26, 31, 37]
    # One per jump: the ledger is taken before the window's start, as of the jump that brought it there.
    assert all(c["anchor"]["ledger_turn"] == c["anchor"]["turn"] for c in one if c["anchor"])
    # In batches of three: before the start of every third grid point the window has stood on.
    starts = list(dict.fromkeys(anchor(c) for c in three if c["anchor"]))
    for c in three:
        if c["anchor"]:
            seen = starts[: starts.index(c["anchor"]["turn"]) + 1]
            assert c["anchor"]["ledger_turn"] == seen[(len(seen) - 1) // 3 * 3]
    moved = _changes(three, lambda c: c["anchor"] and c["anchor"]["ledger_turn"])
    assert set(moved) <= set(jumps) and len(moved) == (len(starts) - 1) // 3
    # Its bytes change only where it moves; one per jump they changed at more calls.
    assert set(_changes(three, ledger)) <= set(moved)
    assert len(_changes(three, ledger)) < len(_changes(one, ledger))


def test_a_ledger_batch_below_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="cache_ledger_batch"):
        Config.from_dict({"context": {"cache_ledger_batch": 0}})
