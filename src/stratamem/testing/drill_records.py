"""What the durability drills write and read back: drill keys, acknowledgement files, the check.

A child process acknowledges a turn only after ``append`` returned, by appending
its key to an acknowledgement file (``!`` lines are errors, ``~`` lines phase
markers); :func:`check` compares the store with the acknowledged keys. Used by
:mod:`stratamem.testing.drills`, which exports these names too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..records import StoredTurn, Turn
from ..store.base import Store

__all__ = ["DrillCheck", "check", "drill_key", "read_acks", "read_errors", "read_phase"]


@dataclass(frozen=True, slots=True)
class DrillCheck:
    """What the store holds compared with what was acknowledged."""

    acknowledged: int
    """Turns whose ``append`` returned."""
    stored: int
    """Drill turns found in the store."""
    lost: int
    """Acknowledged turns missing from the store."""
    duplicated: int
    """Drill keys stored more than once."""
    gaps: int
    """Sessions whose sequence numbers are not exactly 1..n."""
    integrity: str = "n/a"
    """SQLite ``PRAGMA integrity_check`` (``ok``), or ``n/a`` on PostgreSQL."""

    @property
    def ok(self) -> bool:
        """No loss, no duplicate, no gap, integrity fine."""
        return not (self.lost or self.duplicated or self.gaps) and self.integrity in ("ok", "n/a")


def drill_key(st: StoredTurn) -> str:
    """The drill key of a stored turn: ``metadata["drill"]``, else the first word of its text."""
    key = st.turn.metadata.get("drill")
    if key is not None:
        return str(key)
    words = st.turn.text.split(maxsplit=1)
    return words[0] if words else ""


def check(store: Store, namespace: str, acknowledged: Iterable[str]) -> DrillCheck:
    """Compare the store's drill turns in ``namespace`` with the acknowledged keys."""
    keys: Counter[str] = Counter()
    seqs: dict[str, list[int]] = {}
    for t in store.iter_turns(namespace, batch_size=5000):
        keys[drill_key(t)] += 1
        seqs.setdefault(t.session, []).append(t.seq)
    acked = set(acknowledged)
    gaps = sum(1 for s in seqs.values() if s != list(range(1, len(s) + 1)))
    integrity = store.integrity_check() if hasattr(store, "integrity_check") else "n/a"
    return DrillCheck(
        len(acked),
        sum(keys.values()),
        sum(1 for k in acked if keys[k] == 0),
        sum(1 for n in keys.values() if n > 1),
        gaps,
        integrity,
    )


def read_acks(path: str | Path) -> list[str]:
    """Keys acknowledged in an acknowledgement file (a torn last line is ignored)."""
    try:
        data = Path(path).read_text()
    except FileNotFoundError:
        return []
    lines = data.split("\n")
    return [ln for ln in lines[:-1] if ln and not ln.startswith(("!", "~"))]


def read_phase(path: str | Path) -> str:
    """The last phase marker (``~`` line) a child wrote: what it was doing when it stopped."""
    try:
        lines = Path(path).read_text().split("\n")
    except FileNotFoundError:
        return "not started"
    marks = [ln[1:] for ln in lines[:-1] if ln.startswith("~")]
    return marks[-1] if marks else "starting"


def read_errors(path: str | Path) -> list[str]:
    """Error lines (``!`` prefixed) a writer recorded."""
    try:
        return [ln[1:] for ln in Path(path).read_text().split("\n") if ln.startswith("!")]
    except FileNotFoundError:
        return []


def _turns(prefix: str, start: int, n: int, size: int) -> list[Turn]:
    body = ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]
    return [
        Turn(
            role="user" if (start + i) % 2 == 0 else "assistant",
            content=f"{prefix}-{start + i} {body}",
            metadata={"drill": f"{prefix}-{start + i}"},
        )
        for i in range(n)
    ]
