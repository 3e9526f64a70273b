"""Window totals by shifted slices when the turns are in session order (issue 28): the same numbers as
the gathers over every turn, for any session layout, and the window signals of an index unchanged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem.records import StoredTurn, Turn
from stratamem.retrieve.corpus import TurnCorpus

WORDS = ["cat", "kayak", "lisbon", "marathon", "kitchen", "green", "pottery", "bowl", "novel", "server"]


def _turns(sessions: list[int], rng: np.random.Generator) -> list[StoredTurn]:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    out = []
    for i, s in enumerate(sessions):
        text = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 6))))
        turn = Turn("user", text, timestamp=start + timedelta(minutes=i))
        out.append(StoredTurn(id=i + 1, namespace="n", session=f"s{s}", seq=i, turn=turn, tokens=3))
    return out


@settings(max_examples=40, deadline=None)
@given(
    sessions=st.lists(st.integers(0, 4), min_size=1, max_size=80),
    ordered=st.booleans(),
    window=st.integers(0, 4),
    seed=st.integers(0, 2**16),
)
def test_window_totals_by_slices_equal_the_gathers(sessions: list[int], ordered: bool, window: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    if ordered:
        sessions = sorted(sessions)  # session after session: the slice path
    corpus = TurnCorpus(window)
    corpus.add(_turns(sessions, rng))
    corpus.ready()
    if ordered and len(set(sessions)) == 1 and len(sessions) > 8 * (window + 1):
        assert corpus._edge is not None and len(corpus._edge) == 2 * window  # the slice path, engaged
    for dtype in (np.int32, np.float64):
        values = rng.integers(0, 5, len(sessions) + 1).astype(dtype)
        sums = np.cumsum(values, dtype=dtype)
        assert np.array_equal(corpus._window_sums(sums), sums[corpus.hi] - sums[corpus.lo])
    for word in WORDS[:3]:
        window_scores = corpus.lexical([word])[1]
        saved, corpus._edge = corpus._edge, None  # the gathers, for comparison
        assert np.array_equal(corpus.lexical([word])[1], window_scores)
        corpus._edge = saved
